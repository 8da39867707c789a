"""The terminal every command prints to: rich, with a reader who leaves (`| head`) being a normal end.

rich's own Console exits 1 on a broken pipe; scripts with `set -o pipefail` would read that as a failure. Ours
stops printing and lets `trace_report.errors.exits_cleanly` end the command with exit 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console as RichConsole


class Console(RichConsole):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


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
