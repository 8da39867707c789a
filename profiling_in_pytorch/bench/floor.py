"""What a launch costs the CPU on this host, measured in the run: the floor under every variant's CPU µs.

A forward of n kernels cannot be issued in less than n launches' worth of host time. Three launches set it:

    an ATen op       torch.add on 16 elements: the dispatcher, an allocation, cudaLaunchKernel (eager's unit)
    kernel[grid]     an empty Triton kernel from Python: Triton binds and specializes its argument at every call
    ready launch     the same kernel through its compiled launcher (mlp/triton_ops/launch.py's ReadyLaunch)

Each is issued back to back with the GPU running far ahead of nothing (the kernels take a few µs, less than their
launch), so the host clock over a loop is the CPU's cost alone. `host_cost_lines` then reads each variant's CPU µs
per forward against the launches the profile counted in it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from profiling_in_pytorch.bench.prose import count
from profiling_in_pytorch.bench.rows import Row
from profiling_in_pytorch.timers import percentile

FLOOR_CALLS = 2000  # per loop: well past the first calls' noise, a few tens of ms
FLOOR_LOOPS = 7  # the median counts


@dataclass(frozen=True)
class LaunchFloor:
    """CPU µs to issue one launch on this host, each the median of FLOOR_LOOPS loops."""

    aten_op_us: float
    triton_launch_us: float  # kernel[grid](...)
    ready_launch_us: float  # the compiled kernel's own launcher, as ReadyLaunch calls it


def _issue_us(call) -> float:
    for _ in range(200):
        call()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(FLOOR_LOOPS):
        start = time.perf_counter()
        for _ in range(FLOOR_CALLS):
            call()
        per_call.append((time.perf_counter() - start) * 1e6 / FLOOR_CALLS)
        torch.cuda.synchronize()
    return percentile(per_call, 50)


def measure_launch_floor() -> LaunchFloor:
    import triton

    from profiling_in_pytorch.mlp.triton_ops.launch import ReadyLaunch

    @triton.jit
    def empty_kernel(x_ptr):  # no annotations: the JIT resolves names in the module's globals, not in here
        pass

    a, b = torch.ones(16, device="cuda"), torch.ones(16, device="cuda")
    aten = _issue_us(lambda: torch.add(a, b))
    launch = _issue_us(lambda: empty_kernel[(1,)](a))
    ready = ReadyLaunch(empty_kernel, (1,), [a], {}, ("x_ptr",))
    return LaunchFloor(aten, launch, _issue_us(lambda: ready(a)))


def floor_line(floor: LaunchFloor) -> str:
    # the backslash before [grid]: rich would read it as markup and drop it
    return (f"launch floor on this host (CPU µs to issue one): an ATen op {floor.aten_op_us:,.1f}, an empty Triton "
            f"kernel through kernel\\[grid] {floor.triton_launch_us:,.1f}, through its compiled launcher "
            f"{floor.ready_launch_us:,.1f}")


def host_cost_lines(rows: list[Row], floor: LaunchFloor) -> list[str]:
    """Per variant of one shape: CPU µs to issue a forward, its launches, and what that is per launch against
    the floor (an ATen op's cost: what eager pays per kernel)."""
    lines = []
    for row in rows:
        if row.status != "ok" or row.cpu_us is None or not row.launches:
            continue
        per_launch = row.cpu_us / row.launches
        lines.append(f"  {row.variant}: {row.cpu_us:,.1f} µs for {count(row.launches)} launches, "
                     f"{per_launch:,.1f} µs each ({per_launch / floor.aten_op_us:.1f}× an ATen op's)")
    return lines
