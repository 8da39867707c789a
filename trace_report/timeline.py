"""Arithmetic on the GPU lane: how long it was busy, where it sat idle, which idle stretches were the GPU waiting on
the CPU, and how long some work ran with none of the rest beside it. Shared by a step's numbers (`Step.gpu_busy_us`),
the verdict, the communication reading and the checks.

Each function takes GPU work in any order (`GpuWork`: kernels, memsets, memcpys, every stream together) and reads
only its times: `ts`, `dur`, `end`, and for `launch_waits` its `launch` (None when the trace does not link the work
to a launch call) and when that call returned (`launch_end`). It imports nothing of the model: it sits below it.
"""

from __future__ import annotations

import bisect
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


def alone_time(work: Iterable, others: Iterable) -> float:
    """How long `work` ran with none of `others` beside it (a collective's time that no compute hid)."""
    return uncovered(union((w.ts, w.ts + w.dur) for w in work), union((w.ts, w.ts + w.dur) for w in others))


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of (start, end) intervals, as sorted disjoint intervals."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def uncovered(intervals: list[tuple[float, float]], cover: list[tuple[float, float]],
              ends: list[float] | None = None) -> float:
    """How much of `intervals` (disjoint) no interval of `cover` (sorted, disjoint; `ends`: their ends) covers."""
    ends = [b for _, b in cover] if ends is None else ends
    total = 0.0
    for start, end in intervals:
        covered = 0.0
        i = bisect.bisect_right(ends, start)  # the first cover interval that ends after `start`
        while i < len(cover) and cover[i][0] < end:
            covered += min(end, cover[i][1]) - max(start, cover[i][0])
            i += 1
        total += (end - start) - covered
    return total


def devices_note(work: list) -> str | None:
    """A note where the work ran on several GPUs of one process (its `pid`, the device's index in a torch.profiler
    trace: `device_map="auto"` across GPUs, nn.DataParallel): the lane, the verdict and the idle time read them as one
    GPU, busy while any of them is, and each one's own busy share of the window says how far that is from each. None
    for one device."""
    by_device: dict = {}
    for w in work:
        by_device.setdefault(w.pid, []).append(w)
    if len(by_device) < 2:
        return None
    start = min(w.ts for w in work)
    window = max(w.ts + w.dur for w in work) - start
    if window <= 0:
        return None
    shares = ", ".join(f"device {device} {busy_time(items) / window:.0%}" for device, items in
                       sorted(by_device.items(), key=lambda kv: str(kv[0])))
    return (f"GPU work on {len(by_device)} devices in one process: the lane and the verdict read them as one GPU, "
            f"busy while any of them is ({busy_time(work) / window:.0%} of the window); each device alone: {shares}")
