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
already sorted, and keeps their times: a box on a thread is no error, only a picture Perfetto cannot draw.

An item of no duration clips nothing (a zero-length kernel inside another, a Kineto slip: pytorch/kineto#136); of two
items that start together the shorter is clipped, so the stream keeps the longer one's time. Times are compared to
the ns the trace's three decimals give, or to what a float holds of a timestamp that large (an epoch in µs).
"""

from __future__ import annotations

from collections import defaultdict
from math import isfinite, trunc, ulp
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


# --- a copy Perfetto draws whole (`--open`) ---------------------------------------------------------------------

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
REWRITE_LIMIT = 256 << 20  # bytes of JSON: a larger trace is served as it is (a rewrite holds it whole, ~6x in memory)


class _Slice:
    """One GPU event of a trace's JSON as clip_stream_overlaps reads it: its clipped `dur` goes back to the event."""

    __slots__ = ("event", "pid", "tid", "ts", "dur", "recorded")

    def __init__(self, event: dict):
        self.event, self.pid, self.tid = event, event.get("pid"), event.get("tid")
        self.ts, self.dur = float(event["ts"]), float(event.get("dur") or 0.0)
        self.recorded = self.dur


def drawable(doc: Any) -> tuple[Overlaps, int]:
    """Make a trace's parsed JSON one that Perfetto draws whole (it drops an event that starts inside another on its
    track and ends after it). On the GPU's streams, each item that runs into the next is clipped first, as the reader
    reads it. Then each event that Perfetto would still drop moves, at its own times, to a track of its own beside its
    thread or stream (`_move_crossing_events`): a `nn.Module` range opened inside a compiled region and closed after
    it, an annotation on a stream that ends inside a kernel, a stream's sync that outlasts the copy it waits on. What
    the clipping found, and how many events moved."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        return Overlaps(), 0
    slices = [_Slice(e) for e in events if isinstance(e, dict) and e.get("ph") == "X"
              and str(e.get("cat", "")).lower() in GPU_CATEGORIES and _timed(e)
              and _scalar(e.get("pid")) and _scalar(e.get("tid"))]
    found = clip_stream_overlaps(slices)
    if found.clipped:
        for piece in slices:
            if piece.dur != piece.recorded:
                piece.event["dur"] = round(piece.dur, 3)
    return found, _move_crossing_events(events)


MOVED_LEVELS = 8  # tracks beside one at most: events that still cross on the 8th stay there (none seen)


def _move_crossing_events(events: list) -> int:
    """Each "X" event that Perfetto would drop moves to a new thread id of its process, named after its track and
    sorted beside it; events that cross each other there move on to the next one. Times and every other field stay
    as they were. How many events moved off their own tracks."""
    tracks: dict[tuple, list[dict]] = defaultdict(list)
    used: dict[Any, set[int]] = defaultdict(set)  # pid -> the integer thread ids it has
    names: dict[tuple, str] = {}
    order: dict[tuple, Any] = {}
    for e in events:
        if not isinstance(e, dict) or not (_scalar(e.get("pid")) and _scalar(e.get("tid"))):
            continue
        track = (e.get("pid"), e.get("tid"))
        if type(track[1]) is int:
            used[track[0]].add(track[1])
        ph = e.get("ph")
        if ph == "X" and _timed(e):
            tracks[track].append(e)
        elif ph == "M" and isinstance(e.get("args"), dict):
            if e.get("name") == "thread_name":
                names[track] = str(e["args"].get("name"))
            elif e.get("name") == "thread_sort_index":
                order[track] = e["args"].get("sort_index")
    moved = 0
    for (pid, tid), track_events in tracks.items():
        name = names.get((pid, tid)) or f"thread {tid}"
        for level in range(MOVED_LEVELS):
            # in start order, the longer first of two that start together, then as they came
            keyed = sorted((_perfetto_ns(e["ts"]), -_perfetto_ns(e.get("dur") or 0), i)
                           for i, e in enumerate(track_events))
            spans = [(start, start - neg_dur) for start, neg_dur, _ in keyed]
            crossing = [track_events[keyed[k][2]] for k in dropped(spans, 0)]  # Perfetto's own ns: exact
            if not crossing:
                break
            moved += len(crossing) if level == 0 else 0
            new_tid = max(used[pid], default=0) + 1
            used[pid].add(new_tid)
            for e in crossing:
                e["tid"] = new_tid
            what = f"{name}: events Perfetto drops there (each starts inside one and ends after it), moved here"
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": new_tid, "args": {"name": what}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": new_tid,
                           "args": {"sort_index": order.get((pid, tid), tid if type(tid) is int else 0)}})
            track_events = crossing
    return moved


def _perfetto_ns(value: float | int) -> int:
    """A time in µs as Perfetto's JSON importer turns it into ns: an integer times 1000, a number with a fraction
    times 1000.0 and rounded half away from zero (llround; json_trace_tokenizer's CoerceToTs). Compared in these
    ns, the moved events are exactly those the page would drop, with a float's rounding where Perfetto has it."""
    if type(value) is int:
        return value * 1000
    scaled = value * 1000.0
    whole = trunc(scaled)
    return whole + (1 if scaled - whole >= 0.5 else -1 if scaled - whole <= -0.5 else 0)


def _timed(event: dict) -> bool:
    """A time and a duration that are numbers, finite (json reads NaN and Infinity; a profiler writes neither)."""
    ts, dur = event.get("ts"), event.get("dur", 0)
    return type(ts) in (int, float) and type(dur) in (int, float) and isfinite(ts) and isfinite(dur)


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (int, float, str)
