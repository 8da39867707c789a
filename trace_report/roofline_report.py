"""`trace-report`'s section "Ops by roofline": roofline.op_table's rows as a table that fits the terminal's width.

Each row is an op and its input shapes (the shapes on a second line); its numbers per call. Long op names break at
their seams (`::`, `_`), shapes between tensors, never inside a number or a word.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from trace_report.console import Console
from trace_report.model import per_step_count
from trace_report.roofline import SHAPES_HINT, OpTable, OpRow

TITLE = "Ops by roofline"
# Without --rows: the three a faster kernel would save the most on, in about a dozen lines (the report's screen holds
# the summary, the verdict and this on a model's trace of 300 kernels a step: tiny-llama's training step).
ROOFLINE_BRIEF_ROWS = 3
HEADERS = ("/step", "GFLOP", "MB", "µs/call", "TFLOP/s", "TB/s", "FLOP/B", "bound", "of peak")
_SEAMS = ("::", "_", " · ", ".", " ")


def print_op_table(table: OpTable, console: Console, *, rows: int | None = None, brief: bool = False) -> None:
    """The section: one line without shapes (the flag that records them), else the peaks, the table and what no row
    holds. `brief`: the peaks' source and the reading's second line left out, an op's name in three lines at most and
    its shapes in two (an ellipsis where cut); else every name and shape whole."""
    if not table.has_gpu:
        return
    if not table.has_shapes:
        console.print(f"[bold]{TITLE}[/bold] needs input shapes: profile with {SHAPES_HINT} (a lesson's --record_shapes)")
        console.print()
        return
    title, _, source = _peak_text(table).partition(" (")
    console.print(f"[bold]{TITLE}[/bold] · {escape(title)}")
    if source and not brief:
        console.print(f"[dim]  peaks: {escape(source.removesuffix(')'))}[/dim]")
    shown = table.rows if rows is None else table.rows[:rows]
    if shown:
        console.print(_table(shown, console.width, brief))
    if len(shown) < len(table.rows):
        console.print(f"[dim]… {len(table.rows) - len(shown)} more ops (--rows 0 for all; --replay # times one "
                      "alone)[/dim]")
    console.print("  ranked by what a kernel at the peak would save: GPU time × (1 − share of peak)")
    if not brief:
        console.print("  --replay # times a row's op alone on this machine's GPU, beside the trace's time")
    if not brief:
        console.print("  bound: compute above the ridge point (peak FLOP/s ÷ peak bytes/s), memory below")
    for line in _left_out(table):
        console.print(f"  {escape(line)}")
    console.print()


def _peak_text(table: OpTable) -> str:
    if table.found is None:
        gpu = (table.device or "this GPU").split(" (")[0]
        return f"no peaks known for {gpu}: rates without shares of peak (--peak TFLOPS,TBPS sets them)"
    peak = table.found.peak
    if peak.name == "given":
        return table.found.how
    dense = peak.tflops.get("bf16") or peak.tflops.get("fp16") or peak.tflops.get("fp32")
    kind = "bf16" if "bf16" in peak.tflops else "fp16" if "fp16" in peak.tflops else "fp32"
    measured = ", measured" if table.found.measured else ""
    return f"{peak.name}{measured}: {dense:,.0f} TFLOP/s {kind} dense, {peak.tbps:g} TB/s ({table.found.how})"


def _table(rows: list[OpRow], width: int, brief: bool) -> Table:
    cells = [_numbers(row) for row in rows]
    wants = [max(len(header), *(len(cell[i]) for cell in cells)) for i, header in enumerate(HEADERS)]
    # No box, the padding of neighbours collapsed and none at the edges: one space between two columns.
    number = len(str(len(rows)))  # the row's number: `--replay N` re-times that op alone
    room = max(16, width - sum(wants) - len(HEADERS) - 2 - number - 1)
    table = Table(box=None, padding=(0, 1), collapse_padding=True, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right", width=number, no_wrap=True)
    name_lines, detail_lines = (3, 2) if brief else (None, None)
    names = [f"{escape(_fold(row.op, room, name_lines))}\n[dim]{escape(_fold(_detail(row), room, detail_lines))}[/dim]"
             for row in rows]
    table.add_column("op · input shapes", width=min(room, max(len("op · input shapes"), *(
        len(line) for name in names for line in _plain(name).splitlines()))), no_wrap=True)
    for header, want in zip(HEADERS, wants):
        table.add_column(header, justify="right", width=want, no_wrap=True)
    for i, (name, numbers) in enumerate(zip(names, cells), 1):
        table.add_row(str(i), name, *numbers)
    return table


def _numbers(row: OpRow) -> list[str]:
    share = row.peak_share
    return [
        per_step_count(row.per_step), _amount(row.flops, 1e9), _amount(row.bytes, 1e6), _amount(row.us_per_call, 1),
        _amount(row.tflops, 1), _amount(row.tbps, 1), _amount(row.intensity, 1), row.bound or "-",
        f"{share:.0%}" if share is not None else "-",
    ]


def _detail(row: OpRow) -> str:
    text = row.shape_text()
    return f"{row.note} · {text}" if row.note else text


def _amount(value: float | None, unit: float) -> str:
    """Three significant digits or more, no exponent: 38.7, 0.201, 1,234; "-" for no value."""
    if value is None:
        return "-"
    x = value / unit
    if x == 0:
        return "0"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.001:
        return f"{x:.3f}"
    return "<0.001"


def _fold(text: str, width: int, lines: int | None = None) -> str:
    """`text` in lines of at most `width`, broken after a seam (`::`, `_`, ` · `, a space), never inside a word or
    number where a seam will do; at most `lines` lines (None: all), an ellipsis where it was cut."""
    if len(text) <= width:
        return text
    out, line, piece = [], "", ""
    for i, char in enumerate(text):
        piece += char
        if any(text.startswith(seam, i + 1 - len(seam)) for seam in _SEAMS) or i == len(text) - 1:
            if len(line) + len(piece) > width and line:
                out.append(line)
                line = ""
            while len(piece) > width:
                out.append(piece[:width])
                piece = piece[width:]
            line += piece
            piece = ""
    out.append(line)
    if lines is not None and len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return "\n".join(part.rstrip() for part in out)


def _plain(markup: str) -> str:
    return markup.replace("[dim]", "").replace("[/dim]", "").replace("\\[", "[")


def _left_out(table: OpTable) -> list[str]:
    """What no row holds, one line each, and the ops no formula knows."""
    total = table.gpu_us or 1.0
    lines = []
    if table.no_shapes_us:
        lines.append(f"{table.no_shapes_us:,.1f} µs ({table.no_shapes_us / total:.0%} of the GPU time) from ops recorded "
                     f"without shapes: {SHAPES_HINT} records them")
    if table.communication_us:
        lines.append(f"{table.communication_us:,.1f} µs of collectives ({table.communication_us / total:.0%}): no "
                     "roofline (the collectives section weighs them)")
    if table.unlaunched_us:
        lines.append(f"{table.unlaunched_us:,.1f} µs ({table.unlaunched_us / total:.0%}) launched by no op in the trace "
                     "(CUDA graph replays, work from before the recording)")
    unknown = [row for row in table.rows if row.cost is None]
    if unknown:
        names = list(dict.fromkeys(row.op for row in unknown))
        listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        lines.append(f"{table.unknown_us / total:.0%} of the GPU time in ops no formula knows: {listed}")
    return lines
