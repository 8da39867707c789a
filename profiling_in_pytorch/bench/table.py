"""The table a run prints for each shape: one line per variant, its check, its times and its share of the hardware."""

from __future__ import annotations

import math

import torch
from rich.markup import escape
from rich.table import Table

from profiling_in_pytorch.bench.measure import Settings
from profiling_in_pytorch.bench.prose import count, share
from profiling_in_pytorch.bench.rows import Row
from profiling_in_pytorch.bench.shapes import Shape


def fmt(value, spec: str, none: str = "—") -> str:
    return none if value is None else format(value, spec)


def status_cell(row: Row) -> str:
    if row.status == "ok":
        return f"[green]✓[/green] {row.rel_error:.1e}"
    if row.status == "WRONG":
        return f"[bold red]WRONG[/bold red] {row.rel_error:.1e}" if math.isfinite(row.rel_error) else "[bold red]WRONG[/bold red]"
    return f"[red]{row.status}[/red]" if row.status == "failed" else f"[dim]{row.status}[/dim]"


def shape_table(shape: Shape, rows: list[Row], settings: Settings) -> Table:
    """Its title says the shape's work and its floor; on a GPU, the loop, CPU, kernel and memory columns join."""
    ceilings, on_gpu = settings.ceilings, settings.device.type == "cuda"
    element = torch.tensor([], dtype=settings.dtype).element_size()
    floor = ceilings.floor_us(shape.flops, shape.min_bytes(element))
    limit = ceilings.limited_by(shape.flops, shape.min_bytes(element))
    table = Table(
        title=f"[bold]{shape.title}[/bold] · {shape.flops / 1e9:,.2f} GFLOP and ≥{shape.min_bytes(element) / 1e6:,.1f} MB "
        f"per forward · floor {floor:,.1f} µs ({limit}-bound)",
        title_justify="left",
    )
    table.add_column("variant")
    table.add_column("check", no_wrap=True)
    numbers = ["1st call s", "GPU µs (p20–p80)" if on_gpu else "µs (p20–p80)", "× eager", "TFLOP/s", "% matmul", "% floor"]
    if on_gpu:
        numbers += ["loop µs", "× eager", "CPU µs", "GPU busy", "kernels/launches", "peak MiB"]
    for name in numbers:
        table.add_column(name, justify="right")
    for row in rows:
        timed = row.time_us is not None
        cells = [
            row.variant,
            status_cell(row),
            fmt(row.first_call_s, ".2f"),
            f"{row.time_us:,.1f} ({row.time_p20_us:,.1f}–{row.time_p80_us:,.1f})" if timed else "—",
            fmt(row.speedup, ".2f"),
            fmt(row.tflops, ".3g"),
            share(row.matmul_share),
            share(row.roofline_share),
        ]
        if on_gpu:
            counts = f"{count(row.kernels)} / {count(row.launches)}" if row.kernels is not None else "—"
            busy = fmt(row.gpu_busy_fraction and row.gpu_busy_fraction * 100, ".0f")
            cells += [
                fmt(row.loop_us, ",.1f"),
                fmt(row.loop_speedup, ".2f"),
                fmt(row.cpu_us, ",.1f"),
                busy if busy == "—" else f"{busy}%",
                counts,
                fmt(row.peak_mib, ",.1f"),
            ]
        table.add_row(*cells)
    return table


def size(nbytes: int | None) -> str:
    """Bytes in the unit that keeps them readable: B, KiB, MiB, GiB."""
    if nbytes is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes} B"


def train_table(shape: Shape, rows: list[Row], settings: Settings) -> Table:
    """Training mode: per variant, its check, forward + backward time, peak memory and what the backward keeps."""
    on_gpu = settings.device.type == "cuda"
    table = Table(
        title=f"[bold]{shape.title}[/bold] · forward + backward · {shape.train_flops / 1e9:,.2f} GFLOP per call",
        title_justify="left",
    )
    table.add_column("variant")
    table.add_column("check", no_wrap=True)
    numbers = ["1st call s", "GPU µs (p20–p80)" if on_gpu else "µs (p20–p80)", "× eager"]
    numbers += ["loop µs", "CPU µs"] if on_gpu else []
    for name in numbers + ["peak MiB", "saved"]:
        table.add_column(name, justify="right")
    table.add_column("saved for backward", overflow="fold")
    for row in rows:
        timed = row.time_us is not None
        loop = [fmt(row.loop_us, ",.1f"), fmt(row.cpu_us, ",.1f")] if on_gpu else []
        table.add_row(
            row.variant,
            status_cell(row),
            fmt(row.first_call_s, ".2f"),
            f"{row.time_us:,.1f} ({row.time_p20_us:,.1f}–{row.time_p80_us:,.1f})" if timed else "—",
            fmt(row.speedup, ".2f"),
            *loop,
            fmt(row.peak_mib, ",.1f") if on_gpu else ("n/a" if timed else "—"),
            size(row.saved_bytes),
            escape(row.saved) if row.saved else "—",
        )
    return table
