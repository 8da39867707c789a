"""torch's op table (`prof.key_averages().table()`), as the post prints it: whole in the .txt beside the trace, and
in a table that fits this terminal."""

from __future__ import annotations

import torch
from rich.markup import escape
from rich.table import Table
from torch.profiler import profile

from profiling_in_pytorch.lesson.profiling import ACTIVE
from profiling_in_pytorch.lesson.terminal import console
from trace_report.kernels import short_name

TABLE_ROWS = 15
OP_NAME_MIN, OP_NAME_MAX = 12, 60  # the op table's name column, in characters


def sort_key(device: torch.device) -> str:
    return "device_time_total" if device.type == "cuda" else "cpu_time_total"


def op_table_text(prof: profile, device: torch.device) -> str:
    """torch's own table, as the post prints it: kept whole in the .txt beside the trace."""
    return prof.key_averages().table(sort_by=sort_key(device), row_limit=TABLE_ROWS) + "\n"


def print_op_table(prof: profile, device: torch.device) -> None:
    """The same rows in a table that fits a terminal: the ops that cost the most, per 3 active steps.

    A kernel's name is shown as trace-report shows it (`vectorized_elementwise_kernel<gelu>` for ATen's 450
    characters of C++ template), on one line: the numbers keep their width, and a name longer than what is left
    loses its middle to a "…" (its end tells `<gelu>` from `<mul>`, `coopA_TNT` from `coopB_TNT`). The .txt beside
    the trace keeps every name whole.
    """
    on_gpu = device.type == "cuda"
    averages = prof.key_averages()
    rows = sorted(averages, key=lambda e: getattr(e, sort_key(device)), reverse=True)[:TABLE_ROWS]
    names = [short_name(row.key) for row in rows]
    numbers = []
    for row in rows:
        cells = [str(row.count), f"{row.cpu_time_total:.1f}", f"{row.self_cpu_time_total:.1f}"]
        if on_gpu:
            cells += [f"{row.device_time_total:.1f}", f"{row.self_device_time_total:.1f}"]
        numbers.append(cells)
    headers = ["calls", "CPU total", "self CPU"] + (["GPU total", "self GPU"] if on_gpu else [])
    longest = max((len(name) for name in names), default=2)
    if _name_room(headers, numbers) < longest:
        headers = [header.replace(" ", "\n") for header in headers]  # two-line headers leave the names more room
    name_width = max(OP_NAME_MIN, min(OP_NAME_MAX, _name_room(headers, numbers), longest))
    table = Table(title=f"ops over {ACTIVE} active steps, by {'GPU' if on_gpu else 'CPU'} time (µs)")
    table.add_column("op", no_wrap=True, overflow="ellipsis", width=name_width)
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for name, cells in zip(names, numbers):
        table.add_row(escape(_fit(name, name_width)), *cells)
    console.print(table)
    totals = f"Self CPU time total: {sum(e.self_cpu_time_total for e in averages) / 1e3:.3f} ms"
    if on_gpu:
        totals += f"   Self CUDA time total: {sum(e.self_device_time_total for e in averages) / 1e3:.3f} ms"
    console.print(totals)


def _name_room(headers: list[str], numbers: list[list[str]]) -> int:
    """What a line leaves the op's name beside the numbers: each column takes its widest cell or header line, a
    space either side and a border; the name's column its spaces and two borders."""
    widths = [max([len(cells[i]) for cells in numbers] + [len(line) for line in header.split("\n")])
              for i, header in enumerate(headers)]
    return console.width - sum(width + 3 for width in widths) - 4


def _fit(name: str, width: int) -> str:
    """`name` in `width` characters: whole, or its start and its end around a "…"."""
    if len(name) <= width:
        return name
    head = (width - 1) * 2 // 5
    return f"{name[:head]}…{name[len(name) - (width - 1 - head):]}"
