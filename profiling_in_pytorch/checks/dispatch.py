"""What dispatches what: the CPU ops of each step, how they nest (`aten::linear` > `aten::matmul` > `aten::mm`),
what a compiled graph replaces, the shapes they take, and the view ops that launch nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from profiling_in_pytorch.checks.base import (
    COMPILED_NO_VIEW_OPS,
    CPP_KERNEL,
    CPU_MATH_OPS,
    CPU_OPS_BEFORE,
    NOT_COMPILED,
    SHAPES_OFF,
    Expectation,
    Outcome,
    and_list,
    counts_text,
    dims_text,
    is_compiled,
    op_names_text,
    or_list,
    per_step_counts,
    top_ops,
)
from trace_report.kernels import METADATA_OPS
from trace_report.model import CpuOp, Trace, per_step_count

__all__ = [
    "dispatch_chain",
    "runtime_calls_before",
    "one_op_replaces",
    "compiled_region_rows",
    "not_compiled",
    "cpu_op_runs",
    "no_cpu_op",
    "gemm_shapes",
    "launches_nothing",
    "views_launch_nothing",
]


VIEW_LIKE = {f"aten::{op}" for op in METADATA_OPS}  # the ATen ops that only rewrite shape and stride


def dispatch_chain(*chain: str, claim: str = "") -> Expectation:
    """Each step runs `chain[-1]` inside `chain[-2]` inside ... inside `chain[0]` (a label, then ops)."""

    def check(trace: Trace) -> Outcome:
        per_step = [[op for op in step.ops if op.name == chain[-1]] for step in trace.steps]
        found = [ops for ops in per_step if any(_path_ends(op, chain[:-1]) for op in ops)]
        if not any(per_step):
            return Outcome(False, f"no {chain[-1]} in the trace; ops per step: {top_ops(trace)}", _view_reason(trace, chain[-1]))
        example = next((op for ops in per_step for op in ops), None)
        seen = " → ".join(example.path + (example.name,)) if example else ""
        return Outcome(len(found) == len(trace.steps), f"in {len(found)} of {len(trace.steps)} steps: {seen}")

    return Expectation(" → ".join(chain), check, claim)


def runtime_calls_before(parent: str, op: str, claim: str = "") -> Expectation:
    """P1-08, 3-D inputs: `parent` (aten::matmul) makes runtime calls before it reaches `op` (aten::bmm), besides
    the GEMM's own launch. Where the extra work is CPU ops only (broadcasting the batch), the reason says so."""

    def check(trace: Trace) -> Outcome:
        step = trace.steps[0]
        target = next((o for o in step.ops if o.name == op and parent in o.path), None)
        if target is None:
            return Outcome(False, f"no {op} inside {parent}; ops per step: {top_ops(trace)}")
        calls = [c for c in step.runtime if parent in c.launch_path and c.ts < target.ts]
        ops = [o for o in step.ops if parent in o.path and o.ts < target.ts and o.name != op and op not in o.path]
        evidence = (
            f"inside {parent}, before {op}: runtime calls: {counts_text(Counter(c.name for c in calls)) or 'none'}; "
            f"ops: {op_names_text(ops)}"
        )
        reason = CPU_OPS_BEFORE.format(op=op) if not calls and ops else None
        return Outcome(bool(calls) if trace.has_gpu else bool(ops), evidence, reason if trace.has_gpu else None)

    return Expectation(f"{parent} dispatches {op} with extra runtime calls before it", check, claim)


def one_op_replaces(new: Sequence[str], old: Sequence[str], claim: str = "") -> Expectation:
    """--compile: `new` runs once per step where eager ran `old` (`aten::addmm` for `aten::mm` + `aten::add`)."""

    def check(trace: Trace) -> Outcome:
        counts = {op: [step.op_names()[op] for step in trace.steps] for op in (*new, *old)}
        ok = all(all(c == 1 for c in counts[op]) for op in new) and not any(any(counts[op]) for op in old)
        evidence = "; ".join(f"{op}: {per_step_counts(c, trace)}" for op, c in counts.items())
        return Outcome(ok, evidence, None if ok or is_compiled(trace) else NOT_COMPILED)

    return Expectation(f"one {and_list(list(new))} per step replaces {and_list(list(old))}", check, claim)


def compiled_region_rows(claim: str = "") -> Expectation:
    """--compile: Dynamo's and AOTAutograd's rows in every step, and one compiled graph (one hash) throughout."""
    rows = ("Torch-Compiled Region", "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "## Call CompiledFxGraph")

    def check(trace: Trace) -> Outcome:
        missing = [r for r in rows if not all(any(op.name.startswith(r) for op in step.ops) for step in trace.steps)]
        graphs = {op.name for step in trace.steps for op in step.ops if op.name.startswith("## Call CompiledFxGraph")}
        regions = sorted({op.name for step in trace.steps for op in step.ops if op.name.startswith("Torch-Compiled Region")})
        evidence = f"{', '.join(regions) or 'no compiled region'}; graphs called: {', '.join(sorted(graphs)) or 'none'}"
        if missing:
            evidence += f"; missing in some step: {', '.join(missing)}"
        return Outcome(not missing and len(graphs) == 1, evidence, None if is_compiled(trace) else NOT_COMPILED)

    return Expectation("Torch-Compiled Region, Cache Lookup, AOTDispatcher and ## Call CompiledFxGraph rows, one hash in every step", check, claim)


def not_compiled(claim: str = "") -> Expectation:
    """Liger's layer needs no compiler: no compiled region, no Dynamo guards, in any step."""

    def check(trace: Trace) -> Outcome:
        compiled = is_compiled(trace)
        return Outcome(not compiled, "a compiled region runs" if compiled else f"no compiled region, no Dynamo rows; ops per step: {top_ops(trace)}")

    return Expectation("no compiler: no Torch-Compiled Region or Dynamo rows", check, claim)


def cpu_op_runs(op: str, per_step: int | None = None, claim: str = "") -> Expectation:
    """`op` runs in every step (`per_step` times when given)."""

    def check(trace: Trace) -> Outcome:
        counts = [step.op_names()[op] for step in trace.steps]
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        if not any(counts):
            return Outcome(False, f"no {op} in the trace; ops per step: {top_ops(trace)}", _view_reason(trace, op))
        return Outcome(ok, f"{op}: {per_step_counts(counts, trace)}")

    times = " in every step" if per_step is None else f" {per_step}× per step" if per_step != 1 else " once per step"
    return Expectation(f"{op} runs{times}", check, claim)


def no_cpu_op(*ops: str, claim: str = "") -> Expectation:
    """None of `ops` runs (a compiled graph replaces them with its own code)."""

    def check(trace: Trace) -> Outcome:
        found = Counter()
        for step in trace.steps:
            found.update({name: c for name, c in step.op_names().items() if name in ops})
        if found:
            return Outcome(False, "found " + ", ".join(f"{n} ×{c}" for n, c in found.items()), None if is_compiled(trace) else NOT_COMPILED)
        return Outcome(True, f"none of {or_list(ops)} in {len(trace.steps)} steps; ops per step: {top_ops(trace)}")

    return Expectation(f"no {or_list(ops)} op runs", check, claim)


def gemm_shapes(shapes: Sequence[str], *, recorded: bool, op: str = "aten::mm", claim: str = "") -> Expectation:
    """With --record_shapes: each step's GEMM ops take these input shapes, in order (`[8192,768] x [768,3072]`)."""

    def check(trace: Trace) -> Outcome:
        calls = [o for o in trace.steps[0].ops if o.name == op]
        seen = [" x ".join(dims_text(d) for d in o.input_dims[:2]) for o in calls if o.input_dims]
        if not seen:
            return Outcome(None if not recorded else False, f"{len(calls)} {op} calls per step, no input shapes in the trace", SHAPES_OFF)
        return Outcome(seen == list(shapes), f"{op} per step: " + "; ".join(seen))

    return Expectation(f"{op} shapes per step: " + "; ".join(shapes), check, claim)


def launches_nothing(op: str, claim: str = "") -> Expectation:
    """`op` runs in every step and launches no GPU work (a view such as `aten::t`); on a CPU, it calls no math op."""
    return _launch_nothing((op,), f"{op} launches nothing on the GPU (0 µs of CUDA time)", claim)


def views_launch_nothing(claim: str = "") -> Expectation:
    """P2-10: the view ops around each linear (t, transpose, reshape, view, as_strided, _unsafe_view) launch
    nothing: of the ~6 op names per linear only aten::mm reaches the GPU."""
    return _launch_nothing(tuple(sorted(VIEW_LIKE)), "the view ops launch nothing; of each linear's ops only aten::mm reaches the GPU", claim)


def _launch_nothing(ops: Sequence[str], text: str, claim: str) -> Expectation:
    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name in ops]
        if not calls:
            return Outcome(False, f"no {or_list(ops)} in the trace", COMPILED_NO_VIEW_OPS if is_compiled(trace) else None)
        per_step = Counter(o.name for o in calls)
        seen = ", ".join(f"{n} ×{per_step_count(c / len(trace.steps))}" for n, c in per_step.items())
        if trace.has_gpu:
            launched = sum(o.launched for o in calls)
            if launched:
                return Outcome(False, f"{seen} per step launched {launched} GPU work items")
            launchers = Counter(w.launched_by for w in trace.steps[0].gpu if w.kind == "kernel")
            return Outcome(True, f"{seen} per step, 0 GPU work items; the kernels come from {counts_text(launchers)}")
        math = [o for o in calls if _calls_math(trace, o)]
        if math:
            return Outcome(False, f"{seen} per step; {len(math)} of them run math ops")
        return Outcome(True, f"{seen} per step, none runs a math op: they only rewrite shape and stride")

    return Expectation(text, check, claim)


def _calls_math(trace: Trace, op: CpuOp) -> bool:
    return any(op.name in o.path and (o.name in CPU_MATH_OPS or CPP_KERNEL.search(o.name)) for s in trace.steps for o in s.ops if o.ts >= op.ts and o.ts <= op.ts + op.dur)


def _path_ends(op: CpuOp, chain: Sequence[str]) -> bool:
    """`op` sits inside `chain` (outermost first), each directly or through ops in between."""
    it = iter(op.path)
    return all(any(name == want for name in it) for want in chain)


def _view_reason(trace: Trace, op: str) -> str | None:
    return COMPILED_NO_VIEW_OPS if is_compiled(trace) and op in VIEW_LIKE else None
