"""GPU work that runs past the next item on its own stream (trace_report/overlaps.py): clipped to the next one's start,
so that no time counts twice, counted, said in one dim line of the report and in --json; a trace without such
overlaps read exactly as before. The traces are written here: one step, one op and launch per kernel."""

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
    assert report["overlaps"] == {"clipped": 1, "clipped_us": 0.4, "undrawn": 1}
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
