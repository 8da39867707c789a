"""The console every lesson prints to (one for the whole run: a distributed lesson quiets it on all ranks but one)."""

from __future__ import annotations

from trace_report.console import Console

console = Console(highlight=False)
