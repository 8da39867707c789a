"""The naive attention forwards' claims (lessons 04_a and 04_b: P3-01 … P3-03), and their compiled runs.

The forward is written out op by op (matmul, mul, masked_fill, softmax, matmul); 04_a's out-of-place masked_fill
copies the scores first, 04_b's in-place masked_fill_ does not. How a forward is read: `checks/attention.py`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

from profiling_in_pytorch.checks.attention import (
    CPP_KERNEL,
    forwards,
    launched,
    operations,
    read_lesson_trace,
    role,
    tally,
    work_names,
)
from profiling_in_pytorch.checks.base import Expectation, Outcome
from profiling_in_pytorch.checks.dispatch import VIEW_LIKE
from trace_report.kernels import decode, split_fused_ops
from trace_report.model import Trace


# --- the naive forwards: 04_a, 04_b ---------------------------------------------------------------------------


def forward_ops(label: str, ops: Sequence[str], claim: str = "") -> Expectation:
    """P3-01: the ops directly inside the label, in order, views (k.transpose) left out."""
    want = list(ops)

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        seen = [[o.name for o in sorted(p.ops, key=lambda o: o.ts) if o.path and o.path[-1] == label] for p in phases]
        work = [[n for n in names if n not in VIEW_LIKE] for names in seen]
        ok = all(w == want for w in work)
        return Outcome(ok, f"{label} → {', '.join(seen[0]) or 'nothing'}" + ("" if ok else f" (other steps: {work[1:]})"))

    return Expectation(f"inside {label}: {', '.join(want)}", check, claim)


def operations_in_order(label: str, roles: Sequence[str], claim: str = "") -> Expectation:
    """P3-02, P3-03: the forward's GPU operations in time order (copy: a memcpy); on a CPU, the ops that compute."""
    want = list(roles)

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        seen = [[role(w) for w in operations(trace, p)] for p in phases]
        ok = all(s == want for s in seen)
        what = "GPU operations" if trace.has_gpu else "ops that compute (the CPU's stand-in for kernels)"
        evidence = f"{what} per forward, in order: {', '.join(seen[0]) or 'none'}"
        memsets = [w for w in launched(phases[0]) if w.kind == "memset"]
        if memsets:
            evidence += f" (and {len(memsets)} memset{'s' if len(memsets) > 1 else ''}, not counted)"
        return Outcome(ok, evidence + ("" if ok else f"; other steps: {seen[1:]}"))

    return Expectation(f"{len(want)} GPU operations per forward, in order: {', '.join(want)}", check, claim)


def copy_inside_masked_fill(label: str, claim: str = "") -> Expectation:
    """P3-02: out-of-place masked_fill copies the scores before it fills them: aten::masked_fill → aten::clone →
    aten::copy_, a Memcpy DtoD on a GPU, then aten::masked_fill_ on the copy."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if trace.has_gpu:
            copies = [[w for w in launched(p) if w.kind == "memcpy" and "aten::masked_fill" in w.launch_path] for p in phases]
            if not all(copies):
                return Outcome(False, f"no memcpy launched inside aten::masked_fill; GPU work per forward: {work_names(launched(phases[0]))}")
            w = copies[0][0]
            return Outcome(True, " → ".join(w.launch_path) + f" → {w.name} {w.dur:,.1f} µs")
        copies = [[o for o in p.ops if o.name == "aten::copy_" and "aten::masked_fill" in o.path] for p in phases]
        if not all(copies):
            return Outcome(False, "no aten::copy_ inside aten::masked_fill")
        o = copies[0][0]
        return Outcome(True, " → ".join(o.path + (o.name,)) + ", then aten::masked_fill_ on the copy")

    return Expectation("masked_fill copies the scores first: aten::masked_fill → aten::clone → aten::copy_ (a Memcpy DtoD)", check, claim)


def masking_step_against(other: Path, label: str, missing: str, claim: str = "") -> Expectation:
    """P3-03, against the out-of-place trace (04_a): the copy is gone, and the masking step (the masked_fill op and
    the ops inside it) wraps fewer CPU ops."""

    def check(trace: Trace) -> Outcome:
        theirs = read_lesson_trace(trace, other, "04_a's out-of-place trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        ours_ops, their_ops = _masking_ops(trace, label), _masking_ops(theirs, label)
        ours_copies, their_copies = _copies(trace, label), _copies(theirs, label)
        if ours_ops is None or their_ops is None:
            return Outcome(False, f"no masking op inside {label} in one of the traces")
        kind = "memcpys" if trace.has_gpu else "aten::copy_ ops"
        evidence = (
            f"masking step per forward: {tally(ours_ops)} here, against {tally(their_ops)} out of place; "
            f"{kind} in it: {ours_copies:g} here, {their_copies:g} out of place"
        )
        return Outcome(sum(ours_ops.values()) < sum(their_ops.values()) and ours_copies == 0 < their_copies, evidence)

    return Expectation("against the out-of-place forward: no copy, fewer CPU ops in the masking step", check, claim)


def _masking_ops(trace: Trace, label: str) -> Counter | None:
    phases = forwards(trace, label)
    if isinstance(phases, Outcome):
        return None
    tops = [o for o in phases[0].ops if o.name in ("aten::masked_fill", "aten::masked_fill_") and o.path and o.path[-1] == label]
    if not tops:
        return None
    top = tops[0]
    return Counter(o.name for o in phases[0].ops if o is top or top.name in o.path and top.ts <= o.ts <= top.ts + top.dur)


def _copies(trace: Trace, label: str) -> float:
    phases = forwards(trace, label)
    if trace.has_gpu:
        return sum(w.kind == "memcpy" for p in phases for w in launched(p)) / len(phases)
    return sum(o.name == "aten::copy_" and "aten::masked_fill" in o.path for p in phases for o in p.ops) / len(phases)


# --- compiled forwards (the suite's own guesses) ---------------------------------------------------------------


def inductor_fuses(label: str, ops: Sequence[str], claim: str = "") -> Expectation:
    """--compile: one Inductor kernel computes `ops` (the scale, the mask and the softmax), between the GEMMs."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if trace.has_gpu:
            names = [w.name for w in launched(phases[0]) if w.kind == "kernel"]
            fused = [n for n in names if decode(n).family.startswith("Inductor") and set(ops) <= set(decode(n).ops)]
        else:
            names = [o.name for o in phases[0].ops if CPP_KERNEL.search(o.name)]
            fused = [n for n in names if set(ops) <= set(split_fused_ops(CPP_KERNEL.search(n).group(1)))]
        return Outcome(len(fused) == 1, f"{', '.join(fused) or 'no fused kernel'}; the forward's kernels: {', '.join(decode(n).short for n in names) or 'none'}")

    return Expectation(f"one Inductor kernel computes {', '.join(ops)}", check, claim)


def no_copy(label: str, claim: str = "") -> Expectation:
    """--compile: the out-of-place masked_fill's copy is gone (Inductor writes the masked scores once)."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        copies = _copies(trace, label)
        work = [w for w in launched(phases[0])] if trace.has_gpu else operations(trace, phases[0])
        return Outcome(copies == 0, f"copies per forward: {copies:g}; the forward: {', '.join(role(w) for w in work) or 'none'}")

    return Expectation("no copy of the scores", check, claim)
