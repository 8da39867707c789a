"""What Part 3's lessons print beyond the common plumbing: an attention output's check against fp32, and the
attention variants' traces side by side (the post's P3-16 and P3-17 tables, from this machine's traces)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import torch
from rich.table import Table

from profiling_in_pytorch.lesson import console, dtype_name
from profiling_in_pytorch.mlp.accuracy import check_output as check_output_against
from profiling_in_pytorch.checks.attention import summarize
from trace_report.reader import read_trace


def check_attention_output(name: str, got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> bool:
    """Before profiling: does `got` (computed in `dtype`) match `want`, the naive attention run in fp32 on the same
    inputs? One line, judged by the project's one rule (profiling_in_pytorch.mlp.accuracy); the lesson exits 1 if
    not."""
    accuracy = check_output_against(got, want, dtype)
    console.print(
        f"output check against fp32: {name} in {dtype_name(dtype)}, {accuracy.describe()} "
        f"{'[green]✓[/green]' if accuracy.ok else '[red]✗[/red]'}",
        soft_wrap=True,
    )
    return accuracy.ok


def print_side_by_side(traces: Mapping[str, tuple[Path, str]], current: Path) -> None:
    """One row per variant whose trace exists (name -> (path, label)), this run's marked: GPU operations per
    forward, GPU and CPU time per forward, launch calls, transposes. Printed when at least two traces exist."""
    rows = []
    for name, (path, label) in traces.items():
        if path.is_file():
            row = summarize(read_trace(path), label, name)
            if row is not None:
                rows.append((row, path.resolve() == current.resolve()))
    if len(rows) < 2:
        return
    on_gpu = any(row.gpu_us is not None for row, _ in rows)
    table = Table(title="The attention variants side by side, per forward (this machine's traces)")
    table.add_column("variant")
    table.add_column("backend")
    table.add_column("GPU ops" if on_gpu else "ops that compute", justify="right")
    if on_gpu:
        table.add_column("GPU µs (mean)", justify="right")
    table.add_column("CPU µs (fastest)", justify="right")
    table.add_column("runtime calls", justify="right")
    table.add_column("transposes", justify="right")
    for row, this in rows:
        cells = [row.name + (" ←" if this else ""), row.backend if row.backend != "none" else "-", f"{row.operations:g}"]
        if on_gpu:
            cells.append(f"{row.gpu_us:,.1f}" if row.gpu_us is not None else "-")
        cells += [f"{row.cpu_us:,.1f}", f"{row.launches:g}", f"{row.transposes:g}"]
        table.add_row(*cells)
    console.print()
    console.print(table)
    gpu = "GPU µs: the time the forward's GPU work kept the GPU busy; " if on_gpu else ""
    console.print(f"{gpu}CPU µs: the label's box in the least disturbed of the 3 steps.", style="dim")
