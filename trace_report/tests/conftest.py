"""What a pytest-xdist worker (pyproject's addopts) changes for these tests, undone.

xdist's workers start with COLUMNS=80 in their environment where the run itself had none (measured: a test printing
os.environ.get("COLUMNS") read None in one process, "80" in a worker). trace-report's main(), called in-process by
these tests, reads a COLUMNS as a terminal's width and folds its lines at 80, instead of the 120 columns it prints
when piped (report._width): the same test passed in one process and failed in a worker."""

from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
