"""The decode goals of the captured variants, judged on the numbers of the run that prints them.

Set on an H200 in bf16 at the decode shape (8 tokens, 768 -> 3072), where eager issues a forward in about 70 µs
for 25 µs of GPU work: replayed from a CUDA graph, a forward should go at the GPU's pace. Timing depends on the
machine, so the goals live in the benchmark's output, beside the numbers, and never in a test.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape

from profiling_in_pytorch.bench.rows import Row


@dataclass(frozen=True)
class Goal:
    variant: str
    max_loop_us: float  # µs per forward, forwards back to back
    min_gpu_busy: float | None = None  # GPU busy over the loop's time per forward


GOAL_SHAPE = "decode"
GOAL_SETTING = "an H200 in bf16"
GOALS = (
    Goal("fused-graph", 15.0, min_gpu_busy=0.8),
    Goal("cuda-graph", 25.0),
)


def goal_lines(rows: list[Row], device: str, dtype: str) -> list[str]:
    """Each goal against this run's decode rows: ✓ or ✗ with the numbers and eager's loop beside them; nothing
    when the run did not measure the decode shape."""
    at_shape = {r.variant: r for r in rows if r.shape == GOAL_SHAPE}
    if not at_shape:
        return []
    here = f"this run: {device}, {dtype}"
    lines = [f"\n[bold]Goals[/bold] at the decode shape, forwards back to back (set on {GOAL_SETTING}; {escape(here)})"]
    eager = at_shape.get("eager")
    for goal in GOALS:
        row = at_shape.get(goal.variant)
        if row is None:
            lines.append(f"  – {goal.variant}: not in this run (--variants)")
            continue
        if row.status != "ok" or row.loop_us is None:
            why = row.reason or "no loop timing (a GPU measures it)"
            lines.append(f"  – {goal.variant}: not measured ({row.status}: {escape(why)})")
            continue
        met = row.loop_us <= goal.max_loop_us
        text = f"{goal.variant}: {row.loop_us:,.1f} µs per forward (goal ≤ {goal.max_loop_us:g})"
        if row.loop_p20_us is not None and row.loop_p80_us is not None:
            text += f", p20–p80 {row.loop_p20_us:,.1f}–{row.loop_p80_us:,.1f} over {row.loops} loops"
        if eager is not None and eager.status == "ok" and eager.loop_us:
            text += f", eager {eager.loop_us:,.1f} µs in this run ({eager.loop_us / row.loop_us:.1f}×)"
        if goal.min_gpu_busy is not None:
            busy = row.gpu_busy_fraction
            busy_met = busy is not None and busy >= goal.min_gpu_busy
            met = met and busy_met
            shown = f"{busy:.1%}" if busy is not None else "not counted"  # 79.8% is not 80%, and says so
            text += f"; GPU busy {shown} of the loop (goal ≥ {goal.min_gpu_busy:.0%})"
        if not met and row.paced_by == "CPU" and row.cpu_us is not None:  # the miss is the host's time to issue
            text += f"; the CPU set the pace: {row.cpu_us:,.1f} µs to issue a forward"
        lines.append(f"  {'[green]✓[/green]' if met else '[red]✗[/red]'} {text}")
    return lines


# The FP8 rung's goals (issue #32, lesson 10), on an H100 or H200 in bf16 in and out: against the fused bf16
# module and the best other FP8 variant measured in the same run, GPU time per forward (L2 flushed).
FP8_GOALS = (  # shape, the least speedup over fused (bf16), and over the best other FP8 variant (None: no goal)
    ("post", 1.35, 1.2),
    ("7B layer", 1.5, None),
)


def fp8_goal_lines(rows: list[Row], device: str) -> list[str]:
    """fused-fp8 against fused and the other FP8 variants of the same run, per goal shape; nothing when the run
    did not time fused-fp8."""
    lines = []
    for shape, over_bf16, over_fp8 in FP8_GOALS:
        at_shape = {r.variant: r for r in rows if r.shape == shape and r.status == "ok" and r.time_us}
        ours = at_shape.get("fused-fp8")
        if ours is None:
            continue
        if not lines:
            lines.append(f"\n[bold]FP8 goals[/bold], GPU time per forward ({escape(device)})")
        parts, met = [f"fused-fp8 {ours.time_us:,.1f} µs"], True
        bf16 = at_shape.get("fused")
        if bf16 is not None:
            ratio = bf16.time_us / ours.time_us
            met &= ratio >= over_bf16
            parts.append(f"{ratio:.2f}× fused bf16 ({bf16.time_us:,.1f} µs; goal ≥ {over_bf16:g}×)")
        others = [r for r in at_shape.values() if r.fp8 and r.variant != "fused-fp8"]
        if over_fp8 is not None and others:
            best = min(others, key=lambda r: r.time_us)
            ratio = best.time_us / ours.time_us
            met &= ratio >= over_fp8
            parts.append(f"{ratio:.2f}× the best other FP8, {best.variant} ({best.time_us:,.1f} µs; goal ≥ {over_fp8:g}×)")
        if bf16 is None:
            met = False
            parts.append("fused (bf16) not timed: add it to --variants")
        lines.append(f"  {'[green]✓[/green]' if met else '[red]✗[/red]'} {shape}: " + ", ".join(parts))
    return lines


# The launch goals (lesson 05's and 10's modules through their ready launches, mlp/triton_ops/launch.py), set on an
# H200 in bf16 at the post's shape, where through kernel[grid] the fused module took 107 µs of CPU to issue a
# forward and the fused FP8 one 260, against eager's 85: the fused kernels won on the GPU and lost in a loop.
LAUNCH_GOAL_SHAPE = "post"
LAUNCH_GOALS = (  # variant, most CPU µs as a share of eager's, fewest × eager in a loop
    ("fused", 0.5, 1.35),
    ("fused-fp8", 0.8, 1.8),
)
# In a loop, µs per forward at most this × the GPU's time inside the forwards of the same loop
# (`timers.busy_in_loop`): the CPU never makes it wait. Not × the GPU µs column: that is timed with the L2 flushed
# and the GPU idle between calls, where a power-limited GPU clocks higher than back to back (the H200's fused
# forward: 167 µs there at 1,975 MHz, 184 µs back to back at about 1,740 MHz; docs/launch-cost.md). Both are printed.
GPU_BOUND_LOOP = 1.05


def launch_goal_lines(rows: list[Row], train: bool = False) -> list[str]:
    """The launch goals against this run's rows at the post's shape (training: the fused variant issues a call in
    no more CPU time than eager); nothing when the run did not measure them."""
    at_shape = {r.variant: r for r in rows if r.shape == LAUNCH_GOAL_SHAPE and r.status == "ok" and r.cpu_us}
    eager = at_shape.get("eager")
    goals = (("fused", 1.0, None),) if train else LAUNCH_GOALS
    if eager is None or not any(name in at_shape for name, _, _ in goals):
        return []
    lines = [f"\n[bold]Launch goals[/bold] at the post's shape ({'forward + backward' if train else 'forward'}; "
             f"eager issues a call in {eager.cpu_us:,.1f} µs of CPU)"]
    for name, cpu_share, loop_speedup in goals:
        row = at_shape.get(name)
        if row is None:
            continue
        met = row.cpu_us <= cpu_share * eager.cpu_us
        parts = [f"CPU {row.cpu_us:,.1f} µs = {row.cpu_us / eager.cpu_us:.2f}× eager's (goal ≤ {cpu_share:g}×)"]
        if not train:
            loop = (f"loop {row.loop_us:,.1f} µs = {row.loop_us / row.time_us:.2f}× its GPU µs "
                    "(L2 flushed, idle between)")
            if row.busy_loop_us and row.busy_in_loop_us:
                # Both: a CPU slower than the GPU makes it wait inside forwards too, which the events count as busy.
                ratio, ahead = row.busy_loop_us / row.busy_in_loop_us, row.cpu_us < row.busy_in_loop_us
                met &= ratio <= GPU_BOUND_LOOP and ahead
                side = "below" if ahead else "above"
                loop += (f"; timed forward by forward, {ratio:.2f}× the GPU's {row.busy_in_loop_us:,.1f} µs inside "
                         f"each (goal ≤ {GPU_BOUND_LOOP:g}×, the CPU's {row.cpu_us:,.1f} µs {side} it)")
            else:
                met = False
                loop += "; the loop not timed forward by forward (goal not judged)"
            parts.append(loop)
            if row.loop_speedup is not None:
                met &= row.loop_speedup >= loop_speedup
                parts.append(f"{row.loop_speedup:.2f}× eager in a loop (goal ≥ {loop_speedup:g}×)")
        lines.append(f"  {'[green]✓[/green]' if met else '[red]✗[/red]'} {name}: " + ", ".join(parts))
    return lines
