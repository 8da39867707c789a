"""Arithmetic on the GPU lane: how long it was busy, where it sat idle, and which idle stretches were the GPU
waiting on the CPU. Shared by a step's numbers (`Step.gpu_busy_us`), the verdict and the checks.

Each function takes GPU work in any order (`GpuWork`: kernels, memsets, memcpys, every stream together) and reads
only its times: `ts`, `dur`, `end`, and for `launch_waits` its `launch` (None when the trace does not link the work
to a launch call) and when that call returned (`launch_end`). It imports nothing of the model: it sits below it.
"""

from __future__ import annotations

from collections.abc import Iterable


def busy_time(work: Iterable) -> float:
    """The union of the intervals' lengths: time with at least one piece of work running."""
    total = 0.0
    end = float("-inf")
    for w in sorted(work, key=lambda w: w.ts):
        start, stop = w.ts, w.ts + w.dur
        if start >= end:
            total += w.dur
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def gaps(work: Iterable, min_us: float = 0.0) -> list[float]:
    """Idle stretches between consecutive GPU work (all streams together)."""
    found = []
    end = None
    for w in sorted(work, key=lambda w: w.ts):
        if end is not None and w.ts - end > min_us:
            found.append(w.ts - end)
        end = w.ts + w.dur if end is None else max(end, w.ts + w.dur)
    return found


def launch_waits(work: Iterable, min_us: float = 0.0) -> list[float]:
    """The idle stretches of `gaps` where the GPU waited on the CPU: the next work's launch call returned only
    after everything before it had finished, so the GPU had nothing queued."""
    found = []
    end = None
    for w in sorted(work, key=lambda w: w.ts):
        if end is not None and w.ts - end > min_us and w.launch is not None and w.launch_end > end:
            found.append(w.ts - end)
        end = w.end if end is None else max(end, w.end)
    return found
