"""GPU work that runs past the next item on its own stream (trace_report/overlaps.py): clipped to the next one's start,
so that no time counts twice, counted, said in one dim line of the report and in --json; a trace without such
overlaps read exactly as before. The traces are written here: one step, one op and launch per kernel. And CPU boxes
that start inside another on their thread and end after it, which Perfetto does not draw: counted, times kept."""

from __future__ import annotations

import json

import pytest

from trace_report.export import trace_to_dict
from trace_report.model import Overlaps
from trace_report.reader import read_trace
from trace_report.tests.support import FIXTURES, run_report

MAIN, GPU, STREAM, OTHER_STREAM = 100, 0, 7, 13
MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
       "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<"
       "float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)")
GEMM = "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT"
SPLIT_K = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false>()"


def write_trace(tmp_path, kernels, name="overlaps.json"):
    """A trace of one ProfilerStep: per (name, stream, ts, dur) of `kernels` an `aten::mul` on the main thread, its
    cudaLaunchKernel and the kernel, linked by correlation."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": MAIN, "tid": MAIN, "ts": 0.0,
               "dur": 20.0 * len(kernels) + 10, "args": {}}]
    for i, (kernel, stream, ts, dur) in enumerate(kernels, 1):
        cpu = 20.0 * i - 15
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": MAIN, "tid": MAIN, "ts": cpu, "dur": 10.0,
             "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": MAIN, "tid": MAIN, "ts": cpu + 2,
             "dur": 5.0, "args": {"correlation": i}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": GPU, "tid": stream, "ts": ts, "dur": dur,
             "args": {"correlation": i, "stream": stream}},
        ]
    path = tmp_path / name
    path.write_text(json.dumps({"deviceProperties": [{"name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0}],
                                "traceEvents": events}))
    return path


def durations(trace) -> list[float]:
    return [work.dur for work in sorted(trace.gpu_work(), key=lambda w: (w.ts, w.tid))]


def test_a_kernel_that_runs_past_the_next_on_its_stream_is_clipped_and_its_time_counts_once(tmp_path):
    # PDL on an H100: the split-K reduction starts 0.4 µs before the GEMM it reduces ends, on the same stream.
    trace = read_trace(write_trace(tmp_path, [(GEMM, STREAM, 100.0, 4.2), (SPLIT_K, STREAM, 103.8, 1.8),
                                              (MUL, STREAM, 110.0, 3.0)]))
    assert trace.overlaps.clipped == 1 and trace.overlaps.clipped_us == pytest.approx(0.4)
    assert trace.overlaps.undrawn == 1  # it starts inside the GEMM and ends after it: Perfetto drops it
    assert durations(trace) == pytest.approx([3.8, 1.8, 3.0])
    step = trace.steps[0]
    assert step.gpu_time_us == pytest.approx(step.gpu_busy_us) == pytest.approx(8.6)  # not 9.0: no µs twice
    assert sum(stat.total_us for stat in trace.kernel_stats()) == pytest.approx(8.6)
    assert trace.self_gpu_total_us == pytest.approx(8.6)


def test_a_duration_that_covers_the_kernels_after_it_ends_where_the_next_starts(tmp_path):
    # ROCm's deferred completion timestamps (TraceLens #669): one kernel's dur spans the three after it. Perfetto
    # nests those three inside it (it draws them); the step's GPU time is each kernel's once.
    trace = read_trace(write_trace(tmp_path, [(MUL, STREAM, 100.0, 500.0), (MUL, STREAM, 110.0, 5.0),
                                              (MUL, STREAM, 120.0, 5.0), (MUL, STREAM, 130.0, 5.0)]))
    assert trace.overlaps == Overlaps(1, 490.0, 0)
    assert durations(trace) == pytest.approx([10.0, 5.0, 5.0, 5.0])
    assert trace.steps[0].gpu_time_us == pytest.approx(25.0) == pytest.approx(trace.steps[0].gpu_busy_us)


def test_work_on_two_streams_at_once_and_an_empty_kernel_clip_nothing(tmp_path):
    # Two streams overlap for real; a zero-length kernel inside another on its stream takes no time (Kineto #136).
    kernels = [(MUL, STREAM, 100.0, 20.0), (MUL, OTHER_STREAM, 105.0, 20.0), (MUL, STREAM, 110.0, 0.0),
               (MUL, STREAM, 120.0, 4.0)]
    trace = read_trace(write_trace(tmp_path, kernels))
    assert not trace.overlaps and trace.overlaps.note is None
    assert sorted(w.dur for w in trace.gpu_work()) == [0.0, 4.0, 20.0, 20.0]


def test_of_two_kernels_that_start_together_the_shorter_is_clipped(tmp_path):
    trace = read_trace(write_trace(tmp_path, [(MUL, STREAM, 100.0, 9.0), (MUL, STREAM, 100.0, 3.0)]))
    assert trace.overlaps.clipped == 1 and trace.overlaps.clipped_us == pytest.approx(3.0)
    assert sorted(w.dur for w in trace.gpu_work()) == [0.0, 9.0]
    assert trace.steps[0].gpu_time_us == pytest.approx(9.0)


def test_the_report_says_it_in_one_dim_line_and_the_json_carries_it(tmp_path):
    path = write_trace(tmp_path, [(GEMM, STREAM, 100.0, 4.2), (SPLIT_K, STREAM, 103.8, 1.8)])
    text = run_report(path, env={"COLUMNS": "100"})
    assert text.returncode == 0, text.stderr
    line = "1 GPU item ran into the next on its stream: clipped, 0.4 µs in all; 1 not drawn by Perfetto"
    assert text.stdout.splitlines()[1] == line  # under the header, one line
    report = json.loads(run_report(path, "--json").stdout)
    assert report["overlaps"] == {"clipped": 1, "clipped_us": 0.4, "undrawn": 1, "cpu_undrawn": 0}
    assert [w["dur_us"] for w in report["steps"][0]["gpu"]] == [3.8, 1.8]


def test_a_trace_without_overlaps_reads_as_before(tmp_path):
    # Back to back on one stream (the next starts where the one before ends) is no overlap: times kept to the bit.
    kernels = [(MUL, STREAM, 100.0, 4.123), (MUL, STREAM, 104.123, 1.5), (MUL, STREAM, 106.0, 2.0)]
    path = write_trace(tmp_path, kernels)
    trace = read_trace(path)
    assert trace.overlaps == Overlaps() and not trace.overlaps
    assert durations(trace) == [4.123, 1.5, 2.0]
    assert "overlaps" not in trace_to_dict(trace)
    text = run_report(path, env={"COLUMNS": "100"}).stdout
    assert "ran into the next" not in text and "Perfetto" not in text


def test_a_real_trace_with_pdl_overlaps_is_left_with_none():
    # vLLM on a B200 (TensorRT-LLM's MoE GEMMs, launched with PDL): 27 overlaps of up to 1.2 µs; 14 of the kernels
    # start inside the one before and end after it, which Perfetto does not draw.
    trace = read_trace(FIXTURES / "world" / "b200_vllm_eager_tp8_rank0_60to90ms.json.gz")
    assert (trace.overlaps.clipped, trace.overlaps.undrawn) == (27, 14)
    assert trace.overlaps.clipped_us == pytest.approx(21.95, abs=0.01)
    by_stream: dict = {}
    for work in trace.gpu_lane():
        by_stream.setdefault((work.pid, work.tid), []).append(work)
    for items in by_stream.values():
        assert all(a.ts + a.dur <= b.ts + 1e-3 for a, b in zip(items, items[1:]))


def test_a_cpu_box_that_starts_inside_another_and_ends_after_it_is_counted_and_its_time_kept(tmp_path):
    # A record_function range opened inside a compiled region and closed after it (as torch.compile's regions and
    # nn.Module ranges do on the world's H100 trace): Perfetto drops it. What nests inside it is drawn, and counted
    # against the boxes Perfetto keeps: the op inside both is drawn, the one past the region's end is not.
    path = write_trace(tmp_path, [(MUL, STREAM, 100.0, 3.0)])
    doc = json.loads(path.read_text())
    box = {"ph": "X", "cat": "user_annotation", "pid": MAIN, "tid": MAIN, "args": {}}
    doc["traceEvents"] += [{**box, "name": "Torch-Compiled Region", "ts": 1.0, "dur": 2.0},
                           {**box, "name": "nn.Module: GeGLU", "ts": 2.0, "dur": 2.5},  # ends at 4.5, after 3.0
                           {**box, "name": "inside both", "ts": 2.2, "dur": 0.5},
                           {**box, "name": "past the region", "ts": 2.8, "dur": 1.0}]  # 3.8: inside GeGLU only
    path.write_text(json.dumps(doc))
    trace = read_trace(path)
    assert trace.overlaps == Overlaps(cpu_undrawn=2)
    assert {op.name: op.dur for op in trace.steps[0].ops if op.name in ("nn.Module: GeGLU", "past the region")} == {
        "nn.Module: GeGLU": 2.5, "past the region": 1.0}
    text = run_report(path, env={"COLUMNS": "160"})
    line = "2 CPU boxes start inside another on their thread and end after it: not drawn by Perfetto"
    assert text.stdout.splitlines()[1] == line
    report = json.loads(run_report(path, "--json").stdout)
    assert report["overlaps"] == {"clipped": 0, "clipped_us": 0.0, "undrawn": 0, "cpu_undrawn": 2}


def test_a_real_trace_with_unnested_module_ranges_counts_them():
    # torch.compile's max-autotune MLP on an H100: each `nn.Module: GeGLU` and `nn.Module: Linear` range starts inside
    # a `Torch-Compiled Region` and ends after it, 12 in all; its GPU streams have 0 such items.
    trace = read_trace(FIXTURES / "world" / "h100_mlp_max_autotune_suite.json.gz")
    assert (trace.overlaps.cpu_undrawn, trace.overlaps.undrawn) == (12, 0)


def test_an_end_past_its_parent_by_a_floats_rounding_only_is_drawn(tmp_path):
    # Whole µs since the epoch (a DeepSeek-V3 trace's): 1.7e15 µs times 1000 is past what a float holds to the ns, and
    # a child that ends with its parent comes out tens of ns after it. Perfetto reads the integers exactly and draws
    # it; a child that ends a whole µs after its parent it does not.
    epoch = 1_740_461_679_479_773.0
    box = {"ph": "X", "cat": "cpu_op", "pid": MAIN, "tid": MAIN, "args": {}}
    events = [{**box, "cat": "user_annotation", "name": "ProfilerStep#1", "ts": epoch, "dur": 100.0},
              {**box, "name": "aten::sum", "ts": epoch + 10, "dur": 20.0},
              {**box, "name": "aten::sum", "ts": epoch + 11, "dur": 19.0},  # ends with its parent, at +30
              {**box, "name": "aten::mul", "ts": epoch + 40, "dur": 10.0},
              {**box, "name": "aten::mul", "ts": epoch + 41, "dur": 10.0}]  # ends at +51, a µs after its parent
    path = tmp_path / "epoch.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert read_trace(path).overlaps == Overlaps(cpu_undrawn=1)


def test_a_real_trace_in_whole_epoch_us_counts_what_its_exact_times_say():
    # DeepSeek-V3 on an H800, times in whole µs since the epoch: an exact count of its decimal times finds no box that
    # crosses its parent; through floats, 444 seemed to (ends and starts tens of ns off).
    trace = read_trace(FIXTURES / "world" / "h800_deepseekv3_train_ep_rank0.json.gz")
    assert trace.overlaps.cpu_undrawn == 0


@pytest.mark.parametrize("name, clipped, undrawn", [
    # an A100's stream: 8 of its cuda_sync events outlast the pageable copy they wait on (no kernel overlaps another)
    ("a100_alexnet_cudnn_hta.json.gz", 0, 8),
    # a B300's stream: 6 kernels run past the next (clipped), and 3 gpu_user_annotation ranges end inside a gather
    # kernel, which Perfetto drops as well: 9 in all
    ("b300_sm103_moe_microbench.json.gz", 6, 9),
])
def test_a_streams_other_events_that_cross_its_work_count_as_undrawn(name, clipped, undrawn):
    overlaps = read_trace(FIXTURES / "world" / name).overlaps
    assert (overlaps.clipped, overlaps.undrawn, overlaps.cpu_undrawn) == (clipped, undrawn, 0)


def test_an_annotation_that_ends_inside_a_kernel_is_undrawn_and_its_kernels_keep_their_time(tmp_path):
    stream = {"ph": "X", "pid": 0, "tid": 7}
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": MAIN, "tid": MAIN, "ts": 0.0,
               "dur": 100.0},
              {**stream, "cat": "kernel", "name": "gemm", "ts": 10.0, "dur": 20.0, "args": {}},
              {**stream, "cat": "gpu_user_annotation", "name": "block", "ts": 5.0, "dur": 15.0},  # ends inside gemm
              {**stream, "cat": "kernel", "name": "add", "ts": 40.0, "dur": 5.0, "args": {}},
              {**stream, "cat": "gpu_user_annotation", "name": "tail", "ts": 39.0, "dur": 10.0}]  # holds add whole
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_trace(path)
    # gemm starts inside "block" and ends after it: Perfetto drops gemm (the later starter), not the annotation
    assert trace.overlaps == Overlaps(undrawn=1)
    assert sorted(w.dur for s in trace.steps for w in s.gpu) == [5.0, 20.0]
