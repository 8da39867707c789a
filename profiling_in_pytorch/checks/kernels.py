"""Kernels and launches: how many per step and in what order, which GEMMs (their names, variants, layout,
resources), what is fused and what runs on its own, and the runtime calls that launch them.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from profiling_in_pytorch.checks.base import (
    ATEN_ELEMENTWISE,
    CPP_KERNEL,
    HOPPER_LAUNCH,
    INDUCTOR_CONFIG,
    LOOKS_EAGER,
    NO_GPU,
    NO_LT_EPILOGUE,
    NOT_COMPILED,
    OCCUPANCY_QUERY,
    ONE_D_BIAS,
    SPLIT_K,
    TEMPLATE_GEMM,
    Expectation,
    Outcome,
    and_list,
    counts_text,
    cpu_kernels,
    dims_text,
    eager_twin,
    fused_ops,
    has_inductor,
    is_compiled,
    kernel_role,
    needs_gpu,
    op_names_text,
    or_list,
    per_step_counts,
    read_eager_twin,
    read_other_trace,
    top_ops,
)
from trace_report.kernels import decode
from trace_report.model import GpuWork, Step, Trace, per_step_count

__all__ = [
    "kernels_per_step",
    "kernels_in_order",
    "gemms_per_step",
    "gemm_variants",
    "no_separate_kernel_for",
    "fused_pointwise_kernel",
    "fused_kernel_beats_eager_pointwise",
    "same_gemm_kernels_as",
    "same_gemm_kernels_as_eager",
    "same_gemm_family_as_eager",
    "geglu_kernel",
    "geglu_kernel_vs_inductor",
    "gemms_launched_by",
    "bias_in_gemm_epilogue",
    "bias_copy_then_gemm",
    "layout_in_kernel_name",
    "kernel_matching",
    "kernel_resources",
    "runtime_calls_per_gemm",
    "op_runtime_calls",
]


def kernels_per_step(n: int, claim: str = "") -> Expectation:
    """Every step launches exactly `n` kernels (memsets and memcpys are not kernels); on a CPU, `n` math ops."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            counts = [len(cpu_kernels(step)) for step in trace.steps]
            return Outcome(all(c == n for c in counts), f"math ops (the CPU's kernels): {per_step_counts(counts, trace)}: {op_names_text(cpu_kernels(trace.steps[0]))}")
        counts = [len(step.kernels) for step in trace.steps]
        evidence = f"{per_step_counts(counts, trace)}: {_names_of(trace.steps[0].kernels)}"
        others = Counter(w.kind for w in trace.steps[0].gpu if w.kind != "kernel")
        if others:
            evidence += " (not counted: " + ", ".join(f"{c} {k}{'s' if c > 1 else ''}" for k, c in others.items()) + ")"
        ok = all(c == n for c in counts)
        return Outcome(ok, evidence, SPLIT_K if not ok and _split_k(trace) else None)

    return Expectation(f"{n} kernel{'s' if n != 1 else ''} per step", check, claim)


def kernels_in_order(order: Sequence[str], claim: str = "") -> Expectation:
    """Each step's kernels, in time order, do `order`: "GEMM" for a GEMM, else the op its name says (gelu, mul)."""

    def check(trace: Trace) -> Outcome:
        seen = [[kernel_role(k) for k in _step_kernels(trace, step)] for step in trace.steps]
        ok = all(s == list(order) for s in seen)
        what = "kernels" if trace.has_gpu else "math ops (the CPU's kernels)"
        return Outcome(ok, f"{what} per step, in order: {', '.join(seen[0]) or 'none'}" + ("" if ok else f" (other steps: {seen[1:]})"))

    return Expectation(f"{len(order)} kernels per step, in this order: {', '.join(order)}", check, claim)


def gemms_per_step(n: int, claim: str = "") -> Expectation:
    """Every step runs exactly `n` GEMM kernels (cuBLAS, CUTLASS, nvjet, Inductor templates)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        counts = [len(step.gemms) for step in trace.steps]
        evidence = f"{per_step_counts(counts, trace)}: {_names_of(trace.steps[0].gemms) or 'no GEMM'}"
        ok = all(c == n for c in counts)
        return Outcome(ok, evidence, SPLIT_K if not ok and _split_k(trace) else None)

    return Expectation(f"{n} GEMM kernel{'s' if n != 1 else ''} per step", check, claim)


def gemm_variants(same: Sequence[int], other: int, claim: str = "") -> Expectation:
    """The GEMMs at positions `same` (in launch order) share one kernel; the one at `other` is another, faster
    for the same FLOPs (P2-12: gate and up share a tile, down uses a deeper pipeline)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        per_step = [step.gemms for step in trace.steps]
        if any(len(g) <= max(*same, other) for g in per_step):
            return Outcome(False, f"GEMMs per step: {[len(g) for g in per_step]}")
        names = [g.name for g in per_step[0]]
        shared = {names[i] for i in same}

        def mean(i: int) -> float:
            return statistics.mean(g[i].dur for g in per_step)

        same_us, other_us = statistics.mean(mean(i) for i in same), mean(other)
        evidence = (
            f"{' = '.join(decode(names[i]).short for i in same[:1])} ×{len(same)} at {same_us:,.1f} µs; "
            f"{decode(names[other]).short} at {other_us:,.1f} µs ({other_us / same_us - 1:+.0%})"
        )
        return Outcome(len(shared) == 1 and names[other] not in shared and other_us < same_us, evidence)

    return Expectation("two GEMM variants: gate and up share one kernel, down another, faster for the same FLOPs", check, claim)


def no_separate_kernel_for(*ops: str, claim: str = "") -> Expectation:
    """No kernel computes one of `ops` on its own (a fused kernel that computes it with others is fine)."""
    listed = or_list(ops)

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            alone = [op for op in cpu_kernels(trace.steps[0]) if op.name.removeprefix("aten::") in ops]
            if not alone:
                return Outcome(True, f"no aten op computes {listed} alone; math ops per step: {op_names_text(cpu_kernels(trace.steps[0]))}")
            return Outcome(False, f"separate ops per step: {op_names_text(alone)}", None if is_compiled(trace) else NOT_COMPILED)
        alone = [w for w in trace.steps[0].kernels if len(decode(w.name).compute_ops) == 1 and decode(w.name).compute_ops[0] in ops]
        if not alone:
            return Outcome(True, f"none of the {len(trace.steps[0].kernels)} kernels per step computes {listed} alone: {_names_of(trace.steps[0].kernels)}")
        reason = ATEN_ELEMENTWISE if all(decode(w.name).family == "ATen" for w in alone) else None
        return Outcome(False, f"separate kernels per step: {_names_of(alone)}", reason)

    return Expectation(f"no separate kernel for {listed}", check, claim)


def fused_pointwise_kernel(*ops: str, claim: str = "") -> Expectation:
    """One Inductor pointwise kernel per step computes all of `ops`: `triton_poi_fused_..._gelu_mul_0` on a GPU,
    `cpp_fused_gelu_mul_0` on a CPU."""
    listed = and_list(ops)

    def check(trace: Trace) -> Outcome:
        per_step = [[k for k in _fused_kernels(trace, step) if set(ops) <= set(fused_ops(trace, k))] for step in trace.steps]
        counts = [len(found) for found in per_step]
        if all(c == 1 for c in counts):
            kernel = per_step[0][0]
            if trace.has_gpu:
                return Outcome(True, f"{kernel.name} in every step: {decode(kernel.name).describe()}")
            return Outcome(True, f"{kernel.name} in every step: Inductor's C++ kernel for {', '.join(fused_ops(trace, kernel))}")
        if any(counts):
            return Outcome(False, f"{per_step_counts(counts, trace)} fused kernels computing {listed}")
        evidence = f"no Inductor kernel computes {listed}; per step: {_names_of(trace.steps[0].kernels) if trace.has_gpu else op_names_text(cpu_kernels(trace.steps[0]))}"
        return Outcome(False, evidence, None if has_inductor(trace) else LOOKS_EAGER)

    return Expectation(f"one fused Inductor pointwise kernel computes {listed}", check, claim)


def fused_kernel_beats_eager_pointwise(*ops: str, claim: str = "") -> Expectation:
    """P2-16: the fused kernel reads its inputs once and writes once; eager's `ops` each read and write a whole
    [tokens, hidden] tensor. GELU then mul move 5 tensors (g in, h out; h and u in, m out), the fused kernel 3:
    we guess it takes about 3/5 of their time, and at least less."""

    def check(trace: Trace) -> Outcome:
        other = read_eager_twin(trace)
        if isinstance(other, Outcome):
            return other
        fused = [k for step in trace.steps for k in _fused_kernels(trace, step) if set(ops) <= set(fused_ops(trace, k))]
        if not fused:
            return Outcome(False, f"no fused kernel computing {and_list(ops)}", LOOKS_EAGER)
        eager = [k for step in other.steps for k in _step_kernels(other, step) if kernel_role(k) in ops]
        fused_us = sum(k.dur for k in fused) / len(trace.steps)
        eager_us = sum(k.dur for k in eager) / len(other.steps)
        if not eager_us:
            return Outcome(False, f"no separate {or_list(ops)} kernel in {other.name}")
        return Outcome(
            fused_us < eager_us,
            f"fused {fused_us:,.1f} µs per step against eager's {'+'.join(ops)} {eager_us:,.1f} µs "
            f"({fused_us / eager_us:.2f}×; 3 tensors moved instead of 5 predicts 0.60×)",
        )

    return Expectation(f"the fused kernel takes less time than eager's separate {and_list(ops)} (one round trip to memory, not two)", check, claim)


def same_gemm_kernels_as(reference: str | Path | Callable[[Path], Path], what: str = "the reference trace", missing: str = "", claim: str = "") -> Expectation:
    """The GEMM kernels have byte-identical names, as many per step, as in another trace.

    reference: that trace's path, or a function of this trace's path giving it.
    missing:   what to tell the user when the reference trace does not exist (the check is then skipped).
    """

    def check(trace: Trace) -> Outcome:
        path = Path(reference(trace.path) if callable(reference) else reference)
        other = read_other_trace(trace, path, what, missing)
        if isinstance(other, Outcome):
            return other
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        ours, theirs = _gemm_names(trace), _gemm_names(other)
        if ours == theirs and ours:
            names = ", ".join(f"{name} ×{per_step_count(n)}" if n != 1 else name for name, n in ours.items())
            total = sum(ours.values())
            return Outcome(True, f"{per_step_count(total)} GEMM{'s' if total != 1 else ''} per step, same names in {path.name}: {names}")
        only_ours = [n for n in ours if n not in theirs]
        only_theirs = [n for n in theirs if n not in ours]
        parts = []
        if only_ours:
            parts.append("only here: " + ", ".join(only_ours))
        if only_theirs:
            parts.append(f"only in {path.name}: " + ", ".join(only_theirs))
        if not parts:
            parts.append(f"same names, different counts per step: {dict(ours)} vs {dict(theirs)}")
        reason = TEMPLATE_GEMM if any(n.startswith("triton_tem_") for n in only_ours + only_theirs) else None
        return Outcome(False, "; ".join(parts), reason)

    return Expectation(f"the GEMM kernels have the same names as in {what}", check, claim)


def same_gemm_kernels_as_eager(claim: str = "") -> Expectation:
    """For a `--compile` trace: the GEMMs are the eager run's, byte for byte (the eager trace of the same
    sizes, next to this one; the check is skipped when it does not exist yet)."""
    return same_gemm_kernels_as(eager_twin, what="the eager run", missing="run without --compile first", claim=claim)


def same_gemm_family_as_eager(claim: str = "") -> Expectation:
    """--compile of lesson 1: the GEMM comes from the same library as eager's (cuBLAS): no new fused kernel."""

    def check(trace: Trace) -> Outcome:
        other = read_eager_twin(trace)
        if isinstance(other, Outcome):
            return other
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        ours = {decode(w.name).family for w in trace.gpu_work() if w.is_gemm}
        theirs = {decode(w.name).family for w in other.gpu_work() if w.is_gemm}
        names = f"{_names_of([w for w in trace.steps[0].gemms])} here, {_names_of(other.steps[0].gemms)} eager"
        return Outcome(bool(ours) and ours == theirs, f"{', '.join(sorted(ours)) or 'no GEMM'}: {names}")

    return Expectation("the GEMM is the same library's as eager (cuBLAS): fusion at the dispatcher, no new kernel", check, claim)


def geglu_kernel(per_step: int = 1, claim: str = "") -> Expectation:
    """A GeGLU kernel: gelu(gate) * up in one launch (Liger's `_geglu_tanh_forward_kernel`, or a Hub
    kernel whose name says gelu and `and_mul`)."""
    return kernel_matching(
        r"geglu|gelu\w*and_mul|and_mul\w*gelu|and_mul_kernel.*gelu",
        per_step,
        text=f"one GeGLU kernel (gelu and mul in one launch) {'per step' if per_step == 1 else f'×{per_step} per step'}",
        claim=claim,
    )


def geglu_kernel_vs_inductor(compiled_mlp: Path, claim: str = "") -> Expectation:
    """P2-19: Liger's hand-written kernel against Inductor's fused one (03_simple_mlp.py --compile): the post
    found Inductor's a little faster (89.4 against 92.8 µs on its A100), specialised for one static shape."""
    pattern = re.compile(r"geglu|gelu\w*and_mul", re.IGNORECASE)

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        other = read_other_trace(trace, compiled_mlp, "03_simple_mlp.py's compiled trace", "run 03_simple_mlp.py --compile with the same sizes first")
        if isinstance(other, Outcome):
            return other
        liger = [w.dur for w in trace.gpu_work() if w.kind == "kernel" and pattern.search(w.name)]
        inductor = [w.dur for w in other.gpu_work() if decode(w.name).inductor_kind == "pointwise"]
        if not liger or not inductor:
            return Outcome(False, f"GeGLU kernels: {len(liger)} here, {len(inductor)} Inductor pointwise in {other.name}")
        a, b = statistics.mean(liger), statistics.mean(inductor)
        fused = next(w for w in other.gpu_work() if decode(w.name).inductor_kind == "pointwise")
        launch = f" (block {dims_text(fused.block)}, grid {dims_text(fused.grid)})" if fused.block and fused.grid else ""
        evidence = f"Liger's {a:,.1f} µs against Inductor's {b:,.1f} µs{launch}: Liger's takes {a / b:.2f}× Inductor's time"
        return Outcome(b < a, evidence, None if b < a else INDUCTOR_CONFIG)

    return Expectation("Inductor's fused kernel is a little faster than Liger's (one static shape vs any shape)", check, claim)


def gemms_launched_by(*ops: str, claim: str = "") -> Expectation:
    """Every GEMM kernel is launched from inside one of `ops` (`aten::mm`, `aten::addmm`); on a CPU, every GEMM
    op is one of them (the CPU runs the GEMM inside the op itself)."""
    listed = or_list(ops)

    def check(trace: Trace) -> Outcome:
        if trace.has_gpu:
            by = Counter(w.launched_by or "(no op)" for w in trace.gpu_work() if w.is_gemm)
            what, verb = "GEMM kernels", "launched by"
        else:
            by = Counter(o.name for step in trace.steps for o in cpu_kernels(step) if kernel_role(o) == "GEMM")
            what, verb = "GEMMs on the CPU", "run as"
        if not by:
            return Outcome(False, f"no {what} in the trace")
        evidence = f"{sum(by.values())} {what} over {len(trace.steps)} steps, {verb} " + ", ".join(f"{op} ×{n}" for op, n in by.items())
        return Outcome(all(op in ops for op in by), evidence)

    return Expectation(f"every GEMM is launched by {listed}", check, claim)


def bias_in_gemm_epilogue(op: str = "aten::addmm", claim: str = "") -> Expectation:
    """The bias add happens inside the GEMM: `op` launches one kernel, a GEMM (nvjet's `_bias_`, CUTLASS's
    epilogue, or simply no second kernel). On a CPU: `op` runs and no aten::add does."""

    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name == op]
        if not calls:
            return Outcome(False, f"no {op} in the trace")
        if not trace.has_gpu:
            adds = sum(step.op_names()["aten::add"] for step in trace.steps)
            return Outcome(adds == 0, f"{op} ×{len(calls)}, aten::add ×{adds}: the bias is added inside {op}")
        kernels = [w for w in trace.gpu_work() if w.kind == "kernel" and w.launched_by == op]
        per_call = len(kernels) / len(calls)
        gemms = [w for w in kernels if w.is_gemm]
        if per_call == 1 and len(gemms) == len(kernels):
            name = decode(gemms[0].name)
            how = f"the name says so: {name.short}" if name.has_bias_epilogue else f"no separate add kernel: {name.short}"
            return Outcome(True, f"{op} ×{len(calls)}, one kernel each, a GEMM; {how}")
        evidence = f"{op} ×{len(calls)} launched {per_step_count(per_call)} kernels each: {_names_of(kernels[: max(1, round(per_call))])}"
        return Outcome(False, evidence, NO_LT_EPILOGUE if per_call == 2 and gemms else None)

    return Expectation(f"the bias add runs in the GEMM's epilogue ({op} launches one GEMM kernel, no add kernel)", check, claim)


def bias_copy_then_gemm(claim: str = "") -> Expectation:
    """Part 1 --compile, 2-D bias: aten::addmm copies the bias into its output (a Memcpy DtoD), then runs one GEMM
    that accumulates onto it: two GPU operations, one kernel launch per step."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        per_step = [(Counter(w.kind for w in step.gpu), len(step.gemms)) for step in trace.steps]
        ok = all(kinds.get("memcpy", 0) == 1 and kinds.get("kernel", 0) == 1 and gemms == 1 for kinds, gemms in per_step)
        step = trace.steps[0]
        copies = [w for w in step.gpu if w.kind == "memcpy"]
        launches = Counter(w.runtime for w in step.gpu)
        evidence = (
            f"per step: {', '.join(f'{w.name} {w.dur:,.1f} µs' for w in step.gpu)}; runtime calls: "
            + ", ".join(f"{n} ×{c}" for n, c in launches.items())
        )
        reason = None
        if not ok and not copies and step.gemms and decode(step.gemms[0].name).has_bias_epilogue:
            reason = ONE_D_BIAS
        return Outcome(ok, evidence, reason)

    return Expectation("a Memcpy DtoD (the 2-D bias copied into the output), then one GEMM: one kernel launch per step", check, claim)


def layout_in_kernel_name(claim: str = "") -> Expectation:
    """The GEMM's name ends in its layout: `_tn_` (A100 CUTLASS), `_TNT` (H200 nvjet)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        gemms = trace.steps[0].gemms
        layouts = {decode(w.name).short: dict(decode(w.name).details).get("layout") for w in gemms}
        ok = bool(layouts) and all(layouts.values())
        return Outcome(ok, ", ".join(f"{name}: layout {lay or '?'}" for name, lay in layouts.items()) or "no GEMM")

    return Expectation("the GEMM kernel's name carries its layout (TN: the weight read transposed)", check, claim)


def kernel_matching(pattern: str, per_step: int | None = 1, text: str | None = None, claim: str = "") -> Expectation:
    """A kernel whose name matches `pattern` (a regex, case-insensitive) runs `per_step` times per step. On a CPU:
    an event of that name (a Triton kernel under the interpreter, named by the code that launches it)."""
    regex = re.compile(pattern, re.IGNORECASE)

    def check(trace: Trace) -> Outcome:
        if trace.has_gpu:
            per = [[w.short_name for w in step.kernels if regex.search(w.name)] for step in trace.steps]
            everything = _names_of(trace.steps[0].kernels)
        else:
            per = [[o.name for o in step.ops if regex.search(o.name)] for step in trace.steps]
            everything = top_ops(trace)
        counts = [len(found) for found in per]
        if not any(counts):
            reason = NO_GPU if not trace.has_gpu and not trace.steps[0].ops else None
            return Outcome(False, f"no kernel matches /{pattern}/; per step: {everything}", reason)
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        return Outcome(ok, f"{per_step_counts(counts, trace)}: {counts_text(Counter(per[0]))}")

    times = "" if per_step is None else f" {per_step}×" if per_step != 1 else " once"
    return Expectation(text or f"a kernel matching /{pattern}/ runs{times} per step", check, claim)


def kernel_resources(claim: str = "") -> Expectation:
    """P1-10: the trace gives each kernel's registers and shared memory. The GEMM's are large (a tile staged
    through shared memory); the elementwise add's are 32 registers and no shared memory."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        kernels = trace.steps[0].kernels
        gemm = next((w for w in kernels if w.is_gemm), None)
        add = next((w for w in kernels if w.launched_by == "aten::add"), None)
        if gemm is None or add is None or gemm.registers is None or add.registers is None:
            return Outcome(False, f"kernels: {_names_of(kernels)} (no registers in the trace)" if kernels else "no kernels")
        ok = gemm.shared_memory > 0 and gemm.registers > 2 * add.registers and not add.shared_memory
        return Outcome(
            ok,
            f"{decode(gemm.name).short}: {gemm.registers} registers per thread, {gemm.shared_memory:,} B shared memory; "
            f"{decode(add.name).short}: {add.registers} registers, {add.shared_memory:,} B",
        )

    return Expectation("the GEMM uses many registers and much shared memory; the add kernel ~32 registers, none", check, claim)


def runtime_calls_per_gemm(*names: str, claim: str = "") -> Expectation:
    """Each GEMM goes through these runtime calls, as on the post's A100 (default: an occupancy query,
    then cudaLaunchKernel). On Hopper this is a ✗ with its known reason."""
    names = names or (OCCUPANCY_QUERY, "cudaLaunchKernel")

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        # The last name launches each GEMM; the others (an occupancy query) come before, once per GEMM.
        gemm_calls = Counter(w.runtime or "(none)" for w in trace.steps[0].gemms)
        step_calls = trace.steps[0].launch_counts()
        n_gemms = len(trace.steps[0].gemms)
        missing = [n for n in names[:-1] if step_calls.get(n, 0) < n_gemms]
        if gemm_calls.get(names[-1], 0) < n_gemms:
            missing.append(names[-1])
        evidence = f"{n_gemms} GEMM{'s' if n_gemms != 1 else ''} per step launched by {counts_text(gemm_calls)}; runtime calls per step: {counts_text(step_calls)}"
        if not missing and n_gemms:
            return Outcome(True, evidence)
        hopper = any("LaunchKernelEx" in n for n in gemm_calls) or any(decode(w.name).family == "cuBLAS (nvjet)" for w in trace.steps[0].gemms)
        return Outcome(False, evidence, HOPPER_LAUNCH if hopper else None)

    return Expectation(f"each GEMM launch goes through {and_list(names)}", check, claim)


def op_runtime_calls(op: str, calls: Sequence[str], claim: str = "") -> Expectation:
    """Each call of `op` makes exactly these runtime calls (`aten::add`: only cudaLaunchKernel)."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        ops = [o for o in trace.steps[0].ops if o.name == op]
        if not ops:
            return Outcome(False, f"no {op} in the trace")
        made = Counter(c.name for c in trace.steps[0].runtime if op in c.launch_path)
        want = Counter({c: len(ops) for c in calls})
        return Outcome(made == want, f"{op} ×{len(ops)} per step made {counts_text(made) or 'no runtime call'}")

    return Expectation(f"{op} makes only {and_list(list(calls))}", check, claim)


def _step_kernels(trace: Trace, step: Step) -> list:
    return step.kernels if trace.has_gpu else cpu_kernels(step)


def _fused_kernels(trace: Trace, step: Step) -> list:
    if trace.has_gpu:
        return [w for w in step.kernels if decode(w.name).inductor_kind == "pointwise"]
    return [o for o in step.ops if CPP_KERNEL.search(o.name)]


def _split_k(trace: Trace) -> bool:
    return any(decode(w.name).ops == ("split-K reduce",) for w in trace.gpu_work())


def _gemm_names(trace: Trace) -> Counter:
    counts = Counter(w.name for w in trace.gpu_work() if w.is_gemm)
    return Counter({name: n / len(trace.steps) for name, n in counts.items()})


def _names_of(work: Sequence[GpuWork]) -> str:
    return counts_text(Counter(w.short_name for w in work))
