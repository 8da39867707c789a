"""The tensor-parallel lesson's guesses about communication, checked against a rank's trace.

Each constructor returns an `Expectation` (checks/base.py), announced before profiling and
then ✓ or ✗ with the evidence, read by `communication.communication(trace)`: NCCL kernels on a GPU lane, gloo's
record functions on a CPU.
"""

from __future__ import annotations

from pathlib import Path

from trace_report.communication import CPP_KERNEL, CPU_COMPUTE_OPS, Communication, communication
from trace_report.communication import distributed_info
from profiling_in_pytorch.checks.base import Expectation, Outcome
from trace_report.model import Trace, per_step_count
from trace_report.reader import read_trace

__all__ = [
    "collectives_per_step",
    "cpu_time_exceeds_gpu_time",
    "exposed_share_at_least",
    "exposed_share_at_most",
    "less_cpu_than",
    "less_exposed_than",
    "no_nccl_kernel",
]

NO_COLLECTIVE = "no collective in the trace: neither an NCCL kernel nor a backend's record function (gloo:all_reduce)"
ONE_RANK = (
    "one rank: there is nothing to add up across ranks, so DTensor issues no collective (the plain and overlapped "
    "variants still call all_reduce, which runs on one rank too)"
)
ISSUED_ONLY = (
    "the trace shows the c10d ops that issued collectives, not the collectives themselves: a GPU profile without "
    "CUDA activity, or a backend that records nothing of its own"
)
NO_GPU_LANE = "a CPU profile has no GPU lane: no GPU time to weigh the CPU's against"
GLOO_SLOW = (
    "on a CPU, gloo hands each all-reduce to its own thread and through the loopback network: milliseconds for a "
    "few KB, against microseconds of arithmetic at these sizes, so there is little to hide it behind"
)
SHAPE_HIDES_DISPATCH = (
    "at this shape each rank's GEMMs take longer than DTensor's dispatch: its CPU cost hides behind the GPU's work "
    "(on 2 H200s, 16×512 tokens, 4096→11008: DTensor 1.82× one GPU; at the post's shape 0.31×)"
)
NCCL_WAITS = (
    "an NCCL kernel runs from when its GPU reaches it until every rank has joined: a rank that got there first spins "
    "inside it, time that no compute hides (the ranks' skew: trace-report RUN_rank0.json RUN_rank1.json)"
)

SYMMETRIC_WAITS = (
    "symmetric memory's barrier kernels run from when the GPU reaches them until every rank has: a rank whose CPU "
    "issues the step later (async-TP's pipelining is Python, several ops per shard) keeps the others' barriers "
    "spinning, and the last shard's copy and the sum of the partials have no matmul left beside them"
)


def _read(trace: Trace) -> Communication | Outcome:
    found = communication(trace)
    if found is None:
        return Outcome(False, "no collective per step", ONE_RANK if _world_size(trace) == 1 else NO_COLLECTIVE)
    if found.where == "none":
        return Outcome(False, _issued_text(found), ISSUED_ONLY)
    return found


def _world_size(trace: Trace) -> int | None:
    """The world size the profiler wrote into the trace (distributedInfo), None where it wrote none."""
    size = distributed_info(trace.meta).get("world_size")
    return size if isinstance(size, int) else None


def collectives_per_step(n: int, collective: str = "AllReduce", why: str = "", claim: str = "",
                         others_ok: bool = False) -> Expectation:
    """`n` collectives of this kind per step, and as many c10d ops asking for them where the CPU lane shows them;
    no collective of another kind unless `others_ok` (a variant that issues several kinds checks each)."""

    def check(trace: Trace) -> Outcome:
        found = _read(trace)
        if isinstance(found, Outcome):
            return found
        counts = found.per_step(collective)
        names = sorted({c.name for c in found.collectives if c.collective == collective})
        evidence = f"{collective} per step: {', '.join(map(str, counts))} ({', '.join(names) or 'none'})"
        others = sorted({c.collective for c in found.collectives if c.collective != collective})
        if others:
            evidence += f"; other collectives: {', '.join(others)}"
        issued = found.issued_per_step(collective)
        if any(issued):
            evidence += f"; c10d ops issuing them per step: {', '.join(map(str, issued))}"
        elif found.where == "gpu":
            evidence += "; no c10d op in the steps (a CUDA graph replays the collective without one)"
        return Outcome(all(c == n for c in counts) and (others_ok or not others), evidence)

    many = "one" if n == 1 else str(n)
    text = f"{many} {collective} per step" + (f" ({why})" if why else "")
    return Expectation(text, check, claim)


def cpu_time_exceeds_gpu_time(claim: str = "") -> Expectation:
    """The CPU spends longer issuing a step than the GPU spends running it: the step goes at the CPU's pace.

    On a CPU trace, the same question within the CPU: more of the step's time outside the arithmetic ops (dispatch,
    Python) than in them."""

    def check(trace: Trace) -> Outcome:
        steps = trace.steps
        cpu = sum(s.cpu_us for s in steps) / len(steps)
        if not trace.has_gpu:
            math = sum(op.dur for s in steps for op in s.ops if _is_math(op.name)) / len(steps)
            return Outcome(
                cpu - math > math,
                f"per step: {cpu:,.1f} µs of CPU, {math:,.1f} µs of it in the arithmetic ops (aten::mm, aten::gelu, "
                "aten::mul, Inductor's cpp kernels): the rest is dispatch",
            )
        gpu = trace.gpu_busy_us_per_step() or 0.0
        ratio = f" ({cpu / gpu:.1f}×)" if gpu > 0 else ""
        ok = cpu > gpu
        return Outcome(ok, f"per step: the CPU issues work for {cpu:,.1f} µs, the GPU is busy {gpu:,.1f} µs{ratio}",
                       None if ok else SHAPE_HIDES_DISPATCH)

    text = "the CPU takes longer to issue a step than the GPU takes to run it: overhead-bound"
    return Expectation(text, check, claim)


def exposed_share_at_most(limit: float, why: str = "", claim: str = "", what: str = "all-reduce") -> Expectation:
    """At most `limit` of the collectives' time runs with nothing beside it (`what`: the collectives' name)."""

    def check(trace: Trace) -> Outcome:
        found = _read(trace)
        if isinstance(found, Outcome):
            return found
        share = found.exposed_share
        ok = share is not None and share <= limit
        nccl = any(c.nccl is not None for c in found.collectives)
        reason = None if ok else GLOO_SLOW if found.where == "cpu" else NCCL_WAITS if nccl else SYMMETRIC_WAITS
        return Outcome(ok, _exposure_text(found), reason)

    text = f"at most {limit:.0%} of the {what} time exposed" + (f" ({why})" if why else "")
    return Expectation(text, check, claim)


def exposed_share_at_least(limit: float, why: str = "", claim: str = "", what: str = "all-reduce") -> Expectation:
    """At least `limit` of the collectives' time runs alone: nothing was arranged to overlap it."""

    def check(trace: Trace) -> Outcome:
        found = _read(trace)
        if isinstance(found, Outcome):
            return found
        share = found.exposed_share
        return Outcome(share is not None and share >= limit, _exposure_text(found))

    text = f"at least {limit:.0%} of the {what} time exposed" + (f" ({why})" if why else "")
    return Expectation(text, check, claim)


def no_nccl_kernel(why: str = "", claim: str = "") -> Expectation:
    """The step's communication ran without NCCL: no NCCL kernel on the GPU lane (symmetric memory's copies and
    kernels instead, or nothing on a CPU trace)."""

    def check(trace: Trace) -> Outcome:
        found = _read(trace)
        if isinstance(found, Outcome):
            return found
        nccl = sorted({c.name for c in found.collectives if c.nccl is not None})
        other = sorted({c.name for c in found.collectives if c.nccl is None})
        return Outcome(not nccl, f"NCCL kernels: {', '.join(nccl) or 'none'}; other transfers: "
                       f"{', '.join(other) or 'none'}")

    return Expectation("no NCCL kernel in the steps" + (f" ({why})" if why else ""), check, claim)


def less_cpu_than(other: Path, what: str, claim: str = "") -> Expectation:
    """Fewer CPU µs per step than the trace at `other` (the same run's other variant); skipped if it is missing."""

    def check(trace: Trace) -> Outcome:
        if not other.is_file():
            return Outcome(None, f"skipped: {other.name} is missing (run {what} first)")
        base = read_trace(other)
        mine, theirs = trace.cpu_us_per_step(), base.cpu_us_per_step()
        return Outcome(mine < theirs, f"CPU per step: {mine:,.1f} µs here, {theirs:,.1f} µs in {other.name}")

    return Expectation(f"less CPU time per step than {what}", check, claim)


def less_exposed_than(other: Path, what: str, claim: str = "", unless: str | None = None) -> Expectation:
    """Fewer µs per step of communication with nothing beside it than the trace at `other` (the same run's other
    variant, the same rank); skipped if it is missing. `unless`: the reason a ✗ gives."""

    def check(trace: Trace) -> Outcome:
        if not other.is_file():
            return Outcome(None, f"skipped: {other.name} is missing (run {what} first)")
        found, base = _read(trace), _read(read_trace(other))
        for comm in (found, base):
            if isinstance(comm, Outcome):
                return comm
        mine, theirs = found.exposed_us_per_step, base.exposed_us_per_step
        return Outcome(mine < theirs, f"exposed per step: {mine:,.1f} µs here, {theirs:,.1f} µs in {other.name}",
                       None if mine < theirs else unless)

    return Expectation(f"less communication exposed per step than {what}", check, claim)


def _is_math(name: str) -> bool:
    return name in CPU_COMPUTE_OPS or CPP_KERNEL.search(name) is not None


def _exposure_text(found: Communication) -> str:
    share = found.exposed_share
    shown = "-" if share is None else f"{share:.0%}"
    per = ", ".join(f"{s.exposed_us:,.1f} of {s.comm_us:,.1f}" for s in found.steps)
    return f"exposed {shown}: per step, µs exposed of µs in collectives: {per}"


def _issued_text(found: Communication) -> str:
    counts = found.issued_per_step()
    shown = ", ".join(per_step_count(n) for n in counts)
    return f"c10d ops issuing collectives per step: {shown}, and no time for the collectives themselves"
