"""The terminal every command prints to: rich, with a reader who leaves (`| head`) being a normal end.

rich's own Console exits 1 on a broken pipe; scripts with `set -o pipefail` would read that as a failure. Ours
stops printing and lets `profiling_in_pytorch.errors.exits_cleanly` end the command with exit 0.
"""

from __future__ import annotations

from rich.console import Console as RichConsole


class Console(RichConsole):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError
