"""Reading traces: the post's claims on real H200 traces, and traces made here on the CPU."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import H200_EAGER as EAGER
from conftest import H200_LINEAR as LINEAR
from conftest import H200_SDPA_MATH as SDPA_MATH
from conftest import run_report
from profiled_traces import profile_cpu_mlp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from trace_report.errors import UsageError
from trace_report import diff, pace, read_trace, source, trace_to_dict, verdict
from trace_report.kernels import decode, is_gemm, short_name, split_fused_ops


@pytest.fixture(scope="module")
def cpu_trace_without_steps(tmp_path_factory):
    return profile_cpu_mlp(tmp_path_factory.mktemp("cpu") / "mlp_nosteps.json", with_steps=False)


def raw_events(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(int, T2, T3)"


def simulated_matmul_add(path: Path, *, steps_cpu_us, kernels_us, between_steps_us=20.0, flush_us=10.0) -> Path:
    """A trace shaped like Part 1's `matmul_add` on a GPU, with the times we choose.

    Each step's CPU box holds the label, `aten::mm` and `aten::add`, each ending in a 5 µs cudaLaunchKernel.
    The GPU runs a kernel 2 µs after its launch returns, or when the previous kernel ends if that is later
    (a full queue). After the last step comes the profiler's flush: a cudaDeviceSynchronize that lasts until
    the GPU is done, plus `flush_us` of the profiler's own work (1.78 ms at size 64 in the post, P1-11).
    """
    cpu, gpu = {"pid": 1, "tid": 1}, {"pid": 0, "tid": 7}
    events: list[dict] = []
    t, corr, gpu_free = 0.0, 0, 0.0

    def box(cat: str, name: str, ts: float, dur: float, **args) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **cpu, "args": args})

    for number, step_us in enumerate(steps_cpu_us, start=2):
        box("user_annotation", f"ProfilerStep#{number}", t, step_us)
        box("user_annotation", "matmul_add", t + 1, step_us - 2)
        half = step_us / 2
        for op, kernel, kernel_us, op_ts in (("aten::mm", GEMM, kernels_us[0], t + 2), ("aten::add", ADD, kernels_us[1], t + half + 1)):
            box("cpu_op", op, op_ts, half - 3)
            corr += 1
            launch_ts = op_ts + half - 9
            box("cuda_runtime", "cudaLaunchKernel", launch_ts, 5.0, correlation=corr)
            start = max(launch_ts + 5.0 + 2.0, gpu_free)
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": start, "dur": kernel_us, **gpu, "args": {"correlation": corr}})
            gpu_free = start + kernel_us
        t += step_us + between_steps_us
    box("cuda_runtime", "cudaDeviceSynchronize", t, max(0.0, gpu_free - t) + flush_us, correlation=corr + 1)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture(scope="module")
def size_64(tmp_path_factory):
    """P1-01 and P1-11: ~170 µs of CPU per step for 7.7 µs of GPU work, a 1.78 ms flush: 2.3 ms vs 23 µs."""
    path = tmp_path_factory.mktemp("sim") / "64.json"
    return read_trace(simulated_matmul_add(path, steps_cpu_us=(180, 170, 170), kernels_us=(5.0, 2.7), flush_us=1780))


@pytest.fixture(scope="module")
def size_4096(tmp_path_factory):
    """P1-02: a 1.4 ms GEMM and a 0.1 ms add per step, queued faster than they run: 4.8 ms vs 4.5 ms."""
    path = tmp_path_factory.mktemp("sim") / "4096.json"
    return read_trace(simulated_matmul_add(path, steps_cpu_us=(180, 150, 150), kernels_us=(1400, 100), flush_us=300))


# --- the post, on real H200 traces ---------------------------------------------------------------------------


def test_eager_mlp_runs_five_kernels_per_step_three_of_them_gemms(eager):
    assert [s.name for s in eager.steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    for step in eager.steps:
        assert len(step.kernels) == 5
        assert len(step.gemms) == 3
        ops = sorted(op for w in step.kernels if not w.is_gemm for op in decode(w.name).ops)
        assert ops == ["gelu", "mul"]


def test_gpu_work_is_in_time_order_with_memsets_counted_apart(eager):
    step = eager.steps[0]
    assert [w.ts for w in step.gpu] == sorted(w.ts for w in step.gpu)
    assert Counter(w.kind for w in step.gpu) == {"kernel": 5, "memset": 2}


def test_gemms_are_launched_by_aten_mm_inside_linear_inside_the_label(eager):
    for work in eager.gpu_work():
        if work.is_gemm:
            assert work.launched_by == "aten::mm"
            assert work.launch_path == ("mlp_fwd", "aten::linear", "aten::matmul", "aten::mm")
            assert work.runtime == "cuLaunchKernelEx"  # Hopper: driver launch, not cudaLaunchKernel
    gelu = next(w for w in eager.steps[0].kernels if decode(w.name).ops == ("gelu",))
    assert gelu.launched_by == "aten::gelu" and gelu.runtime == "cudaLaunchKernel"


def test_views_launch_nothing_and_cost_nothing_on_the_gpu(eager, linear):
    idle = eager.steps[0].idle_ops()
    assert idle["aten::t"] == 3 and idle["aten::view"] == 3 and idle["aten::_unsafe_view"] == 3
    assert "aten::mm" not in idle and "aten::linear" not in idle and "aten::gelu" not in idle
    assert set(linear.steps[0].idle_ops()) == {"aten::t", "aten::transpose", "aten::as_strided"}


def test_compiled_mlp_fuses_gelu_and_mul_into_one_triton_pointwise_kernel(compiled):
    for step in compiled.steps:
        assert len(step.kernels) == 4
        fused = [w for w in step.kernels if w.name.startswith("triton_")]
        assert [w.name for w in fused] == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
        name = decode(fused[0].name)
        assert name.inductor_kind == "pointwise"
        assert name.ops == ("_unsafe_view", "gelu", "mul") and name.compute_ops == ("gelu", "mul")


def test_compiled_gemm_names_are_byte_identical_to_eager(eager, compiled):
    def gemm_names(trace):
        return Counter(w.name for w in trace.gpu_work() if w.is_gemm)

    assert gemm_names(eager) == gemm_names(compiled)
    assert len(gemm_names(eager)) == 2  # two tiles: 256x128 (gate, up) and 192x128 (down)


def test_linear_is_one_gemm_with_the_bias_in_its_epilogue_launched_by_addmm(linear):
    for step in linear.steps:
        (kernel,) = step.kernels
        assert kernel.launched_by == "aten::addmm"
        assert decode(kernel.name).has_bias_epilogue


def test_runtime_calls_per_step(eager):
    assert eager.steps[0].launch_counts() == {"cudaMemsetAsync": 2, "cuLaunchKernelEx": 3, "cudaLaunchKernel": 2}


def test_kernel_stats_across_steps(eager):
    stats = {s.name: s for s in eager.kernel_stats()}
    coop_a = stats["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"]
    assert coop_a.count == 6 and coop_a.launched_by == "aten::mm"
    durations = [w.dur for w in eager.gpu_work() if w.name == coop_a.name]
    assert coop_a.min_us == min(durations) and coop_a.max_us == max(durations)
    assert coop_a.avg_us == pytest.approx(sum(durations) / 6)


def test_the_linear_is_overhead_bound_its_gpu_waits_on_every_launch(linear):
    # nn.Linear at 1024x32 -> 64: a 2.7 µs kernel for ~150 µs of CPU per step
    v = verdict(linear)
    assert v.kind == "overhead-bound" and v.table_totals_say == "overhead-bound"
    assert v.gpu_busy_us_per_step == pytest.approx(2.72, abs=0.01)
    assert v.cpu_us_per_step == pytest.approx(153.3, abs=0.1)
    assert v.launch_waits == 2 and v.launch_wait_fraction > 0.9  # both gaps between the three kernels
    assert "waited on a launch 2 times" in v.summary


def test_the_eager_mlp_is_compute_bound_though_the_flush_tips_the_table_totals(eager):
    # Issuing costs ~171 µs of CPU per step against ~244 µs of GPU work; the profiler's 269 µs flush makes
    # the table's Self CPU total (784 µs) larger than its Self CUDA total (733 µs).
    v = verdict(eager)
    assert v.kind == "compute-bound" and v.table_totals_say == "overhead-bound"
    assert v.self_cpu_total_us > v.self_gpu_total_us
    assert v.closing_sync_us == pytest.approx(269.302) and v.sync_wait_us == pytest.approx(269.302)
    assert v.cpu_us_per_step == pytest.approx(171.46, abs=0.01) and v.gpu_busy_us_per_step == pytest.approx(244.41, abs=0.01)
    # 15 short gaps on the GPU lane, but in only one had the GPU finished everything before the launch returned
    assert v.gaps == 15 and v.launch_waits == 1 and v.launch_wait_us == pytest.approx(6.208, abs=1e-3)
    assert v.launch_wait_fraction < 0.05 and not v.close_to_line
    assert "would say overhead-bound" in v.summary and "closing cudaDeviceSynchronize" in v.summary
    assert "Without the waits the CPU spends 514.4 µs issuing 733.2 µs of GPU work: compute-bound" in v.summary


def test_the_compiled_mlp_is_close_to_the_line(compiled):
    v = verdict(compiled)
    assert v.close_to_line and "close to the line" in v.summary
    assert 0.8 <= v.self_gpu_total_us / (v.cpu_us_per_step * v.steps) <= 1.25


def test_part_1_at_size_64_is_overhead_bound(size_64):
    v = verdict(size_64)
    assert v.self_cpu_total_us == pytest.approx(2300.0) and v.self_gpu_total_us == pytest.approx(23.1)
    assert v.kind == "overhead-bound" and v.table_totals_say == "overhead-bound"
    assert v.closing_sync_us == pytest.approx(1780.0)
    assert v.launch_wait_fraction > 0.9
    assert "Self CPU 2.30 ms, Self CUDA 23.1 µs" in v.summary


def test_part_1_at_size_4096_is_compute_bound_the_flush_waits_for_a_full_queue(size_4096):
    v = verdict(size_4096)
    assert v.self_gpu_total_us == pytest.approx(4500.0)
    assert 4500.0 < v.self_cpu_total_us < 5000.0  # the table's totals alone tip toward the CPU
    assert v.kind == "compute-bound" and v.table_totals_say == "overhead-bound"
    assert v.launch_waits == 0  # the GPU never waited: its queue stayed full
    assert v.max_gpu_lag_us > 2500.0  # the CPU lane runs ms ahead of the GPU lane (P1-06)
    assert "the table's totals alone would say overhead-bound" in v.summary.lower()


def test_a_gpu_waiting_on_launches_is_overhead_bound_whatever_the_totals_say(tmp_path):
    # Each step issues its work in 50 µs, but a millisecond passes outside the steps between them: the
    # table's CPU total stays under its GPU total, yet the GPU idles most of its window.
    path = simulated_matmul_add(tmp_path / "starved.json", steps_cpu_us=(50, 50, 50), kernels_us=(90, 10), between_steps_us=1000)
    v = verdict(read_trace(path))
    assert v.self_cpu_total_us < v.self_gpu_total_us and v.table_totals_say == "compute-bound"
    assert v.kind == "overhead-bound" and v.launch_wait_fraction > pace.STARVED_SHARE
    assert "ran dry waiting for launches" in v.summary


# --- outside the steps: the profiler's flush ------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture, flush_us",
    [("eager", 269.302), ("compiled", 109.673), ("linear", 13.856)],
)
def test_the_profilers_closing_sync_is_kept_after_the_last_step(request, fixture, flush_us):
    trace = request.getfixturevalue(fixture)
    closing = trace.closing_sync
    assert closing is not None and closing.name == "cudaDeviceSynchronize"
    assert closing.dur == pytest.approx(flush_us)
    last = trace.steps[-1]
    assert closing.ts >= last.ts + last.dur
    assert trace.runtime_outside_steps == [closing]
    assert all(closing not in step.runtime for step in trace.steps)


def test_a_cpu_trace_has_no_closing_sync(cpu_trace):
    trace = read_trace(cpu_trace)
    assert trace.closing_sync is None and trace.sync_wait_us == 0.0
    assert trace.self_gpu_total_us == 0.0


def test_table_totals_of_the_eager_mlp(eager):
    # The ProfilerStep boxes hold every other box of the steps, so the self times add up to their
    # durations, plus the flush after them.
    assert eager.self_cpu_total_us == pytest.approx(sum(s.dur for s in eager.steps) + eager.closing_sync.dur)
    assert eager.self_cpu_total_us == pytest.approx(783.679)
    assert eager.self_gpu_total_us == pytest.approx(733.217)
    assert eager.self_gpu_total_us == pytest.approx(sum(w.dur for w in eager.gpu_work()))


@pytest.mark.parametrize("with_stack", [False, True], ids=["plain", "with_stack"])
def test_self_cpu_total_is_the_one_under_key_averages_table(tmp_path, with_stack):
    # Profiled as the posts profile, on the CPU; with_stack adds Python frames, which nest the ops (and so
    # change their self times) but have no row, so no share of the total.
    x, w = torch.randn(64, 256), torch.randn(1024, 256)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3), with_stack=with_stack) as prof:
        for _ in range(5):
            with record_function("mlp_fwd"):
                F.gelu(F.linear(x, w)).sum()
            prof.step()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    printed = re.search(r"Self CPU time total: ([\d.]+)(us|ms)", prof.key_averages().table(row_limit=5))
    table_us = float(printed[1]) * (1000.0 if printed[2] == "ms" else 1.0)
    exact_us = sum(e.self_cpu_time_total for e in prof.key_averages())  # what the table rounds
    trace = read_trace(path)
    assert trace.self_cpu_total_us == pytest.approx(exact_us, rel=1e-6)
    assert trace.self_cpu_total_us == pytest.approx(table_us, rel=1e-3)
    assert sum(s.dur for s in trace.steps) > 0 and trace.closing_sync is None


# --- what each box knows about its place ---------------------------------------------------------------------


def test_a_cpu_op_knows_the_boxes_around_it(eager):
    ops = [op for step in eager.steps for op in step.ops]
    mms = [op for op in ops if op.name == "aten::mm"]
    assert len(mms) == 9 and {op.path for op in mms} == {("mlp_fwd", "aten::linear", "aten::matmul")}
    assert {op.path for op in ops if op.name == "mlp_fwd"} == {()}  # ProfilerStep# is no part of a path
    assert {op.path for op in ops if op.name == "aten::gelu"} == {("mlp_fwd",)}


def test_the_gpu_lane_runs_behind_the_cpu_lane(eager):
    lane = eager.gpu_lane()
    assert all(w.launch is not None for w in lane)
    for w in lane:
        assert w.launch_ts <= w.launch_end <= w.ts  # launched, returned, then run
        assert w.lag_us == pytest.approx(w.ts - w.launch_ts)
    # No synchronize inside the steps: the CPU issues each step's work sooner than the GPU runs it, so the
    # lag starts at a few µs and grows over the three steps.
    assert lane[0].lag_us < 10.0
    assert lane[-1].lag_us > 250.0
    assert verdict(eager).max_gpu_lag_us == pytest.approx(max(w.lag_us for w in lane))


def test_a_kernel_belongs_to_the_step_whose_cpu_launched_it():
    # SDPA's math backend: the GPU runs ~5x behind the CPU, so the warmup step's (ProfilerStep#1) last kernels
    # run during ProfilerStep#2..#4. Their launch calls were not recorded: they belong to no step.
    trace = read_trace(SDPA_MATH)
    first_launch = min(c.correlation for s in trace.steps for c in s.runtime if c.correlation is not None)
    for step in trace.steps:
        assert len(step.kernels) == 20, [w.short_name for w in step.kernels]
        assert all(w.launch in step.runtime for w in step.gpu)
        assert [w.name for w in step.kernels] == [w.name for w in trace.steps[0].kernels]
    warmup = [w for w in trace.gpu_outside_steps if w.launch is None]
    assert len(warmup) == 8 and all(w.correlation < first_launch for w in warmup)
    assert warmup[-1].ts > trace.steps[2].ts  # the last of them runs in ProfilerStep#4, still the warmup's
    assert len(trace.gpu_lane()) == 3 * 20 + 8
    assert sum(trace.kernel_names().values()) == 20  # launches per step, the avg CUDA table's


def test_time_waiting_in_synchronize_is_not_cpu_work(tmp_path):
    data = raw_events(LINEAR)
    step = next(e for e in data["traceEvents"] if e.get("name") == "ProfilerStep#2")
    sync = {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": step["pid"], "tid": step["tid"],
            "ts": step["ts"] + 190.0, "dur": 10.0, "args": {"correlation": 1}}
    data["traceEvents"].append(sync)
    path = tmp_path / "synced.json"
    path.write_text(json.dumps(data))
    trace = read_trace(path)
    synced = trace.steps[0]
    assert synced.sync_us == pytest.approx(10.0)
    assert synced.cpu_us == pytest.approx(synced.dur - 10.0)
    # The table's CPU total counts both waits, the one in the step and the profiler's flush; the verdict's
    # issue time counts neither.
    assert trace.sync_wait_us == pytest.approx(10.0 + 13.856)
    v = verdict(trace)
    assert v.cpu_us_per_step * v.steps == pytest.approx(trace.self_cpu_total_us - 10.0 - 13.856)
    assert "13.9 µs of the CPU total is the profiler's flush" in v.summary and "10.0 µs is waiting in other synchronize calls" in v.summary


def test_diff_of_eager_and_compiled(eager, compiled):
    d = diff(eager, compiled)
    assert sorted(decode(g.names[0]).ops[0] for g in d.only_in_first) == ["gelu", "mul"]
    assert [g.names for g in d.only_in_second] == [["triton_poi_fused__unsafe_view_gelu_mul_0"]]
    assert sorted(g.short for g in d.in_both) == sorted({w.name for w in eager.gpu_work() if w.is_gemm})
    as_dict = d.to_dict()
    assert [t["trace"] for t in as_dict["step_time_us"]] == ["mlp_eager.json.gz", "mlp_compile.json.gz"]
    assert all(t["gpu_busy_us_per_step"] > 0 for t in as_dict["step_time_us"])


def test_json_shape(eager):
    out = json.loads(json.dumps(trace_to_dict(eager)))
    step = out["steps"][0]
    assert step["name"] == "ProfilerStep#2"
    assert {"kind", "name", "launched_by", "dur_us"} <= set(step["gpu"][0])
    assert [g["kind"] for g in step["gpu"]].count("kernel") == step["kernels"] == 5
    assert sum(g["share"] for g in step["gpu"]) == pytest.approx(1.0, abs=1e-3)
    assert all(g["lag_us"] > 0 for g in step["gpu"])
    assert out["verdict"]["kind"] == "compute-bound"
    assert out["verdict"]["table_totals_say"] == "overhead-bound"
    assert out["verdict"]["closing_sync_us"] == pytest.approx(269.302)
    assert out["self_cpu_total_us"] == pytest.approx(783.679) and out["self_gpu_total_us"] == pytest.approx(733.217)
    assert out["closing_sync"]["name"] == "cudaDeviceSynchronize" and out["closing_sync"]["dur_us"] == pytest.approx(269.302)
    assert out["outside_steps"]["runtime_calls"] == [{"name": "cudaDeviceSynchronize", "count": 1, "total_us": 269.302}]


# --- how the links are made ----------------------------------------------------------------------------------


def test_ac2g_flows_link_gpu_work_when_correlation_ids_are_missing(tmp_path):
    data = raw_events(EAGER)
    for event in data["traceEvents"]:
        if event.get("cat") in ("kernel", "gpu_memset"):
            del event["args"]["correlation"]
    path = tmp_path / "flows_only.json"
    path.write_text(json.dumps(data))
    trace = read_trace(path)
    assert [len(s.kernels) for s in trace.steps] == [5, 5, 5]
    assert {w.launched_by for w in trace.gpu_work() if w.is_gemm} == {"aten::mm"}
    idle = trace.steps[0].idle_ops()
    assert idle["aten::t"] == 3 and "aten::mm" not in idle


def test_trace_without_profiler_steps_is_one_step(tmp_path):
    data = raw_events(EAGER)
    data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    path = tmp_path / "no_steps.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    trace = read_trace(path)
    assert not trace.from_profiler_steps
    assert [s.name for s in trace.steps] == ["whole trace"]
    assert len(trace.steps[0].kernels) == 15
    assert any("ProfilerStep" in note for note in trace.notes)
    # Nothing comes after the steps now: the flush is a wait inside the one step, still not issue time.
    assert trace.closing_sync is None and not trace.runtime_outside_steps
    assert trace.steps[0].sync_us == pytest.approx(269.302)
    assert verdict(trace).kind == "compute-bound"


@pytest.mark.parametrize("chunk", [7, 64, 4096])
def test_streaming_parse_gives_the_same_trace_at_any_chunk_size(monkeypatch, tmp_path, chunk):
    # Chunks that cut events, strings and numbers anywhere must not change what we read.
    plain = tmp_path / "eager.json"
    plain.write_text(json.dumps(raw_events(EAGER), indent=1))
    reference = trace_to_dict(read_trace(plain))
    monkeypatch.setattr(source, "CHUNK_CHARS", chunk)
    assert trace_to_dict(read_trace(plain)) == reference


@pytest.mark.parametrize("chunk", [64, 4096, 1 << 20])
def test_events_holding_brace_comma_brace_are_read_whole(monkeypatch, tmp_path, chunk):
    # A chunk's events are parsed at once, cut where `}, {` follows an event; the same three characters inside an
    # event (a list of objects in args, a string) must not cut it in two.
    data = raw_events(EAGER)
    reference = tmp_path / "plain" / "nested.json"  # the same name: the report names its trace
    reference.parent.mkdir()
    reference.write_text(json.dumps(data))
    for i, event in enumerate(data["traceEvents"]):
        event.setdefault("args", {})["nested"] = [{"a": i}, {"b": "x}, {y"}]
    plain = tmp_path / "nested.json"
    plain.write_text(json.dumps(data, indent=1))
    monkeypatch.setattr(source, "CHUNK_CHARS", chunk)
    with source.open_text(plain) as text:
        assert list(source.TraceSource(text, plain).events()) == data["traceEvents"]
    assert trace_to_dict(read_trace(plain)) == trace_to_dict(read_trace(reference))


def test_bad_json_late_in_a_chunk_is_placed_exactly(tmp_path):
    # The events before it are parsed at once; where that fails, one at a time, so the message says where.
    data = raw_events(EAGER)
    text = json.dumps(data, indent=1)
    at = text.rindex('"ts"')  # in the last event: `"ts": 1,,` is not JSON
    bad = text[:at] + '"ts": 1,,' + text[text.index(",", at) + 1 :]
    path = tmp_path / "bad.json"
    path.write_text(bad)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(bad)
    with pytest.raises(UsageError, match=f"not valid JSON: .* at character {expected.value.pos:,}$"):
        read_trace(path)


def test_json_array_format_is_read_too(tmp_path):
    path = tmp_path / "array.json"
    path.write_text(json.dumps(raw_events(LINEAR)["traceEvents"]))
    assert len(read_trace(path).steps[0].kernels) == 1


# --- CPU traces made here ------------------------------------------------------------------------------------


def test_cpu_trace_has_steps_and_ops_but_no_gpu(cpu_trace):
    trace = read_trace(cpu_trace)
    assert [s.name for s in trace.steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert not trace.has_gpu
    for step in trace.steps:
        ops = step.op_names()
        assert ops["aten::linear"] == 3 and ops["aten::gelu"] == 1 and ops["aten::mul"] == 1
        assert ops["aten::mm"] + ops["aten::addmm"] == 3
    assert trace.labels["mlp_fwd"] == 3
    v = verdict(trace)
    assert v.kind == "no GPU data" and "no GPU" in v.summary
    assert trace_to_dict(trace)["steps"][0]["gpu"] == []


def test_self_time_of_an_op_excludes_its_children(cpu_trace):
    step = read_trace(cpu_trace).steps[0]
    linear = next(op for op in step.ops if op.name == "aten::linear")
    children = [op for op in step.ops if linear.ts <= op.ts < linear.ts + linear.dur and op is not linear and not op.is_label]
    direct = [c for c in children if not any(p is not c and p.ts <= c.ts < p.ts + p.dur for p in children)]
    assert direct and linear.self_us == pytest.approx(linear.dur - sum(c.dur for c in direct), abs=1e-6)


def test_cpu_trace_without_steps_is_one_step(cpu_trace_without_steps):
    trace = read_trace(cpu_trace_without_steps)
    assert not trace.from_profiler_steps and len(trace.steps) == 1
    assert trace.steps[0].op_names()["aten::gelu"] == 3


# --- bad input -----------------------------------------------------------------------------------------------


def _cut(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


BAD_INPUTS = {
    "empty": b"",
    "whitespace": b"  \n ",
    "cut_json": _cut(gzip.decompress(EAGER.read_bytes()), 0.6),
    "cut_json_in_a_number": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 12',
    "cut_gzip": _cut(EAGER.read_bytes(), 0.5),
    "not_json": b"hello, world",
    "binary": bytes(range(256)),
    "json_number": b"42",
    "json_without_trace_events": b'{"schemaVersion": 1}',
    "trace_events_not_a_list": b'{"traceEvents": {"ph": "X"}}',
    "events_not_objects": b'{"traceEvents": [1, 2, 3]}',
    "no_events": b'{"traceEvents": []}',
    "no_timed_events": b'{"traceEvents": [{"ph": "M", "name": "process_name"}]}',
    "extra_data": b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]} {}',
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_a_usage_error_of_one_line(tmp_path, case):
    path = tmp_path / (f"{case}.json.gz" if case == "cut_gzip" else f"{case}.json")
    path.write_bytes(BAD_INPUTS[case])
    with pytest.raises(UsageError) as err:
        read_trace(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message


def test_cut_files_say_they_are_cut(tmp_path):
    for name in ("cut_json", "cut_gzip"):
        path = tmp_path / (f"{name}.json.gz" if name == "cut_gzip" else f"{name}.json")
        path.write_bytes(BAD_INPUTS[name])
        with pytest.raises(UsageError, match="cut short"):
            read_trace(path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read_trace(tmp_path / "nope.json")
    with pytest.raises(UsageError, match="folder"):
        read_trace(tmp_path)


# --- kernel names --------------------------------------------------------------------------------------------


def test_nvjet_names_are_decoded():
    name = decode("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT")
    fields = dict(name.details)
    assert name.is_gemm and name.family == "cuBLAS (nvjet)"
    assert fields["arch"] == "sm90 (Hopper)" and fields["tile"] == "256x128" and fields["layout"] == "TNT"
    assert fields["k-block"] == "64 x 4 stages" and fields["cluster"] == "1x2"
    assert not name.has_bias_epilogue
    assert decode("nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT").has_bias_epilogue


def test_cutlass_and_cublas_names_are_decoded():
    name = decode("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8")
    fields = dict(name.details)
    assert name.is_gemm and name.family == "CUTLASS"
    assert fields["arch"] == "sm80 (Ampere)" and fields["dtype"] == "bf16" and fields["tile"] == "16x16"
    assert fields["layout"] == "tn" and fields["alignment"] == "8 elements"
    wrapped = decode("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)")
    assert wrapped.short == "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8"
    assert ("epilogue", "relu in the epilogue") in wrapped.details
    ampere = decode("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn")
    assert ampere.is_gemm and dict(ampere.details)["tile"] == "128x128" and dict(ampere.details)["layout"] == "tn"


def test_inductor_names_are_decoded():
    assert split_fused_ops("_unsafe_view_gelu_mul") == ("_unsafe_view", "gelu", "mul")
    assert split_fused_ops("native_layer_norm_add") == ("native_layer_norm", "add")
    reduction = decode("triton_red_fused_sum_1")
    assert reduction.inductor_kind == "reduction" and reduction.ops == ("sum",)
    assert decode("triton_tem_fused_addmm_0").is_gemm
    assert not is_gemm("triton_poi_fused__unsafe_view_gelu_mul_0")


def test_aten_names_are_shortened_to_their_op():
    gelu = next(w.name for w in read_trace(EAGER).gpu_work() if "Gelu" in w.name)
    assert len(gelu) > 300
    assert short_name(gelu) == "vectorized_elementwise_kernel<gelu>"


@pytest.mark.parametrize("name, short", [("my_kernel", "my_kernel"), ("void foo<int>(int)", "foo<int>"),
                                         ("fmha_cutlassF_f16_aligned_64x64_rf_sm80", "fmha_cutlassF_f16_aligned_64x64_rf_sm80"),
                                         ("void internal::foo::kernel<int, float>(Params)", "foo::kernel<int, float>")])
def test_unknown_names_keep_their_function_name(name, short):
    decoded = decode(name)
    assert decoded.short == short  # without `void` and the parameters; a generic function keeps its namespace
    assert not decoded.is_gemm and decoded.name == name


@pytest.mark.parametrize("name, direction", [("_geglu_gemm_kernel", "forward"), ("_geglu_gemm_tma_kernel", "forward"),
                                             ("_geglu_backward_kernel", "backward"),
                                             ("_geglu_backward_tma_kernel", "backward")])
def test_the_suites_fused_geglu_gemms_are_gemms_not_liger_kernels(name, direction):
    decoded = decode(name)
    assert decoded.family == "profiling_in_pytorch (Triton)" and decoded.is_gemm
    assert ("pass", direction) in decoded.details
    assert ("loads" in dict(decoded.details)) == name.endswith("_tma_kernel")


def test_liger_geglu_kernel_is_recognised():
    name = decode("_geglu_tanh_forward_kernel")
    assert name.family == "Liger-Kernel (Triton)" and name.ops == ("geglu",) and not name.is_gemm


def test_trace_report_on_a_cpu_trace_reports_cpu_ops_and_no_gpu(cpu_trace):
    run = run_report(cpu_trace)
    assert run.returncode == 0, run.stderr
    assert "no GPU in the trace" in run.stdout
    assert "aten::gelu" in run.stdout and "aten::linear" in run.stdout and "self µs" in run.stdout
    assert "verdict: no GPU data" in run.stdout
    assert "Who sets the pace" not in run.stdout and "outside the steps" not in run.stdout
    report = json.loads(run_report(cpu_trace, "--json").stdout)
    assert report["verdict"]["kind"] == "no GPU data"
    assert report["closing_sync"] is None and report["verdict"]["closing_sync_us"] is None
    assert report["self_cpu_total_us"] == pytest.approx(sum(s["cpu_us"] for s in report["steps"]), abs=0.01)
    ops = {op["name"]: op for op in report["steps"][0]["cpu_ops"]}
    assert ops["aten::linear"]["count"] == 3 and ops["aten::linear"]["launched_gpu_work"] == 0
