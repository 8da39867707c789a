"""Read a Chrome trace written by torch.profiler the way the post reads it in Perfetto.

A trace is a flat list of events. Four kinds matter here:

    cpu_op / user_annotation   boxes on a CPU thread: `aten::linear` > `aten::matmul` > `aten::mm`, and labels
                               such as `ProfilerStep#2` or the lesson's `mlp_fwd`
    cuda_runtime / cuda_driver the calls that hand work to the GPU: `cudaLaunchKernel`, `cuLaunchKernelEx`,
                               `cudaMemsetAsync`, ...; they sit inside the op that made them
    kernel / gpu_memset / gpu_memcpy   the work itself, on a GPU stream
    ac2g flows                 arrows from a runtime call to its GPU work

A kernel and the runtime call that launched it share `args.correlation` (the ac2g arrow has the same id).
The op that launched the kernel is the innermost `cpu_op` around that runtime call on its thread: for
`nn.Linear`'s GEMM that is `aten::mm` (inside `aten::matmul`, inside `aten::linear`, inside `mlp_fwd`).
We group everything by `ProfilerStep#N`, the active steps of the profiler's schedule; a runtime call's step
is the one its CPU timestamp falls in, and its GPU work belongs to the same step even when the GPU runs it
later. A trace without `ProfilerStep` events is read as one step.

Traces can be hundreds of MB. We parse the `traceEvents` array one event at a time
(`json.JSONDecoder.raw_decode` over 1 MiB chunks) and keep only the fields we use, so memory grows with the
number of events we keep, not with the size of the JSON text.
"""

from __future__ import annotations

import bisect
import gzip
import io
import json
import re
import zlib
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from common.errors import UsageError
from common.kernel_names import KernelName, decode

CHUNK_CHARS = 1 << 20
MAX_EVENT_CHARS = 64 << 20  # one event (or one metadata value) larger than this is not a profiler trace

GPU_KINDS = {
    "kernel": "kernel",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "xpu_runtime", "privateuse1_runtime"}
OP_CATS = {"cpu_op", "operator"}
ANNOTATION_CATS = {"user_annotation"}
STEP_PREFIX = "ProfilerStep#"
WHOLE_TRACE = "whole trace"

_WS = re.compile(r"[ \t\n\r]*")


# --- the model: what a trace holds, after reading ------------------------------------------------------------


@dataclass(slots=True)
class CpuOp:
    """A box on a CPU thread: an ATen op (`aten::mm`), or a label (`mlp_fwd`) when `is_label`."""

    name: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    is_label: bool = False
    self_us: float = 0.0
    launched: int = 0  # GPU work launched from inside this box, its children's included


@dataclass(slots=True)
class RuntimeCall:
    """A CUDA runtime or driver call: `cudaLaunchKernel`, `cuLaunchKernelEx`, `cudaMemsetAsync`, ..."""

    name: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    correlation: Any
    launched_by: str | None = None
    launch_path: tuple[str, ...] = ()


@dataclass(slots=True)
class GpuWork:
    """One kernel, memset or memcpy on the GPU, with the op and runtime call that launched it."""

    kind: str  # "kernel" | "memset" | "memcpy"
    name: str
    ts: float
    dur: float
    pid: Any  # the GPU lane (pid = device, tid = stream)
    tid: Any
    correlation: Any
    launched_by: str | None = None
    launch_path: tuple[str, ...] = ()  # outermost label or op first, launching op last
    runtime: str | None = None

    @property
    def decoded(self) -> KernelName:
        return decode(self.name)

    @property
    def short_name(self) -> str:
        return decode(self.name).short if self.kind == "kernel" else self.name

    @property
    def is_gemm(self) -> bool:
        return self.kind == "kernel" and decode(self.name).is_gemm


@dataclass
class Step:
    """One profiler step: its CPU box, and the runtime calls, ops and GPU work that belong to it."""

    name: str
    ts: float
    dur: float
    gpu: list[GpuWork] = field(default_factory=list)
    runtime: list[RuntimeCall] = field(default_factory=list)
    ops: list[CpuOp] = field(default_factory=list)

    @property
    def kernels(self) -> list[GpuWork]:
        return [w for w in self.gpu if w.kind == "kernel"]

    @property
    def gemms(self) -> list[GpuWork]:
        return [w for w in self.gpu if w.is_gemm]

    @property
    def sync_us(self) -> float:
        """Time the CPU spent waiting for the GPU (cudaDeviceSynchronize, ...) inside this step."""
        return sum(call.dur for call in self.runtime if "Synchronize" in call.name)

    @property
    def cpu_us(self) -> float:
        """The step's CPU time without the waits: what it costs the CPU to issue the step's work.

        A harness that synchronizes every step (so that each step's GPU work stays inside it) would
        otherwise make every step look at least as long on the CPU as on the GPU.
        """
        return max(0.0, self.dur - self.sync_us)

    @property
    def gpu_time_us(self) -> float:
        """The sum of the GPU work's durations: what the shares are shares of."""
        return sum(w.dur for w in self.gpu)

    @property
    def gpu_busy_us(self) -> float:
        """Time with at least one kernel, memset or memcpy running (overlaps counted once)."""
        return busy_time(self.gpu)

    def op_names(self, labels: bool = False) -> Counter:
        return Counter(op.name for op in self.ops if op.is_label == labels)

    def idle_ops(self) -> Counter:
        """The ops that launched nothing on the GPU (`aten::t`, views, reshapes): 0 µs on the GPU."""
        return Counter(op.name for op in self.ops if not op.is_label and op.launched == 0)

    def launch_counts(self) -> Counter:
        return Counter(call.name for call in self.runtime)


@dataclass
class KernelStat:
    """One GPU work name across all steps: the post's `avg CUDA` table row."""

    kind: str
    name: str
    count: int
    total_us: float
    min_us: float
    max_us: float
    launched_by: str | None

    @property
    def avg_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0

    @property
    def short_name(self) -> str:
        return decode(self.name).short if self.kind == "kernel" else self.name


@dataclass
class Verdict:
    """Overhead-bound or compute-bound, with the numbers behind it (Part 1 of the series)."""

    kind: str  # "overhead-bound" | "compute-bound" | "no GPU data"
    summary: str
    cpu_us_per_step: float
    gpu_busy_us_per_step: float | None = None
    gpu_idle_fraction: float | None = None
    gaps: int | None = None
    longest_gap_us: float | None = None

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "cpu_us_per_step": round(self.cpu_us_per_step, 3),
            "gpu_busy_us_per_step": _round(self.gpu_busy_us_per_step),
            "gpu_idle_fraction": _round(self.gpu_idle_fraction, 4),
            "gpu_gaps": self.gaps,
            "longest_gpu_gap_us": _round(self.longest_gap_us),
        }


@dataclass
class Trace:
    path: Path
    steps: list[Step]
    from_profiler_steps: bool
    device: str | None = None
    labels: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def has_gpu(self) -> bool:
        return any(step.gpu for step in self.steps)

    def gpu_work(self) -> Iterator[GpuWork]:
        for step in self.steps:
            yield from step.gpu

    def kernel_stats(self) -> list[KernelStat]:
        """Per GPU work name across steps, in the order of first appearance."""
        stats: dict[tuple[str, str], KernelStat] = {}
        launchers: dict[tuple[str, str], Counter] = defaultdict(Counter)
        for work in self.gpu_work():
            key = (work.kind, work.name)
            stat = stats.get(key)
            if stat is None:
                stats[key] = KernelStat(work.kind, work.name, 1, work.dur, work.dur, work.dur, None)
            else:
                stat.count += 1
                stat.total_us += work.dur
                stat.min_us = min(stat.min_us, work.dur)
                stat.max_us = max(stat.max_us, work.dur)
            launchers[key][work.launched_by] += 1
        for key, stat in stats.items():
            stat.launched_by = launchers[key].most_common(1)[0][0]
        return list(stats.values())

    def kernel_names(self) -> Counter:
        """Kernel name -> launches per step (an average over the steps)."""
        counts = Counter(w.name for w in self.gpu_work() if w.kind == "kernel")
        return Counter({name: n / len(self.steps) for name, n in counts.items()})

    def verdict(self) -> Verdict:
        return verdict(self)

    def to_dict(self) -> dict:
        return trace_to_dict(self)


# --- reading -------------------------------------------------------------------------------------------------


def read_trace(path: str | Path) -> Trace:
    """Read a torch.profiler Chrome trace (.json or .json.gz); bad input raises UsageError, one line."""
    path = Path(path)
    collector = _Collector(path)
    with _open_text(path) as text:
        source = _TraceSource(text, path)
        try:
            for event in source.events():
                collector.add(event)
        except (EOFError, zlib.error, gzip.BadGzipFile) as err:
            raise UsageError(f"{path}: the gzip stream is cut short or corrupt ({err})") from None
        except UnicodeDecodeError:
            raise UsageError(f"{path}: not UTF-8 text, so not a JSON trace") from None
        except OSError as err:
            raise UsageError(f"{path}: cannot read it ({err.strerror or err})") from None
    if collector.events == 0:
        raise UsageError(f"{path}: the trace holds no events")
    if collector.timed == 0:
        raise UsageError(f"{path}: no timed events (\"ph\": \"X\"): not a trace from torch.profiler")
    return collector.build(path, source.meta)


@contextmanager
def _open_text(path: Path) -> Iterator[io.TextIOBase]:
    """Open a trace as text, gzip or not (told by the magic bytes, not the suffix)."""
    try:
        raw = open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a trace file") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot open it ({err.strerror or err})") from None
    with raw:
        try:
            magic = raw.peek(2)[:2]
        except OSError as err:
            raise UsageError(f"{path}: cannot read it ({err.strerror or err})") from None
        if not magic:
            raise UsageError(f"{path}: the file is empty")
        binary = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        yield io.TextIOWrapper(binary, encoding="utf-8-sig")  # -sig: a byte-order mark is not JSON


class _TraceSource:
    """The trace's top-level object, with `traceEvents` streamed one event at a time.

    Everything else at the top level (deviceProperties, traceName, ...) is small and lands in `meta`.
    """

    def __init__(self, text: io.TextIOBase, path: Path):
        self.text = text
        self.path = path
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped from the front of `buf`, for error positions
        self.meta: dict[str, Any] = {}
        self.decoder = json.JSONDecoder()

    def events(self) -> Iterator[Any]:
        first = self._peek()
        if first == "":
            raise UsageError(f"{self.path}: the file holds only whitespace")
        if first == "[":  # the JSON Array Format of the Chrome trace spec: events only
            yield from self._array()
            self._end()
            return
        if first != "{":
            raise UsageError(f"{self.path}: not a Chrome trace (expected a JSON object with traceEvents)")
        self.pos += 1
        seen_events = False
        while True:
            ch = self._peek()
            if ch == "}":
                self.pos += 1
                break
            key = self._value()
            if not isinstance(key, str):
                self._malformed("expected a key")
            self._expect(":")
            if key == "traceEvents":
                if self._peek() != "[":
                    raise UsageError(f"{self.path}: traceEvents is not a list: not a Chrome trace")
                seen_events = True
                yield from self._array()
            else:
                self.meta[key] = self._value()
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch != "}":
                self._malformed("expected ',' or '}'")
        if not seen_events:
            raise UsageError(f"{self.path}: no traceEvents: JSON, but not a Chrome trace from torch.profiler")
        self._end()

    def _array(self) -> Iterator[Any]:
        self._expect("[")
        if self._peek() == "]":
            self.pos += 1
            return
        while True:
            yield self._value()
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch == "]":
                self.pos += 1
                return
            else:
                self._malformed("expected ',' or ']' between events")

    def _more(self) -> bool:
        if self.eof:
            return False
        # Read at least as much as we hold, so that a long value costs a few reads, not one per MiB.
        chunk = self.text.read(max(CHUNK_CHARS, len(self.buf) - self.pos))
        if not chunk:
            self.eof = True
            return False
        self.consumed += self.pos
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def _peek(self) -> str:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _expect(self, ch: str) -> None:
        if self._peek() != ch:
            self._malformed(f"expected {ch!r}")
        self.pos += 1

    def _value(self) -> Any:
        if self._peek() == "":
            self._malformed("unexpected end")
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                # The value may just continue in the next chunk; past MAX_EVENT_CHARS it is broken.
                if len(self.buf) - self.pos < MAX_EVENT_CHARS and self._more():
                    continue
                cut = self.eof and (err.msg.startswith("Unterminated") or err.pos >= len(self.buf.rstrip()))
                self._malformed(err.msg, self.consumed + err.pos, cut)
            if end == len(self.buf) and self._more():  # a number cut at the chunk's end: read on
                continue
            self.pos = end
            return value

    def _end(self) -> None:
        if self._peek() != "":
            self._malformed("extra data after the trace")

    def _malformed(self, what: str, at: int | None = None, cut: bool | None = None) -> None:
        if at is None:
            at = self.consumed + self.pos
        if cut is None:
            cut = self.eof and self.pos >= len(self.buf)
        hint = ", the file is cut short" if cut else ""
        raise UsageError(f"{self.path}: not valid JSON{hint}: {what.removesuffix(' at')} at character {at:,}")


class _Collector:
    """Keeps the few fields we use from each event; names are interned (kernels repeat a lot)."""

    def __init__(self, path: Path):
        self.path = path
        self.events = 0
        self.timed = 0
        self.names: dict[str, str] = {}
        self.lanes: dict[Any, Any] = {}  # pid and tid values, shared: a big trace repeats a handful of them
        self.steps: list[tuple[str, float, float]] = []
        self.ops: list[CpuOp] = []
        self.runtime: list[RuntimeCall] = []
        self.gpu: list[GpuWork] = []
        self.flow_start: dict[Any, tuple] = {}  # ac2g id -> (pid, tid, ts) of the runtime call
        self.flow_end: dict[tuple, Any] = {}  # (pid, tid, ts) of the GPU work -> ac2g id

    def add(self, ev: Any) -> None:
        if type(ev) is not dict:
            raise UsageError(f"{self.path}: traceEvents holds {type(ev).__name__} values, not event objects: not a Chrome trace")
        self.events += 1
        ph = ev.get("ph")
        if ph == "X":
            self.timed += 1
            cat = ev.get("cat")
            if not isinstance(cat, str):
                return
            cat = cat.lower()
            try:
                ts = float(ev["ts"])
                dur = float(ev.get("dur") or 0.0)
            except (KeyError, TypeError, ValueError):
                return
            name = ev.get("name")
            name = self.names.setdefault(name, name) if isinstance(name, str) else "?"
            lanes = self.lanes
            pid, tid = ev.get("pid"), ev.get("tid")
            pid, tid = lanes.setdefault(pid, pid), lanes.setdefault(tid, tid)
            if cat in OP_CATS:
                self.ops.append(CpuOp(name, ts, dur, pid, tid))
            elif cat in ANNOTATION_CATS:
                if name.startswith(STEP_PREFIX):
                    self.steps.append((name, ts, dur))
                else:
                    self.ops.append(CpuOp(name, ts, dur, pid, tid, is_label=True))
            elif cat in RUNTIME_CATS:
                args = ev.get("args") or {}
                self.runtime.append(RuntimeCall(name, ts, dur, pid, tid, args.get("correlation")))
            elif cat in GPU_KINDS:
                args = ev.get("args") or {}
                self.gpu.append(GpuWork(GPU_KINDS[cat], name, ts, dur, pid, tid, args.get("correlation")))
        elif (ph == "s" or ph == "f") and ev.get("cat") == "ac2g":
            key = (ev.get("pid"), ev.get("tid"), ev.get("ts"))
            if ph == "s":
                self.flow_start[ev.get("id")] = key
            else:
                self.flow_end[key] = ev.get("id")

    def build(self, path: Path, meta: dict) -> Trace:
        notes: list[str] = []
        steps = [Step(name, ts, dur) for name, ts, dur in sorted(self.steps, key=lambda s: s[1])]
        from_profiler_steps = bool(steps)
        if not steps:
            spans = [(o.ts, o.ts + o.dur) for o in self.ops] + [(r.ts, r.ts + r.dur) for r in self.runtime]
            spans += [(w.ts, w.ts + w.dur) for w in self.gpu]
            start = min(s for s, _ in spans) if spans else 0.0
            end = max(e for _, e in spans) if spans else 0.0
            steps = [Step(WHOLE_TRACE, start, end - start)]
            notes.append("no ProfilerStep events: the whole trace is read as one step")

        calls = _link(self.runtime, self.gpu, self.flow_start, self.flow_end)
        self.flow_start.clear()
        self.flow_end.clear()
        _nest(self.ops, self.runtime, Counter(id(call) for call in calls.values()))
        for work in self.gpu:
            call = calls.get(id(work))
            if call is not None:
                work.launched_by, work.launch_path, work.runtime = call.launched_by, call.launch_path, call.name

        starts = [s.ts for s in steps]
        for op in self.ops:
            step = _step_at(steps, starts, op.ts)
            if step is not None:
                step.ops.append(op)
        for call in self.runtime:
            step = _step_at(steps, starts, call.ts)
            if step is not None:
                step.runtime.append(call)
        for work in self.gpu:
            call = calls.get(id(work))
            # GPU work belongs to the step that launched it; without a launch, to the step it runs in.
            step = _step_at(steps, starts, call.ts if call is not None else work.ts)
            if step is not None:
                step.gpu.append(work)
        for step in steps:
            step.gpu.sort(key=lambda w: w.ts)

        labels = Counter(op.name for op in self.ops if op.is_label)
        device = None
        props = meta.get("deviceProperties")
        if isinstance(props, list) and props and isinstance(props[0], dict):
            device = props[0].get("name")
            major, minor = props[0].get("computeMajor"), props[0].get("computeMinor")
            if device and major is not None:
                device = f"{device} (sm{major}{minor or 0})"
        if not any(s.gpu for s in steps):
            notes.append("no GPU work in the trace: a CPU-only profile (or CUDA activity was not recorded)")
        return Trace(path, steps, from_profiler_steps, device, labels, notes)


def _nest(ops: list[CpuOp], runtime: list[RuntimeCall], launches: Counter) -> None:
    """Walk each thread's boxes in time order with a stack: self times, launching ops, launched counts.

    launches: id(runtime call) -> how many pieces of GPU work it launched.
    """
    threads: dict[tuple, list] = defaultdict(list)
    for op in ops:
        # ops before runtime calls at the same instant, outer boxes (longer) before inner ones
        threads[(op.pid, op.tid)].append((op.ts, -op.dur, 0, op))
    for call in runtime:
        threads[(call.pid, call.tid)].append((call.ts, -call.dur, 1, call))
    for items in threads.values():
        items.sort(key=lambda item: item[:3])
        stack: list[CpuOp] = []
        for ts, _, is_call, item in items:
            while stack and stack[-1].ts + stack[-1].dur <= ts:  # it ended: not a parent of what follows
                stack.pop()
            if stack and not stack[-1].is_label:
                stack[-1].self_us -= item.dur
            if is_call:
                launcher = next((op for op in reversed(stack) if not op.is_label), None)
                item.launched_by = launcher.name if launcher else (stack[-1].name if stack else None)
                item.launch_path = tuple(op.name for op in stack)
                n = launches.get(id(item), 0)
                if n:
                    for op in stack:
                        op.launched += n
            else:
                item.self_us += item.dur
                stack.append(item)


def _link(runtime: list[RuntimeCall], gpu: list[GpuWork], flow_start: dict, flow_end: dict) -> dict[int, RuntimeCall]:
    """Find each piece of GPU work's runtime call: by correlation id, else by the ac2g arrow.

    Returns id(work) -> call.
    """
    by_corr = {call.correlation: call for call in runtime if call.correlation is not None}
    by_place = None
    calls: dict[int, RuntimeCall] = {}
    for work in gpu:
        call = by_corr.get(work.correlation) if work.correlation is not None else None
        if call is None and flow_end:
            flow_id = flow_end.get((work.pid, work.tid, work.ts))
            place = flow_start.get(flow_id) if flow_id is not None else None
            if place is not None:
                if by_place is None:
                    by_place = {(c.pid, c.tid, c.ts): c for c in runtime}
                call = by_place.get((place[0], place[1], float(place[2])))
        if call is not None:
            calls[id(work)] = call
    return calls


def _step_at(steps: list[Step], starts: list[float], ts: float) -> Step | None:
    i = bisect.bisect_right(starts, ts) - 1
    if i < 0:
        return None
    step = steps[i]
    return step if ts <= step.ts + step.dur else None


def busy_time(work: list[GpuWork]) -> float:
    """The union of the intervals' lengths."""
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


def gaps(work: list[GpuWork], min_us: float = 0.0) -> list[float]:
    """Idle stretches between consecutive GPU work (all streams together)."""
    found = []
    end = None
    for w in sorted(work, key=lambda w: w.ts):
        if end is not None and w.ts - end > min_us:
            found.append(w.ts - end)
        end = w.ts + w.dur if end is None else max(end, w.ts + w.dur)
    return found


# --- verdict -------------------------------------------------------------------------------------------------


def verdict(trace: Trace) -> Verdict:
    """Who sets the pace: the CPU issuing work (overhead-bound) or the GPU running it (compute-bound).

    Per step we compare the CPU's time (the ProfilerStep box, less any time spent waiting in a
    synchronize) with the GPU's busy time. When the GPU works less than the CPU spends launching, it
    waits for work, and the gaps on its lane show it.
    """
    steps = trace.steps
    cpu = sum(s.cpu_us for s in steps) / len(steps)
    if not trace.has_gpu:
        return Verdict(
            "no GPU data",
            "no GPU data: the trace has no GPU lane (a CPU-only profile), so there is no GPU to be idle; "
            f"the CPU spends {cpu:,.1f} µs per step",
            cpu,
        )
    busy = sum(s.gpu_busy_us for s in steps) / len(steps)
    # Idle time counts step by step, over what Perfetto shows as the step: its CPU box and the GPU work it
    # launched. The stretch between two steps belongs to the profiling loop (prof.step()), not to the code.
    window = sum(
        max(s.ts + s.dur, *(w.ts + w.dur for w in s.gpu)) - min(s.ts, *(w.ts for w in s.gpu))
        for s in steps
        if s.gpu
    )
    found = [gap for s in steps for gap in gaps(s.gpu, min_us=1.0)]
    idle = max(0.0, 1.0 - busy * len(steps) / window) if window > 0 else 0.0
    ratio = busy / cpu if cpu > 0 else float("inf")
    numbers = (
        f"GPU busy {busy:,.1f} µs per step against {cpu:,.1f} µs of CPU time per step ({ratio:.0%}); "
        f"the GPU idles {idle:.0%} of each step ({len(found)} gaps over 1 µs between kernels"
        + (f", the longest {max(found):,.1f} µs)" if found else ")")
    )
    if ratio < 1.0:
        kind = "overhead-bound"
        why = (
            "the CPU takes longer to issue the work than the GPU takes to run it, so the GPU waits "
            "(the profiler itself adds CPU time to every op: time the code without it before concluding)"
        )
    else:
        kind = "compute-bound"
        why = "the GPU's kernels take longer than the CPU needs to launch them, so launch overhead hides"
    if 0.8 <= ratio <= 1.25:
        why += " (close to the line: both sides matter)"
    return Verdict(kind, f"{kind}: {why}. {numbers}", cpu, busy, idle, len(found), max(found) if found else 0.0)


# --- diff ----------------------------------------------------------------------------------------------------


@dataclass
class TraceDiff:
    """Two traces' kernels side by side: only in the first, only in the second, in both (byte-identical)."""

    first: Trace
    second: Trace
    only_in_first: list[str]
    only_in_second: list[str]
    in_both: list[str]

    def to_dict(self) -> dict:
        a, b = self.first.kernel_names(), self.second.kernel_names()

        def row(name: str) -> dict:
            return {"name": name, "short_name": decode(name).short, "per_step": [_round(a.get(name, 0.0)), _round(b.get(name, 0.0))]}

        return {
            "only_in_first": [row(n) for n in self.only_in_first],
            "only_in_second": [row(n) for n in self.only_in_second],
            "in_both": [row(n) for n in self.in_both],
            "step_time_us": [_step_times(self.first), _step_times(self.second)],
        }


def diff(first: Trace, second: Trace) -> TraceDiff:
    a, b = first.kernel_names(), second.kernel_names()
    return TraceDiff(
        first,
        second,
        [n for n in a if n not in b],
        [n for n in b if n not in a],
        [n for n in a if n in b],
    )


def _step_times(trace: Trace) -> dict:
    n = len(trace.steps)
    busy = sum(s.gpu_busy_us for s in trace.steps) / n if trace.has_gpu else None
    cpu = sum(s.cpu_us for s in trace.steps) / n
    return {"trace": trace.name, "cpu_us_per_step": round(cpu, 3), "gpu_busy_us_per_step": _round(busy)}


# --- JSON ----------------------------------------------------------------------------------------------------


def trace_to_dict(trace: Trace) -> dict:
    """The report as plain data: what `trace-report --json` prints."""
    steps = []
    for step in trace.steps:
        total = step.gpu_time_us
        gpu = [
            {
                "kind": w.kind,
                "name": w.name,
                "short_name": w.short_name,
                "launched_by": w.launched_by,
                "launch_path": list(w.launch_path),
                "runtime_call": w.runtime,
                "dur_us": round(w.dur, 3),
                "share": round(w.dur / total, 4) if total else None,
                "start_us": round(w.ts - step.ts, 3),
            }
            for w in step.gpu
        ]
        cpu_ops: dict[str, dict] = {}
        for op in step.ops:
            if op.is_label:
                continue
            row = cpu_ops.setdefault(op.name, {"name": op.name, "count": 0, "cpu_us": 0.0, "self_us": 0.0, "launched_gpu_work": 0})
            row["count"] += 1
            row["cpu_us"] += op.dur
            row["self_us"] += op.self_us
            row["launched_gpu_work"] += op.launched
        for row in cpu_ops.values():
            row["cpu_us"] = round(row["cpu_us"], 3)
            row["self_us"] = round(row["self_us"], 3)
        runtime: dict[str, dict] = {}
        for call in step.runtime:
            row = runtime.setdefault(call.name, {"name": call.name, "count": 0, "total_us": 0.0})
            row["count"] += 1
            row["total_us"] += call.dur
        for row in runtime.values():
            row["total_us"] = round(row["total_us"], 3)
        steps.append(
            {
                "name": step.name,
                "cpu_us": round(step.dur, 3),
                "sync_us": round(step.sync_us, 3),
                "gpu_time_us": round(total, 3),
                "gpu_busy_us": round(step.gpu_busy_us, 3),
                "kernels": len(step.kernels),
                "gemms": len(step.gemms),
                "gpu": gpu,
                "runtime_calls": list(runtime.values()),
                "idle_cpu_ops": [{"name": n, "count": c} for n, c in step.idle_ops().items()] if trace.has_gpu else [],
                "cpu_ops": list(cpu_ops.values()),
                "labels": dict(step.op_names(labels=True)),
            }
        )
    kernels = [
        {
            "kind": s.kind,
            "name": s.name,
            "short_name": s.short_name,
            "decoded": decode(s.name).describe() if s.kind == "kernel" else "",
            "is_gemm": s.kind == "kernel" and decode(s.name).is_gemm,
            "count": s.count,
            "per_step": round(s.count / len(trace.steps), 3),
            "avg_us": round(s.avg_us, 3),
            "min_us": round(s.min_us, 3),
            "max_us": round(s.max_us, 3),
            "total_us": round(s.total_us, 3),
            "launched_by": s.launched_by,
        }
        for s in trace.kernel_stats()
    ]
    return {
        "trace": trace.name,
        "device": trace.device,
        "steps_from": "ProfilerStep" if trace.from_profiler_steps else WHOLE_TRACE,
        "steps": steps,
        "kernels": kernels,
        "verdict": trace.verdict().to_dict(),
        "notes": trace.notes,
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
