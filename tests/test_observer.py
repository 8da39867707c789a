"""The observer effect: a lesson times its step without the profiler, writes the figures into its trace and says what
the profiler changed; trace-report reads them back, knows what any trace was recorded with, and says where the two
verdicts disagree (a hand-built trace) or whether an overhead-bound verdict would likely survive without the profiler."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, requires_cuda, run_script, stderr_lines
from trace_report.tests.graph_traces import TraceWriter

from trace_report.observer import UNPROFILED_KEY, ObserverEffect, Profiled, Unprofiled, observe
from trace_report.observer import recording_options
from trace_report.pace import verdict
from trace_report.profiler_costs import MEASURED, estimate
from trace_report.reader import read_trace
from trace_report.report import main as trace_report

WORLD = FIXTURES / "world"


def _rewritten(source: Path, target: Path, drop: tuple[str, ...] = (), add: dict | None = None) -> Path:
    """`source` with some top-level keys dropped and others put first, as plain JSON at `target`."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as f:
        data = json.load(f)
    target.write_text(json.dumps({**(add or {}), **{k: v for k, v in data.items() if k not in drop}}))
    return target


# --- a lesson's run: the timing, in its trace and its output ----------------------------------------------------


@pytest.mark.parametrize("name", ["01", "01 warm"])
def test_a_lesson_times_its_step_unprofiled_and_writes_the_figures_first_in_its_trace(cpu_lesson_runs, name):
    result = cpu_lesson_runs[name]
    assert result.returncode == 0, result.stderr
    tag = "16_fp32_warm_eager_cpu" if "warm" in name else "16_fp32_cold_eager_cpu"
    path = cpu_lesson_runs.folder / "01_matmul_add" / f"{tag}.json"
    data = json.loads(path.read_text())
    assert next(iter(data)) == UNPROFILED_KEY  # before traceEvents: read from the file's first bytes
    figures = data[UNPROFILED_KEY]
    assert figures["device"] == "cpu" and figures["gpu_us_per_step"] is None
    assert figures["repeats"] >= 3 and 0 < figures["wall_us_per_step"] == figures["cpu_issue_us_per_step"]
    assert figures["timing_s"] <= 1.0  # the goal: at most a second per lesson run
    out = result.stdout
    line = next(line for line in out.splitlines() if line.startswith("without the profiler: "))
    assert f"(medians of {figures['repeats']}," in line
    section = " ".join(out.split("What the profiler changed", 1)[1].split())  # wrapped to the terminal
    assert "a step, profiled" in section and "no GPU, so no verdict to flip" in section


def test_trace_report_reads_the_lessons_figures_back_from_the_trace(cpu_lesson_runs, capsys):
    path = cpu_lesson_runs.folder / "01_matmul_add" / "16_fp32_warm_eager_cpu.json"
    assert cpu_lesson_runs["01 warm"].returncode == 0
    written = json.loads(path.read_text())[UNPROFILED_KEY]
    assert trace_report([str(path), "--json"]) == 0
    measured = json.loads(capsys.readouterr().out)["observer_effect"]["measured"]
    assert measured["unprofiled"] == written
    assert measured["flipped"] is False and measured["unprofiled_kind"] is None  # no GPU, no verdict to weigh
    assert trace_report([str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "What the profiler changed" in out and f"unprofiled {_ms_or_us(written['wall_us_per_step'])} a step" in out


def _ms_or_us(us: float) -> str:
    return f"{us / 1000:,.2f} ms" if us >= 1000 else f"{us:,.1f} µs"


# --- what a trace was recorded with ---------------------------------------------------------------------------


def test_recording_options_from_the_profilers_metadata_and_from_the_events(tmp_path):
    vllm = WORLD / "b200_vllm_eager_tp8_rank0_60to90ms.json.gz"  # recorded with shapes and stacks
    trace = read_trace(vllm)
    assert observe(trace, verdict(trace)).options == {"record_shapes": "the trace's metadata",
                                                      "with_stack": "the trace's metadata"}
    # Without the metadata the events still say it: input shapes on the ops, module frames from Python stacks.
    stacks = _rewritten(FIXTURES / "cpu" / "tiny-llama_with_stack_train.json.gz", tmp_path / "stacks.json",
                        drop=("with_stack",))
    shapes = _rewritten(FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz",
                        tmp_path / "shapes.json", drop=("record_shapes",))
    assert recording_options(read_trace(stacks), {}) == {"with_stack": "Python frames around its ops"}
    assert recording_options(read_trace(shapes), {}) == {"record_shapes": "input shapes on its ops"}
    # profile_memory and with_modules leave nothing the reader keeps: only the metadata names them.
    gfx = WORLD / "gfx942_vllm_decode_graph_replay_emptyname.json.gz"
    assert list(observe(read_trace(gfx), verdict(read_trace(gfx))).options) == ["record_shapes", "with_stack",
                                                                                "profile_memory"]
    plain = FIXTURES / "h200" / "mlp_eager.json.gz"
    assert recording_options(read_trace(plain), {}) == {}


# --- the verdict judged on both runs -----------------------------------------------------------------------------


def _launch_bound_trace(path: Path, *, kernel_us: float, unprofiled: dict | None = None, meta: dict | None = None,
                        steps: int = 3, pause_us: float = 0.0) -> Path:
    """Steps of 100 µs on the CPU, each 4 ops launching one kernel of `kernel_us` (queued behind the GPU's work),
    `pause_us` of unrecorded CPU time between steps, then the profiler's closing synchronize; `unprofiled`: the
    lesson's figures, written first."""
    w = TraceWriter()
    t, free = 1_000_000.0, 0.0
    for step in range(2, 2 + steps):
        w.box("user_annotation", f"ProfilerStep#{step}", t, 100.0)
        w.box("user_annotation", "mlp_fwd", t + 2.0, 96.0)
        for i in range(4):
            op = t + 4.0 + 24.0 * i
            w.box("cpu_op", "aten::mm", op, 22.0)
            correlation = w.runtime("cudaLaunchKernel", op + 12.0, 8.0, cbid=211)
            start = max(free, op + 21.0)
            w.gpu("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", start, kernel_us, correlation)
            free = start + kernel_us
        t += 100.0 + pause_us
    w.runtime("cudaDeviceSynchronize", t + 1.0, max(1.0, free - t), cbid=165)
    trace = {**({UNPROFILED_KEY: unprofiled} if unprofiled else {}), **(meta or {}), "schemaVersion": 1,
             "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "computeMajor": 9, "computeMinor": 0}],
             "traceEvents": w.events, "traceName": path.name}
    path.write_text(json.dumps(trace))
    return path


def test_a_verdict_the_profiler_flips_is_said_and_the_unprofiled_one_believed(tmp_path, capsys):
    # Profiled: 4 kernels of 5 µs a step (20 µs of GPU work) issued in ~100 µs: overhead-bound. Timed without the
    # profiler: the CPU issues a step in 15 µs, the GPU works 20 µs, steps go by every 21 µs: GPU-bound.
    unprofiled = {"device": "cuda", "repeats": 20, "wall_us_per_step": 21.0, "cpu_issue_us_per_step": 15.0,
                  "gpu_us_per_step": 20.0, "timing_s": 0.2}
    path = _launch_bound_trace(tmp_path / "flipped.json", kernel_us=5.0, unprofiled=unprofiled)
    trace = read_trace(path)
    judged = verdict(trace)
    assert judged.kind == "overhead-bound" and judged.gpu_busy_us_per_step == pytest.approx(20.0)
    effect = observe(trace, judged).effect
    assert effect.flipped and effect.unprofiled.kind == "compute-bound"
    assert effect.cause() == "the profiler's CPU cost is most of the gap"
    assert trace_report([str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the sentences as one line, whatever the terminal's width
    assert "unprofiled 21.0 µs a step, profiled 100.0 µs (+376%): the profiler's CPU cost is most of the gap" in out
    assert ("the profiler flips the verdict: the trace reads overhead-bound, the step timed without it compute-bound "
            "(the GPU idles about 5% of a step without it") in out
    assert "believe the unprofiled timing on who sets the pace" in out


def test_a_verdict_that_holds_without_the_profiler_says_so_and_whose_idle_share_it_is(tmp_path):
    unprofiled = {"device": "cuda", "repeats": 20, "wall_us_per_step": 60.0, "cpu_issue_us_per_step": 58.0,
                  "gpu_us_per_step": 20.0, "timing_s": 0.2}
    trace = read_trace(_launch_bound_trace(tmp_path / "holds.json", kernel_us=5.0, unprofiled=unprofiled))
    effect = observe(trace, verdict(trace)).effect
    assert not effect.flipped and effect.unprofiled.kind == "overhead-bound"
    text = " ".join(effect.sentences())
    assert "both read overhead-bound: the verdict holds without the profiler; the GPU idles about 67% of a step" in text
    assert "that share is the profiler's, not the code's" in text


def test_an_untimed_overhead_bound_trace_gets_the_measured_option_costs(tmp_path, capsys):
    # 100 µs of CPU a step; with record_shapes the measured steps were 1.25x-2.32x slower: 43-80 µs without it.
    shapes = {"record_shapes": 1}
    survives = read_trace(_launch_bound_trace(tmp_path / "survives.json", kernel_us=9.0, meta=shapes))
    found = observe(survives, verdict(survives)).estimate
    slowdowns = sorted(r.slowdown for r in MEASURED if r.options == {"record_shapes"})
    assert found.exact and found.issue_us == pytest.approx((100.0 / slowdowns[-1], 100.0 / slowdowns[0]), rel=0.02)
    assert found.survives == "likely"  # 36 µs of GPU work: below even the lowest estimate
    # 84 µs of GPU work a step, the GPU idle between steps (a GPU busy 80% of its window is no longer overhead-bound)
    flips = read_trace(_launch_bound_trace(tmp_path / "flips.json", kernel_us=21.0, meta=shapes, pause_us=30.0))
    assert verdict(flips).kind == "overhead-bound"
    assert observe(flips, verdict(flips)).estimate.survives == "unlikely"  # 84 µs: above the highest
    assert trace_report([str(tmp_path / "flips.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "recorded with record_shapes (the trace's metadata)" in out
    assert "the verdict likely does not survive without the profiler" in out
    # Options no step was measured with alone: the rows with fewer of them, said to be a lower bound.
    lower = estimate(frozenset({"record_shapes", "with_stack", "profile_memory"}), 100.0, 36.0, 0.6)
    assert not lower.exact and "a lower bound" in lower.sentences()[0]
    assert {r.options for r in lower.rows} == {frozenset({"record_shapes", "with_stack"})}


# --- the benchmark of the options' costs ---------------------------------------------------------------------------


def test_the_options_benchmark_runs_on_a_cpu_at_tiny_sizes(tmp_path):
    out = tmp_path / "options.json"
    result = run_script("benchmark_profiler_options.py", "--workloads", "mlp", "--device", "cpu", "--mlp_sizes",
                        "2,8,64,128", "--configs", "record_shapes", "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    assert stderr_lines(result) == []
    data = json.loads(out.read_text())
    base, shapes = data["rows"]
    assert (base["config"], base["profiled"], shapes["config"], shapes["profiled"]) == ("unprofiled", False,
                                                                                     "record_shapes", True)
    assert shapes["slowdown"] == pytest.approx(shapes["wall_us_per_step"] / base["wall_us_per_step"], abs=1e-3)
    [row] = data["measured"]  # in profiler_costs.MEASURED's form, for the table trace-report estimates from
    assert row["options"] == ["record_shapes"] and row["unprofiled_ms"] == round(base["wall_us_per_step"] / 1e3, 4)
    assert "record_shapes" in result.stdout and f"results: {out}" in result.stdout


def test_the_options_benchmark_refuses_an_unknown_configuration():
    result = run_script("benchmark_profiler_options.py", "--configs", "record_shape")
    assert result.returncode == 2
    assert stderr_lines(result) == [
        "benchmark_profiler_options.py: error: --configs: unknown record_shape: use unprofiled, no_option, "
        "record_shapes, with_stack, profile_memory, with_modules, all"]


@pytest.mark.gpu
@requires_cuda
def test_on_a_gpu_the_lesson_times_gpu_and_cpu_apart_and_judges_both(tmp_path):
    result = run_script("03_simple_mlp.py", "--trace_dir", str(tmp_path), timeout=600)  # the post's size
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    trace = json.loads(next((tmp_path / "03_simple_mlp").glob("*.json")).read_text())
    figures = trace[UNPROFILED_KEY]
    assert figures["device"] == "cuda" and figures["gpu_us_per_step"] > 0 and figures["repeats"] >= 3
    assert figures["timing_s"] <= 1.0  # the goal at the post's sizes
    section = " ".join(result.stdout.split("What the profiler changed", 1)[1].split())
    assert "the GPU works" in section and ("both read" in section or "the profiler flips the verdict" in section)


def test_a_step_that_filled_the_launch_queue_keeps_that_said_in_its_trace():
    # llama-1b's forward on an H100: more launches than the queue holds; its issue time is the step's return to an
    # idle GPU, no later than the GPU's time, so the figures read GPU-bound (held, they read 34.5 ms to issue).
    figures = Unprofiled("cuda", 20, 13_167.0, 12_400.0, 13_081.0, 0.6, launch_queue_full=True)
    back = Unprofiled.from_dict(json.loads(json.dumps(figures.to_dict())))
    assert back == figures and back.kind == "compute-bound"
    older = {key: value for key, value in figures.to_dict().items() if key != "launch_queue_full"}
    assert Unprofiled.from_dict(older).launch_queue_full is False


def test_one_cpu_step_timed_slower_than_the_profiled_ones_is_not_called_noise():
    # Lesson 03 on 2 cores: one step of seconds timed (680 ms, its second call), the profiled steps 568 ms.
    once = Unprofiled("cpu", 1, 680_400.0, 680_400.0, None, 1.4)
    profiled = Profiled(567_770.0, 567_770.0, None, "no GPU data", None)
    assert "one step of seconds, timed on its second call, is no median" in ObserverEffect(once, profiled).cause()
    several = Unprofiled("cpu", 3, 680_400.0, 680_400.0, None, 1.4)
    assert "needs more repeats" in ObserverEffect(several, profiled).cause()
