"""The attention kernel's footprint on an SM and its estimated occupancy (P3-11, P3-15), from the launch's
registers, block and shared memory in the trace and the device's limits in its deviceProperties.

The fused kernels are heavy by design (many registers per thread, large tiles in shared memory), so few of their
blocks fit on an SM: a low occupancy is what they are built for (P3-11). cuDNN's kernel, launched through the driver
API, shows 0% where its footprint fits a block: CUPTI's estimate has a gap there (P3-15).
"""

from __future__ import annotations

import math
from typing import Mapping

from profiling_in_pytorch.checks.attention import attention_kernel
from profiling_in_pytorch.checks.base import Expectation, Outcome
from trace_report.kernels import decode
from trace_report.model import GpuWork, Trace

REGISTER_GRANULE = 256  # registers are allocated per warp in units of 256 (sm80 and sm90)
RESERVED_SHARED = 1024  # shared memory the driver keeps per block on sm80 and later
MAX_BLOCKS_PER_SM = 32
CUPTI_ESTIMATED = "CUPTI estimated this launch's occupancy here (the post's A100 gave none for cuDNN's)"


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


def heavy_blocks(label: str, at_most: float = 25.0, claim: str = "") -> Expectation:
    """P3-11: the attention kernel's estimated achieved occupancy is low (the post: ~13% on its A100) because each
    block is heavy by design: its registers × threads (or its shared memory) let only a few blocks on an SM."""

    def check(trace: Trace) -> Outcome:
        found = _kernel_and_fit(trace, label)
        if isinstance(found, Outcome):
            return found
        kernel, fit = found
        blocks, limiter, theoretical = fit
        evidence = f"{decode(kernel.name).short}: est. achieved occupancy {kernel.occupancy:g}%; {_footprint_text(kernel, fit)}"
        ok = kernel.occupancy <= at_most and theoretical * 100 <= at_most and "threads" not in limiter
        return Outcome(ok, evidence)

    return Expectation(f"the kernel's estimated occupancy is low (≤ {at_most:g}%): few heavy blocks per SM (registers × threads)", check, claim)


def occupancy_gap(label: str, claim: str = "") -> Expectation:
    """P3-15: cuDNN's kernel shows 0% estimated achieved occupancy, yet it ran and its footprint fits at least one
    block per SM: a gap in CUPTI's estimate for driver-API launches (cuLaunchKernelEx), not an idle GPU."""

    def check(trace: Trace) -> Outcome:
        found = _kernel_and_fit(trace, label)
        if isinstance(found, Outcome):
            return found
        kernel, fit = found
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


def _kernel_and_fit(trace: Trace, label: str) -> tuple[GpuWork, tuple[int, str, float]] | Outcome:
    """The attention kernel of the labelled forward and its footprint, or the Outcome that says why there is none."""
    kernel = attention_kernel(trace, label)
    if isinstance(kernel, Outcome):
        return kernel
    fit = footprint(kernel, trace.device_properties)
    if fit is None or kernel.occupancy is None:
        return Outcome(False, f"{decode(kernel.name).short}: no registers, block or occupancy in the trace")
    return kernel, fit


def _footprint_text(kernel: GpuWork, fit: tuple[int, str, float]) -> str:
    blocks, limiter, theoretical = fit
    threads = math.prod(kernel.block)
    shared = f", {kernel.shared_memory:,} B shared memory" if kernel.shared_memory else ""
    return (
        f"{kernel.registers} registers × {threads} threads{shared} per block: {blocks} block{'s' if blocks != 1 else ''} "
        f"per SM (limited by {limiter}), {theoretical:.1%} of the SM's warps"
    )
