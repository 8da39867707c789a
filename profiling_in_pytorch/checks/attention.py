"""Part 3's claims (P3-01 … P3-17, docs/claims.md) as checks of a trace: one attention forward per step.

Each check reads the forward inside the lesson's label (`attn_fwd`, `sdpa_fwd`, `flash_kernel_fwd`), step by step:
the ops that start inside the label's box, and the GPU work those ops launched. Only launched work counts: the
naive forward keeps a GPU busy for ~1 ms per step while the CPU issues it in ~0.4 ms, so the schedule's warm-up
step still has kernels running during the first recorded steps, with no launch call in the window to link them
to (they would otherwise count twice). A forward's "GPU operations", as the post counts them, are its kernels and
memcpys; a memset (cuBLAS's nvjet and cuDNN clear a few bytes before their kernel on Hopper) is listed, not
counted.

On a CPU the ops that compute stand in for kernels: `aten::bmm` for a GEMM, `aten::copy_` for the copy,
`aten::masked_fill_`, `aten::_softmax`, the CPU's own flash kernel; a claim only a GPU can show (kernel names,
launch calls, occupancy, GPU time) is ✗ there with that reason. Checks that compare with another lesson's trace
take its path, and are skipped (–) with the command to run when it does not exist yet.

The checks live by concern, and a lesson imports the modules it checks with (none is re-exported by `checks`:
their names are attention's, `operations`, `role`, ...):

    attention.py            this one: a forward as the checks read it (its ops, the GPU work they launched, the
                            backend that ran, the P3-16 table's row), the count every lesson checks (P3-05, P3-17)
                            and the helpers the other three share
    attention_naive.py      the naive forwards, 04_a and 04_b (P3-01 … P3-03), and their compiled runs
    attention_sdpa.py       SDPA's backends, 04_c and 04_d: math (P3-04 … P3-08), fused (P3-09, P3-10, P3-12 …
                            P3-14), side by side (P3-16)
    attention_occupancy.py  a kernel's footprint on an SM and its occupancy (P3-11, P3-15)
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from profiling_in_pytorch.checks.base import NO_GPU, Expectation, Outcome
from trace_report.kernels import VIEW_OPS, decode, split_fused_ops
from trace_report.model import CpuOp, GpuWork, Phase, Step, Trace
from trace_report.reader import read_trace
from trace_report.timeline import busy_time

# What a CPU runs for each GPU operation of the forwards (the outermost of these ops, in time order).
CPU_WORK = {
    "aten::bmm": "GEMM",
    "aten::mm": "GEMM",
    "aten::mul": "mul",
    "aten::copy_": "copy",
    "aten::masked_fill_": "masked_fill",
    "aten::_softmax": "softmax",
    "aten::fill_": "fill",
    "aten::tril": "tril",
    "aten::where": "where",
    "aten::add_": "add",
    "aten::isneginf": "isneginf",
    "aten::all": "all",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
}
# SDPA's backends, by the op it dispatches to and by its kernel's name.
BACKEND_OPS = {
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
}
BACKEND_KERNELS = {
    "flash": r"flash_fwd\w*_kernel",
    "efficient": r"fmha_cutlassF",
    "cudnn": r"cudnn_generated\w*sdpa",
}
BACKEND_OWN_OPS = {  # the op in which each fused backend prepares and launches its kernel
    "flash": "aten::_flash_attention_forward",
    "efficient": "aten::_efficient_attention_forward",
    "cudnn": "aten::_cudnn_attention_forward",
}
FUSED = ("flash", "efficient", "cudnn")
CPP_KERNEL = re.compile(r"cpp_fused_(\w+?)_\d+$")  # Inductor's CPU kernels (graph_0_cpp_fused_..._0 in a trace)
MEMSET_NOT_COUNTED = "on Hopper cuBLAS's nvjet GEMMs and cuDNN clear a few bytes before their kernel"


# --- one forward, as the checks read it --------------------------------------------------------------------


def forwards(trace: Trace, label: str) -> list[Phase] | Outcome:
    """Each step's `label`, or the Outcome that says which step has none."""
    phases = [step.phase(label) for step in trace.steps]
    missing = [step.name for step, phase in zip(trace.steps, phases) if phase is None]
    if missing:
        labels = Counter(op.name for op in trace.steps[0].ops if op.is_label)
        return Outcome(False, f"no {label} in {', '.join(missing)}; labels per step: {tally(labels) or 'none'}")
    return phases


def launched(phase: Phase) -> list[GpuWork]:
    """The GPU work the forward's ops launched, in time order (work still running from before is left out)."""
    return [w for w in phase.gpu if w.launch is not None]


def operations(trace: Trace, phase: Phase) -> list:
    """What the post counts per forward: kernels and memcpys on a GPU; on a CPU the ops of CPU_WORK."""
    if trace.has_gpu:
        return [w for w in launched(phase) if w.kind != "memset"]
    found = [o for o in phase.ops if (o.name in CPU_WORK or CPP_KERNEL.search(o.name)) and not any(p in CPU_WORK for p in o.path)]
    return sorted(found, key=lambda o: o.ts)


def role(item) -> str:
    """GEMM, copy, or the op a kernel (or CPU op) computes: mul, masked_fill, softmax, attention, ..."""
    if isinstance(item, CpuOp):
        fused = CPP_KERNEL.search(item.name)
        if fused:
            return "+".join(op for op in split_fused_ops(fused.group(1)) if op not in VIEW_OPS)
        return CPU_WORK.get(item.name, item.name.removeprefix("aten::"))
    if item.kind == "memcpy":
        return "copy"
    if item.is_gemm:
        return "GEMM"
    decoded = decode(item.name)
    return "+".join(decoded.compute_ops) or decoded.short


def backend_of(trace: Trace, phase: Phase) -> str:
    """Which SDPA backend ran: from the kernel's name on a GPU, from the op SDPA dispatched to on a CPU."""
    if trace.has_gpu:
        names = [w.name for w in launched(phase) if w.kind == "kernel"]
        for backend, pattern in BACKEND_KERNELS.items():
            if any(re.search(pattern, n) for n in names):
                return backend
    return next((BACKEND_OPS[o.name] for o in phase.ops if o.name in BACKEND_OPS), "none")


@dataclass(frozen=True)
class ForwardSummary:
    """One trace's forward, per step: the P3-16 table's row (GPU µs are a mean; CPU µs the fastest step's)."""

    name: str
    operations: float
    gpu_us: float | None
    cpu_us: float
    launches: float
    transposes: float
    backend: str


def summarize(trace: Trace, label: str, name: str | None = None) -> ForwardSummary | None:
    phases = forwards(trace, label)
    if isinstance(phases, Outcome):
        return None
    n = len(phases)
    launches = sum(len([c for c in calls_in(step, phase) if not c.is_sync]) for step, phase in zip(trace.steps, phases))
    return ForwardSummary(
        name=name or trace.name,
        operations=sum(len(operations(trace, p)) for p in phases) / n,
        gpu_us=statistics.mean(busy_time(launched(p)) for p in phases) if trace.has_gpu else None,
        cpu_us=min(p.dur for p in phases),
        launches=launches / n,
        transposes=sum(op_count(p, "aten::transpose") for p in phases) / n,
        backend=backend_of(trace, phases[0]),
    )


def attention_kernel(trace: Trace, label: str) -> GpuWork | Outcome:
    """The forward's attention kernel (in the last step), or the Outcome that says why there is none."""
    if not trace.has_gpu:
        return Outcome(False, "no kernels in the trace", NO_GPU)
    phases = forwards(trace, label)
    if isinstance(phases, Outcome):
        return phases
    kernels = [w for w in launched(phases[-1]) if w.kind == "kernel"]
    attention = [w for w in kernels if "attention" in decode(w.name).ops]
    if not attention:
        return Outcome(False, f"no attention kernel in the forward: {work_names(kernels)}")
    return attention[0]


# --- what every forward is counted by: P3-05, P3-17 -----------------------------------------------------


def operations_per_forward(label: str, n: int, cpu_reason: str | None = None, claim: str = "") -> Expectation:
    """P3-05, P3-17: `n` GPU operations (kernels and memcpys) per forward; on a CPU, `n` ops that compute, or ✗
    with `cpu_reason` where a CPU computes it in another number of ops."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        counts = [len(operations(trace, p)) for p in phases]
        found = Counter(role(w) for w in operations(trace, phases[0]))
        ok = all(c == n for c in counts)
        what = "GPU operations" if trace.has_gpu else "ops that compute"
        evidence = f"{what} per forward: {per_step(counts)}: {tally(found) or 'none'}"
        memsets = sum(w.kind == "memset" for w in launched(phases[0]))
        if memsets:
            evidence += f" (and {memsets} memset{'s' if memsets > 1 else ''}, not counted: {MEMSET_NOT_COUNTED})"
        return Outcome(ok, evidence, None if ok or trace.has_gpu else cpu_reason)

    return Expectation(f"{n} GPU operation{'s' if n != 1 else ''} per forward (kernels and memcpys)", check, claim)


# --- helpers, the other attention modules' too --------------------------------------------------------------------


def read_lesson_trace(trace: Trace, path: Path, what: str, missing: str, itself_ok: bool = False) -> Trace | Outcome:
    """Another lesson's trace, or the Outcome that skips the check and says what to run."""
    path = Path(path)
    if path.resolve() == trace.path.resolve():
        return trace if itself_ok else Outcome(None, f"skipped: {path.name} is {what} itself")
    if not path.is_file():
        return Outcome(None, f"skipped: {what} is not at {path}: {missing}")
    return read_trace(path)


def trace_at(trace: Trace, path: Path) -> Trace:
    return trace if Path(path).resolve() == trace.path.resolve() else read_trace(path)


def calls_in(step: Step, phase: Phase) -> list:
    return [c for c in step.runtime if phase.ts <= c.ts <= phase.end]


def op_count(phase: Phase, name: str) -> int:
    return sum(o.name == name for o in phase.ops)


def work_names(work: Sequence[GpuWork]) -> str:
    return tally(Counter(w.short_name for w in work)) or "none"


def tally(counts: Counter) -> str:
    return ", ".join(f"{name} ×{n:g}" if n != 1 else str(name) for name, n in counts.items())


def per_step(counts: Sequence[int]) -> str:
    return f"{counts[0]} in each of {len(counts)} steps" if len(set(counts)) == 1 else " / ".join(str(c) for c in counts)
