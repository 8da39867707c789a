"""A training step: forward, backward, optimizer. Each check reads one labelled part of every step, a `Phase`
(`model.Step.phase`): the ops of every thread that start inside the label's box, and the GPU work whose launch call
does. A GPU's backward runs on autograd's own thread, outside the label's tree but inside its time.
"""

from __future__ import annotations

import re
from collections import Counter

from profiling_in_pytorch.checks.base import (
    CPP_KERNEL,
    CPU_BACKWARD_THREAD,
    CPU_MATH_OPS,
    LOOKS_EAGER,
    Expectation,
    Outcome,
    and_list,
    counts_text,
    fused_ops,
    has_inductor,
    kernel_role,
    math_ops,
    op_names_text,
    or_list,
    per_step_counts,
)
from trace_report.kernels import decode
from trace_report.model import CpuOp, GpuWork, Phase, Trace, per_step_count

__all__ = [
    "labels_per_step",
    "phase_kernels",
    "phase_kernel_matching",
    "phase_fused_kernel",
    "phase_ops",
    "backward_on_autograd_thread",
]


# A backward adds its own: what stands in for the gradient kernels on a CPU (aten::mul, aten::add serve both ways).
CPU_BACKWARD_MATH_OPS = CPU_MATH_OPS | {"aten::gelu_backward"}


def labels_per_step(*labels: str, claim: str = "") -> Expectation:
    """Every step opens each of `labels` once, in this order (a training step: forward, backward, optimizer)."""

    def check(trace: Trace) -> Outcome:
        seen = [[o.name for o in sorted((o for o in step.ops if o.is_label and o.name in labels), key=lambda o: o.ts)]
                for step in trace.steps]
        ok = bool(seen) and all(names == list(labels) for names in seen)
        evidence = "; ".join(f"{step.name}: {' → '.join(names) or 'none'}" for step, names in zip(trace.steps, seen))
        return Outcome(ok, evidence)

    return Expectation(f"{and_list(list(labels))} once per step, in this order", check, claim)


def phase_kernels(label: str, counts: dict[str, int], claim: str = "") -> Expectation:
    """In each step's `label`, this many kernels of each role: "GEMM", or the one op a kernel computes alone
    (`gelu_backward`, `mul`, `add`); 0 means no kernel computes that op alone (a fused kernel may). Other kernels
    are listed, not counted. On a CPU the math ops stand in (aten::mm for a GEMM, aten::gelu_backward, ...)."""

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        roles = [Counter(_phase_role(k) for k in _phase_kernels(trace, phase)) for phase in phases]
        ok = all(all(seen[role] == n for role, n in counts.items()) for seen in roles)
        what = "kernels" if trace.has_gpu else "math ops (the CPU's kernels)"
        evidence = f"{label}'s {what} per step: {counts_text(roles[0]) or 'none'}"
        if any(seen != roles[0] for seen in roles[1:]):
            evidence += " (other steps: " + "; ".join(counts_text(seen) or "none" for seen in roles[1:]) + ")"
        return Outcome(ok, evidence)

    parts = [f"{n} GEMM{'s' if n != 1 else ''}" if role == "GEMM" else f"{n} {role}" for role, n in counts.items() if n]
    absent = [role for role, n in counts.items() if not n]
    text = ", ".join(parts) + (("; " if parts else "") + f"no {or_list(absent)} kernel on its own" if absent else "")
    return Expectation(f"per step in {label}: {text}", check, claim)


def phase_kernel_matching(label: str, pattern: str, per_step: int = 1, text: str | None = None, claim: str = "") -> Expectation:
    """In each step's `label`, `per_step` kernels whose name matches `pattern` (a regex, case-insensitive); on a
    CPU, ops of that name (Inductor's C++ kernels; a Triton kernel under the interpreter)."""
    regex = re.compile(pattern, re.IGNORECASE)

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if trace.has_gpu:
            found = [[w.short_name for w in phase.kernels if regex.search(w.name)] for phase in phases]
        else:
            found = [[o.name for o in phase.ops if not o.is_label and regex.search(o.name)] for phase in phases]
        counts = [len(names) for names in found]
        if not any(counts):
            everything = counts_text(Counter(_phase_role(k) for k in _phase_kernels(trace, phases[0]))) or "none"
            return Outcome(False, f"no kernel in {label} matches /{pattern}/; {label} per step: {everything}")
        return Outcome(all(c == per_step for c in counts), f"{per_step_counts(counts, trace)}: {counts_text(Counter(found[0]))}")

    times = "once" if per_step == 1 else f"{per_step}×"
    return Expectation(text or f"in {label}: a kernel matching /{pattern}/ {times} per step", check, claim)


def phase_fused_kernel(label: str, *ops: str, claim: str = "") -> Expectation:
    """In each step's `label`, one Inductor pointwise kernel computes all of `ops` (`triton_poi_fused_...` on a GPU,
    `cpp_fused_...` on a CPU; Inductor names a kernel after the ATen ops it fused, gelu_backward included)."""
    listed = and_list(ops)

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        fused = [[k for k in _phase_inductor_kernels(trace, phase) if set(ops) <= set(fused_ops(trace, k))] for phase in phases]
        counts = [len(found) for found in fused]
        if all(c == 1 for c in counts):
            kernel = fused[0][0]
            described = decode(kernel.name).describe() if trace.has_gpu else f"Inductor's C++ kernel for {', '.join(fused_ops(trace, kernel))}"
            return Outcome(True, f"{kernel.name} in every step's {label}: {described}")
        inductor = [k.name for k in _phase_inductor_kernels(trace, phases[0])]
        evidence = f"{per_step_counts(counts, trace)} computing {listed}; Inductor kernels in {label}: {', '.join(inductor) or 'none'}"
        return Outcome(False, evidence, None if inductor or has_inductor(trace) else LOOKS_EAGER)

    return Expectation(f"in {label}: one fused Inductor kernel computes {listed}", check, claim)


def phase_ops(label: str, pattern: str, per_step: int | None = None, text: str | None = None, claim: str = "") -> Expectation:
    """In each step's `label`, CPU ops whose name matches `pattern` (a regex) run `per_step` times (at least once
    when None); an op inside another of the same name counts once."""
    regex = re.compile(pattern)

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        found = [[o for o in phase.ops if not o.is_label and regex.search(o.name) and o.name not in o.path] for phase in phases]
        counts = [len(ops) for ops in found]
        if not any(counts):
            top = counts_text(Counter(dict(Counter(o.name for o in phases[0].ops if not o.is_label).most_common(6)))) or "none"
            return Outcome(False, f"no op in {label} matches /{pattern}/; ops per step: {top}")
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        return Outcome(ok, f"{per_step_counts(counts, trace)}: {op_names_text(found[0])}")

    times = " in every step" if per_step is None else " once per step" if per_step == 1 else f" {per_step}× per step"
    return Expectation(text or f"in {label}: an op matching /{pattern}/ runs{times}", check, claim)


def backward_on_autograd_thread(label: str, claim: str = "") -> Expectation:
    """On a GPU, autograd runs the backward on its own device thread: every GEMM of `label` (the box around
    `loss.backward()`) is launched from another thread than the one that opened the label. Only what `backward()`
    does before handing over (the loss's seed gradient, `torch.ones_like(loss)`) comes from the calling thread. In
    Perfetto the backward's ops sit on that other thread's row, under `autograd::engine::evaluate_function: ...`,
    not under the label. A CPU runs the backward on the calling thread: ✗ there, with that reason."""

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if not trace.has_gpu:
            threads = Counter(_thread_name(op, phases[0]) for op in phases[0].ops if not op.is_label)
            return Outcome(False, f"no GPU work; {label}'s ops per step by thread: {counts_text(threads) or 'none'}", CPU_BACKWARD_THREAD)
        gemms = [w for phase in phases for w in phase.gemms if w.launch is not None]
        if not gemms:
            return Outcome(False, f"no GEMM launched inside {label}")
        own = [phase.thread for phase in phases]
        gemm_threads = Counter(_launch_thread(w, phase) for phase in phases for w in phase.gemms if w.launch is not None)
        work_threads = Counter(_launch_thread(w, phase) for phase in phases for w in phase.gpu if w.launch is not None)
        per_step = Counter({t: n / len(phases) for t, n in work_threads.items()})
        ok = all((w.launch.pid, w.launch.tid) not in own for w in gemms)
        evidence = (
            f"{label} opened on thread {phases[0].thread[1]}; its GEMMs launched from {counts_text(gemm_threads)} "
            f"over {len(phases)} steps; its GPU work per step, by launching thread: "
            + ", ".join(f"{t} ×{per_step_count(n)}" for t, n in per_step.items())
        )
        return Outcome(ok, evidence)

    return Expectation(f"the backward's GEMMs are launched from autograd's own thread, not the one that opened {label}", check, claim)


def _launch_thread(work: GpuWork, phase: Phase) -> str:
    thread = (work.launch.pid, work.launch.tid)
    return f"thread {thread[1]}" + (" (the label's)" if thread == phase.thread else "")


def _phases(trace: Trace, label: str) -> list[Phase] | Outcome:
    """Each step's `label` phase, or the Outcome that says which step has none."""
    phases = [step.phase(label) for step in trace.steps]
    missing = [step.name for step, phase in zip(trace.steps, phases) if phase is None]
    if missing:
        return Outcome(False, f"no {label} in {', '.join(missing)}; labels per step: {counts_text(trace.steps[0].op_names(labels=True)) or 'none'}")
    return phases


def _phase_kernels(trace: Trace, phase: Phase) -> list:
    return phase.kernels if trace.has_gpu else math_ops(phase.ops, CPU_BACKWARD_MATH_OPS)


def _phase_inductor_kernels(trace: Trace, phase: Phase) -> list:
    if trace.has_gpu:
        return [w for w in phase.kernels if decode(w.name).inductor_kind == "pointwise"]
    return [o for o in phase.ops if CPP_KERNEL.search(o.name)]


def _phase_role(item) -> str:
    """kernel_role, with an in-place op's role its op's (aten::add_ is an add)."""
    role = kernel_role(item)
    return role[:-1] if isinstance(item, CpuOp) and role.endswith("_") and not role.startswith("_") else role


def _thread_name(op: CpuOp, phase: Phase) -> str:
    return f"thread {op.tid}" + (" (the label's)" if (op.pid, op.tid) == phase.thread else "")
