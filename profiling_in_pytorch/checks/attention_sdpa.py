"""SDPA's backends as checks of a trace (lessons 04_c and 04_d): the math backend against the naive forward
(P3-04 … P3-08), the fused backends' one kernel each (P3-09, P3-10, P3-12 … P3-14), the backends side by side
(P3-16), and the Hub's FlashAttention-2 against SDPA's flash backend (04_d).

Which backend ran is read from the kernel's name on a GPU, from the op SDPA dispatched to on a CPU
(`backend_of` in `checks/attention.py`, with how a forward is read). The attention kernel's footprint and
occupancy (P3-11, P3-15) are `checks/attention_occupancy.py`'s.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Callable, Mapping

from profiling_in_pytorch.checks.attention import (
    BACKEND_KERNELS,
    BACKEND_OPS,
    BACKEND_OWN_OPS,
    ForwardSummary,
    attention_kernel,
    backend_of,
    calls_in,
    forwards,
    launched,
    op_count,
    operations,
    per_step,
    read_lesson_trace,
    role,
    summarize,
    tally,
    trace_at,
)
from profiling_in_pytorch.checks.base import NO_GPU, Expectation, Outcome
from trace_report.kernels import decode, math_unit
from trace_report.model import Phase, Trace

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


# --- SDPA's math backend, against the naive forward -------------------------------------------------------------


def gpu_time_against(other: Path, label: str, other_label: str, at_least: float, missing: str, claim: str = "") -> Expectation:
    """P3-04: this forward takes at least `at_least`× the GPU time of the other trace's (the post: SDPA's math
    backend 7.24 ms against the in-place forward's 1.96 ms on its A100, 3.7×)."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        theirs = read_lesson_trace(trace, other, "04_b's in-place trace", missing)
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
        theirs = read_lesson_trace(trace, other, "04_b's in-place trace", missing)
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
        theirs = read_lesson_trace(trace, other, "04_b's in-place trace", missing)
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
        evidence = f"per forward: {tally(seen[0]) or 'none of ' + ', '.join(ops)}"
        if trace.has_gpu:
            roles = Counter(role(w) for w in launched(phases[0]))
            kernels = {r: roles[r] for r in ("tril", "where", "add") if roles[r]}
            ok = ok and all(Counter(role(w) for w in launched(p))["tril"] == 1 for p in phases) and roles["where"] >= 1
            evidence += f"; on the GPU: {tally(Counter(kernels)) or 'no tril or where kernel'}"
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
            return Outcome(False, f"no aten::_safe_softmax; softmax ops per forward: {tally(names) or 'none'}")
        inside = Counter(o.name for o in phases[0].ops if "aten::_safe_softmax" in o.path and o.path[-1] == "aten::_safe_softmax")
        extra = [n for n in inside if "softmax" not in n]
        evidence = f"aten::_safe_softmax → {tally(inside)}"
        if trace.has_gpu:
            kernels = Counter(role(w) for w in launched(phases[0]) if "aten::_safe_softmax" in w.launch_path)
            evidence += f"; its kernels: {tally(kernels)}"
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
        evidence = f"kernels per forward: {per_step([len(k) for k in kernels])}: {kernels[0][0].name}"
        if decoded.family:
            evidence += f" = {decoded.describe()}"
        beside = [w.name for w in launched(phases[0]) if w.kind != "kernel"]
        if beside:
            evidence += f"; beside it: {', '.join(beside)}"
        return Outcome(ok, evidence)

    return Expectation(text, check, claim)


def transposes(label: str, n: int, cpu_reason: str | None = None, claim: str = "") -> Expectation:
    """P3-13: `n` aten::transpose per forward on the CPU lane (flash and efficient: 4; cuDNN: none)."""

    def check(trace: Trace) -> Outcome:
        phases = forwards(trace, label)
        if isinstance(phases, Outcome):
            return phases
        counts = [op_count(p, "aten::transpose") for p in phases]
        ok = all(c == n for c in counts)
        return Outcome(ok, f"aten::transpose: {per_step(counts)} per forward", None if ok or trace.has_gpu else cpu_reason)

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
        calls = Counter(c.name for c in calls_in(trace.steps[0], phases[0]) if op in c.launch_path)
        if not any(o.name == op for o in phases[0].ops):
            return Outcome(False, f"no {op} in the forward")
        ok = all(name.startswith("aten::empty") for name in inside) and any("Launch" in c for c in calls)
        return Outcome(ok, f"{op} → ops: {tally(inside) or 'none'}; runtime calls: {tally(calls) or 'none'}")

    return Expectation(f"{op} → aten::empty allocations and the kernel's launch, nothing else", check, claim)


def launched_through(label: str, call: str, claim: str = "") -> Expectation:
    """P3-14: the attention kernel's launch call (cuDNN: `cuLaunchKernelEx`, the driver API, not `cudaLaunchKernel`)."""

    def check(trace: Trace) -> Outcome:
        kernel = attention_kernel(trace, label)
        if isinstance(kernel, Outcome):
            return kernel
        others = Counter(w.runtime for step in trace.steps for w in step.kernels if w.name != kernel.name and w.runtime)
        evidence = f"{decode(kernel.name).short} launched by {kernel.runtime}"
        if others:
            evidence += f"; the trace's other kernels by {tally(others)}"
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
        costs = {b: _own_op_cpu(trace_at(trace, traces[b]), label, BACKEND_OWN_OPS[b]) for b in traces}
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
            other = read_lesson_trace(trace, path, f"the {name} run's trace", missing(name), itself_ok=True)
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
        other = read_lesson_trace(trace, path, f"the {backend} backend's trace", missing(backend), itself_ok=True)
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
        theirs = read_lesson_trace(trace, other, "04_c's flash-backend trace", missing)
        if isinstance(theirs, Outcome):
            return theirs
        ours_k, their_k = attention_kernel(trace, label), attention_kernel(theirs, other_label)
        if isinstance(ours_k, Outcome) or isinstance(their_k, Outcome):
            return ours_k if isinstance(ours_k, Outcome) else their_k
        a, b = decode(ours_k.name), decode(their_k.name)
        times = summarize(trace, label).gpu_us, summarize(theirs, other_label).gpu_us
        same = "byte-identical names" if ours_k.name == their_k.name else f"{a.short} here, {b.short} there"
        evidence = f"{same}; GPU per forward {times[0]:,.1f} µs here, {times[1]:,.1f} µs in {other.name}"
        return Outcome(a.family.startswith("FlashAttention-2") and b.family.startswith("FlashAttention-2"), evidence)

    return Expectation("the same algorithm as SDPA's flash backend (04_c): a FlashAttention-2 kernel in both", check, claim)
