"""How each CPU thread's boxes nest, as torch and Perfetto nest them: a box is the child of the innermost open box on
its thread that holds it. One sort of each thread's boxes (`by_thread`: ops, runtime calls, the steps, Python frames)
serves two walks:

- `nest`: each op's self time, its path (the boxes around it), the op around it (`CpuOp.parent_op`), and for each
  runtime call the op that launched it and its path; how much GPU work was launched from inside each op;
- `self_cpu_total`: the table's "Self CPU time total" (`key_averages().table()`), and how many boxes Perfetto drops.

The Python frames (with_stack=True) are packed as the reader reads them (`Boxes`): they are most of such a trace.
`start_order` sorts one track's boxes so, packed alike, for the copy `--open` serves (drawable.py).

The reader (`reader.py`) calls them once its events are kept.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from trace_report.model import CpuOp, RuntimeCall
from trace_report.overlaps import undrawn

_HALF = 1 << 63  # a start or end in ns, offset by this, fits 64 bits
_INDEX = 1 << 32
_ENDS = _INDEX * _INDEX - 1  # the bits of a packed box's end
_INDICES = _INDEX - 1  # the bits of its index
_FRAME_INDEX = 1 << 31  # the Python frames' indices start here, past every op's, runtime call's and step's


@dataclass
class Lanes:
    """Each thread's boxes, sorted (by_thread): `threads[(pid, tid)]` the boxes' keys, (start, -end, index) in ns
    packed into one int each when `packed` (else as that tuple)."""

    threads: dict[tuple, list]
    packed: bool


def by_thread(boxes: Iterable[tuple[Any, Any, float, float]], frames: Boxes | None = None) -> Lanes:
    """The boxes (pid, tid, ts, dur), numbered in the order they come, sorted on each thread as torch nests them:
    by start, outer (longer) boxes first, ties in the order they came; with them the Python frames (`frames`, whose
    lists it takes), numbered past every box. Times are whole ns, as torch compares them: the trace's timestamps are
    µs with three decimals."""
    keyed = Boxes(0, _FRAME_INDEX)
    add = keyed.add
    for pid, tid, ts, dur in boxes:
        add(pid, tid, ts, dur)
    if frames is not None:
        keyed.take(frames)
    for spans in keyed.threads.values():
        spans.sort()
    return Lanes(keyed.threads, keyed.packed)


class Boxes:
    """Boxes as by_thread sorts them, each thread's in a list as they come: numbered from `first`, each one int,
    (start, -end, index) packed in bits that sort as that tuple does. Times past the bits (no profiler's) fall back
    to the tuples.

    A tuple of three ints cost 156 bytes a box, the packed int 48: a Mamba trace's 330k boxes, 51 MB against 16 at
    the read's peak (and tuples of the boxes' float times, for a second sort, took it from 130 to 166 MB). The
    reader packs the Python frames (with_stack=True) as it reads them: they are most of a stack trace's events and
    nothing reads them past the nesting; a tuple of a frame's pid, tid and float times, kept until the sort, cost
    144 bytes a frame besides its key (a 152 MB Llama trace with stacks, 284k frames: the read's peak of Python
    objects from 108 MB to 75)."""

    __slots__ = ("threads", "packed", "next", "end")

    def __init__(self, first: int = _FRAME_INDEX, end: int = _INDEX) -> None:
        self.threads: dict[tuple, list] = defaultdict(list)
        self.packed = True
        self.next = first  # the next box's number
        self.end = end  # numbers from here on do not fit the bits

    def add(self, pid: Any, tid: Any, ts: float, dur: float) -> None:
        start = round(ts * 1000)
        end = start + round(dur * 1000)
        i = self.next
        self.next = i + 1
        if self.packed and -_HALF <= start and -_HALF < end <= _HALF and i < self.end:
            self.threads[(pid, tid)].append(((start + _HALF) << 96) | ((_HALF - end) << 32) | i)
        else:
            self._unpack()
            self.threads[(pid, tid)].append((start, -end, i))

    def take(self, other: Boxes) -> None:
        """Add the boxes of `other` (numbered past these), taking its lists."""
        if not other.packed:
            self._unpack()
        for lane, keys in other.threads.items():
            if self.packed != other.packed:
                keys = [_unpacked(key) for key in keys]
            if lane in self.threads:
                self.threads[lane] += keys
            else:
                self.threads[lane] = keys
        other.threads.clear()

    def _unpack(self) -> None:
        """From here on, tuples: those packed so far unpacked."""
        if self.packed:
            self.packed = False
            for spans in self.threads.values():
                spans[:] = [_unpacked(key) for key in spans]


def start_order(starts: Sequence[int], ends: Sequence[int]) -> list[int]:
    """The places of one track's boxes (their starts and ends in ns, in the order they came) in the order they nest:
    by start, the longer first of two that start together, then as they came. Sorted as one packed int a box, as
    `Boxes` packs them (48 bytes, against 156 for a tuple of its three ints), where the times fit the bits; else as
    tuples. For the copy --open serves (drawable.py), which keeps its tracks' times in arrays."""
    n = len(starts)
    # the bits Boxes packs: a start in [-2**63, 2**63), an end in (-2**63, 2**63], a place below 2**32
    if 0 < n <= _INDICES and -_HALF <= min(starts) and max(starts) < _HALF and -_HALF < min(ends) and \
            max(ends) <= _HALF:
        keys = sorted(((s + _HALF) << 96) | ((_HALF - e) << 32) | i for i, s, e in zip(range(n), starts, ends))
        return [key & _INDICES for key in keys]
    return [i for _, _, i in sorted(zip(starts, (-e for e in ends), range(n)))]


def self_cpu_total(lanes: Lanes, counted: int) -> tuple[float, int]:
    """The table's "Self CPU time total": the self times of the CPU boxes, those numbered below `counted` (the Python
    frames past them nest the others but are no box of the table's); and how many boxes Perfetto will not draw.

    A box's self time is its duration less its children's. We nest the boxes as torch does
    (`EventList._populate_cpu_children`): a box is the child of the innermost open box on its thread that
    holds it whole; one that only overlaps is nobody's child. Python frames (with_stack=True) take part in
    the nesting, so an op's Python children come off its self time, but `key_averages()` leaves the frames
    out of its rows and so of the total.

    Perfetto nests a thread's boxes alike, but drops a box that starts inside an open one and ends after it (its
    stat `slice_drop_overlapping_complete_event`, pytorch issue #174555) and nests what follows in the boxes it
    kept. Until a thread's first such box the two walks hold the same boxes open, so the walk here finds it (one
    comparison when a box closes); only a thread that has one is walked again, as Perfetto does, to count them all.
    """
    packed = lanes.packed
    total_ns = 0
    undrawn = 0
    for spans in lanes.threads.values():
        stack: list[tuple[int, bool]] = []  # (end, counted) of the open boxes
        crossed = False  # a box started inside an open one and ended after it
        for key in spans:
            if packed:  # _unpacked, written out: a call per box was a tenth of this walk
                start, end, i = (key >> 96) - _HALF, _HALF - ((key >> 32) & _ENDS), key & _INDICES
            else:
                start, end, i = key[0], -key[1], key[2]
            while stack and (start >= stack[-1][0] or end > stack[-1][0]):
                if start < stack[-1][0]:
                    crossed = True
                stack.pop()
            is_counted = i < counted
            if is_counted:
                total_ns += end - start
            if stack and stack[-1][1]:  # the parent's self time loses this child's whole duration
                total_ns -= end - start
            stack.append((end, is_counted))
        if crossed:
            undrawn += _undrawn(spans, packed)
    return total_ns / 1000, undrawn


def _undrawn(spans: list, packed: bool) -> int:
    """How many of a thread's boxes (sorted, as self_cpu_total holds them, in ns) Perfetto drops (overlaps.undrawn).

    Times within what a float holds of them (µs since the epoch, 1.7e15, times 1000: a few hundred ns) are one
    instant: the differences are the conversion's, not the trace's, which Perfetto reads exactly. (Without it, 444 of a
    DeepSeek-V3 trace's boxes, in whole µs, ended or started tens of ns off their parents' ends; an exact count of its
    decimal times finds none, as this one does, and the same 12 and 1 on the two world traces that have them.)"""
    if not spans:
        return 0
    first = _unpacked(spans[0])[0] if packed else spans[0][0]
    slack = round(2 * math.ulp(abs(first) / 1000) * 1000)  # ns
    if packed:  # unpacked in place: a call per box was half of this walk
        ends = (((key >> 96) - _HALF, _HALF - ((key >> 32) & _ENDS)) for key in spans)
    else:
        ends = ((start, -neg_end) for start, neg_end, _ in spans)
    return undrawn(ends, slack)


def _unpacked(key: int) -> tuple[int, int, int]:
    """A packed box (self_cpu_total) as (start, -end, index)."""
    return (key >> 96) - _HALF, ((key >> 32) & _ENDS) - _HALF, key & _INDICES


def nest(ops: list[CpuOp], runtime: list[RuntimeCall], launches: Counter, lanes: Lanes) -> None:
    """Walk each thread's boxes in time order with a stack: self times, paths, launching ops, launched counts.

    launches: id(runtime call) -> how many pieces of GPU work it launched. lanes: each thread's boxes sorted
    (by_thread), the ops' indices first, then the runtime calls': the ops come before runtime calls at the same
    instant, outer boxes (longer) before inner ones, then the order they came in; the boxes past them (steps, Python
    frames) are not walked here.
    """
    boxes: list = [*ops, *runtime]
    calls_from, past = len(ops), len(boxes)
    known: dict[tuple[str, ...], tuple[str, ...]] = {}  # 157k paths of a 111-step trace, 14 MB, are 2k distinct
    for keys in lanes.threads.values():
        stack: list[CpuOp] = []
        paths: list[tuple[str, ...]] = [()]  # paths[k]: the names of stack[:k], one tuple shared by the boxes inside
        launchers: list[CpuOp | None] = [None]  # launchers[k]: the innermost op (not a label) of stack[:k]
        for key in keys:
            i = key & _INDICES if lanes.packed else key[2]
            if i >= past:
                continue
            item = boxes[i]
            ts = item.ts
            while stack and stack[-1].ts + stack[-1].dur <= ts:  # it ended: not a parent of what follows
                stack.pop()
                paths.pop()
                launchers.pop()
            if stack and not stack[-1].is_label:
                stack[-1].self_us -= item.dur
            if i >= calls_from:
                launcher = launchers[-1]
                item.launched_by = launcher.name if launcher else (stack[-1].name if stack else None)
                item.launcher = launcher
                item.launch_path = paths[-1]
                n = launches.get(id(item), 0)
                if n:
                    for op in stack:
                        op.launched += n
            else:
                item.self_us = item.dur or 0.0  # its children, which come after it, take theirs off
                item.path = paths[-1]
                item.parent_op = launchers[-1]
                stack.append(item)
                inner = paths[-1] + (item.name,)
                paths.append(known.setdefault(inner, inner))  # one tuple per distinct path: the steps repeat them
                launchers.append(launchers[-1] if item.is_label else item)
