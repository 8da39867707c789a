"""What every check is made of: the types, running them, the known reasons for a ✗, and the helpers they share.

A check is a function that returns an `Expectation`: `.text` (the guess, in words), `.claim` (the posts' number
for it, P2-08) and `.check(trace) -> Outcome`, ✓ or ✗ with the evidence and, when we know it, the reason (a Hopper
GPU where the post used an A100, a CPU where it used a GPU, ...). The known reasons are here, one text each, so
that a lesson's test can name the ✗ it expects. `announce` prints the guesses before profiling, `check_trace`
the outcomes after.

Each check reads a GPU trace for kernels and launches, and a CPU trace for what stands in for them there: the ops
that do the arithmetic (`aten::mm`, `aten::gelu`, Inductor's `cpp_fused_...` kernels, `cpu_kernels` below), so a
CPU run teaches the same thing. A claim only a GPU can show (runtime calls, registers, a memcpy) is ✗ on a CPU,
with that reason (`needs_gpu`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from trace_report.console import Console
from trace_report.files import twin_trace
from trace_report.kernels import decode, split_fused_ops
from trace_report.model import CpuOp, Step, Trace
from trace_report.reader import read_trace

# What a lesson uses (the checks' own helpers below are for the other modules of `checks`).
__all__ = [
    "Expectation",
    "Outcome",
    "announce",
    "check_trace",
    "eager_twin",
    "OCCUPANCY_QUERY",
    "HOPPER_LAUNCH",
    "PROFILER_START",
    "NO_GPU",
    "SHORT_CPU_STEPS",
    "LOOKS_EAGER",
    "ATEN_ELEMENTWISE",
    "NOT_COMPILED",
    "SPLIT_K",
    "COMPILED_NO_VIEW_OPS",
    "NO_LT_EPILOGUE",
    "ONE_D_BIAS",
    "TEMPLATE_GEMM",
    "STEADY_CLOCKS",
    "INDUCTOR_CONFIG",
    "CPU_OPS_BEFORE",
    "SHAPES_OFF",
    "CPU_BACKWARD_THREAD",
]

# --- the known reasons for a ✗: a lesson's test names the one it expects ---------------------------------------

OCCUPANCY_QUERY = "cudaOccupancyMaxActiveBlocksPerMultiprocessor"

HOPPER_LAUNCH = (
    "on Hopper (sm90) cuBLAS launches its GEMMs with the extensible launch calls (cuLaunchKernelEx for nvjet "
    "kernels, some after a 4-byte cudaMemsetAsync; cudaLaunchKernelExC after cudaFuncGetAttributes for others), "
    "the calls that can set thread-block clusters; the post's A100 shows an occupancy query "
    "(cudaOccupancyMaxActiveBlocksPerMultiprocessor) and cudaLaunchKernel instead"
)

PROFILER_START = (
    "the first recorded step also pays for the profiler starting to record (every op in it runs slower, warm or "
    "cold, on this machine); the steps after it are alike"
)

NO_GPU = "a CPU profile has no GPU lane: no kernels, no launches, no GPU time to read"

SHORT_CPU_STEPS = (
    "on a CPU these steps last tens of µs, and a moment of other work on the machine (another process, the OS) is as "
    "long as what is measured: on a quiet machine, run it again"
)

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

ONE_D_BIAS = (
    "a 1-D bias fits cuBLASLt's bias epilogue, so addmm needs no copy: Part 1's bias is (size, size) for this"
)

TEMPLATE_GEMM = "Inductor replaced a cuBLAS GEMM with its own Triton template (max-autotune picks these)"

STEADY_CLOCKS = "this run's GPU held its clocks: the spread is within noise (it shows under power or heat)"

INDUCTOR_CONFIG = (
    "Inductor picks its pointwise kernel's launch configuration when it compiles, so its speed depends on the "
    "compile: an H200 compile that chose 128-thread blocks over a 24,576-block grid ran this kernel in 38.4 µs, "
    "faster than Liger's, as on the post's A100"
)

CPU_OPS_BEFORE = (
    "here the extra work before {op} is CPU ops (reshaping the batch for it), and {op}'s launch is its only "
    "runtime call"
)

SHAPES_OFF = "input shapes are recorded only with --record_shapes (it costs CPU time per op, so it is off)"

CPU_BACKWARD_THREAD = (
    "on a CPU, autograd runs the backward on the thread that called backward(), inside its label; only a GPU's "
    "backward goes to autograd's own device thread"
)


# --- what stands in for kernels on a CPU -----------------------------------------------------------------------

# The ops that do arithmetic in a CPU trace: what stands in for kernels there.
CPU_MATH_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::add", "aten::gelu", "aten::mul"}

CPP_KERNEL = re.compile(r"cpp_fused_(\w+?)_\d+$")  # Inductor's CPU kernels, with enable_kernel_profile


# --- a check, and running the checks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """ok: True (✓), False (✗) or None (skipped, not a failure); evidence: what we saw; reason: why a ✗."""

    ok: bool | None
    evidence: str
    reason: str | None = None


@dataclass(frozen=True)
class Expectation:
    """One guess: `claim` is the posts' number for it (P2-08), empty for the suite's own guesses."""

    text: str
    check_fn: Callable[[Trace], Outcome]
    claim: str = ""

    def check(self, trace: Trace) -> Outcome:
        return self.check_fn(trace)

    @property
    def title(self) -> str:
        return f"{self.claim} · {self.text}" if self.claim else self.text


def needs_gpu(check: Callable[[Trace], Outcome]) -> Callable[[Trace], Outcome]:
    """A claim only a GPU trace can show: on a trace without a GPU lane it fails, with the reason."""

    @functools.wraps(check)
    def guarded(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        return check(trace)

    return guarded


def announce(expectations: Sequence[Expectation], console: Console | None = None) -> None:
    """Print what we expect to see, before profiling: the guess comes first."""
    console = console or Console(highlight=False)
    console.print("\n[bold]What we expect to see[/bold]")
    for expectation in expectations:
        console.print(f"  • {escape(expectation.title)}")
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
        console.print(f"  {mark} {escape(expectation.title)}")
        console.print(f"      {escape(outcome.evidence)}", style="dim" if outcome.ok is None else None)
        if outcome.ok is False and outcome.reason:
            console.print(f"      [yellow]known reason:[/yellow] {escape(outcome.reason)}")
    if failed:
        console.print(f"  {failed} of {len(expectations)} expectations not met: the trace is the truth, not the guess")
    return failed


# --- helpers the checks share ----------------------------------------------------------------------------------


def eager_twin(path: Path) -> Path:
    """This run's eager trace, next to it under the lessons' file names."""
    return twin_trace(path, "eager")


def read_eager_twin(trace: Trace) -> Trace | Outcome:
    """This run's eager twin (same sizes, next to it), or the Outcome that says why it cannot be compared."""
    return read_other_trace(trace, eager_twin(trace.path), "the eager run", "run without --compile first")


def read_other_trace(trace: Trace, path: Path, what: str, missing: str) -> Trace | Outcome:
    if path.resolve() == trace.path.resolve():
        return Outcome(None, f"skipped: {path.name} is {what} itself")
    if not path.is_file():
        return Outcome(None, f"skipped: {what} is not at {path}" + (f": {missing}" if missing else ""))
    return read_trace(path)


def cpu_kernels(step: Step) -> list[CpuOp]:
    """The CPU's stand-in for kernels: the math ops and Inductor's C++ kernels, in time order, outermost only."""
    return math_ops(step.ops, CPU_MATH_OPS)


def math_ops(ops: Sequence[CpuOp], names: set[str]) -> list[CpuOp]:
    """Of `ops`, those named in `names` and Inductor's C++ kernels, in time order, outermost only."""
    found = [o for o in ops if not o.is_label and (o.name in names or CPP_KERNEL.search(o.name))]
    return sorted((o for o in found if not any(p in names for p in o.path)), key=lambda o: o.ts)


def kernel_role(item) -> str:
    """"GEMM", or the op a kernel (or a CPU math op) computes: gelu, mul, add, fused ops joined by +."""
    if isinstance(item, CpuOp):
        # A Triton GEMM under the interpreter is a CPU op named after its kernel: the fused GeGLU GEMMs count as GEMMs there too.
        if item.name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm") or _is_triton_gemm(item.name):
            return "GEMM"
        m = CPP_KERNEL.search(item.name)
        return "+".join(split_fused_ops(m.group(1))) if m else item.name.removeprefix("aten::")
    if item.is_gemm:
        return "GEMM"
    return "+".join(decode(item.name).compute_ops) or decode(item.name).short


def _is_triton_gemm(name: str) -> bool:
    decoded = decode(name)
    return decoded.is_gemm and decoded.family.endswith("(Triton)")


def fused_ops(trace: Trace, kernel) -> tuple[str, ...]:
    if trace.has_gpu:
        return decode(kernel.name).ops
    return split_fused_ops(CPP_KERNEL.search(kernel.name).group(1))


def dims_text(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def has_inductor(trace: Trace) -> bool:
    return any(decode(w.name).family.startswith("Inductor") for w in trace.gpu_work()) or is_compiled(trace)


def is_compiled(trace: Trace) -> bool:
    return any(o.name.startswith("Torch-Compiled Region") or "CompiledFxGraph" in o.name for step in trace.steps for o in step.ops)


def op_names_text(ops: Sequence[CpuOp]) -> str:
    return counts_text(Counter(o.name for o in ops)) or "none"


def counts_text(counts: Counter) -> str:
    return ", ".join(f"{name} ×{n}" if n > 1 else str(name) for name, n in counts.items())


def per_step_counts(counts: Sequence[int], trace: Trace) -> str:
    if len(set(counts)) == 1:
        return f"{counts[0]} in each of {len(counts)} step{'s' if len(counts) != 1 else ''}"
    return ", ".join(f"{c} in {s.name}" for c, s in zip(counts, trace.steps))


def top_ops(trace: Trace, n: int = 6) -> str:
    counts = trace.steps[0].op_names()
    return ", ".join(f"{name} ×{c}" if c > 1 else name for name, c in counts.most_common(n)) or "none"


def or_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def and_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
