"""Time and regime (Part 1): the profiler's steps, who sets the pace, how far the GPU lane runs behind the CPU
lane, the profiler's flush, cold and warm steps, and what --compile costs the CPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from profiling_in_pytorch.checks.base import (
    PROFILER_START,
    SHORT_CPU_STEPS,
    STEADY_CLOCKS,
    Expectation,
    Outcome,
    cpu_kernels,
    needs_gpu,
    read_eager_twin,
)
from trace_report.model import Step, Trace
from trace_report.observer import UNPROFILED_KEY, Unprofiled
from trace_report.pace import verdict

__all__ = [
    "profiler_steps",
    "overhead_bound",
    "compute_bound",
    "gpu_lane_lag",
    "closing_sync",
    "cold_first_step",
    "steps_alike",
    "kernel_time_varies",
    "more_cpu_than_eager",
]


def profiler_steps(n: int = 3, claim: str = "") -> Expectation:
    """The schedule's active steps appear in the CPU lane as ProfilerStep#2..#4."""
    want = [f"ProfilerStep#{i}" for i in range(2, 2 + n)]

    def check(trace: Trace) -> Outcome:
        names = [s.name for s in trace.steps] if trace.from_profiler_steps else []
        return Outcome(names == want, f"steps: {', '.join(names) or 'none (no ProfilerStep events)'}")

    return Expectation(f"{n} profiler steps in the CPU lane, {want[0]}..#{1 + n} (wait=1, warmup=1, active={n})", check, claim)


def overhead_bound(claim: str = "") -> Expectation:
    """Part 1 at --size 64: the table's Self CPU total dwarfs its Self CUDA total; the GPU idles."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            share = _cpu_math_share(trace)
            return Outcome(share < 0.5, _cpu_share_evidence(share), _short_cpu_steps(trace))
        v = verdict(trace)
        return Outcome(v.kind == "overhead-bound", v.summary)

    return Expectation("overhead-bound: Self CPU total ≫ Self CUDA total, the GPU mostly idle", check, claim)


def compute_bound(dominant: str = "GEMM", claim: str = "") -> Expectation:
    """Part 1 at --size 4096: the GPU's work is as long as the CPU's or longer, and one kernel dominates it."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            share = _cpu_math_share(trace)
            return Outcome(share >= 0.5, _cpu_share_evidence(share))
        v = verdict(trace)
        gpu = [w for w in trace.gpu_work()]
        total = sum(w.dur for w in gpu)
        top = sum(w.dur for w in gpu if w.is_gemm) if dominant == "GEMM" else 0.0
        share = top / total if total else 0.0
        evidence = f"{v.summary} The {dominant} kernels take {share:.0%} of the GPU time."
        return Outcome(v.kind == "compute-bound" and share > 0.5, evidence)

    return Expectation(f"compute-bound: the GPU's time is as long as the CPU's, and the {dominant} dominates it", check, claim)


def gpu_lane_lag(cpu_ahead: bool, threshold_us: float = 100.0, claim: str = "") -> Expectation:
    """How far the GPU lane runs behind the CPU lane: each step's latest kernel start minus its launch call's start.

    cpu_ahead: the GPU is the bottleneck, so its queue grows and the lag passes `threshold_us` (Part 1 at 4096);
    otherwise the GPU keeps up and every kernel starts within `threshold_us` of its launch (Part 1 at 64)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        lags = _lags(trace)
        last = max(lags) if lags else 0.0
        evidence = f"per step, the latest kernel starts {_us_list(lags) or '?'} µs after its launch call"
        return Outcome(last >= threshold_us if cpu_ahead else last < threshold_us, evidence)

    if cpu_ahead:
        text = f"the CPU lane runs ahead of the GPU lane (kernels start ≥ {threshold_us:g} µs after their launch)"
    else:
        text = f"the GPU keeps up with the CPU: every kernel starts < {threshold_us:g} µs after its launch"
    return Expectation(text, check, claim)


def closing_sync(claim: str = "") -> Expectation:
    """The profiler's own flush: one long cudaDeviceSynchronize after the last step, the GPU mostly idle meanwhile."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        sync = trace.closing_sync
        if sync is None:
            return Outcome(False, "no synchronize after the last step")
        running = sum(max(0.0, min(w.ts + w.dur, sync.ts + sync.dur) - max(w.ts, sync.ts)) for w in trace.gpu_work())
        idle = 1 - running / sync.dur if sync.dur else 0.0
        return Outcome(
            True,
            f"{sync.name} {sync.dur:,.1f} µs after {trace.steps[-1].name}; the GPU ran {running:,.1f} µs of it "
            f"(idle {idle:.0%}): the profiler waiting for the GPU before it stops",
        )

    return Expectation("a cudaDeviceSynchronize closes the active window (the profiler's flush)", check, claim)


def cold_first_step(label: str, claim: str = "") -> Expectation:
    """A cold run: the first recorded step is the longest, and its dead window (from the label's start to the
    first op inside it: workspace allocation, cuBLAS heuristics, lazy loading) is wider than in later steps."""

    def check(trace: Trace) -> Outcome:
        durs = [s.dur for s in trace.steps]
        windows = [_dead_window(step, label) for step in trace.steps]
        if len(durs) < 2 or any(w is None for w in windows):
            return Outcome(False, f"no op inside {label} in every step")
        gaps = [gap for gap, _ in windows]
        rest_dur, rest_gap = statistics.median(durs[1:]), statistics.median(gaps[1:])
        evidence = (
            f"steps {_us_list(durs)} µs; {label} → {windows[0][1]} gap {_us_list(gaps)} µs "
            f"(the first step {durs[0] / rest_dur:.1f}× the others' length)"
        )
        return Outcome(durs[0] > 1.2 * rest_dur and gaps[0] > 2 * rest_gap, evidence, _short_cpu_steps(trace))

    return Expectation(f"cold: the first profiled step is the longest, with a dead window at the start of {label}", check, claim)


def steps_alike(claim: str = "") -> Expectation:
    """A warm run: every profiled step takes about the same time."""

    def check(trace: Trace) -> Outcome:
        durs = [s.dur for s in trace.steps]
        spread = max(durs) / min(durs) if min(durs) > 0 else float("inf")
        later = max(durs[1:]) / min(durs[1:]) if len(durs) > 2 and min(durs[1:]) > 0 else spread
        reason = PROFILER_START if spread >= 1.5 and later < 1.5 and durs[0] == max(durs) else _short_cpu_steps(trace)
        return Outcome(spread < 1.5, f"steps {_us_list(durs)} µs: the longest {spread:.2f}× the shortest", reason)

    return Expectation("warm: every profiled step takes a similar time (within 1.5×)", check, claim)


def kernel_time_varies(min_spread: float = 0.01, claim: str = "") -> Expectation:
    """At --size 4096 the same GEMM can run longer in one step than in another: read the trace, not the mean."""

    def check(trace: Trace) -> Outcome:
        if trace.has_gpu:
            durs = [sum(w.dur for w in step.gemms) for step in trace.steps]
            what = "the GEMM"
        else:
            durs = [sum(op.dur for op in step.ops if op.name in ("aten::mm", "aten::bmm")) for step in trace.steps]
            what = "aten::mm"
        if not all(durs):
            return Outcome(False, f"no {what} in every step")
        spread = max(durs) / min(durs) - 1
        evidence = f"{what} per step: {_us_list(durs)} µs (spread {spread:.1%})"
        return Outcome(spread >= min_spread, evidence, None if spread >= min_spread else STEADY_CLOCKS)

    return Expectation("the same GEMM kernel takes different times in different steps", check, claim)


def more_cpu_than_eager(claim: str = "") -> Expectation:
    """--compile: for one small op the compiled step costs the CPU more than the eager one (guards, wrappers)."""

    def check(trace: Trace) -> Outcome:
        other = read_eager_twin(trace)
        if isinstance(other, Outcome):
            return other
        ours, theirs = _issue_cpu(trace), _issue_cpu(other)
        evidence = f"CPU per step (each run's fastest): compiled {ours:,.1f} µs, eager {theirs:,.1f} µs ({ours / theirs:.1f}×)"
        reason = None if ours > theirs or trace.has_gpu else CPU_DOES_THE_MATH
        return Outcome(ours > theirs, evidence, reason)

    return Expectation("compiled, the CPU spends more per step than eager (Dynamo's guards and wrappers)", check, claim)


def _lags(trace: Trace) -> list[float]:
    """Per step, how long after its launch call the step's last kernel started: the GPU lane's delay."""
    lags = []
    for step in trace.steps:
        launched = [w for w in step.gpu if w.launch_ts is not None]
        if launched:
            lags.append(max(w.ts - w.launch_ts for w in launched))
    return lags


def _issue_cpu(trace: Trace) -> float:
    """CPU time per step spent issuing work (the step's box, less time waiting in a synchronize), of the fastest
    step: a cold first step, or another process taking the CPU for a while (a CI machine's two cores), only ever
    adds time, so the fastest step is the closest to the run's own cost and two runs compare fairly."""
    return min(s.cpu_us for s in trace.steps)


def _dead_window(step: Step, label: str) -> tuple[float, str] | None:
    """From the label's start to the start of the first op inside it (Part 1's dead window), and that op."""
    box = next((o for o in step.ops if o.is_label and o.name == label), None)
    if box is None:
        return None
    inner = [o for o in step.ops if not o.is_label and box.ts <= o.ts <= box.ts + box.dur]
    if not inner:
        return None
    first = min(inner, key=lambda o: o.ts)
    return first.ts - box.ts, first.name


SHORT_STEP_US = 1000.0
# On a CPU the step's CPU time is its arithmetic too, not only what it costs to issue: Inductor's one C++ loop for the
# matmul and the add against eager's two ops, each with its own dispatch. At --size 16 on 2 busy cores one run of the
# tests measured compiled 62 µs, eager 74 µs; earlier runs, the other way round.
CPU_DOES_THE_MATH = ("on a CPU the step's CPU time is the arithmetic too: Inductor's one loop for the matmul and the add "
                     "can beat eager's two ops by more than Dynamo's guards cost, and two runs on a busy machine differ")


def _short_cpu_steps(trace: Trace) -> str | None:
    """The reason a CPU run's timing can miss: steps of a few tens of µs, where another process's moment counts.
    Measured on 2 cores: lesson 01's steps last 23-67 µs at --size 16 and 42-94 µs at 64; at 16, with the test suite
    running beside it, it missed its cold step (P1-04) or its overhead share (P1-01) about once a suite, and once its
    warm steps' likeness (P1-05: 61, 26 and 42 µs)."""
    if trace.has_gpu or not trace.steps:
        return None
    # How long a step is, read where other work on the machine moves it least: the lessons time the step without the
    # profiler first and write the median of its repeats into the trace (lesson 01 at --size 16: 17 µs, 50 repeats).
    # The profiled steps are three, and a machine busy with other work can stretch every one of them past a
    # millisecond (lesson 01 at --size 16 beside a test suite and a trace-report loop: math ops at 99% of a step);
    # without the timing in the trace, the fastest of them.
    unprofiled = Unprofiled.from_dict(trace.meta.get(UNPROFILED_KEY))
    step_us = unprofiled.wall_us_per_step if unprofiled is not None else min(s.dur for s in trace.steps)
    if step_us >= SHORT_STEP_US:
        return None
    return SHORT_CPU_STEPS


def _cpu_math_share(trace: Trace) -> float:
    """On a CPU: the share of each step spent inside the math ops, the rest being Python and dispatch."""
    math = sum(o.dur for step in trace.steps for o in cpu_kernels(step))
    total = sum(step.dur for step in trace.steps)
    return math / total if total else 0.0


def _cpu_share_evidence(share: float) -> str:
    return (
        f"no GPU here: the math ops take {share:.0%} of each step's CPU time, the other {1 - share:.0%} is "
        "Python, dispatch and the profiler (a CPU's version of the same question)"
    )


def _us_list(values: Sequence[float]) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)
