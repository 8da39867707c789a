"""The data-parallel lesson's guesses (lesson 09): how many collectives of each kind a training step issues, and
whether they start while the backward still computes. Read through `attribution.owners`: each collective with the
kind the code asked for (gloo runs FSDP2's reduce-scatter as an all-reduce), its bucket or unit, and its phase.
"""

from __future__ import annotations

from collections import Counter

from trace_report.attribution import owners
from profiling_in_pytorch.checks.base import Expectation, Outcome, counts_text
from profiling_in_pytorch.checks.communication import _read
from trace_report.communication import _is_cpu_compute
from trace_report.kernels.collectives import decode_nccl
from trace_report.model import Trace

__all__ = ["collectives_by_kind", "collectives_start_in_backward"]

CPU_ISSUE_SLOWER = (
    "on a CPU at these sizes a layer's backward arithmetic takes microseconds, and handing a collective to gloo "
    "hundreds (the c10d:: ops in the op table): the backward's last GEMM is done before the later collectives are "
    "even issued. On GPUs the GEMMs take longer than the launches, and the collectives run beside them"
)


def collectives_by_kind(counts: dict[str, int], why: str = "", claim: str = "") -> Expectation:
    """Per step, exactly `counts[kind]` collectives of each kind (by what the code asked for), and no other kind."""

    def check(trace: Trace) -> Outcome:
        found = _read(trace)
        if isinstance(found, Outcome):
            return found
        seen = [Counter(o.kind for o in step) for step in owners(trace, found)]
        ok = bool(seen) and all(step == Counter(counts) for step in seen)
        units = sorted({o.unit for step in owners(trace, found)[:1] for o in step if o.unit})
        evidence = "per step: " + "; ".join(counts_text(step) or "none" for step in seen)
        if units:
            evidence += f" (units or buckets named: {', '.join(units)})"
        return Outcome(ok, evidence)

    text = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) + " per step" + (f" ({why})" if why else "")
    return Expectation(text, check, claim)


def collectives_start_in_backward(label: str, kind: str, at_least: int, why: str = "",
                                  claim: str = "") -> Expectation:
    """Per step, at least `at_least` of the `kind` collectives start before the backward's compute ends (its last
    kernel on a GPU, its last arithmetic op on a CPU): they run while the backward still computes."""

    def check(trace: Trace) -> Outcome:
        found = _read(trace)
        if isinstance(found, Outcome):
            return found
        early = []
        for step, owned in zip(trace.steps, owners(trace, found)):
            phase = step.phase(label)
            if phase is None:
                return Outcome(False, f"no {label} in {step.name}")
            if trace.has_gpu:
                ends = [w.end for w in phase.gpu if w.kind == "kernel" and decode_nccl(w.name) is None]
            else:
                ends = [op.ts + op.dur for op in phase.ops if _is_cpu_compute(op)]
            compute_end = max(ends, default=phase.end)
            mine = [o for o in owned if o.kind == kind and o.phase == label]
            early.append((sum(o.collective.ts < compute_end for o in mine), len(mine)))
        ok = all(n >= at_least for n, _ in early)
        per = ", ".join(f"{n} of {total}" for n, total in early)
        reason = None if ok or trace.has_gpu else CPU_ISSUE_SLOWER
        return Outcome(ok, f"{kind} started before {label}'s compute ended, per step: {per}", reason)

    text = f"at least {at_least} {kind} per step start before {label}'s compute ends" + (f" ({why})" if why else "")
    return Expectation(text, check, claim)
