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
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from profiling_in_pytorch.traces.checks.base import NO_GPU, Expectation, Outcome
from profiling_in_pytorch.traces.checks.dispatch import VIEW_LIKE
from profiling_in_pytorch.traces.kernels import VIEW_OPS, decode, math_unit, split_fused_ops
from profiling_in_pytorch.traces.model import CpuOp, GpuWork, Phase, Step, Trace
from profiling_in_pytorch.traces.reader import read_trace
from profiling_in_pytorch.traces.timeline import busy_time

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
REGISTER_GRANULE = 256  # registers are allocated per warp in units of 256 (sm80 and sm90)
RESERVED_SHARED = 1024  # shared memory the driver keeps per block on sm80 and later
MAX_BLOCKS_PER_SM = 32

MEMSET_NOT_COUNTED = "on Hopper cuBLAS's nvjet GEMMs and cuDNN clear a few bytes before their kernel"
CPU_FLASH = (
    "on a CPU, SDPA's flash backend is torch's CPU kernel (_scaled_dot_product_flash_attention_for_cpu): the same "
    "idea, tiles and an online softmax, in C++; FlashAttention-2's kernel is CUDA code"
)
CPU_FLASH_TRANSPOSES = (
    "on a CPU, SDPA's flash backend is torch's CPU kernel, which transposes its inputs and its output itself"
)
CPU_MATH_COUNT = (
    "a CPU in fp32 runs the math backend's decomposition as fewer ops: the GPU's 20 kernels include the bf16 -> fp32 "
    "copies of q, k and v and the copies back to bf16 (the math backend computes in fp32), and fills for scalars "
    "that a CPU folds into its ops"
)
HOPPER_CUDNN = (
    "on Hopper (sm90) cuDNN's generated kernel runs on wgmma, Hopper's warpgroup tensor-core instructions; "
    "FlashAttention-2 as vendored in PyTorch is Ampere (sm80) code, so cuDNN wins there"
)
PINNED_CPU = "entering and leaving sdpa_kernel(...) on every call is Python time inside the label, around the op"
CPU_NO_FUSED = (
    "a CPU runs only SDPA's math and flash backends (efficient and cuDNN have no CPU kernel), and has no GPU time: "
    "there is nothing to compare"
)
CUPTI_ESTIMATED = "CUPTI estimated this launch's occupancy here (the post's A100 gave none for cuDNN's)"


# --- one forward, as the checks read it --------------------------------------------------------------------


def forwards(trace: Trace, label: str) -> list[Phase] | Outcome:
    """Each step's `label`, or the Outcome that says which step has none."""
    phases = [step.phase(label) for step in trace.steps]
    missing = [step.name for step, phase in zip(trace.steps, phases) if phase is None]
    if missing:
        labels = Counter(op.name for op in trace.steps[0].ops if op.is_label)
        return Outcome(False, f"no {label} in {', '.join(missing)}; labels per step: {_counts(labels) or 'none'}")
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
    launches = sum(len([c for c in _calls(step, phase) if not c.is_sync]) for step, phase in zip(trace.steps, phases))
    return ForwardSummary(
        name=name or trace.name,
        operations=sum(len(operations(trace, p)) for p in phases) / n,
        gpu_us=statistics.mean(busy_time(launched(p)) for p in phases) if trace.has_gpu else None,
        cpu_us=min(p.dur for p in phases),
        launches=launches / n,
        transposes=sum(_count(p, "aten::transpose") for p in phases) / n,
        backend=backend_of(trace, phases[0]),
    )


def footprint(work: GpuWork, device: Mapping) -> tuple[int, str, float] | None:
    """How many blocks of a kernel fit on one SM (registers, shared memory, threads), what limits them, and the
    occupancy that gives (active warps over the SM's maximum); None without registers or a block size."""
    if work.registers is None or not work.block:
        return None
    warp = device.get("warpSize", 32)
    threads = math.prod(work.block)
    warps = math.ceil(threads / warp)
    regs_per_warp = math.ceil(work.registers * warp / REGISTER_GRANULE) * REGISTER_GRANULE
    limits = {
        "registers": device.get("regsPerMultiprocessor", 65536) // max(1, regs_per_warp * warps),
        "threads": device.get("maxThreadsPerMultiprocessor", 2048) // threads,
        "blocks": MAX_BLOCKS_PER_SM,
    }
    shared_per_sm = device.get("sharedMemPerMultiprocessor")
    if work.shared_memory and shared_per_sm:
        limits["shared memory"] = shared_per_sm // (work.shared_memory + RESERVED_SHARED)
    blocks = min(limits.values())
    limiter = " and ".join(k for k, v in limits.items() if v == blocks)
    return blocks, limiter, blocks * warps / (device.get("maxThreadsPerMultiprocessor", 2048) / warp)


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
        evidence = f"{what} per forward: {_per_step(counts)}: {_counts(found) or 'none'}"
        memsets = sum(w.kind == "memset" for w in launched(phases[0]))
        if memsets:
            evidence += f" (and {memsets} memset{'s' if memsets > 1 else ''}, not counted: {MEMSET_NOT_COUNTED})"
        return Outcome(ok, evidence, None if ok or trace.has_gpu else cpu_reason)

    return Expectation(f"{n} GPU operation{'s' if n != 1 else ''} per forward (kernels and memcpys)", check, claim)


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
                return Outcome(False, f"no memcpy launched inside aten::masked_fill; GPU work per forward: {_names(launched(phases[0]))}")
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
        theirs = _read(trace, other, "04_a's out-of-place trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        ours_ops, their_ops = _masking_ops(trace, label), _masking_ops(theirs, label)
        ours_copies, their_copies = _copies(trace, label), _copies(theirs, label)
        if ours_ops is None or their_ops is None:
            return Outcome(False, f"no masking op inside {label} in one of the traces")
        kind = "memcpys" if trace.has_gpu else "aten::copy_ ops"
        evidence = (
            f"masking step per forward: {_counts(ours_ops)} here, against {_counts(their_ops)} out of place; "
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


# --- SDPA's math backend, against the naive forward -------------------------------------------------------------


def gpu_time_against(other: Path, label: str, other_label: str, at_least: float, missing: str, claim: str = "") -> Expectation:
    """P3-04: this forward takes at least `at_least`× the GPU time of the other trace's (the post: SDPA's math
    backend 7.24 ms against the in-place forward's 1.96 ms on its A100, 3.7×)."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        theirs = _read(trace, other, "04_b's in-place trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        a, b = summarize(trace, label), summarize(theirs, other_label)
        if a is None or b is None or not b.gpu_us:
            return Outcome(False, f"no {label} here or no {other_label} in {other.name}")
        ratio = a.gpu_us / b.gpu_us
        return Outcome(ratio >= at_least, f"GPU per forward: {a.gpu_us:,.1f} µs here, {b.gpu_us:,.1f} µs in {other.name} ({ratio:.1f}×)")

    return Expectation(f"the one-liner takes ≥ {at_least:g}× the in-place forward's GPU time (A100: 3.7×)", check, claim)


def more_operations_than(other: Path, label: str, other_label: str, missing: str, claim: str = "") -> Expectation:
    """P3-05: more GPU operations per forward than the in-place naive forward (the post: 20 against 5)."""

    def check(trace: Trace) -> Outcome:
        theirs = _read(trace, other, "04_b's in-place trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        a, b = summarize(trace, label), summarize(theirs, other_label)
        if a is None or b is None:
            return Outcome(False, f"no {label} here or no {other_label} in {other.name}")
        what = "GPU operations" if trace.has_gpu else "ops that compute"
        return Outcome(a.operations > b.operations, f"{what} per forward: {a.operations:g} here, {b.operations:g} in {other.name}")

    return Expectation("more GPU operations per forward than the in-place naive forward (20 against 5)", check, claim)


def gemms_on(label: str, unit: str, text: str, claim: str = "") -> Expectation:
    """P3-06: every GEMM of the forward runs on `unit` ("CUDA cores": fp32 ffma/sgemm; "tensor cores"), by name."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no kernel names in the trace", NO_GPU)
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        return _gemm_units(trace, phases, unit)

    return Expectation(text, check, claim)


def gemms_against(other: Path, label: str, other_label: str, unit: str, missing: str, claim: str = "") -> Expectation:
    """P3-06, the other side: the in-place forward's GEMMs (04_b's trace) carry the 16-bit tensor-core signature
    (`s16816` on the A100, nvjet's `_h_` on Hopper)."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no kernel names in the trace", NO_GPU)
        theirs = _read(trace, other, "04_b's in-place trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        phases = forwards(theirs, other_label)
        if isinstance(phases, Outcome):
            return phases
        outcome = _gemm_units(theirs, phases, unit)
        return Outcome(outcome.ok, f"in {other.name}: {outcome.evidence}")

    return Expectation(f"the in-place forward's GEMMs (04_b) run on {unit}, with 16-bit inputs", check, claim)


def _gemm_units(trace: Trace, phases: list[Phase], unit: str) -> Outcome:
    gemms = [w for w in launched(phases[0]) if w.is_gemm]
    if not gemms:
        return Outcome(False, "no GEMM in the forward")
    units = {decode(w.name).short: math_unit(w.name) or "?" for w in gemms}
    evidence = "; ".join(f"{name}: {u}" + (f" ({_inputs(name)})" if _inputs(name) else "") for name, u in units.items())
    return Outcome(all(u == unit for u in units.values()), evidence)


def _inputs(name: str) -> str:
    details = dict(decode(name).details)
    return details.get("inputs") or details.get("dtype", "")


def mask_rebuilt(label: str, claim: str = "") -> Expectation:
    """P3-07: is_causal=True makes the math backend build the causal mask on every call: aten::ones → aten::tril,
    aten::scalar_tensor, aten::where on the CPU lane; a triu_tril kernel and where kernels on the GPU."""
    ops = ("aten::ones", "aten::tril", "aten::scalar_tensor", "aten::where")

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        seen = [Counter(o.name for o in p.ops if o.name in ops and not any(q in ops for q in o.path)) for p in phases]
        ok = all(all(s[op] for op in ops) for s in seen)
        evidence = f"per forward: {_counts(seen[0]) or 'none of ' + ', '.join(ops)}"
        if trace.has_gpu:
            roles = Counter(role(w) for w in launched(phases[0]))
            kernels = {r: roles[r] for r in ("tril", "where", "add") if roles[r]}
            ok = ok and all(Counter(role(w) for w in launched(p))["tril"] == 1 for p in phases) and roles["where"] >= 1
            evidence += f"; on the GPU: {_counts(Counter(kernels)) or 'no tril or where kernel'}"
        return Outcome(ok, evidence)

    return Expectation("the causal mask is rebuilt on every call: aten::ones → aten::tril, aten::where (a tril kernel)", check, claim)


def safe_softmax(label: str, claim: str = "") -> Expectation:
    """P3-08: the math backend calls aten::_safe_softmax, whose guard (a fully masked row gives 0, not NaN) adds
    work beside the softmax: isneginf, all, where."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        safe = [[o for o in p.ops if o.name == "aten::_safe_softmax"] for p in phases]
        if not all(safe):
            names = Counter(o.name for o in phases[0].ops if "softmax" in o.name)
            return Outcome(False, f"no aten::_safe_softmax; softmax ops per forward: {_counts(names) or 'none'}")
        inside = Counter(o.name for o in phases[0].ops if "aten::_safe_softmax" in o.path and o.path[-1] == "aten::_safe_softmax")
        extra = [n for n in inside if "softmax" not in n]
        evidence = f"aten::_safe_softmax → {_counts(inside)}"
        if trace.has_gpu:
            kernels = Counter(role(w) for w in launched(phases[0]) if "aten::_safe_softmax" in w.launch_path)
            evidence += f"; its kernels: {_counts(kernels)}"
            extra = extra if sum(kernels.values()) > 1 else []
        return Outcome(bool(extra), evidence)

    return Expectation("aten::_safe_softmax, not aten::softmax: extra work beside the softmax (isneginf, all, where)", check, claim)


# --- the fused backends: one kernel each -------------------------------------------------------------------


def one_attention_kernel(label: str, backend: str, text: str, claim: str = "") -> Expectation:
    """P3-09, P3-10, P3-12: the forward is one kernel of `backend`'s family; its name, decoded, is the evidence."""
    pattern = re.compile(BACKEND_KERNELS[backend])

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if not trace.has_gpu:
            ops = [o.name for o in operations(trace, phases[0])]
            reason = CPU_FLASH if backend == "flash" and "aten::_scaled_dot_product_flash_attention_for_cpu" in ops else NO_GPU
            return Outcome(False, f"no kernels on a CPU; the forward's ops that compute: {', '.join(ops) or 'none'}", reason)
        kernels = [[w for w in launched(p) if w.kind == "kernel"] for p in phases]
        ok = all(len(k) == 1 and pattern.search(k[0].name) for k in kernels)
        if not kernels[0]:
            return Outcome(False, "no kernel in the forward")
        decoded = decode(kernels[0][0].name)
        evidence = f"kernels per forward: {_per_step([len(k) for k in kernels])}: {kernels[0][0].name}"
        if decoded.family:
            evidence += f" = {decoded.describe()}"
        beside = [w.name for w in launched(phases[0]) if w.kind != "kernel"]
        if beside:
            evidence += f"; beside it: {', '.join(beside)}"
        return Outcome(ok, evidence)

    return Expectation(text, check, claim)


def heavy_blocks(label: str, at_most: float = 25.0, claim: str = "") -> Expectation:
    """P3-11: the attention kernel's estimated achieved occupancy is low (the post: ~13% on its A100) because each
    block is heavy by design: its registers × threads (or its shared memory) let only a few blocks on an SM."""

    def check(trace: Trace) -> Outcome:
        kernel = _attention_kernel(trace, label)
        if isinstance(kernel, Outcome):
            return kernel
        fit = footprint(kernel, trace.device_properties)
        if fit is None or kernel.occupancy is None:
            return Outcome(False, f"{decode(kernel.name).short}: no registers, block or occupancy in the trace")
        blocks, limiter, theoretical = fit
        evidence = f"{decode(kernel.name).short}: est. achieved occupancy {kernel.occupancy:g}%; {_footprint_text(kernel, fit)}"
        ok = kernel.occupancy <= at_most and theoretical * 100 <= at_most and "threads" not in limiter
        return Outcome(ok, evidence)

    return Expectation(f"the kernel's estimated occupancy is low (≤ {at_most:g}%): few heavy blocks per SM (registers × threads)", check, claim)


def occupancy_gap(label: str, claim: str = "") -> Expectation:
    """P3-15: cuDNN's kernel shows 0% estimated achieved occupancy, yet it ran and its footprint fits at least one
    block per SM: a gap in CUPTI's estimate for driver-API launches (cuLaunchKernelEx), not an idle GPU."""

    def check(trace: Trace) -> Outcome:
        kernel = _attention_kernel(trace, label)
        if isinstance(kernel, Outcome):
            return kernel
        fit = footprint(kernel, trace.device_properties)
        if fit is None or kernel.occupancy is None:
            return Outcome(False, f"{decode(kernel.name).short}: no registers, block or occupancy in the trace")
        evidence = (
            f"est. achieved occupancy {kernel.occupancy:g}% for a kernel that ran {kernel.dur:,.1f} µs, launched by "
            f"{kernel.runtime}; {_footprint_text(kernel, fit)}"
        )
        same = {decode(w.name).short for step in trace.steps for w in step.kernels
                if w.occupancy == 0 and w is not kernel and w.runtime == kernel.runtime and w.name != kernel.name}
        if same:
            evidence += f"; other kernels launched by {kernel.runtime} show 0% too: {', '.join(sorted(same))}"
        ok = kernel.occupancy == 0 and fit[0] >= 1
        return Outcome(ok, evidence, None if ok or kernel.occupancy == 0 else CUPTI_ESTIMATED)

    return Expectation("0% estimated occupancy, yet the footprint fits a block per SM: a CUPTI gap, not an idle GPU", check, claim)


def _attention_kernel(trace: Trace, label: str) -> GpuWork | Outcome:
    if not trace.has_gpu:
        return Outcome(False, "no kernels in the trace", NO_GPU)
    phases = forwards(trace, label)
    if isinstance(phases, Outcome):
        return phases
    kernels = [w for w in launched(phases[-1]) if w.kind == "kernel"]
    attention = [w for w in kernels if "attention" in decode(w.name).ops]
    if not attention:
        return Outcome(False, f"no attention kernel in the forward: {_names(kernels)}")
    return attention[0]


def _footprint_text(kernel: GpuWork, fit: tuple[int, str, float]) -> str:
    blocks, limiter, theoretical = fit
    threads = math.prod(kernel.block)
    shared = f", {kernel.shared_memory:,} B shared memory" if kernel.shared_memory else ""
    return (
        f"{kernel.registers} registers × {threads} threads{shared} per block: {blocks} block{'s' if blocks != 1 else ''} "
        f"per SM (limited by {limiter}), {theoretical:.1%} of the SM's warps"
    )


def transposes(label: str, n: int, cpu_reason: str | None = None, claim: str = "") -> Expectation:
    """P3-13: `n` aten::transpose per forward on the CPU lane (flash and efficient: 4; cuDNN: none)."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        counts = [_count(p, "aten::transpose") for p in phases]
        ok = all(c == n for c in counts)
        return Outcome(ok, f"aten::transpose: {_per_step(counts)} per forward", None if ok or trace.has_gpu else cpu_reason)

    return Expectation(f"{n if n else 'no'} aten::transpose on the CPU lane per forward", check, claim)


def own_op_allocates_and_launches(label: str, op: str, claim: str = "") -> Expectation:
    """P3-13: inside `op` (cuDNN's `_cudnn_attention_forward`) only allocations (`aten::empty...`) and the launch."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no launches in the trace", NO_GPU)
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        inside = Counter(o.name for o in phases[0].ops if op in o.path)
        calls = Counter(c.name for c in _calls(trace.steps[0], phases[0]) if op in c.launch_path)
        if not any(o.name == op for o in phases[0].ops):
            return Outcome(False, f"no {op} in the forward")
        ok = all(name.startswith("aten::empty") for name in inside) and any("Launch" in c for c in calls)
        return Outcome(ok, f"{op} → ops: {_counts(inside) or 'none'}; runtime calls: {_counts(calls) or 'none'}")

    return Expectation(f"{op} → aten::empty allocations and the kernel's launch, nothing else", check, claim)


def launched_through(label: str, call: str, claim: str = "") -> Expectation:
    """P3-14: the attention kernel's launch call (cuDNN: `cuLaunchKernelEx`, the driver API, not `cudaLaunchKernel`)."""

    def check(trace: Trace) -> Outcome:
        kernel = _attention_kernel(trace, label)
        if isinstance(kernel, Outcome):
            return kernel
        others = Counter(w.runtime for step in trace.steps for w in step.kernels if w.name != kernel.name and w.runtime)
        evidence = f"{decode(kernel.name).short} launched by {kernel.runtime}"
        if others:
            evidence += f"; the trace's other kernels by {_counts(others)}"
        return Outcome(kernel.runtime == call, evidence)

    return Expectation(f"the kernel is launched through {call}", check, claim)


def own_op_costs_most_cpu(label: str, op: str, claim: str = "") -> Expectation:
    """P3-16: the backend's own op (`_cudnn_attention_forward`, where cuDNN picks and runs its plan) has the largest
    self CPU time of the forward's ops."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        fastest = min(phases, key=lambda p: p.dur)
        selfs = Counter()
        for o in fastest.ops:
            if not o.is_label:
                selfs[o.name] += o.self_us
        if op not in selfs:
            return Outcome(False, f"no {op} in the forward")
        top = selfs.most_common(3)
        evidence = f"self CPU in the fastest forward ({fastest.dur:,.1f} µs): " + ", ".join(f"{n} {us:,.1f} µs" for n, us in top)
        return Outcome(top[0][0] == op, evidence)

    return Expectation(f"{op} has the largest self CPU time of the forward's ops (planning and launching)", check, claim)


def backend_ran(label: str, expected: str, why: str, claim: str = "") -> Expectation:
    """Which backend SDPA ran, read from the kernel's name (on a CPU, the op it dispatched to): `expected`."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        ran = [backend_of(trace, p) for p in phases]
        kernels = [w.name for w in launched(phases[0]) if w.kind == "kernel"]
        ops = [o.name for o in phases[0].ops if o.name in BACKEND_OPS]
        shown = f"kernel {decode(kernels[0]).short}" if len(kernels) == 1 else f"{len(kernels)} kernels" if kernels else f"op {', '.join(ops)}"
        return Outcome(all(r == expected for r in ran), f"{ran[0]} ran ({shown})")

    return Expectation(f"SDPA runs its {expected} backend ({why})", check, claim)


# --- the backends side by side: P3-16 ---------------------------------------------------------------------------


def fastest_on_gpu(label: str, traces: Mapping[str, Path], expected: str, missing: Callable[[str], str], claim: str = "") -> Expectation:
    """P3-16: of the fused backends' traces, `expected`'s forward takes the least GPU time (the post's A100: flash,
    146.8 µs against cuDNN's 186.3 and efficient's 277.9)."""

    def check(trace: Trace) -> Outcome:
        rows = _rows(trace, label, traces, missing)
        if isinstance(rows, Outcome):
            return rows
        fastest = min(rows, key=lambda b: rows[b].gpu_us)
        evidence = "GPU per forward: " + ", ".join(f"{b} {rows[b].gpu_us:,.1f} µs" for b in sorted(rows, key=lambda b: rows[b].gpu_us))
        reason = HOPPER_CUDNN if fastest == "cudnn" and expected == "flash" and _on_hopper(trace) else None
        return Outcome(fastest == expected, evidence, reason)

    return Expectation(f"{expected} is the fastest of {', '.join(traces)} on the GPU at this shape (A100: flash)", check, claim)


def most_cpu_in_own_op(label: str, traces: Mapping[str, Path], expected: str, missing: Callable[[str], str], claim: str = "") -> Expectation:
    """P3-16: of the fused backends, `expected` spends the most CPU in its own op (`_cudnn_attention_forward`:
    finding and running its plan on each call): the op's self time (its allocations and launch calls left out),
    in the fastest forward of each trace."""

    def check(trace: Trace) -> Outcome:
        rows = _rows(trace, label, traces, missing)
        if isinstance(rows, Outcome):
            return rows
        costs = {b: _own_op_cpu(_trace_at(trace, traces[b]), label, BACKEND_OWN_OPS[b]) for b in traces}
        if any(v is None for v in costs.values()):
            return Outcome(False, "a backend's own op is missing: " + ", ".join(b for b, v in costs.items() if v is None))
        most = max(costs, key=costs.get)
        evidence = "own op's self CPU per forward (fastest step): " + ", ".join(
            f"{BACKEND_OWN_OPS[b].removeprefix('aten::')} {costs[b]:,.1f} µs" for b in sorted(costs, key=costs.get, reverse=True)
        )
        evidence += "; the whole forward's CPU: " + ", ".join(f"{b} {rows[b].cpu_us:,.1f} µs" for b in rows)
        return Outcome(most == expected, evidence)

    return Expectation(f"{expected} spends the most CPU of {', '.join(traces)} in its own op (its plan, each call)", check, claim)


def pinning_costs_cpu(label: str, pinned: Path, unpinned: Path, missing: Callable[[str], str], claim: str = "") -> Expectation:
    """P3-16 on an H200: the same cuDNN kernel, pinned with sdpa_kernel(...) and unpinned; the pinned forward spends
    more CPU outside the SDPA op (entering and leaving sdpa_kernel on each call)."""

    def check(trace: Trace) -> Outcome:
        both = {}
        for name, path in (("pinned", pinned), ("unpinned", unpinned)):
            other = _read(trace, path, f"the {name} run's trace", missing(name), itself_ok=True)
            if isinstance(other, Outcome):
                return other
            both[name] = other
        outside = {name: _outside_sdpa(t, label) for name, t in both.items()}
        if any(v is None for v in outside.values()):
            return Outcome(False, f"no aten::scaled_dot_product_attention inside {label} in one of the traces")
        kernels = {name: summarize(t, label).backend for name, t in both.items()}
        evidence = (
            f"CPU per forward outside the SDPA op (fastest step): pinned {outside['pinned']:,.1f} µs, unpinned "
            f"{outside['unpinned']:,.1f} µs; backends: pinned {kernels['pinned']}, unpinned {kernels['unpinned']}"
        )
        ok = outside["pinned"] > outside["unpinned"] and kernels["pinned"] == kernels["unpinned"]
        return Outcome(ok, evidence + (f": {PINNED_CPU}" if ok else ""))

    return Expectation("pinning the backend SDPA would pick anyway costs CPU time the unpinned call does not", check, claim)


def _rows(trace: Trace, label: str, traces: Mapping[str, Path], missing: Callable[[str], str]) -> dict[str, ForwardSummary] | Outcome:
    if not trace.has_gpu:
        return Outcome(False, "no GPU work in the trace", CPU_NO_FUSED)
    rows = {}
    for backend, path in traces.items():
        other = _read(trace, path, f"the {backend} backend's trace", missing(backend), itself_ok=True)
        if isinstance(other, Outcome):
            return other
        row = summarize(other, label, backend)
        if row is None:
            return Outcome(False, f"no {label} in {path.name}")
        rows[backend] = row
    return rows


def _own_op_cpu(trace: Trace, label: str, op: str) -> float | None:
    phases = forwards(trace, label)
    times = [sum(o.self_us for o in p.ops if o.name == op) for p in phases] if not isinstance(phases, Outcome) else []
    return min(times) if times and all(times) else None


def _outside_sdpa(trace: Trace, label: str) -> float | None:
    phases = forwards(trace, label)
    if isinstance(phases, Outcome):
        return None
    sdpa = [[o for o in p.ops if o.name == "aten::scaled_dot_product_attention"] for p in phases]
    if not all(sdpa):
        return None
    return min(p.dur - sum(o.dur for o in ops) for p, ops in zip(phases, sdpa))


def _on_hopper(trace: Trace) -> bool:
    return trace.device_properties.get("computeMajor") == 9 or "sm90" in (trace.device or "")


# --- 04_d: the Hub's FlashAttention-2 against SDPA's --------------------------------------------------------------


def same_kernel_family_as(other: Path, label: str, other_label: str, missing: str, claim: str = "") -> Expectation:
    """Lesson 04_d against 04_c's flash backend: the Hub's kernel and torch's are both FlashAttention-2 (the same
    algorithm, and the same tile and warps when built from the same source); their GPU times side by side."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no kernels in the trace", NO_GPU)
        theirs = _read(trace, other, "04_c's flash-backend trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        ours_k, their_k = _attention_kernel(trace, label), _attention_kernel(theirs, other_label)
        if isinstance(ours_k, Outcome) or isinstance(their_k, Outcome):
            return ours_k if isinstance(ours_k, Outcome) else their_k
        a, b = decode(ours_k.name), decode(their_k.name)
        times = summarize(trace, label).gpu_us, summarize(theirs, other_label).gpu_us
        same = "byte-identical names" if ours_k.name == their_k.name else f"{a.short} here, {b.short} there"
        evidence = f"{same}; GPU per forward {times[0]:,.1f} µs here, {times[1]:,.1f} µs in {other.name}"
        return Outcome(a.family.startswith("FlashAttention-2") and b.family.startswith("FlashAttention-2"), evidence)

    return Expectation("the same algorithm as SDPA's flash backend (04_c): a FlashAttention-2 kernel in both", check, claim)


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


# --- helpers -----------------------------------------------------------------------------------------------------


def _read(trace: Trace, path: Path, what: str, missing: str, itself_ok: bool = False) -> Trace | Outcome:
    """Another lesson's trace, or the Outcome that skips the check and says what to run."""
    path = Path(path)
    if path.resolve() == trace.path.resolve():
        return trace if itself_ok else Outcome(None, f"skipped: {path.name} is {what} itself")
    if not path.is_file():
        return Outcome(None, f"skipped: {what} is not at {path}: {missing}")
    return read_trace(path)


def _trace_at(trace: Trace, path: Path) -> Trace:
    return trace if Path(path).resolve() == trace.path.resolve() else read_trace(path)


def _calls(step: Step, phase: Phase) -> list:
    return [c for c in step.runtime if phase.ts <= c.ts <= phase.end]


def _count(phase: Phase, name: str) -> int:
    return sum(o.name == name for o in phase.ops)


def _names(work: Sequence[GpuWork]) -> str:
    return _counts(Counter(w.short_name for w in work)) or "none"


def _counts(counts: Counter) -> str:
    return ", ".join(f"{name} ×{n:g}" if n != 1 else str(name) for name, n in counts.items())


def _per_step(counts: Sequence[int]) -> str:
    return f"{counts[0]} in each of {len(counts)} steps" if len(set(counts)) == 1 else " / ".join(str(c) for c in counts)
