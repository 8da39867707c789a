"""A copy of a trace that Perfetto draws whole, for `--open`: made as a stream, whatever the trace's size.

Perfetto drops a complete event (`"ph": "X"`) that starts inside another on its track and ends after it (its stat
`slice_drop_overlapping_complete_event`; pytorch issue #174555). On a GPU stream that is a kernel launched with
programmatic dependent launch, or ROCm's late timestamps (overlaps.py): a gap in the picture. On a CPU thread it is a
box that closes after its parent (a `nn.Module` range opened inside a compiled region): missing from it. The copy
`drawable_copy(path)` makes has the GPU streams' items clipped to the next one's start, as the report reads them, and
each event Perfetto would still drop moved, at its own times, to a track of its own beside its thread or stream.

Two passes over the file, neither holding its events (a 1 GB trace is millions of them):

1. `_scan`: each "X" event's track, its number in the array, its start and end in Perfetto's ns (integers in
   arrays, 24 bytes an event), and the GPU items' times as the reader reads them; the tracks' names and order.
   From these, what to change (`_plan`): the clipped items' `dur`, the moved events' `tid`, the tracks to add.
2. `_write`: the events again, each as its own text (`source.RAW_EVENTS`: no Python object made of an event left as
   it was), the changed ones decoded, changed and encoded; the added tracks after the last event. The copy is
   gzipped as it is written (level 1, about a tenth of the JSON): Perfetto unpacks gzip itself.
"""

from __future__ import annotations

import json
import zlib
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from math import isfinite, trunc
from pathlib import Path
from typing import Any, Callable

from trace_report.model import Overlaps
from trace_report.nesting import start_order
from trace_report.overlaps import clip_stream_overlaps, dropped
from trace_report.source import RAW_EVENTS, UNSET, Layout, TraceSource, msgspec, open_text

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
MOVED_LEVELS = 8  # tracks beside one at most: events that still cross on the 8th stay there (none seen)
_SCALAR = (int, float, str)
Progress = Callable[[int, int], None] | None  # told the bytes read of the file, and its size, as each pass reads

# --- what the first pass reads of each event --------------------------------------------------------------------

_FIELDS = ("ph", "cat", "ts", "dur", "pid", "tid", "name")
if msgspec is not None:
    # UNSET tells an absent `dur` (no duration: 0) from a null one (no time: the event is left as it is)
    _TrackArgs = msgspec.defstruct("_TrackArgs", [("name", Any, UNSET), ("sort_index", Any, UNSET)], gc=False)
    # args as _TrackArgs: a kernel's dozen keys skipped, not built into a dict (args that are no object: the chunk
    # goes through json.loads, and _event_of keeps them as they are)
    _Event = msgspec.defstruct("_Event", [(key, Any, UNSET) for key in _FIELDS] + [("args", _TrackArgs | None, None)],
                               gc=False)
    _EVENTS: Any = msgspec.json.Decoder(list[_Event])
else:
    class _TrackArgs:  # type: ignore[no-redef]
        __slots__ = ("name", "sort_index")

        def __init__(self, name: Any = UNSET, sort_index: Any = UNSET):
            self.name, self.sort_index = name, sort_index

    class _Event:  # type: ignore[no-redef]
        __slots__ = (*_FIELDS, "args")

        def __init__(self, *values: Any):
            for key, value in zip(self.__slots__, values):
                setattr(self, key, value)

    _EVENTS = None


def _event_of(value: Any) -> Any:
    """A value json.loads read (a chunk msgspec refused), as the _Event msgspec makes; anything else as it is."""
    if type(value) is not dict:
        return value
    args = value.get("args", UNSET)
    if type(args) is dict:
        args = _TrackArgs(args.get("name", UNSET), args.get("sort_index", UNSET))
    return _Event(*(value.get(key, UNSET) for key in _FIELDS), args)


_SCAN = Layout(_EVENTS, _event_of)


class _Track:
    """One track's "X" events in the order they come: their numbers in the array, starts and ends in Perfetto's ns
    (lists once a time is past 64 bits), and of its GPU items their place here and times as the reader has them."""

    __slots__ = ("numbers", "starts", "ends", "gpu_places", "gpu_ts", "gpu_dur")

    def __init__(self) -> None:
        self.numbers = array("q")
        self.starts: Any = array("q")
        self.ends: Any = array("q")
        self.gpu_places = array("q")
        self.gpu_ts = array("d")
        self.gpu_dur = array("d")

    def add(self, number: int, start: int, end: int) -> None:
        self.numbers.append(number)
        try:
            self.starts.append(start)
            self.ends.append(end)
        except OverflowError:  # no profiler's times: this track's times as Python ints from here on
            kept = len(self.numbers) - 1  # the times before this event's (its start may be in, its end not)
            self.starts, self.ends = list(self.starts)[:kept], list(self.ends)[:kept]
            self.starts.append(start)
            self.ends.append(end)


@dataclass
class _Scan:
    """What the first pass found: the tracks, the integer thread ids of each process, the tracks' names and sort
    indices, the top-level keys around traceEvents."""

    tracks: dict[tuple, _Track] = field(default_factory=dict)
    used: dict[Any, set] = field(default_factory=lambda: defaultdict(set))
    names: dict[tuple, str] = field(default_factory=dict)
    order: dict[tuple, Any] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    keys_before_events: int | None = None


def _scan(path: Path, progress: Progress) -> _Scan:
    found = _Scan()
    tracks, names, order = found.tracks, found.names, found.order
    lanes: set[tuple] = set()  # the tracks of events of other phases: their integer tids are taken too
    gpu_cats: dict[Any, bool] = {}
    number = 0
    with open_text(path) as text:
        source = TraceSource(text, path, _SCAN)
        for batch in source.batches(progress):
            for event in batch:
                number += 1
                if type(event) is not _Event:
                    continue
                pid, tid = event.pid, event.tid
                if pid is UNSET:
                    pid = None
                if tid is UNSET:
                    tid = None
                # overlaps._scalar, written out: two calls an event were 0.09 µs more (2M events timed), 0.4 s of a
                # 1 GB trace's 9.7 s scan
                if not ((pid is None or type(pid) in _SCALAR) and (tid is None or type(tid) in _SCALAR)):
                    continue
                ph = event.ph
                if ph != "X":
                    lanes.add((pid, tid))
                    if ph == "M" and type(event.args) is _TrackArgs:
                        if event.name == "thread_name":
                            names[(pid, tid)] = str(None if event.args.name is UNSET else event.args.name)
                        elif event.name == "thread_sort_index":
                            order[(pid, tid)] = None if event.args.sort_index is UNSET else event.args.sort_index
                    continue
                ts, dur = event.ts, event.dur
                if dur is UNSET:
                    dur = 0
                # finite numbers: an int is (isfinite would refuse one past a float's range), a float may not be
                if not ((type(ts) is int or type(ts) is float and isfinite(ts))
                        and (type(dur) is int or type(dur) is float and isfinite(dur))):
                    lanes.add((pid, tid))
                    continue
                track = tracks.get((pid, tid))
                if track is None:
                    track = tracks[(pid, tid)] = _Track()
                start = ts * 1000 if type(ts) is int else _perfetto_ns(ts)
                track.add(number - 1, start, start + (dur * 1000 if type(dur) is int else _perfetto_ns(dur)))
                cat = event.cat
                gpu = gpu_cats.get(cat) if type(cat) is str else None
                if gpu is None:
                    text_cat = "" if cat is UNSET else str(cat)
                    gpu = text_cat.lower() in GPU_CATEGORIES
                    if type(cat) is str:
                        gpu_cats[cat] = gpu
                if gpu:
                    try:
                        ts, dur = float(ts), float(dur)
                    except OverflowError:  # an integer past a float's range: no time the reader reads
                        continue
                    track.gpu_places.append(len(track.numbers) - 1)
                    track.gpu_ts.append(ts)
                    track.gpu_dur.append(dur)
        found.meta, found.keys_before_events = source.meta, source.keys_before_events
    for pid, tid in (*tracks, *lanes):
        if type(tid) is int:
            found.used[pid].add(tid)
    return found


# --- what to change --------------------------------------------------------------------------------------------


class _Item:
    """A GPU item as clip_stream_overlaps reads it (GpuWork's fields), with its place on its track."""

    __slots__ = ("pid", "tid", "ts", "dur", "place")

    def __init__(self, pid: Any, tid: Any, ts: float, dur: float, place: int):
        self.pid, self.tid, self.ts, self.dur, self.place = pid, tid, ts, dur, place


@dataclass
class Plan:
    """What the copy changes: each changed event's new fields by its number in the array, the track events to add
    after the last, what the GPU streams' clipping found, how many events moved off their own tracks."""

    edits: dict[int, dict] = field(default_factory=dict)
    added: list[dict] = field(default_factory=list)
    found: Overlaps = field(default_factory=Overlaps)
    moved: int = 0


def _plan(scan: _Scan) -> Plan:
    plan = Plan()
    for (pid, tid), track in scan.tracks.items():
        if track.gpu_places:
            plan.found = plan.found.plus(_clip(pid, tid, track, plan.edits))
    for (pid, tid), track in scan.tracks.items():
        _move_crossing(pid, tid, track, scan, plan)
    return plan


def _clip(pid: Any, tid: Any, track: _Track, edits: dict[int, dict]) -> Overlaps:
    """One stream's GPU items clipped as the reader clips them (clip_stream_overlaps); each clipped one's new `dur`
    (to the ns, as the trace writes it) into `edits`, and its end on the track moved with it."""
    ts, dur = track.gpu_ts, track.gpu_dur
    end = float("-inf")
    for i in sorted(range(len(ts)), key=ts.__getitem__):  # the common case, as clip_stream_overlaps tells it
        if end > ts[i]:
            break
        end = ts[i] + dur[i]
    else:
        return Overlaps()
    items = [_Item(pid, tid, ts[i], dur[i], place) for i, place in enumerate(track.gpu_places)]
    found = clip_stream_overlaps(items)
    for item, recorded in zip(items, dur):
        if item.dur != recorded:
            new = round(item.dur, 3)
            edits.setdefault(track.numbers[item.place], {})["dur"] = new
            track.ends[item.place] = track.starts[item.place] + _perfetto_ns(new)
    return found


def _move_crossing(pid: Any, tid: Any, track: _Track, scan: _Scan, plan: Plan) -> None:
    """The events of one track that Perfetto would drop move to a new thread id of its process, named after the track
    and sorted beside it; those that cross each other there move on to the next one. Times stay as they were."""
    starts, ends = track.starts, track.ends
    places = start_order(starts, ends)
    name = scan.names.get((pid, tid)) or f"thread {tid}"
    for level in range(MOVED_LEVELS):
        crossing = [places[k] for k in dropped(((starts[p], ends[p]) for p in places), 0)]  # Perfetto's own ns
        if not crossing:
            return
        plan.moved += len(crossing) if level == 0 else 0
        used = scan.used[pid]
        new_tid = max(used, default=0) + 1
        used.add(new_tid)
        for place in crossing:
            plan.edits.setdefault(track.numbers[place], {})["tid"] = new_tid
        what = f"{name}: events Perfetto drops there (each starts inside one and ends after it), moved here"
        plan.added.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": new_tid, "args": {"name": what}})
        plan.added.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": new_tid,
                           "args": {"sort_index": scan.order.get((pid, tid), tid if type(tid) is int else 0)}})
        places = crossing  # still in start order


# --- the copy --------------------------------------------------------------------------------------------------


def _write(path: Path, scan: _Scan, plan: Plan, progress: Progress) -> bytes:
    """The trace with the plan's changes, gzipped: the top-level keys around traceEvents as they came, each event as
    it was written unless the plan changes it, the plan's tracks after the last."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: a gzip header; level 1, 240 MB/s of trace JSON
    pieces: list[bytes] = []
    meta = list(scan.meta.items())
    before = len(meta) if scan.keys_before_events is None else scan.keys_before_events
    if scan.keys_before_events is None:
        pieces.append(packer.compress(b"["))
    else:
        pieces.append(packer.compress(b"{" + b"".join(_member(key, value) + b"," for key, value in meta[:before])
                                    + b'"traceEvents":['))
    edits = sorted(plan.edits.items())
    at = 0  # the next edit
    number = 0
    separator = b""
    with open_text(path) as text:
        for batch in TraceSource(text, path, RAW_EVENTS).batches(progress):
            end = number + len(batch)
            while at < len(edits) and edits[at][0] < end:
                changed, fields = edits[at]
                event = json.loads(bytes(batch[changed - number]))
                event.update(fields)
                batch[changed - number] = _dumps(event)
                at += 1
            number = end
            pieces.append(packer.compress(separator + b",".join(batch)))
            separator = b","
    if plan.added:
        pieces.append(packer.compress(separator + b",".join(_dumps(event) for event in plan.added)))
    if scan.keys_before_events is None:
        pieces.append(packer.compress(b"]"))
    else:
        pieces.append(packer.compress(b"]" + b"".join(b"," + _member(key, value) for key, value in meta[before:]) + b"}"))
    pieces.append(packer.flush())
    return b"".join(pieces)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def _member(key: str, value: Any) -> bytes:
    return _dumps(key) + b":" + _dumps(value)


def drawable_copy(path: Path, track: Callable[[str], Progress] | None = None) -> tuple[bytes | None, Overlaps, int]:
    """The trace as Perfetto draws it whole, gzipped, where it has events Perfetto would drop; None (serve the file)
    where it has none. With it, what the GPU streams' clipping found and how many events moved. Bad input raises
    UsageError, as the reader's does. `track(name)`: each pass's progress callable, or None (console.read_progress)."""
    scan = _scan(path, track(str(path)) if track is not None else None)
    plan = _plan(scan)
    if not (plan.found.undrawn or plan.moved):
        return None, plan.found, plan.moved
    return _write(path, scan, plan, track(f"{path.name}'s copy") if track is not None else None), plan.found, plan.moved


def _perfetto_ns(value: float | int) -> int:
    """A time in µs as Perfetto's JSON importer turns it into ns: an integer times 1000, a number with a fraction
    times 1000.0 and rounded half away from zero (llround; json_trace_tokenizer's CoerceToTs). Compared in these
    ns, the moved events are exactly those the page would drop, with a float's rounding where Perfetto has it."""
    if type(value) is int:
        return value * 1000
    scaled = value * 1000.0
    whole = trunc(scaled)
    return whole + (1 if scaled - whole >= 0.5 else -1 if scaled - whole <= -0.5 else 0)
