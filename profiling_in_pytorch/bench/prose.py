"""What a run says in words: the legend under its title, a line per measured variant, and the lines under a table.

Who sets the pace, the words after the tables on a GPU, is `profiling_in_pytorch/bench/pace.py`.
"""

from __future__ import annotations

from rich.markup import escape

from profiling_in_pytorch.bench.rows import Row


def legend(on_gpu: bool, dtype_label: str, tolerance: float) -> str:
    """How each column was measured, printed dim under the run's title."""
    timer = (
        "GPU µs: CUDA events around each forward, after a 256 MB memset (L2 flushed) and a spin kernel that "
        "hides the CPU's issue time; loop µs: CUDA events around forwards issued back to back (L2 warm); CPU µs: "
        "host time to issue one forward in that loop. "
        if on_gpu else
        "µs: time.perf_counter around each forward (the CPU runs it). No GPU: no kernels, launches or GPU memory. "
    )
    return (
        f"[dim]{timer}% matmul: TFLOP/s over a large GEMM's (the best of short bursts, one after each variant); "
        "% floor: the fastest possible forward (its FLOPs at that GEMM rate, or its weights and activations moved "
        "once at copy speed) over the measured time. "
        f"Checked against fp32: ‖out−ref‖/‖ref‖ ≤ {tolerance:g} ({dtype_label}).[/dim]"
    )


def train_legend(on_gpu: bool, dtype_label: str, tolerance: float) -> str:
    """Training mode's legend: what one call does, how it is timed, what the memory columns count."""
    timer = (
        "GPU µs: CUDA events around each call, after a 256 MB memset (L2 flushed) and a spin kernel that hides "
        "the CPU's issue time; loop µs: calls issued back to back; CPU µs: host time to issue one in that loop; peak MiB: torch.cuda.max_memory_allocated during one call above what was allocated "
        "before it. "
        if on_gpu else
        "µs: time.perf_counter around each call (the CPU runs it); peak MiB: n/a (no GPU allocator to ask). "
    )
    return (
        "[dim]Training mode: a call sets the gradients to None, runs the forward on an x that requires grad and "
        f"y.backward(dy) with a fixed dy (no loss). {timer}saved: what the forward keeps for the backward (x and "
        "the activations, counted by autograd's saved-tensor hooks; weights left out). Checked against fp32: the "
        f"output, x's gradient and each weight's, ‖got−ref‖/‖ref‖ ≤ {tolerance:g} ({dtype_label}).[/dim]"
    )


def count(value: float) -> str:
    """Kernels or launches per forward, an average over the profiled steps: whole where it is whole (5), one
    decimal where it is not (16 kernels in 3 steps: 5.3)."""
    return f"{round(value)}" if abs(value - round(value)) < 1e-6 else f"{value:.1f}"


ABOVE_CEILING = ">100*"


def share(value: float | None) -> str:
    """A share of a ceiling, in %; above 100 it says only that the ceiling was measured low (see above_ceiling)."""
    if value is None:
        return "—"
    return ABOVE_CEILING if value > 1 else f"{value * 100:.1f}"


def above_ceiling(rows: list[Row], ceilings) -> list[str]:
    """Under a table where a share exceeds 100%: why that is no measurement of the variant (`ceilings.Ceilings`)."""
    high = [r.variant for r in rows if (r.matmul_share or 0) > 1 or (r.roofline_share or 0) > 1]
    if not high:
        return []
    bursts = ceilings.matmul_bursts or (ceilings.matmul_tflops,)
    return [
        f"  [yellow]{ABOVE_CEILING}[/yellow] {', '.join(high)}: faster than the ceiling measured in this run allows "
        f"(the GEMM's best of {len(bursts)} short bursts, {ceilings.matmul_tflops:,.4g} TFLOP/s; the copy "
        f"{ceilings.copy_gb_per_s:,.0f} GB/s): that ceiling was measured low (the GPU clocked lower during its "
        "bursts than during this variant), so the share is not a fraction of what the hardware allows"
    ]


def log_line(row: Row) -> str:
    """One line as each variant finishes, above the progress bar."""
    head = f"{row.shape:>9} · {row.variant:<15} "
    if row.status == "skipped":
        return head + f"[dim]skipped: {escape(row.reason)}[/dim]"
    first = f"first call {row.first_call_s:.2f} s · " if row.first_call_s is not None else ""
    if row.status != "ok":
        return head + first + f"[red]{row.status}[/red]: {escape(row.reason)}"
    return head + first + f"✓ {row.rel_error:.1e} · {row.time_us:,.1f} µs"


def under_table(rows: list[Row]) -> list[str]:
    """Under a shape's table: why each WRONG or failed variant is so, and each row's notes."""
    lines = []
    for row in rows:
        if row.status in ("WRONG", "failed"):
            lines.append(f"  [red]{row.variant} {row.status}[/red]: {escape(row.reason)}")
        lines += [f"  [yellow]{row.variant}[/yellow]: {escape(note)}" for note in row.notes]
    return lines


def skipped(rows: list[Row]) -> list[str]:
    """Each skipped variant once, with why, after all the tables."""
    reasons: dict[str, str] = {}
    for row in rows:
        if row.status == "skipped":
            reasons.setdefault(row.variant, row.reason)
    return [f"[dim]skipped {name}: {escape(reason)}[/dim]" for name, reason in reasons.items()]


NO_PACE_ON_CPU = (
    "[dim]On a CPU the forward runs on the thread that calls it: there are no kernel launches to "
    "hide, so who sets the pace (CPU or GPU) is a question for a GPU run.[/dim]"
)
