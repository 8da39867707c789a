"""Guess first, then look: each lesson says what it expects to see, and we check it against the trace.

A lesson picks its guesses per kind of run (a GPU has kernels; a CPU trace only has ops):

    expect=expectations_by_run(
        gpu_eager=[kernels_per_step(5), gemms_per_step(3), gemms_launched_by("aten::mm")],
        gpu_compiled=[kernels_per_step(4), fused_pointwise_kernel("gelu", "mul"), same_gemm_kernels_as_eager()],
        cpu_eager=[cpu_op_runs("aten::mm", per_step=3), label_recorded("mlp_fwd", times=3)],
    )

(or any function `(args, device_type) -> list`). The harness calls `announce(...)` before profiling and
`check_trace(...)` after the export; the latter prints each expectation with ✓ or ✗ and the evidence
(numbers, kernel names), and when we know why a ✗ happens (a Hopper GPU where the post used an A100, an
eager trace where a compiled one was expected, ...) it says so. Each constructor returns an
`Expectation`: `.text` and `.check(trace) -> Outcome`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console
from rich.markup import escape

from common.kernel_names import decode
from common.traces import GpuWork, Trace, read_trace

OCCUPANCY_QUERY = "cudaOccupancyMaxActiveBlocksPerMultiprocessor"

HOPPER_LAUNCH = (
    "on Hopper (sm90) cuBLAS's nvjet kernels launch with the driver's cuLaunchKernelEx (the call that can "
    "set thread-block clusters), some after a 4-byte cudaMemsetAsync (a Memset on the GPU lane); the post's "
    "A100 shows an occupancy query (cudaOccupancyMaxActiveBlocksPerMultiprocessor) and cudaLaunchKernel instead"
)
NO_GPU = "the trace has no GPU work: a CPU run, or CUDA activity was not recorded"
LOOKS_EAGER = "the trace has no Inductor kernels: it looks like an eager run (was --compile given?)"
ATEN_ELEMENTWISE = (
    "these are ATen's eager elementwise kernels: nothing fused gelu and mul (a run without --compile, or a "
    "fused module that fell back to PyTorch ops)"
)
NOT_COMPILED = "the trace has no compiled region: it looks like an eager run (was --compile given?)"
SPLIT_K = "cuBLAS split K for this shape: a split GEMM adds a splitKreduce_kernel that sums its partial results"
COMPILED_NO_VIEW_OPS = (
    "a compiled graph does not dispatch view ops such as aten::t: Inductor hands the GEMM the transposed "
    "layout directly"
)
NO_LT_EPILOGUE = (
    "PyTorch uses cuBLASLt's bias epilogue only when its conditions hold (2-D input, a contiguous 1-D bias, "
    "beta = 1, a supported dtype); otherwise it copies the bias into the output and runs the GEMM on top "
    "(beta = 1): two kernels"
)
TEMPLATE_GEMM = "Inductor replaced a cuBLAS GEMM with its own Triton template (max-autotune picks these)"


@dataclass(frozen=True)
class Outcome:
    """ok: True (✓), False (✗) or None (skipped, not a failure); evidence: what we saw; reason: why a ✗."""

    ok: bool | None
    evidence: str
    reason: str | None = None


@dataclass(frozen=True)
class Expectation:
    text: str
    check_fn: Callable[[Trace], Outcome]

    def check(self, trace: Trace) -> Outcome:
        return self.check_fn(trace)


def _needs_gpu(check: Callable[[Trace], Outcome]) -> Callable[[Trace], Outcome]:
    """A kernel expectation: on a trace without a GPU lane it fails, with the reason, before looking for kernels."""

    @functools.wraps(check)
    def guarded(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no kernels at all", NO_GPU)
        return check(trace)

    return guarded


# --- what the harness calls ----------------------------------------------------------------------------------


def announce(expectations: Sequence[Expectation], console: Console | None = None) -> None:
    """Print what we expect to see, before profiling: the guess comes first."""
    console = console or Console(highlight=False)
    console.print("\n[bold]What we expect to see[/bold]")
    for expectation in expectations:
        console.print(f"  • {escape(expectation.text)}")
    console.print()


def check_trace(expectations: Sequence[Expectation], trace_path: str | Path, device_type: str, console: Console | None = None) -> int:
    """Read the trace, print each expectation with ✓ or ✗ and the evidence; return the number of ✗."""
    console = console or Console(highlight=False)
    trace = read_trace(trace_path)
    console.print(f"\n[bold]What we saw[/bold] ({escape(trace.name)}, {device_type})")
    failed = 0
    for expectation in expectations:
        outcome = expectation.check(trace)
        if outcome.ok is None:
            mark = "[dim]–[/dim]"
        elif outcome.ok:
            mark = "[green]✓[/green]"
        else:
            mark = "[red]✗[/red]"
            failed += 1
        console.print(f"  {mark} {escape(expectation.text)}")
        console.print(f"      {escape(outcome.evidence)}", style="dim" if outcome.ok is None else None)
        if outcome.ok is False and outcome.reason:
            console.print(f"      [yellow]known reason:[/yellow] {escape(outcome.reason)}")
    if failed:
        console.print(f"  {failed} of {len(expectations)} expectations not met: the trace is the truth, not the guess")
    return failed


def expectations_by_run(
    *,
    gpu_eager: Sequence[Expectation] = (),
    gpu_compiled: Sequence[Expectation] = (),
    cpu_eager: Sequence[Expectation] = (),
    cpu_compiled: Sequence[Expectation] = (),
) -> Callable[..., list[Expectation]]:
    """A lesson's `expect=`: the guesses for each kind of run, picked from `args.compile` and the device."""

    def pick(args, device_type: str) -> list[Expectation]:
        compiled = bool(getattr(args, "compile", False))
        if device_type == "cuda":
            return list(gpu_compiled if compiled else gpu_eager)
        return list(cpu_compiled if compiled else cpu_eager)

    return pick


# --- GPU expectations ----------------------------------------------------------------------------------------


def kernels_per_step(n: int) -> Expectation:
    """Every step launches exactly `n` kernels (memsets and memcpys are not kernels)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        counts = [len(step.kernels) for step in trace.steps]
        evidence = f"{_per_step_counts(counts, trace)}: {_names_of(trace.steps[0].kernels)}"
        others = Counter(w.kind for w in trace.steps[0].gpu if w.kind != "kernel")
        if others:
            evidence += " (not counted: " + ", ".join(f"{c} {k}{'s' if c > 1 else ''}" for k, c in others.items()) + ")"
        ok = all(c == n for c in counts)
        reason = None
        if not ok and any(decode(w.name).ops == ("split-K reduce",) for w in trace.gpu_work()):
            reason = SPLIT_K
        return Outcome(ok, evidence, reason)

    return Expectation(f"{n} kernel{'s' if n != 1 else ''} per step", check)


def gemms_per_step(n: int) -> Expectation:
    """Every step runs exactly `n` GEMM kernels (cuBLAS, CUTLASS, nvjet, Inductor templates)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        counts = [len(step.gemms) for step in trace.steps]
        evidence = f"{_per_step_counts(counts, trace)}: {_names_of(trace.steps[0].gemms) or 'no GEMM'}"
        ok = all(c == n for c in counts)
        reason = SPLIT_K if not ok and any(decode(w.name).ops == ("split-K reduce",) for w in trace.gpu_work()) else None
        return Outcome(ok, evidence, reason)

    return Expectation(f"{n} GEMM kernel{'s' if n != 1 else ''} per step", check)


def no_separate_kernel_for(*ops: str) -> Expectation:
    """No kernel computes one of `ops` on its own (a fused kernel that computes it with others is fine)."""
    listed = _or(ops)

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        alone = [w for w in trace.steps[0].kernels if len(decode(w.name).compute_ops) == 1 and decode(w.name).compute_ops[0] in ops]
        if not alone:
            return Outcome(True, f"none of the {len(trace.steps[0].kernels)} kernels per step computes {listed} alone: {_names_of(trace.steps[0].kernels)}")
        reason = ATEN_ELEMENTWISE if all(decode(w.name).family == "ATen" for w in alone) else None
        return Outcome(False, f"separate kernels per step: {_names_of(alone)}", reason)

    return Expectation(f"no separate kernel for {listed}", check)


def fused_pointwise_kernel(*ops: str) -> Expectation:
    """One Inductor Triton pointwise kernel per step computes all of `ops` (`triton_poi_fused_..._gelu_mul_0`)."""
    listed = _and(ops)

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        per_step = [
            [w for w in step.kernels if decode(w.name).inductor_kind == "pointwise" and set(ops) <= set(decode(w.name).ops)]
            for step in trace.steps
        ]
        counts = [len(found) for found in per_step]
        if all(c == 1 for c in counts):
            kernel = decode(per_step[0][0].name)
            return Outcome(True, f"{kernel.name} in every step: {kernel.describe()}")
        if any(counts):
            return Outcome(False, f"{_per_step_counts(counts, trace)} fused pointwise kernels: {_names_of(per_step[0])}")
        pointwise = [w for w in trace.steps[0].kernels if decode(w.name).inductor_kind == "pointwise"]
        evidence = f"no Triton pointwise kernel computes {listed}; kernels per step: {_names_of(trace.steps[0].kernels)}"
        if pointwise:
            evidence = f"Triton pointwise kernels, none with all of {listed}: {_names_of(pointwise)}"
        return Outcome(False, evidence, None if _has_inductor(trace) else LOOKS_EAGER)

    return Expectation(f"one fused Triton pointwise kernel computes {listed}", check)


def same_gemm_kernels_as(reference: str | Path | Callable[[Path], Path], what: str = "the reference trace", missing: str = "") -> Expectation:
    """The GEMM kernels have byte-identical names, as many per step, as in another trace.

    reference: that trace's path, or a function of this trace's path giving it.
    missing:   what to tell the user when the reference trace does not exist (the check is then skipped).
    """

    def check(trace: Trace) -> Outcome:
        path = Path(reference(trace.path) if callable(reference) else reference)
        if path.resolve() == trace.path.resolve():
            return Outcome(None, f"skipped: {path.name} is {what} itself")
        if not path.is_file():
            return Outcome(None, f"skipped: no {what} at {path}" + (f": {missing}" if missing else ""))
        if not trace.has_gpu:
            return Outcome(False, "no kernels at all", NO_GPU)
        other = read_trace(path)
        ours, theirs = _gemm_names(trace), _gemm_names(other)
        if ours == theirs and ours:
            names = ", ".join(f"{name} ×{_fmt(n)}" if n != 1 else name for name, n in ours.items())
            return Outcome(True, f"{_fmt(sum(ours.values()))} GEMMs per step, same names in {path.name}: {names}")
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

    return Expectation(f"the GEMM kernels have the same names as in {what}", check)


def same_gemm_kernels_as_eager() -> Expectation:
    """For a `--compile` trace: the GEMMs are the eager run's, byte for byte (the eager trace of the same
    sizes, next to this one; the check is skipped when it does not exist yet)."""
    return same_gemm_kernels_as(eager_twin, what="the eager run", missing="run without --compile first")


def eager_twin(path: Path) -> Path:
    """`.../64_128_768_3072_compile.json` -> `.../64_128_768_3072_eager.json` (the harness's file names)."""
    stem, dot, suffix = path.name.partition(".")
    parts = stem.split("_")
    if "compile" in parts:
        i = len(parts) - 1 - parts[::-1].index("compile")
        parts[i] = "eager"
    return path.with_name("_".join(parts) + dot + suffix)


def gemms_launched_by(*ops: str) -> Expectation:
    """Every GEMM kernel is launched from inside one of `ops` (`aten::mm`, `aten::addmm`)."""
    listed = _or(ops)

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        gemms = [w for w in trace.gpu_work() if w.is_gemm]
        if not gemms:
            return Outcome(False, "no GEMM kernel in the trace")
        by = Counter(w.launched_by or "(no op)" for w in gemms)
        evidence = f"{len(gemms)} GEMMs over {len(trace.steps)} steps, launched by " + ", ".join(f"{op} ×{n}" for op, n in by.items())
        return Outcome(all(op in ops for op in by), evidence)

    return Expectation(f"every GEMM is launched by {listed}", check)


def bias_in_gemm_epilogue(op: str = "aten::addmm") -> Expectation:
    """The bias add happens inside the GEMM: `op` launches one kernel, a GEMM (nvjet's `_bias_`, CUTLASS's
    epilogue, or simply no second kernel)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name == op]
        if not calls:
            return Outcome(False, f"no {op} in the trace")
        kernels = [w for w in trace.gpu_work() if w.kind == "kernel" and w.launched_by == op]
        per_call = len(kernels) / len(calls)
        gemms = [w for w in kernels if w.is_gemm]
        if per_call == 1 and len(gemms) == len(kernels):
            name = decode(gemms[0].name)
            if name.has_bias_epilogue:
                how = f"the name says so: {name.short}"
            else:
                how = f"no separate add kernel: {name.short}"
            return Outcome(True, f"{op} ×{len(calls)}, one kernel each, a GEMM; {how}")
        evidence = f"{op} ×{len(calls)} launched {_fmt(per_call)} kernels each: {_names_of(kernels[: max(1, round(per_call))])}"
        return Outcome(False, evidence, NO_LT_EPILOGUE if per_call == 2 and gemms else None)

    return Expectation(f"the bias add runs in the GEMM's epilogue ({op} launches one GEMM kernel, no add kernel)", check)


def launches_nothing(op: str) -> Expectation:
    """`op` runs on the CPU in every step and launches no GPU work (a view such as `aten::t`)."""

    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name == op]
        if not calls:
            return Outcome(False, f"no {op} in the trace", COMPILED_NO_VIEW_OPS if _is_compiled(trace) else None)
        launched = sum(o.launched for o in calls)
        per_step = _fmt(len(calls) / len(trace.steps))
        if launched:
            return Outcome(False, f"{op} ×{per_step} per step launched {launched} GPU work items")
        cpu = sum(o.dur for o in calls) / len(calls)
        return Outcome(True, f"{op} ×{per_step} per step, {cpu:,.1f} µs on the CPU each, 0 µs on the GPU: it only rewrites metadata")

    return Expectation(f"{op} launches nothing on the GPU", check)


def op_launches(op: str, kernels: int = 1) -> Expectation:
    """Each call of `op` launches exactly `kernels` kernels (its children's included): `aten::add` one."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name == op]
        if not calls:
            return Outcome(False, f"no {op} in the trace", COMPILED_NO_VIEW_OPS if _is_compiled(trace) and op in VIEW_LIKE else None)
        launched = [w for w in trace.gpu_work() if w.kind == "kernel" and op in w.launch_path]
        per_call = len(launched) / len(calls)
        first = launched[: max(1, round(per_call))]
        return Outcome(per_call == kernels, f"{op} ×{len(calls)} launched {_fmt(per_call)} kernel{'s' if per_call != 1 else ''} each: {_names_of(first) or 'none'}")

    return Expectation(f"each {op} launches {kernels} kernel{'s' if kernels != 1 else ''}", check)


def kernel_matching(pattern: str, per_step: int | None = 1, text: str | None = None) -> Expectation:
    """A kernel whose name matches `pattern` (a regex, case-insensitive) runs `per_step` times per step."""
    regex = re.compile(pattern, re.IGNORECASE)

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        per = [[w for w in step.kernels if regex.search(w.name)] for step in trace.steps]
        counts = [len(found) for found in per]
        if not any(counts):
            return Outcome(False, f"no kernel matches /{pattern}/; kernels per step: {_names_of(trace.steps[0].kernels)}")
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        return Outcome(ok, f"{_per_step_counts(counts, trace)}: {_names_of(per[0])}")

    times = "" if per_step is None else f" {per_step}×" if per_step != 1 else " once"
    return Expectation(text or f"a kernel matching /{pattern}/ runs{times} per step", check)


def geglu_kernel(per_step: int = 1) -> Expectation:
    """A GeGLU kernel: gelu(gate) * up in one launch (Liger's `_geglu_tanh_forward_kernel`, or a Hub
    kernel whose name says gelu and `and_mul`)."""
    return kernel_matching(
        r"geglu|gelu\w*and_mul|and_mul\w*gelu|and_mul_kernel.*gelu",
        per_step,
        text=f"one GeGLU kernel (gelu and mul in one launch) {'per step' if per_step == 1 else f'×{per_step} per step'}",
    )


def runtime_calls_per_gemm(*names: str) -> Expectation:
    """Each GEMM goes through these runtime calls, as on the post's A100 (default: an occupancy query,
    then cudaLaunchKernel). On Hopper this is a ✗ with its known reason."""
    names = names or (OCCUPANCY_QUERY, "cudaLaunchKernel")

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        # The last name launches each GEMM; the others (an occupancy query) come before, once per GEMM.
        gemm_calls = Counter(w.runtime or "(none)" for w in trace.steps[0].gemms)
        step_calls = trace.steps[0].launch_counts()
        seen = ", ".join(f"{n} ×{c}" for n, c in step_calls.items())
        n_gemms = len(trace.steps[0].gemms)
        missing = [n for n in names[:-1] if step_calls.get(n, 0) < n_gemms]
        if gemm_calls.get(names[-1], 0) < n_gemms:
            missing.append(names[-1])
        evidence = f"{n_gemms} GEMM{'s' if n_gemms != 1 else ''} per step launched by {', '.join(f'{n} ×{c}' for n, c in gemm_calls.items())}; runtime calls per step: {seen}"
        if not missing and n_gemms:
            return Outcome(True, evidence)
        hopper = any(n.startswith("cuLaunchKernelEx") for n in gemm_calls) or any(decode(w.name).family == "cuBLAS (nvjet)" for w in trace.steps[0].gemms)
        return Outcome(False, evidence, HOPPER_LAUNCH if hopper else None)

    return Expectation(f"each GEMM launch goes through {_and(names)}", check)


# --- CPU expectations: without a GPU there are no kernels, only the ops --------------------------------------


def cpu_op_runs(op: str, per_step: int | None = None) -> Expectation:
    """`op` runs in every step (`per_step` times when given)."""

    def check(trace: Trace) -> Outcome:
        counts = [step.op_names()[op] for step in trace.steps]
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        if not any(counts):
            return Outcome(False, f"no {op} in the trace; ops per step: {_top_ops(trace)}", COMPILED_NO_VIEW_OPS if _is_compiled(trace) and op in VIEW_LIKE else None)
        return Outcome(ok, f"{op}: {_per_step_counts(counts, trace)}")

    times = " in every step" if per_step is None else f" {per_step}× per step" if per_step != 1 else " once per step"
    return Expectation(f"{op} runs{times}", check)


def no_cpu_op(*ops: str) -> Expectation:
    """None of `ops` runs (a compiled graph replaces them with its own fused code)."""

    def check(trace: Trace) -> Outcome:
        found = Counter()
        for step in trace.steps:
            found.update({name: c for name, c in step.op_names().items() if name in ops})
        if found:
            return Outcome(False, "found " + ", ".join(f"{n} ×{c}" for n, c in found.items()), None if _is_compiled(trace) else NOT_COMPILED)
        return Outcome(True, f"none of {_or(ops)} in {len(trace.steps)} steps; ops per step: {_top_ops(trace)}")

    return Expectation(f"no {_or(ops)} op runs", check)


def label_recorded(label: str, times: int = 3) -> Expectation:
    """The lesson's record_function label appears `times` times (once per active step)."""

    def check(trace: Trace) -> Outcome:
        n = trace.labels.get(label, 0)
        return Outcome(n == times, f"{label} ×{n} in the trace ({len(trace.steps)} steps)")

    return Expectation(f"the label {label} appears {times} times (once per active step)", check)


# --- helpers -------------------------------------------------------------------------------------------------

VIEW_LIKE = {"aten::t", "aten::transpose", "aten::view", "aten::reshape", "aten::_unsafe_view", "aten::as_strided"}


def _gemm_names(trace: Trace) -> Counter:
    counts = Counter(w.name for w in trace.gpu_work() if w.is_gemm)
    return Counter({name: n / len(trace.steps) for name, n in counts.items()})


def _has_inductor(trace: Trace) -> bool:
    return any(decode(w.name).family.startswith("Inductor") for w in trace.gpu_work()) or _is_compiled(trace)


def _is_compiled(trace: Trace) -> bool:
    return any(o.name.startswith("Torch-Compiled Region") or "CompiledFxGraph" in o.name for step in trace.steps for o in step.ops)


def _names_of(work: Sequence[GpuWork]) -> str:
    counts = Counter(w.short_name for w in work)
    return ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in counts.items())


def _per_step_counts(counts: Sequence[int], trace: Trace) -> str:
    if len(set(counts)) == 1:
        return f"{counts[0]} in each of {len(counts)} step{'s' if len(counts) != 1 else ''}"
    return ", ".join(f"{c} in {s.name}" for c, s in zip(counts, trace.steps))


def _top_ops(trace: Trace, n: int = 6) -> str:
    counts = trace.steps[0].op_names()
    return ", ".join(f"{name} ×{c}" if c > 1 else name for name, c in counts.most_common(n)) or "none"


def _fmt(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def _or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
