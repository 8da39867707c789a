"""Guess first, then look: the guesses printed before anything is profiled (`announce`), and each checked against
the written trace afterwards (`check`)."""

from __future__ import annotations

from typing import Sequence

from profiling_in_pytorch.lesson.profiling import ACTIVE, STEPS, WAIT, WARMUP
from profiling_in_pytorch.lesson.runs import Run
from profiling_in_pytorch.lesson.terminal import console
from profiling_in_pytorch.checks import Expectation, check_trace
from profiling_in_pytorch.checks import announce as print_expectations


def announce(expectations: Sequence[Expectation], run: Run, compiled_already: bool = False) -> None:
    """The guesses first; then one line on what the profile is about to do (outside the recorded steps).

    compiled_already: the lesson ran its step once before the profile, so the profile's first step compiles
    nothing."""
    print_expectations(expectations, console=console)
    compiling = "the first compiles the forward, " if run.compiled and not compiled_already else ""
    console.print(
        f"profiling {STEPS} steps: {compiling}the last {ACTIVE} are recorded "
        f"(ProfilerStep#{WAIT + WARMUP}..#{STEPS - 1})"
    )


def check(expectations: Sequence[Expectation], run: Run) -> int:
    """Each guess against the written trace; a ✗ is a lesson, not an error. Returns the number of ✗."""
    return check_trace(expectations, run.trace_path, run.device.type, console=console)
