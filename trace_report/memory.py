"""Where the memory goes, from the `[memory]` events of a trace recorded with `profile_memory=True`.

With `profile_memory=True` the profiler writes an instant event for every allocation and free the allocator makes
while it records:

    {"ph": "i", "name": "[memory]", "ts": ..., "tid": ..., "args": {"Addr": ..., "Bytes": 32768 (negative: a free),
     "Total Allocated": ..., "Total Reserved": ..., "Device Type": 1 (CUDA; 0 the CPU), "Device Id": 0}}

Parsing (`memory_event`, which the reader calls for each such event) is apart from the analysis (`memory_peaks`):
per device, the peak of "Total Allocated", when it happened (the step, the `record_function` ranges open then, the op
that allocated last), and which ops allocated what is live at that moment, replaying allocations and frees by address.
On a GPU "Total Allocated" is the caching allocator's `memory_allocated()`, everything allocated before the recording
included (the weights, the optimizer's state, cuBLAS's workspace): what no event of the trace allocated is shown as
"allocated before the recording". On a CPU the profiler counts only what it saw allocated since it started.

It reads any torch.profiler trace: one without memory events gives no peak (`memory_peaks` returns []).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.table import Table

from trace_report.errors import readable_bytes

MEMORY_EVENT = "[memory]"
DEVICE_TYPES = {0: "cpu", 1: "cuda"}  # c10::DeviceType: the two a trace of ours holds (others keep their number)
BEFORE_RECORDING = "allocated before the recording"
TOP_ALLOCATORS = 8


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One allocation (nbytes > 0) or free (nbytes < 0), with the allocator's totals just after it."""

    ts: float
    pid: Any
    tid: Any
    addr: int
    nbytes: int
    total_allocated: int
    total_reserved: int
    device: str  # "cuda:0", "cpu"


def memory_event(ev: dict) -> MemoryEvent | None:
    """A `[memory]` instant event as the profiler writes it, or None when its fields are not those."""
    args = ev.get("args")
    ts = ev.get("ts")
    if type(args) is not dict or type(ts) not in (int, float):
        return None
    addr, nbytes, total = args.get("Addr"), args.get("Bytes"), args.get("Total Allocated")
    reserved, kind, index = args.get("Total Reserved", 0), args.get("Device Type"), args.get("Device Id", -1)
    if not all(type(v) is int for v in (addr, nbytes, total, reserved, kind, index)):
        return None
    name = DEVICE_TYPES.get(kind, f"device type {kind}")
    device = name if index < 0 else f"{name}:{index}"
    return MemoryEvent(float(ts), ev.get("pid"), ev.get("tid"), addr, nbytes, total, reserved, device)


@dataclass(frozen=True)
class Allocator:
    """An op that allocated blocks still live at the peak, and where it ran."""

    op: str
    where: str  # the labels around it ("mlp_bwd"), or "" outside any
    nbytes: int
    blocks: int

    def to_dict(self) -> dict:
        return {"op": self.op, "where": self.where, "bytes": self.nbytes, "blocks": self.blocks}


@dataclass
class DevicePeak:
    """The peak of one device's allocated memory, and what was live then."""

    device: str
    peak_bytes: int
    reserved_bytes: int  # the allocator's reserved memory at that moment (a CPU trace says 0)
    ts: float
    step: str | None  # the ProfilerStep# it fell in, or None outside the recorded steps
    offset_us: float | None  # from that step's start
    ranges: tuple[str, ...]  # the record_function ranges open then, outermost first (ProfilerStep# left out)
    op: str | None  # the op that made the peak's allocation (the innermost op around it on its thread)
    events: int  # memory events of this device in the trace
    allocators: list[Allocator] = field(default_factory=list)  # most bytes first
    before_recording: int = 0  # of the peak, what no allocation of the trace made

    @property
    def phase(self) -> str | None:
        """The innermost record_function range the peak fell in (`mlp_bwd`), or None."""
        return self.ranges[-1] if self.ranges else None

    def to_dict(self) -> dict:
        return {
            "device": self.device, "peak_bytes": self.peak_bytes, "reserved_bytes": self.reserved_bytes,
            "ts": self.ts, "step": self.step, "offset_us": None if self.offset_us is None else round(self.offset_us, 3),
            "ranges": list(self.ranges), "op": self.op, "events": self.events,
            "allocators": [a.to_dict() for a in self.allocators], "before_recording_bytes": self.before_recording,
        }


def memory_peaks(trace, top: int = TOP_ALLOCATORS) -> list[DevicePeak]:
    """Per device with memory events, its peak and what was live then; [] for a trace without memory events."""
    by_device: dict[str, list[MemoryEvent]] = defaultdict(list)
    for event in trace.memory_events:
        by_device[event.device].append(event)
    if not by_device:
        return []
    places = _Places(trace)
    return [_peak(device, sorted(events, key=lambda e: e.ts), places, top) for device, events in sorted(by_device.items())]


def _peak(device: str, events: list[MemoryEvent], places: _Places, top: int) -> DevicePeak:
    at = max(range(len(events)), key=lambda i: (events[i].total_allocated, -i))  # the first time it is reached
    peak = events[at]
    live: dict[int, MemoryEvent] = {}
    for event in events[: at + 1]:
        if event.nbytes > 0:
            live[event.addr] = event
        else:
            live.pop(event.addr, None)
    grouped: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for event in live.values():
        op, labels = places.around(event)
        row = grouped[(op or "(no op)", " > ".join(labels))]
        row[0] += event.nbytes
        row[1] += 1
    allocators = sorted((Allocator(op, where, n, b) for (op, where), (n, b) in grouped.items()), key=lambda a: -a.nbytes)
    seen = sum(a.nbytes for a in allocators)
    step = places.step_at(peak.ts)
    op, labels = places.around(peak)
    return DevicePeak(
        device, peak.total_allocated, peak.total_reserved, peak.ts, step.name if step else None,
        peak.ts - step.ts if step else None, tuple(labels), op, len(events), allocators[:top],
        max(0, peak.total_allocated - seen),
    )


class _Places:
    """Where an event happened: its step, the labels open then (any thread: on a GPU autograd's thread allocates
    while the main thread's `mlp_bwd` is open), and the innermost op around it on its own thread."""

    def __init__(self, trace):
        self.steps = trace.steps
        self.starts = [s.ts for s in self.steps]
        ops = [op for step in trace.steps for op in step.ops] + list(trace.ops_outside_steps)
        # Each step's labels apart (and those outside any): a model's trace has thousands of module ranges.
        self.labels: dict[int, list] = {
            i: [op for op in step.ops if op.is_label] for i, step in enumerate(self.steps)}
        self.labels[-1] = [op for op in trace.ops_outside_steps if op.is_label]
        self.by_thread: dict[tuple, list] = defaultdict(list)
        for op in ops:
            if not op.is_label:
                self.by_thread[(op.pid, op.tid)].append(op)
        self.thread_starts: dict[tuple, list[float]] = {}
        for key, thread_ops in self.by_thread.items():
            thread_ops.sort(key=lambda op: op.ts)
            self.thread_starts[key] = [op.ts for op in thread_ops]

    def step_index(self, ts: float) -> int:
        i = bisect.bisect_right(self.starts, ts) - 1
        return i if i >= 0 and ts <= self.steps[i].ts + self.steps[i].dur else -1

    def step_at(self, ts: float):
        i = self.step_index(ts)
        return self.steps[i] if i >= 0 else None

    def around(self, event: MemoryEvent) -> tuple[str | None, list[str]]:
        ts = event.ts
        inside = sorted((op for op in self.labels[self.step_index(ts)] if op.ts <= ts <= op.ts + op.dur),
                        key=lambda op: op.ts)
        labels = [op.name for op in inside]
        key = (event.pid, event.tid)
        thread_ops, starts = self.by_thread.get(key, []), self.thread_starts.get(key, [])
        i = bisect.bisect_right(starts, ts) - 1
        while i >= 0:  # the latest-starting op that still holds ts is the innermost
            op = thread_ops[i]
            if op.ts + op.dur >= ts:
                return op.name, labels
            i -= 1
        return None, labels


def memory_to_dict(peaks: list[DevicePeak]) -> list[dict]:
    """The `memory` key of `trace-report --json`: one entry per device ([] without memory events)."""
    return [p.to_dict() for p in peaks]


def print_memory(peaks: list[DevicePeak], console, rows: int | None = TOP_ALLOCATORS) -> None:
    """The report's section: per device the peak, when, and the ops that allocated what was live then. A trace
    without memory events prints nothing (it was recorded without profile_memory=True)."""
    for p in peaks:
        when = f"{p.step} at {p.offset_us / 1000:.3f} ms" if p.step else "outside the recorded steps"
        inside = f", in {' > '.join(p.ranges)}" if p.ranges else ""
        by = f", by {p.op}" if p.op else ""
        reserved = f" (reserved {readable_bytes(p.reserved_bytes)})" if p.reserved_bytes else ""
        cpu = (": a CPU's count starts with the recording, what was allocated before (the weights) is not in it"
               if p.device == "cpu" else "")
        console.print(f"[bold]Memory[/bold] on {p.device}: peak {readable_bytes(p.peak_bytes)} allocated{reserved}, "
                      f"{escape(when)}{escape(inside)}{escape(by)} ({p.events:,} memory events{cpu})")
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("live at the peak, allocated by", overflow="fold")
        table.add_column("in", overflow="fold")
        table.add_column("bytes", justify="right")
        table.add_column("share", justify="right")
        table.add_column("blocks", justify="right")
        shown = p.allocators if rows is None else p.allocators[:rows]
        for a in shown:
            table.add_row(escape(a.op), escape(a.where or "-"), readable_bytes(a.nbytes),
                          f"{a.nbytes / p.peak_bytes:.0%}" if p.peak_bytes else "-", str(a.blocks))
        if p.before_recording:
            table.add_row(BEFORE_RECORDING, "-", readable_bytes(p.before_recording),
                          f"{p.before_recording / p.peak_bytes:.0%}" if p.peak_bytes else "-", "-")
        console.print(table)
        console.print()


# --- the profiler's memory timeline by category, as a lesson writes it into its trace ------------------------

TIMELINE_KEY = "memoryTimeline"  # the trace's top-level key: CategoryTimeline.to_dict()
# torch.profiler._memory_profiler.Category's names as a reader says them, in the order the picture stacks them.
CATEGORY_NAMES = {
    "PARAMETER": "parameters", "OPTIMIZER_STATE": "optimizer state", "INPUT": "inputs", "TEMPORARY": "temporaries",
    "ACTIVATION": "activations", "GRADIENT": "gradients", "AUTOGRAD_DETAIL": "autograd detail",
    "UNKNOWN": "unknown (no tensor)",
}
UNTOUCHED = "allocated before, touched by no op"  # the allocator's bytes the profiler never saw used (cuBLAS's workspace)


@dataclass
class CategoryTimeline:
    """Bytes per category over time (torch's MemoryProfileTimeline, one device), on the trace's clock, and what the
    lesson measured beside it (`extras`: torch.cuda.max_memory_allocated over the profile, ...)."""

    device: str
    categories: tuple[str, ...]  # CATEGORY_NAMES' keys
    times_us: list[float]  # the trace's `ts` clock
    sizes: list[list[int]]  # per time, bytes per category
    extras: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"device": self.device, "categories": list(self.categories), "times_us": self.times_us,
                "sizes": self.sizes, "extras": self.extras}

    @classmethod
    def of(cls, trace) -> CategoryTimeline | None:
        """The timeline a lesson wrote into `trace`, or None (any other trace)."""
        data = trace.meta.get(TIMELINE_KEY)
        if not isinstance(data, dict):
            return None
        try:
            timeline = cls(str(data["device"]), tuple(data["categories"]), [float(t) for t in data["times_us"]],
                           [[int(b) for b in row] for row in data["sizes"]], dict(data.get("extras") or {}))
        except (KeyError, TypeError, ValueError):
            return None
        if not timeline.times_us or len(timeline.times_us) != len(timeline.sizes):
            return None
        if timeline.extras.get("clock") == "absolute":  # the profiler's clock: the trace's is that minus its base
            base = trace.meta.get("baseTimeNanoseconds")
            if type(base) is int:
                offset = base / 1000
            else:  # a trace without it: the first point is the first allocation, the device's first [memory] event
                first = min((e.ts for e in trace.memory_events if e.device == timeline.device), default=None)
                offset = timeline.times_us[0] - first if first is not None else 0.0
            timeline.times_us = [t - offset for t in timeline.times_us]
        return timeline

    def total(self, i: int) -> int:
        return sum(self.sizes[i])

    def index_at(self, ts: float) -> int:
        """The last point at or before `ts` (0 before the first)."""
        return max(0, bisect.bisect_right(self.times_us, ts) - 1)

    def peak_index(self, start: float = float("-inf"), end: float = float("inf")) -> int | None:
        """The first point of the highest total between start and end, or None when none lies there."""
        inside = [i for i, t in enumerate(self.times_us) if start <= t <= end]
        return max(inside, key=lambda i: (self.total(i), -i)) if inside else None

    def split(self, i: int) -> dict[str, int]:
        """Bytes per category at point i, by CATEGORY_NAMES' words, largest first, empty ones left out."""
        named = {CATEGORY_NAMES.get(c, c.lower()): b for c, b in zip(self.categories, self.sizes[i]) if b}
        return dict(sorted(named.items(), key=lambda kv: -kv[1]))
