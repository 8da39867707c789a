"""The decode lesson's guesses (07_decode_mlp.py): a loop of forwards per profiled step, launched one kernel at a
time or replayed from a CUDA graph.

Each profiled step runs `forwards` forwards back to back under one label, as generation issues them, so every
count here is per forward: a step's count divided by `forwards`. What the checks read:

    kernels_per_forward          how many kernels one forward runs, and which
    kernel_per_forward           a kernel matching a name, once per forward
    gpu_waits_between_kernels    launched one by one: the GPU idles between kernels, waiting for the next launch
    one_graph_launch_per_forward replayed: one cudaGraphLaunch per forward runs every kernel
    replay_back_to_back          inside a replay the kernels follow each other within a few µs
    loop_against_gpu             the loop's time per forward (timed without the profiler) against the GPU's busy
                                 time per forward (from the trace): who sets the pace
    cpu_time_breakdown           where each forward's CPU time goes: guards, wrappers, the compiled graph's own
                                 Python (CUDA graph trees' bookkeeping), ATen ops, runtime calls, the graph launch

Like every check (profiling_in_pytorch.checks.base), each returns an Expectation whose check gives ✓, or ✗ with
the evidence and, when known, the reason; a GPU-only claim on a CPU trace is ✗ with that reason.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from dataclasses import dataclass

from profiling_in_pytorch.checks.base import NO_GPU, Expectation, Outcome, needs_gpu
from trace_report.graphs import Replay, is_graph_launch, outside_graphs, replays
from trace_report.model import Step, Trace
from trace_report.pace import MIN_GAP_US
from trace_report.timeline import gaps, launch_waits

# What a kernel launched one by one waits for, and what a replay's kernels do not.
BACK_TO_BACK_US = 3.0  # inside a graph the GPU goes from one kernel to the next in about a µs (H200)
GPU_SHARE = 0.5  # GPU busy over the loop's time per forward: at least this, the GPU sets the pace


@dataclass
class LoopTime:
    """The loop of forwards timed without the profiler, which adds CPU time to every op it records: per forward,
    CUDA events around the loop (the GPU's clock) and the host clock around the same loop (the CPU's issue time).
    The lesson fills it after announcing its guesses and before profiling (lesson.time_unprofiled); None until then."""

    per_forward_us: float | None = None
    cpu_us: float | None = None


def _per_forward(value: float, forwards: int) -> str:
    per = value / forwards
    return f"{per:g}" if per == int(per) else f"{per:.2f}"


def _names(counter: Counter, forwards: int) -> str:
    return ", ".join(f"{name} ×{_per_forward(n, forwards)}" if n != forwards else name for name, n in counter.items())


# --- kernels per forward ------------------------------------------------------------------------------------


def kernels_per_forward(forwards: int, least: int, text: str | None = None, claim: str = "") -> Expectation:
    """Every step runs the same number of kernels per forward, at least `least` (cuBLAS may split a GEMM's K at a
    few tokens and add a reduce kernel, so the count is a floor), and says which."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        counts = [len(step.kernels) for step in trace.steps]
        names = Counter(w.short_name for w in trace.steps[0].kernels)
        per = counts[0] / forwards
        evidence = f"{_per_forward(counts[0], forwards)} kernels per forward ({forwards} per step): {_names(names, forwards)}"
        if len(set(counts)) > 1:
            evidence += f" (steps differ: {', '.join(map(str, counts))} kernels)"
        return Outcome(len(set(counts)) == 1 and per == int(per) and per >= least, evidence)

    return Expectation(text or f"at least {least} kernels per forward, the same in every step", check, claim)


def kernel_per_forward(pattern: str, forwards: int, text: str | None = None, claim: str = "") -> Expectation:
    """A kernel whose name matches `pattern` (a regex, case-insensitive) runs once per forward."""
    regex = re.compile(pattern, re.IGNORECASE)

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        counts = [sum(1 for w in step.kernels if regex.search(w.name)) for step in trace.steps]
        found = Counter(w.short_name for w in trace.steps[0].kernels if regex.search(w.name))
        if not any(counts):
            every = Counter(w.short_name for w in trace.steps[0].kernels)
            return Outcome(False, f"no kernel matches /{pattern}/; per forward: {_names(every, forwards) or 'none'}")
        return Outcome(all(c == forwards for c in counts),
                       f"{', '.join(_per_forward(c, forwards) for c in counts)} per forward in the steps: {_names(found, forwards)}")

    return Expectation(text or f"a kernel matching /{pattern}/ once per forward", check, claim)


# --- launched one by one: the GPU waits --------------------------------------------------------------------


def gpu_waits_between_kernels(forwards: int, max_busy: float = GPU_SHARE, claim: str = "") -> Expectation:
    """Launched one kernel at a time at a decode shape, each kernel runs for a few µs and the next launch takes the
    CPU longer: the GPU is busy less than `max_busy` of its window and most of its idle gaps are launch waits (the
    next launch call returned only after the GPU had run dry). The CPU stays ahead by one launch, never more."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        shares, idle, waits, lags = [], [], [], []
        for step in trace.steps:
            work = sorted(step.gpu, key=lambda w: w.ts)
            if not work:
                continue
            window = max(w.end for w in work) - work[0].ts
            shares.append(step.gpu_busy_us / window if window > 0 else 1.0)
            idle += gaps(work, MIN_GAP_US)
            waits += launch_waits(work, MIN_GAP_US)
            lags += [w.lag_us for w in work if w.lag_us is not None]
        if not shares:
            return Outcome(False, "no GPU work in the steps")
        busy = statistics.mean(shares)
        evidence = (
            f"the GPU busy {busy:.0%} of its window; {len(idle) / len(shares):.0f} idle gaps per step "
            f"(median {statistics.median(idle) if idle else 0:,.1f} µs), {len(waits)} of {len(idle)} waiting on a "
            f"launch; each kernel starts at most {max(lags) if lags else 0:,.1f} µs after its launch call"
        )
        return Outcome(busy < max_busy and len(waits) >= len(idle) / 2, evidence)

    return Expectation(
        "the GPU idles between kernels, waiting for the CPU's next launch: busy under half its window, each kernel "
        "starting right after its launch call", check, claim)


# --- replayed: one launch per forward, kernels back to back ------------------------------------------------


def _step_replays(trace: Trace) -> dict[str, list[Replay]]:
    by_step: dict[str, list[Replay]] = {step.name: [] for step in trace.steps}
    for replay in replays(trace):
        if replay.step in by_step:
            by_step[replay.step].append(replay)
    return by_step


def _is_copy(name: str) -> bool:
    return "copy" in name.lower()


def one_graph_launch_per_forward(forwards: int, claim: str = "") -> Expectation:
    """Each forward is one cudaGraphLaunch, and every kernel of the step comes from one, but for copies of the input
    into the graph's buffer (CUDA graph trees copy with a `_foreach_copy_` kernel; `Tensor.copy_` is a memcpy)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        by_step = _step_replays(trace)
        counts = [len(found) for found in by_step.values()]
        alone = outside_graphs(trace)
        first = next((r for found in by_step.values() for r in found if r.work), None)
        evidence = f"{', '.join(map(str, counts))} graph launches in the steps ({forwards} forwards each)"
        if first is not None:
            evidence += f"; each ran {len(first.kernels)} kernels: {', '.join(first.ops)}"
        other = Counter(c.name for c in trace.steps[0].runtime if not is_graph_launch(c.name))
        if other:
            evidence += f"; other runtime calls per forward: {_names(other, forwards)}"
        if alone:
            evidence += f"; {len(alone)} kernels launched on their own: {_names(Counter(w.short_name for w in alone), len(trace.steps) * forwards)}"
        ok = all(c == forwards for c in counts) and first is not None and all(_is_copy(w.name) for w in alone)
        return Outcome(ok, evidence)

    return Expectation("one cudaGraphLaunch per forward runs all its kernels; none is launched on its own but a copy "
                       "of the input", check, claim)


def replay_back_to_back(max_gap_us: float = BACK_TO_BACK_US, claim: str = "") -> Expectation:
    """Inside each replay the GPU goes from one kernel to the next without waiting for the CPU: the largest gap
    inside a replay stays under `max_gap_us` (the median replay's, so that one disturbed replay does not decide)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        found = [r for rs in _step_replays(trace).values() for r in rs if len(r.work) > 1]
        if not found:
            return Outcome(False, "no replay with more than one piece of GPU work in the steps")
        inside = [g for r in found for g in r.gaps_us]
        largest = statistics.median(max(r.gaps_us) for r in found)
        between = [b.start - a.end for a, b in itertools.pairwise(found) if b.start is not None and a.end is not None]
        between = [g for g in between if g >= 0]
        evidence = (
            f"inside {len(found)} replays: gaps median {statistics.median(inside):,.1f} µs, a replay's largest "
            f"{largest:,.1f} µs (median), {max(inside):,.1f} µs at most"
        )
        if between:
            evidence += f"; between replays the GPU idled {statistics.median(between):,.1f} µs (median)"
        return Outcome(largest < max_gap_us, evidence)

    return Expectation(f"inside each replay the kernels run back to back (gaps under {max_gap_us:g} µs)", check, claim)


# --- who sets the pace ----------------------------------------------------------------------------------------


def loop_against_gpu(loop: LoopTime, forwards: int, gpu_bound: bool, share: float = GPU_SHARE, claim: str = "") -> Expectation:
    """The loop's time per forward, timed without the profiler, against the GPU's busy time per forward in the
    trace. gpu_bound: the GPU is busy at least `share` of the loop (it sets the pace); else less (the CPU does)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        if loop.per_forward_us is None:
            return Outcome(None, "skipped: the loop was not timed")
        busy = statistics.mean(step.gpu_busy_us for step in trace.steps) / forwards
        profiled_cpu = statistics.mean(step.cpu_us for step in trace.steps) / forwards
        busy_share = busy / loop.per_forward_us
        pace = "the GPU sets the pace" if busy_share >= share else f"the CPU sets the pace, the GPU idles {1 - busy_share:.0%} of the loop"
        evidence = (
            f"the loop (timed without the profiler): {loop.per_forward_us:,.1f} µs per forward, the CPU issuing one in "
            f"{loop.cpu_us:,.1f} µs; the GPU busy {busy:,.1f} µs per forward in the trace ({busy_share:.0%} of the "
            f"loop): {pace}. Under the profiler the CPU took {profiled_cpu:,.1f} µs per forward (it adds time to every op)"
        )
        return Outcome(busy_share >= share if gpu_bound else busy_share < share, evidence)

    if gpu_bound:
        text = f"in the loop the GPU is busy at least {share:.0%} of the time: it sets the pace, not the CPU"
    else:
        text = f"in the loop the GPU is busy less than {share:.0%} of the time: the CPU sets the pace"
    return Expectation(text, check, claim)


# --- where the CPU's time goes ------------------------------------------------------------------------------

GUARDS = "Dynamo's guards (TorchDynamo Cache Lookup)"
WRAPPERS = "the compiled region's wrappers (Dynamo, AOTAutograd)"
COMPILED = "the compiled graph's own Python (CUDA graph trees' bookkeeping)"
OPS = "ATen ops (dispatch, copies into the graph's input)"
RUNTIME = "other runtime calls (kernel launches, copies)"
GRAPH_LAUNCH = "cudaGraphLaunch"
PYTHON = "Python between the ops (the loop, the module call, replay)"
OTHER = "other labelled work"
MACHINERY = (GUARDS, WRAPPERS, COMPILED)
_BUCKET_OF_NAME = (
    (("TorchDynamo Cache Lookup",), GUARDS),
    (("## Call CompiledFxGraph",), COMPILED),
    (("Torch-Compiled Region", "Pregraph bytecode", "AOTDispatcher"), WRAPPERS),
    (("aten::", "triton_"), OPS),
)


def _bucket_of(name: str) -> str | None:
    return next((bucket for prefixes, bucket in _BUCKET_OF_NAME if name.startswith(prefixes)), None)


def cpu_breakdown(step: Step, label: str) -> dict[str, float]:
    """Where the CPU's time inside `label` went in one step, in µs: each op's self time goes to the first of it and
    the boxes around it (innermost first) that names a bucket; each runtime call's whole time to the runtime bucket
    or the graph launch; the label's own time (what no op or call inside it covers) to Python."""
    box = min((o for o in step.ops if o.is_label and o.name == label), key=lambda o: o.ts, default=None)
    if box is None:
        return {}
    thread = (box.pid, box.tid)

    def inside(item, path) -> bool:
        return (item.pid, item.tid) == thread and label in path

    spent: Counter = Counter()
    covered = 0.0  # the label's direct children: what is not the label's own time
    for op in step.ops:
        if op.is_label or not inside(op, op.path):
            continue
        chain = (op.name, *reversed(op.path))
        spent[next((b for b in map(_bucket_of, chain) if b), OTHER)] += op.self_us
        if op.path[-1] == label:
            covered += op.dur
    for call in step.runtime:
        if not inside(call, call.launch_path):
            continue
        spent[GRAPH_LAUNCH if is_graph_launch(call.name) else RUNTIME] += call.dur
        if call.launch_path[-1] == label:
            covered += call.dur
    spent[PYTHON] += max(0.0, box.dur - covered)
    return dict(spent)


def cpu_time_breakdown(label: str, forwards: int, launch_share: float = 0.25, claim: str = "") -> Expectation:
    """reduce-overhead at a decode shape: the graph launch is cheap, the CPU's time goes to what runs around it
    every call: Dynamo's guards, the compiled region's wrappers and CUDA graph trees' bookkeeping (checking that
    the inputs and outputs are where the graph expects them, copying the input in, rebuilding the outputs). ✓ when
    cudaGraphLaunch takes under `launch_share` of each forward's CPU time and those three take over half."""

    def check(trace: Trace) -> Outcome:
        per_step = [cpu_breakdown(step, label) for step in trace.steps]
        if not all(per_step):
            return Outcome(False, f"no {label} in every step")
        total: Counter = Counter()
        for spent in per_step:
            total.update(spent)
        whole = sum(total.values())
        if not whole:
            return Outcome(False, f"no CPU time inside {label}")
        n = len(per_step) * forwards
        parts = ", ".join(f"{bucket} {us / n:,.1f} µs ({us / whole:.0%})" for bucket, us in total.most_common() if us > 0)
        launch, machinery = total[GRAPH_LAUNCH] / whole, sum(total[b] for b in MACHINERY) / whole
        evidence = f"per forward, {whole / n:,.1f} µs of CPU under the profiler: {parts}"
        if not trace.has_gpu:
            return Outcome(False, evidence, NO_GPU)
        return Outcome(launch < launch_share and machinery > 0.5 and total[GRAPH_LAUNCH] > 0, evidence)

    return Expectation(
        f"cudaGraphLaunch takes under {launch_share:.0%} of each forward's CPU time; Dynamo's guards, the compiled "
        "region's wrappers and CUDA graph trees' bookkeeping take most of it", check, claim)
