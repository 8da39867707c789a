"""GPU work that overlaps the next item on its own stream: `clip_stream_overlaps(gpu)` clips it and counts it.

One GPU stream runs its work one item after another, yet a trace may have a kernel's `dur` run past the start of the
next item on the same stream (pid = device, tid = stream). ROCm's profiler writes it when the hardware flushes
deferred completion timestamps after a long stall (a kernel of milliseconds reported as seconds, covering the
kernels after it: TraceLens issue #669); on Hopper and Blackwell, a kernel launched with programmatic dependent
launch (PDL: cuBLAS's split-K GEMM and its `splitKreduce_kernel`, FlashAttention 3 and its combine, TensorRT-LLM's
MoE GEMMs) starts while the one before it finishes, by a fraction of a µs. Summed as they are, each overlap counts
twice: in a step's GPU time (what every share is a share of), in the kinds of work, in a kernel's total. So the
earlier item's end is clipped to the next one's start, as chrome://tracing draws the stream: the stream's time is
then each item's once. How many were clipped and the µs clipped in all go on the Trace (`model.Overlaps`) and into
one line of the report; a trace without overlaps keeps its times to the bit, and its report and --json byte for byte.

Perfetto, which `--open` hands the trace to, drops a complete event (`"ph": "X"`) that starts inside another on its
track and ends after it (its stat `slice_drop_overlapping_complete_event`; pytorch issue #174555): such a kernel is a
gap in the picture. Those on the streams are counted too (`undrawn`), before the clipping. The CPU threads' boxes can
overlap so as well (a `nn.Module` range opened inside a torch.compile region and closed after it): the reader counts
those (`cpu_undrawn`) in the walk that sums the self CPU time (nesting.self_cpu_total), where each thread's boxes are
already sorted, and keeps their times: a box on a thread is no error, only a picture Perfetto cannot draw. The copy
`--open` serves, which Perfetto draws whole, is drawable.py's: it clips the streams with `clip_stream_overlaps` and
finds what Perfetto would still drop with `dropped`.

An item of no duration clips nothing (a zero-length kernel inside another, a Kineto slip: pytorch/kineto#136); of two
items that start together the shorter is clipped, so the stream keeps the longer one's time. Times are compared to
the ns the trace's three decimals give, or to what a float holds of a timestamp that large (an epoch in µs).
"""

from __future__ import annotations

from collections import defaultdict
from math import isfinite, ulp
from operator import attrgetter
from typing import Any, Callable, Iterable, Sequence

from trace_report.model import Overlaps

_BY_START = attrgetter("ts")
_NS = 0.0005  # µs: half of the trace's last decimal


def clip_stream_overlaps(gpu: list, beside: dict[tuple, list[tuple[float, float]]] | None = None) -> Overlaps:
    """Clip each GPU item (GpuWork) that runs past the next one's start on its stream, its `dur` changed in place,
    and count them: how many, the µs clipped, and how many events on the streams Perfetto will not draw. `beside`:
    per stream (pid, tid), the (ts, dur) of its events of other categories (`other_spans`), counted with its items
    for what Perfetto drops (an annotation that ends inside a kernel, a kernel that starts inside one and ends after
    it) and clipped never."""
    streams: dict[tuple[Any, Any], list] = defaultdict(list)
    for work in gpu:
        streams[(work.pid, work.tid)].append(work)
    found = Overlaps()
    for track, items in streams.items():
        items.sort(key=_BY_START)
        others = beside.get(track, ()) if beside else ()
        end = float("-inf")
        for work in items:  # the common case: every item ends before the next one starts (one overlapping another
            if end > work.ts:  # overlaps the next in start order too)
                break
            end = work.ts + work.dur
        else:
            if not others:
                continue
        found = found.plus(_clip(items, others))
    return found


def _clip(items: list, others: Sequence[tuple[float, float]] = ()) -> Overlaps:
    """One stream's items, some of them overlapping or beside events of other categories: clipped in place; what was
    found."""
    items.sort(key=lambda w: (w.ts, w.dur))
    undrawn = stream_undrawn([(work.ts, work.dur) for work in items] + list(others))
    clipped, clipped_us = 0, 0.0
    timed = [work for work in items if work.dur > 0]
    for earlier, later in zip(timed, timed[1:]):
        over = earlier.ts + earlier.dur - later.ts
        if over > max(_NS, 2 * ulp(later.ts)):
            clipped += 1
            clipped_us += over
            earlier.dur = later.ts - earlier.ts
    return Overlaps(clipped, clipped_us, undrawn)


def stream_undrawn(items: list[tuple[float, float]]) -> int:
    """How many of one GPU stream's events, (ts, dur) as the trace gives them, Perfetto drops: in start order, the
    longer first of two that start together, their ends compared to the ns or to what a float holds of them."""
    ordered = sorted(items, key=lambda item: (item[0], -item[1]))
    return undrawn(((ts, ts + dur) for ts, dur in ordered), lambda start: max(_NS, 2 * ulp(start)))


def undrawn(spans: Iterable[tuple[float, float]], slack: float | Callable[[float], float]) -> int:
    """How many of one track's slices, (start, end) in start order, Perfetto drops (`dropped`)."""
    return len(dropped(spans, slack))


def dropped(spans: Iterable[tuple[float, float]], slack: float | Callable[[float], float]) -> list[int]:
    """Which of one track's slices, (start, end) in start order, start inside an open one and end after it, by their
    place in that order: Perfetto drops each, and nests what follows in the ones it kept. An end within `slack(start)`
    of another (or `slack`, a number) is the same instant (the trace's last decimal, what a float holds of its times):
    a slice ending where the open one ends is inside it."""
    found: list[int] = []
    ends: list[float] = []  # the open slices' ends, innermost last
    fixed = None if callable(slack) else slack  # a thread's boxes in ns: one slack for all, no call per box
    for i, (start, end) in enumerate(spans):
        tolerance = slack(start) if fixed is None else fixed
        while ends and ends[-1] <= start + tolerance:
            ends.pop()
        if ends and end > ends[-1] + tolerance:
            found.append(i)
        else:
            ends.append(end)
    return found


def other_spans(events: list[tuple]) -> dict[tuple, list[tuple[float, float]]]:
    """Per track (pid, tid), the (ts, dur) of events of categories read for nothing else (`events`: their pid, tid, ts
    and dur as the trace gives them; a stream's gpu_user_annotation, its cuda_sync), where those are numbers: what
    clip_stream_overlaps counts beside a stream's GPU work."""
    others: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for pid, tid, ts, dur in events:
        dur = 0.0 if dur is None else dur
        if type(ts) in (int, float) and type(dur) in (int, float) and _scalar(pid) and _scalar(tid):
            try:
                ts, dur = float(ts), float(dur)
            except OverflowError:  # an integer too large for a float
                continue
            if isfinite(ts) and isfinite(dur):
                others[(pid, tid)].append((ts, dur))
    return others


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (int, float, str)
