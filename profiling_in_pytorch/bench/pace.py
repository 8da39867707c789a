"""Who sets the pace at a shape, the CPU issuing a forward or the GPU running it, and what each variant changes.

The rule is trace-report's verdict (`trace_report.pace.verdict`) with its thresholds, `STARVED_SHARE` and
`CLOSE_TO_LINE`, applied to numbers taken without the profiler where it would distort them: what issuing one
forward costs the CPU in a back-to-back loop (the profiler adds CPU time to every op), against the GPU's busy time
per forward from the profile. "CPU" is the verdict's overhead-bound, "GPU" its compute-bound.
"""

from __future__ import annotations

from profiling_in_pytorch.bench.prose import ABOVE_CEILING, count
from profiling_in_pytorch.bench.rows import Row
from profiling_in_pytorch.bench.shapes import Shape
from trace_report.pace import CLOSE_TO_LINE, paced_by_timing


def paced_by(cpu_us: float, gpu_busy_us: float, loop_us: float) -> str:
    """"CPU" when issuing a forward takes longer than running it, or the GPU idled STARVED_SHARE of the loop
    (`pace.paced_by_timing`, the rule every unprofiled timing is judged by)."""
    return "CPU" if paced_by_timing(cpu_us, gpu_busy_us, loop_us) == "overhead-bound" else "GPU"


def close_to_line(row: Row) -> str:
    """The verdict's caveat, when GPU work over CPU issue time is within CLOSE_TO_LINE; else ''."""
    ratio = row.gpu_busy_us / row.cpu_us if row.cpu_us else float("inf")
    if CLOSE_TO_LINE[0] <= ratio <= CLOSE_TO_LINE[1]:
        return f" (close to the line: {ratio:.2f}x as much GPU work as CPU issue time, both sides matter)"
    return ""


def pace_story(shape: Shape, rows: list[Row], per_call: dict[str, str]) -> list[str]:
    """Who sets the pace at this shape, and what each variant changes about it, from the measured numbers.

    `per_call`: for each variant, what runs on the CPU at every call besides launching kernels.
    """
    ok = {r.variant: r for r in rows if r.status == "ok" and r.paced_by is not None}
    eager = ok.get("eager")
    if eager is None:
        return []
    lines = []
    if eager.paced_by == "CPU":
        why = (
            f"issuing them costs the CPU {eager.cpu_us:,.1f} µs" if eager.cpu_us > eager.gpu_busy_us
            else f"the GPU waits for the next launch {1 - eager.gpu_busy_fraction:.0%} of the time"
        )
        lines.append(
            f"[bold]{shape.name}[/bold]: launch-bound. Eager's {count(eager.kernels)} kernels keep the GPU busy "
            f"{eager.gpu_busy_us:,.1f} µs per forward, but {why}, so "
            f"forwards in a loop go at the CPU's pace (GPU busy {eager.gpu_busy_fraction:.0%}){close_to_line(eager)}. "
            "Fewer kernels only help if they also cost the CPU less:"
        )
    else:
        best = max(ok.values(), key=lambda r: r.speedup or 0)
        lines.append(
            f"[bold]{shape.name}[/bold]: GPU-bound. The CPU issues a forward in {eager.cpu_us:,.1f} µs while the GPU "
            f"works {eager.gpu_busy_us:,.1f} µs{close_to_line(eager)}, so launch costs hide and the kernels decide: "
            f"fastest is {best.variant} at {best.tflops:,.0f} TFLOP/s, {of_gemm_rate(best.matmul_share)}."
        )
    for name, row in ok.items():
        if name == "eager" or eager.paced_by != "CPU":
            continue
        lines.append(
            f"  {name}: {count(row.kernels)} kernels from {count(row.launches)} launches, {row.cpu_us:,.1f} µs of "
            f"CPU per forward ({per_call.get(name, '')}) → {row.loop_speedup:.2f}× eager in a loop "
            f"(GPU time alone: {row.speedup:.2f}×)"
        )
    return lines


def of_gemm_rate(matmul_share: float) -> str:
    """The fastest variant's share of the GEMM ceiling, in words; above it, only that the ceiling read low."""
    if matmul_share > 1:
        return f"above the GEMM rate measured in this run ({ABOVE_CEILING}: that rate was measured low)"
    return f"{matmul_share:.0%} of this GPU's GEMM rate"
