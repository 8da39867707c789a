"""The terminal every command prints to: rich, with a reader who leaves (`| head`) being a normal end.

rich's own Console exits 1 on a broken pipe; scripts with `set -o pipefail` would read that as a failure. Ours
stops printing and lets `trace_report.errors.exits_cleanly` end the command with exit 0.

A long read shows its progress on a terminal (`read_progress`): a bar on stderr that goes when the read ends; the
analyses after it a line of their own (`analysing`) that goes when the report starts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console as RichConsole
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from trace_report.files import file_size


class Console(RichConsole):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


# Traces this large in all (about 2 s and more of reading on a slow core) show their progress on a terminal.
PROGRESS_BYTES = 64 << 20
PROGRESS_EVERY_S = 0.1  # the reader redraws the bar at most this often (a ticking bar's thread, 4 times a second)


@contextmanager
def read_progress(paths: Iterable[str | Path], ticking: bool = True
                  ) -> Iterator[Callable[[str | Path], Callable[[int, int], None] | None]]:
    """Yields `track(name)`: what `read_trace(path, progress=...)` takes to draw that trace's read on stderr (`name`
    one of `paths`), or `read_ranks`'s of all of them (`name` a label, "64 ranks"); else None. A bar for each, only
    when stderr is a terminal and the traces hold PROGRESS_BYTES or more in all: a pipe, a log or a short read gets
    nothing. The bars go when the reads end, before the report prints. Each is redrawn as its reader tells it, at most
    every PROGRESS_EVERY_S, and, `ticking`, by a thread of rich's four times a second: its clock goes on while the
    reader builds the model after the last byte (5.6 s of a 1 GB Mamba trace's 16 on this project's 2-core machine).
    read_ranks' bar does not tick: a thread would keep it from forking its workers."""
    sizes = {str(path): file_size(path) for path in paths}
    if not _shows_progress(sizes.values()):
        yield lambda path: None
        return
    progress = _on_stderr(TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
                          auto_refresh=ticking)

    def track(name: str | Path) -> Callable[[int, int], None]:
        task = progress.add_task(escape(Path(name).name), total=sizes.get(str(name), sum(sizes.values())) or None)
        drawn = [0.0]

        def update(done: int, total: int) -> None:
            now = time.monotonic()
            if now - drawn[0] >= PROGRESS_EVERY_S or done >= total:
                drawn[0] = now
                progress.update(task, completed=done, total=total or None, refresh=True)
        return update

    with progress:
        yield track


@contextmanager
def analysing(paths: Iterable[str | Path], what: str) -> Iterator[None]:
    """After a long read (read_progress's), one line on stderr while the analyses run: `analysing WHAT` and the time
    so far. The text report of a 1 GB Mamba trace comes 6.6 s after its read (--json's 11 s; this project's 2-core
    machine), with nothing on the screen otherwise. The line goes at the first write to stdout where stdout is the
    same terminal (the report prints there), else at the end. A thread redraws it: nothing forks after the reads."""
    if not _shows_progress(file_size(path) for path in paths):
        yield
        return
    console = Console(file=sys.stderr, highlight=False)
    spinner = "dots" if console.encoding.lower().startswith("utf") else "line"  # a terminal without UTF-8: - \ | /
    progress = _on_stderr(SpinnerColumn(spinner), TextColumn("analysing {task.description}"), TimeElapsedColumn(),
                          console=console)
    progress.add_task(escape(what), total=None)
    real_stdout = sys.stdout
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            progress.stop()
            if sys.stdout is watched:
                sys.stdout = real_stdout

    watched = _StopsAtFirstWrite(real_stdout, stop) if _is_terminal(real_stdout) else None
    if watched is not None:
        sys.stdout = watched
    progress.start()
    try:
        yield
    finally:
        stop()


def _on_stderr(*columns, console: Console | None = None, auto_refresh: bool = True) -> Progress:
    """A progress display on stderr that goes when it stops (transient), redrawn four times a second when
    `auto_refresh`. redirect_stdout off: rich would send what stdout gets meanwhile to stderr; stdout is the report's."""
    return Progress(*columns, console=console or Console(file=sys.stderr, highlight=False), transient=True,
                    auto_refresh=auto_refresh, refresh_per_second=4, redirect_stdout=False)


class _StopsAtFirstWrite:
    """A stream that calls `stop` before its first write, then writes to `stream`; it is `stream` in all else."""

    def __init__(self, stream, stop: Callable[[], None]):
        self._stream, self._stop = stream, stop

    def write(self, text: str) -> int:
        self._stop()
        return self._stream.write(text)

    def writelines(self, lines: Iterable[str]) -> None:
        self._stop()
        self._stream.writelines(lines)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _shows_progress(sizes: Iterable[int]) -> bool:
    """Whether a read of traces of these sizes shows its progress: on a terminal, PROGRESS_BYTES or more in all."""
    return _is_terminal(sys.stderr) and sum(sizes) >= PROGRESS_BYTES


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced by an object that is no file, or closed
        return False


def name_width(names: Iterable[str], room: int) -> int:
    """A table column of kernel names as wide as the longest name when the terminal has `room` for it: a folded
    kernel name is hard to read (`nvjet_sm90_tst_256x128_64x4_1x2_h_bz_c` / `oopA_TNT`)."""
    return max(12, min(room, max((len(n) for n in names), default=12)))


def clipped(text: str, width: int, lines: int = 2) -> str:
    """`text` cut to fit `lines` lines of a `width`-character table cell, an ellipsis where it was cut: a launching
    op or a decoded name (`## Call CompiledFxGraph fxyz... ##`, a fused kernel's forty ops) then adds two lines to
    its row at most."""
    room = width * lines
    return text if len(text) <= room else text[: room - 1] + "…"


def table_room(console_width: int, columns: int) -> int:
    """The characters a rich table of `columns` columns, in its default box, has for its cells' text at
    `console_width`: each column costs a space either side and a border, the table one border more."""
    return console_width - 1 - 3 * columns


def fit_widths(room: int, wants: list[int], mins: list[int]) -> list[int]:
    """Column widths that add up to at most `room`: each column's want (its longest cell) when all fit, else the
    one with the most to spare above its min shrinks first, none below its min. A table printed with these widths is never cropped on the right."""
    widths = list(wants)
    excess = sum(widths) - room
    while excess > 0:
        i = max(range(len(widths)), key=lambda k: (widths[k] - mins[k], widths[k]))
        if widths[i] <= mins[i]:
            break  # every column at its least: the caller leaves one out
        widths[i] -= 1
        excess -= 1
    return widths


# Where an identifier may break across a cell's lines: after these, or before `<` and `(`.
_BREAKS = ("::", "_", ".", ", ", " ", "/", "-")


def folded(text: str, width: int, lines: int = 2) -> str:
    """`text` in lines of at most `width` characters for a table cell, broken where a name has a seam (after `_`,
    `::`, `.`, a space; before `<` and `(` and a CamelCase word), never inside a word (`aten::_grouped_m` / `m`); at most `lines` lines, an
    ellipsis where it was cut. A piece longer than a line is cut where it must be."""
    if len(text) <= width:
        return text
    pieces = _pieces(text)
    out: list[str] = []
    line = ""
    for piece in pieces:
        if len(line) + len(piece) <= width:
            line += piece
            continue
        if line:
            out.append(line)
        while len(piece) > width:
            out.append(piece[:width])
            piece = piece[width:]
        line = piece
    if line:
        out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return "\n".join(part.rstrip() for part in out)


def _pieces(text: str) -> list[str]:
    pieces, start, i = [], 0, 0
    while i < len(text):
        # before `<` and `(`, and where a CamelCase word starts (`GELU` | `Activation`, `Llama` | `MLP`)
        camel = (i > start and text[i].isupper() and text[i - 1].isalpha()
                 and (text[i - 1].islower() or (i + 1 < len(text) and text[i + 1].islower())))
        if (text[i] in "<(" and i > start) or camel:
            pieces.append(text[start:i])
            start = i
        for seam in _BREAKS:
            if text.startswith(seam, i):
                i += len(seam)
                pieces.append(text[start:i])
                start = i
                break
        else:
            i += 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def op_label(name: str, width: int, lines: int = 2) -> str:
    """An op's name for a `width`-character cell: whole where it fits one line; else without its namespace
    (`aten::_grouped_mm` -> `_grouped_mm`) where that fits; else folded at its seams (`folded`)."""
    if len(name) <= width:
        return name
    bare = name.rsplit("::", 1)[-1] if "::" in name and not name.startswith("#") else name
    return bare if len(bare) <= width else folded(bare, width, lines)


@dataclass(frozen=True)
class Column:
    """A column of a table that must fit the terminal (`fitted_table`).

    least:    the fewest characters it may shrink to (0: its longest cell's, as numbers need)
    most:     the most it takes however long its cells (None: its longest cell's)
    fold:     how a cell too long for it breaks: "name" at a name's seams in up to 3 lines (`folded`), "op" an op's
              name without its namespace or folded in 2 (`op_label`), "" where rich wraps words (prose)
    lines:    the most lines a folded cell takes (a name cut to them ends in an ellipsis)
    optional: left out, last first, when the table would not fit with it
    """

    header: str
    least: int = 0
    most: int | None = None
    fold: str = ""
    right: bool = False
    optional: bool = False
    lines: int = 3
    style: str = ""


def fitted_table(columns: list[Column], rows: list[list[str]], console_width: int, **table_options) -> Table:
    """A rich table of `rows` (plain text, escaped here) as wide as its cells need and never wider than
    `console_width`: each column within its least and most, the ones with most to spare narrowed first, optional
    columns left out when the least widths do not fit, names broken at their seams, never inside a word."""
    columns = list(columns)
    rows = [list(row) for row in rows]
    while True:
        wants = [_want(column, [row[i] for row in rows]) for i, column in enumerate(columns)]
        mins = [min(column.least, want) if column.least else want for column, want in zip(columns, wants)]
        room = table_room(console_width, len(columns))
        optional = [i for i, column in enumerate(columns) if column.optional]
        if sum(mins) <= room or not optional:
            break
        drop = optional[-1]
        columns.pop(drop)
        for row in rows:
            row.pop(drop)
    widths = fit_widths(room, wants, mins)
    if sum(widths) > room:  # no optional column left to drop: names give up lines before rich splits a number or a word
        widths = fit_widths(room, widths, [_floor(column, [row[i] for row in rows], width)
                                           for i, (column, width) in enumerate(zip(columns, widths))])
    table = Table(**table_options)
    for column, width in zip(columns, widths):
        table.add_column(column.header, justify="right" if column.right else "left", width=width, overflow="fold",
                         style=column.style or None)
    for row in rows:
        table.add_row(*(escape(_fold(text, column, width)) for text, column, width in zip(row, columns, widths)))
    return table


def _want(column: Column, texts: list[str]) -> int:
    longest = max([len(line) for text in texts for line in text.splitlines() or [""]], default=0)
    header = len(column.header) if column.least == 0 or len(column.header) <= 8 else max(map(len, column.header.split()))
    return min(column.most or 10**6, max(longest, header, 1))


NAME_FLOOR = 12  # a name column's fewest characters on a narrow terminal: three lines of 12 hold most short names


def _floor(column: Column, texts: list[str], width: int) -> int:
    """The narrowest a column may go when its least does not fit: a name folds at its seams (NAME_FLOOR), prose
    as wide as its longest word, a number not at all (rich would break `1,121.3` across two lines)."""
    if column.least == 0:
        return width
    if column.fold:
        return min(width, NAME_FLOOR)
    words = [len(word) for text in [*texts, column.header] for word in text.split()]
    return min(width, max(words, default=1))


def _fold(text: str, column: Column, width: int) -> str:
    lines = column.lines if column.fold == "name" else min(column.lines, 2)
    if width < column.least:  # narrowed below its least (_floor): more lines hold what its least would have
        lines = -(-column.least * lines // width) + 1  # and one for the seams: a folded line is seldom full
    if column.fold == "name":
        return folded(text, width, lines)
    if column.fold == "op":
        return op_label(text, width, lines)
    return text


# A notebook's <pre> for a report: rich's own Jupyter style (its monospace fonts, its line height).
NOTEBOOK_HTML = ('<pre style="white-space:pre;overflow-x:auto;line-height:normal;font-family:Menlo,\'DejaVu Sans Mono\','
                 'consolas,\'Courier New\',monospace">{code}</pre>')


def html_of(draw, width: int) -> str:
    """What `draw(console)` prints, as HTML for a notebook (`_repr_html_`): the terminal's text and colours, through
    rich's export. Drawn to ANSI first: the report writes sections it rendered ahead straight to the console's
    file, which a recording console does not see."""
    import io

    from rich.text import Text

    buffer = io.StringIO()
    draw(Console(file=buffer, width=width, force_terminal=True, force_jupyter=False, color_system="truecolor",
                 highlight=False))
    recorder = Console(file=io.StringIO(), width=width, record=True, force_terminal=True, force_jupyter=False,
                       color_system="truecolor")
    recorder.print(Text.from_ansi(buffer.getvalue()), soft_wrap=True, end="")
    return recorder.export_html(inline_styles=True, code_format=NOTEBOOK_HTML)
