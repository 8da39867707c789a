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

What falls outside every step is kept apart (`Trace.runtime_outside_steps`, ...), not dropped: the script
does not wait for the GPU inside its steps, so the CPU lane runs ahead of the GPU lane, and the profiler's
own flush at the end of the active window, one long `cudaDeviceSynchronize` after the last step
(`Trace.closing_sync`), is where the CPU waits for the GPU to catch up. `prof.key_averages().table()`
counts that wait in its "Self CPU time total"; `Trace.self_cpu_total_us` does too, and the verdict says
when it decides the answer.

Traces can be hundreds of MB. We parse the `traceEvents` array one event at a time
(`json.JSONDecoder.raw_decode` over 1 MiB chunks) and keep only the fields we use, so memory grows with the
number of events we keep, not with the size of the JSON text.
"""

from __future__ import annotations

import bisect
import gzip
import io
import json
import math
import re
import zlib
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from profiling_in_pytorch.errors import UsageError, first_line
from profiling_in_pytorch.traces.kernel_names import decode

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
PYTHON_CATS = {"python_function"}  # with_stack=True: Python frames; they nest ops, the table leaves them out
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
    path: tuple[str, ...] = ()  # the boxes around it, outermost label or op first, ProfilerStep# left out
    input_dims: tuple = ()  # each input's shape, when the profile ran with record_shapes=True


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

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def is_sync(self) -> bool:
        """cudaDeviceSynchronize, cudaStreamSynchronize, ...: the CPU waiting for the GPU, not issuing work."""
        return "Synchronize" in self.name


@dataclass(slots=True)
class GpuWork:
    """One kernel, memset or memcpy on the GPU, with the runtime call (and so the op) that launched it."""

    kind: str  # "kernel" | "memset" | "memcpy"
    name: str
    ts: float
    dur: float
    pid: Any  # the GPU lane (pid = device, tid = stream)
    tid: Any
    correlation: Any
    launch: RuntimeCall | None = None  # None when the trace does not link it to a runtime call
    registers: int | None = None  # per thread, as CUPTI reports a kernel's launch
    shared_memory: int | None = None  # bytes per block, static and dynamic
    grid: tuple | None = None  # the launch's grid and block dimensions
    block: tuple | None = None
    occupancy: float | None = None  # CUPTI's "est. achieved occupancy %" (0 where it cannot estimate it)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def launched_by(self) -> str | None:
        return self.launch.launched_by if self.launch else None

    @property
    def launch_path(self) -> tuple[str, ...]:
        """Outermost label or op first, launching op last."""
        return self.launch.launch_path if self.launch else ()

    @property
    def runtime(self) -> str | None:
        """The runtime call's name: `cudaLaunchKernel`, `cuLaunchKernelEx`, `cudaMemsetAsync`, ..."""
        return self.launch.name if self.launch else None

    @property
    def launch_ts(self) -> float | None:
        return self.launch.ts if self.launch else None

    @property
    def launch_end(self) -> float | None:
        """When the launch call returned: the earliest the GPU could have had this work in its queue."""
        return self.launch.end if self.launch else None

    @property
    def lag_us(self) -> float | None:
        """How far the GPU lane runs behind the CPU lane here: start on the GPU minus start of the launch call.

        A few µs when the GPU is idle and takes work as it comes; it grows step after step when the CPU
        queues work faster than the GPU runs it (Part 1 saw ~2.5 ms).
        """
        return self.ts - self.launch.ts if self.launch else None

    @property
    def short_name(self) -> str:
        return short_work_name(self.kind, self.name)

    @property
    def is_gemm(self) -> bool:
        return self.kind == "kernel" and decode(self.name).is_gemm


class _GpuWorkViews:
    """The kernels and the GEMMs among a part of a trace's GPU work (`gpu`): a step's, or a labelled phase's."""

    gpu: list[GpuWork]

    @property
    def kernels(self) -> list[GpuWork]:
        return [w for w in self.gpu if w.kind == "kernel"]

    @property
    def gemms(self) -> list[GpuWork]:
        return [w for w in self.gpu if w.is_gemm]


@dataclass
class Step(_GpuWorkViews):
    """One profiler step: its CPU box, and the runtime calls, ops and GPU work that belong to it."""

    name: str
    ts: float
    dur: float
    gpu: list[GpuWork] = field(default_factory=list)
    runtime: list[RuntimeCall] = field(default_factory=list)
    ops: list[CpuOp] = field(default_factory=list)

    @property
    def sync_us(self) -> float:
        """Time the CPU spent waiting for the GPU (cudaDeviceSynchronize, ...) inside this step."""
        return sum(call.dur for call in self.runtime if call.is_sync)

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

    def op_rows(self) -> list[dict]:
        """The CPU ops (labels left out) by name, in the order of first appearance: count, CPU µs, self µs and
        the GPU work they launched."""
        rows: dict[str, dict] = {}
        for op in self.ops:
            if op.is_label:
                continue
            row = rows.setdefault(op.name, {"name": op.name, "count": 0, "cpu_us": 0.0, "self_us": 0.0, "launched_gpu_work": 0})
            row["count"] += 1
            row["cpu_us"] += op.dur
            row["self_us"] += op.self_us
            row["launched_gpu_work"] += op.launched
        return list(rows.values())

    def op_names(self, labels: bool = False) -> Counter:
        return Counter(op.name for op in self.ops if op.is_label == labels)

    def idle_ops(self) -> Counter:
        """The ops that launched nothing on the GPU (`aten::t`, views, reshapes): 0 µs on the GPU."""
        return Counter(op.name for op in self.ops if not op.is_label and op.launched == 0)

    def launch_counts(self) -> Counter:
        return Counter(call.name for call in self.runtime)

    def phase(self, label: str) -> Phase | None:
        """What ran while this step's first `label` box was open, on every thread (see Phase); None without one."""
        box = min((op for op in self.ops if op.is_label and op.name == label), key=lambda op: op.ts, default=None)
        if box is None:
            return None
        end = box.ts + box.dur
        ops = [op for op in self.ops if op is not box and box.ts <= op.ts <= end]
        gpu = [w for w in self.gpu if box.ts <= (w.launch_ts if w.launch is not None else w.ts) <= end]
        return Phase(label, box.ts, box.dur, (box.pid, box.tid), ops, gpu)


@dataclass
class Phase(_GpuWorkViews):
    """One labelled part of a step (a training step's `mlp_fwd`, `mlp_bwd`, `optimizer_step`), taken by time.

    On a GPU, autograd runs the backward on its own thread (one per device): the backward's ops and the runtime
    calls that launch its kernels sit under `autograd::engine::evaluate_function: ...` on that thread, not under
    the label the main thread opened around `loss.backward()`, so their paths do not name it. `backward()`
    returns only once that thread has issued everything, so the label's box spans it all in time: a phase holds
    the ops of every thread that start inside the box, and the GPU work whose launch call does (the GPU may run
    it later). On a CPU the backward runs on the calling thread, inside the label, and the same rule holds.
    """

    label: str
    ts: float
    dur: float
    thread: tuple  # (pid, tid) of the label's box: the thread that opened it
    ops: list[CpuOp] = field(default_factory=list)
    gpu: list[GpuWork] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur


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
        return short_work_name(self.kind, self.name)


@dataclass
class Verdict:
    """Overhead-bound or compute-bound, with the numbers behind it (Part 1's cheatsheet).

    Totals are over the recorded window (every active step and the profiler's flush after them), in µs.
    """

    kind: str  # "overhead-bound" | "compute-bound" | "no GPU data"
    summary: str
    steps: int
    self_cpu_total_us: float  # the table's "Self CPU time total"
    self_gpu_total_us: float  # the table's "Self CUDA time total" (0 without a GPU lane)
    sync_wait_us: float  # of the CPU total: waiting in synchronize calls, in the steps and after them
    closing_sync_us: float | None  # of those: the profiler's flush after the last step; None when absent
    cpu_us_per_step: float  # the CPU total less those waits, per step: what issuing the work costs
    gpu_busy_us_per_step: float | None = None  # time with GPU work running, overlaps counted once
    gpu_window_us: float | None = None  # the GPU lane, from its first work's start to its last one's end
    gpu_idle_fraction: float | None = None  # of that window
    gaps: int | None = None  # idle stretches of the GPU lane over MIN_GAP_US
    longest_gap_us: float | None = None
    launch_waits: int | None = None  # of those gaps, the ones where the GPU ran dry before the launch returned
    launch_wait_us: float | None = None
    launch_wait_fraction: float | None = None  # of the GPU window
    max_gpu_lag_us: float | None = None  # the furthest the GPU lane ran behind the CPU lane (GpuWork.lag_us)
    table_totals_say: str | None = None  # what comparing the two table totals alone would answer
    close_to_line: bool = False  # GPU work over CPU issue time within CLOSE_TO_LINE

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "steps": self.steps,
            "self_cpu_total_us": round(self.self_cpu_total_us, 3),
            "self_gpu_total_us": round(self.self_gpu_total_us, 3),
            "sync_wait_us": round(self.sync_wait_us, 3),
            "closing_sync_us": _round(self.closing_sync_us),
            "cpu_us_per_step": round(self.cpu_us_per_step, 3),
            "gpu_busy_us_per_step": _round(self.gpu_busy_us_per_step),
            "gpu_window_us": _round(self.gpu_window_us),
            "gpu_idle_fraction": _round(self.gpu_idle_fraction, 4),
            "gpu_gaps": self.gaps,
            "longest_gpu_gap_us": _round(self.longest_gap_us),
            "launch_waits": self.launch_waits,
            "launch_wait_us": _round(self.launch_wait_us),
            "launch_wait_fraction": _round(self.launch_wait_fraction, 4),
            "max_gpu_lag_us": _round(self.max_gpu_lag_us),
            "table_totals_say": self.table_totals_say,
            "close_to_line": self.close_to_line,
        }


@dataclass
class Trace:
    path: Path
    steps: list[Step]
    from_profiler_steps: bool
    device: str | None = None
    labels: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    # What no step holds, in time order: above all the profiler's closing synchronize after the last step.
    runtime_outside_steps: list[RuntimeCall] = field(default_factory=list)
    ops_outside_steps: list[CpuOp] = field(default_factory=list)
    gpu_outside_steps: list[GpuWork] = field(default_factory=list)  # launched outside the steps (or unlinked, run there)
    # The first GPU's limits as the trace records them (numSms, regsPerMultiprocessor, sharedMemPerMultiprocessor,
    # maxThreadsPerMultiprocessor, warpSize, ...): what a kernel's footprint is weighed against.
    device_properties: dict = field(default_factory=dict)
    # The table's "Self CPU time total": every CPU box's self time (ops, labels, ProfilerStep boxes,
    # runtime calls, in the steps or not). Computed while reading, where the boxes' threads are known.
    self_cpu_total_us: float = 0.0

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def has_gpu(self) -> bool:
        return any(step.gpu for step in self.steps) or bool(self.gpu_outside_steps)

    def gpu_work(self) -> Iterator[GpuWork]:
        """The steps' GPU work, step by step (what the per-step tables and the kernel stats read)."""
        for step in self.steps:
            yield from step.gpu

    def gpu_lane(self) -> list[GpuWork]:
        """All GPU work of the window in time order, the steps' and any outside them: the GPU lane."""
        return sorted([*self.gpu_work(), *self.gpu_outside_steps], key=lambda w: w.ts)

    @property
    def self_gpu_total_us(self) -> float:
        """The table's "Self CUDA time total": kernels, memsets and memcpys, summed (overlaps count twice)."""
        return sum(w.dur for w in self.gpu_lane())

    @property
    def sync_wait_us(self) -> float:
        """Of the Self CPU total, the time spent waiting in synchronize calls, in the steps and after them."""
        return sum(s.sync_us for s in self.steps) + sum(c.dur for c in self.runtime_outside_steps if c.is_sync)

    @property
    def closing_sync(self) -> RuntimeCall | None:
        """The profiler's flush: the first synchronize call that starts after the last step ends.

        When the steps do not wait for their GPU work, this is where the CPU waits for the GPU to finish the
        window's work; it is not CPU work, yet the table counts it in its Self CPU total. None without
        ProfilerStep events (nothing comes after the steps then) or without a synchronize (a CPU trace).
        """
        if not self.from_profiler_steps:
            return None
        last_end = self.steps[-1].ts + self.steps[-1].dur
        return next((c for c in self.runtime_outside_steps if c.is_sync and c.ts >= last_end), None)

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

    def cpu_us_per_step(self) -> float:
        """The mean of the steps' CPU time, waits in a synchronize left out."""
        return sum(s.cpu_us for s in self.steps) / len(self.steps)

    def gpu_busy_us_per_step(self) -> float | None:
        """The mean of the steps' GPU busy time; None without a GPU lane."""
        return sum(s.gpu_busy_us for s in self.steps) / len(self.steps) if self.has_gpu else None

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
    try:
        return collector.build(path, source.meta)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        # JSON that parses but whose fields are not a profiler's (a number where an object should be, ...)
        raise UsageError(f"{path}: not a well-formed torch.profiler trace ({type(err).__name__}: {first_line(err)})") from None


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
            except RecursionError:
                self._malformed("arrays or objects nested too deeply for a trace")
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
        self.steps: list[tuple[str, float, float, Any, Any]] = []  # name, ts, dur, pid, tid
        self.ops: list[CpuOp] = []
        self.runtime: list[RuntimeCall] = []
        self.gpu: list[GpuWork] = []
        self.python_frames: list[tuple[Any, Any, float, float]] = []  # pid, tid, ts, dur: for self times only
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
            except (KeyError, TypeError, ValueError, OverflowError):
                return
            if not (math.isfinite(ts) and math.isfinite(dur)):
                return  # NaN or Infinity: JSON that Python reads, but no time a profiler wrote
            name = ev.get("name")
            name = self.names.setdefault(name, name) if isinstance(name, str) else "?"
            lanes = self.lanes
            pid, tid = _lane(ev.get("pid")), _lane(ev.get("tid"))
            pid, tid = lanes.setdefault(pid, pid), lanes.setdefault(tid, tid)
            args = ev.get("args")
            args = args if isinstance(args, dict) else {}
            if cat in OP_CATS:
                dims = args.get("Input Dims")
                dims = tuple(tuple(d) if isinstance(d, list) else () for d in dims) if isinstance(dims, list) else ()
                self.ops.append(CpuOp(name, ts, dur, pid, tid, input_dims=dims))
            elif cat in ANNOTATION_CATS:
                if name.startswith(STEP_PREFIX):
                    self.steps.append((name, ts, dur, pid, tid))
                else:
                    self.ops.append(CpuOp(name, ts, dur, pid, tid, is_label=True))
            elif cat in RUNTIME_CATS:
                self.runtime.append(RuntimeCall(name, ts, dur, pid, tid, args.get("correlation")))
            elif cat in GPU_KINDS:
                registers, shared = args.get("registers per thread"), args.get("shared memory")
                occupancy = args.get("est. achieved occupancy %")
                self.gpu.append(
                    GpuWork(
                        GPU_KINDS[cat], name, ts, dur, pid, tid, args.get("correlation"),
                        registers=registers if isinstance(registers, int) else None,
                        shared_memory=shared if isinstance(shared, int) else None,
                        grid=_dims3(args.get("grid")),
                        block=_dims3(args.get("block")),
                        occupancy=float(occupancy) if isinstance(occupancy, (int, float)) and math.isfinite(occupancy) else None,
                    )
                )
            elif cat in PYTHON_CATS:
                self.python_frames.append((pid, tid, ts, dur))
        elif (ph == "s" or ph == "f") and ev.get("cat") == "ac2g":
            key = (ev.get("pid"), ev.get("tid"), ev.get("ts"))
            if ph == "s":
                self.flow_start[ev.get("id")] = key
            else:
                self.flow_end[key] = ev.get("id")

    def build(self, path: Path, meta: dict) -> Trace:
        notes: list[str] = []
        steps = [Step(name, ts, dur) for name, ts, dur, _, _ in sorted(self.steps, key=lambda s: s[1])]
        from_profiler_steps = bool(steps)
        if not steps:
            spans = [(o.ts, o.ts + o.dur) for o in self.ops] + [(r.ts, r.ts + r.dur) for r in self.runtime]
            spans += [(w.ts, w.ts + w.dur) for w in self.gpu]
            start = min(s for s, _ in spans) if spans else 0.0
            end = max(e for _, e in spans) if spans else 0.0
            steps = [Step(WHOLE_TRACE, start, end - start)]
            notes.append("no ProfilerStep events: the whole trace is read as one step")

        _link(self.runtime, self.gpu, self.flow_start, self.flow_end)
        self.flow_start.clear()
        self.flow_end.clear()
        launches = Counter(id(work.launch) for work in self.gpu if work.launch is not None)
        _nest(self.ops, self.runtime, launches)
        boxes = [(o.pid, o.tid, o.ts, o.dur, True) for o in self.ops]
        boxes += [(c.pid, c.tid, c.ts, c.dur, True) for c in self.runtime]
        boxes += [(pid, tid, ts, dur, True) for _, ts, dur, pid, tid in self.steps]
        boxes += [(pid, tid, ts, dur, False) for pid, tid, ts, dur in self.python_frames]
        self.python_frames.clear()
        self_cpu_total = _self_cpu_total(boxes)

        starts = [s.ts for s in steps]
        ops_outside: list[CpuOp] = []
        for op in self.ops:
            step = _step_at(steps, starts, op.ts)
            (step.ops if step is not None else ops_outside).append(op)
        runtime_outside: list[RuntimeCall] = []
        for call in self.runtime:
            step = _step_at(steps, starts, call.ts)
            (step.runtime if step is not None else runtime_outside).append(call)
        gpu_outside: list[GpuWork] = []
        for work in self.gpu:
            # GPU work belongs to the step that launched it; without a launch, to the step it runs in.
            step = _step_at(steps, starts, work.launch_ts if work.launch is not None else work.ts)
            (step.gpu if step is not None else gpu_outside).append(work)
        for step in steps:
            step.gpu.sort(key=lambda w: w.ts)
        for outside in (ops_outside, runtime_outside, gpu_outside):
            outside.sort(key=lambda item: item.ts)

        labels = Counter(op.name for op in self.ops if op.is_label)
        device = None
        device_properties: dict = {}
        props = meta.get("deviceProperties")
        if isinstance(props, list) and props and isinstance(props[0], dict):
            device_properties = props[0]
            device = props[0].get("name")
            major, minor = props[0].get("computeMajor"), props[0].get("computeMinor")
            if device and major is not None:
                device = f"{device} (sm{major}{minor or 0})"
        if not self.gpu:
            notes.append("no GPU work in the trace: a CPU-only profile (or CUDA activity was not recorded)")
        return Trace(
            path,
            steps,
            from_profiler_steps,
            device,
            labels,
            notes,
            runtime_outside_steps=runtime_outside,
            ops_outside_steps=ops_outside,
            gpu_outside_steps=gpu_outside,
            self_cpu_total_us=self_cpu_total,
            device_properties=device_properties,
        )


def _lane(value: Any) -> Any:
    """A pid or tid as a key: numbers and strings as they are, anything else (a list, an object) as its text."""
    return value if isinstance(value, (int, float, str)) or value is None else repr(value)


def _dims3(value: Any) -> tuple | None:
    """A launch dimension as the trace gives it (`[24576, 1, 1]`), or None."""
    return tuple(value) if isinstance(value, list) and all(isinstance(v, int) for v in value) else None


def _nest(ops: list[CpuOp], runtime: list[RuntimeCall], launches: Counter) -> None:
    """Walk each thread's boxes in time order with a stack: self times, paths, launching ops, launched counts.

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
                item.path = tuple(op.name for op in stack)
                stack.append(item)


def _link(runtime: list[RuntimeCall], gpu: list[GpuWork], flow_start: dict, flow_end: dict) -> None:
    """Set each piece of GPU work's `launch`, its runtime call: by correlation id, else by the ac2g arrow."""
    by_corr = {call.correlation: call for call in runtime if call.correlation is not None}
    by_place = None
    for work in gpu:
        call = by_corr.get(work.correlation) if work.correlation is not None else None
        if call is None and flow_end:
            flow_id = flow_end.get((work.pid, work.tid, work.ts))
            place = flow_start.get(flow_id) if flow_id is not None else None
            if place is not None:
                if by_place is None:
                    by_place = {(c.pid, c.tid, c.ts): c for c in runtime}
                call = by_place.get((place[0], place[1], float(place[2])))
        work.launch = call


def _self_cpu_total(boxes: list[tuple[Any, Any, float, float, bool]]) -> float:
    """The table's "Self CPU time total": the self times of the CPU boxes (pid, tid, ts, dur, counted).

    A box's self time is its duration less its children's. We nest the boxes as torch does
    (`EventList._populate_cpu_children`): a box is the child of the innermost open box on its thread that
    holds it whole; one that only overlaps is nobody's child. Python frames (with_stack=True) take part in
    the nesting, so an op's Python children come off its self time, but `key_averages()` leaves the frames
    out of its rows and so of the total: those boxes come with counted=False. Times are compared in whole
    ns, as torch does: the trace's timestamps are µs with three decimals.
    """
    threads: dict[tuple, list[tuple[int, int, bool]]] = defaultdict(list)
    for pid, tid, ts, dur, counted in boxes:
        start = round(ts * 1000)
        threads[(pid, tid)].append((start, start + round(dur * 1000), counted))
    total_ns = 0
    for spans in threads.values():
        spans.sort(key=lambda span: (span[0], -span[1]))
        stack: list[tuple[int, int, bool]] = []
        for span in spans:
            start, end, counted = span
            while stack and (start >= stack[-1][1] or end > stack[-1][1]):
                stack.pop()
            if counted:
                total_ns += end - start
            if stack and stack[-1][2]:  # the parent's self time loses this child's whole duration
                total_ns -= end - start
            stack.append(span)
    return total_ns / 1000


def _step_at(steps: list[Step], starts: list[float], ts: float) -> Step | None:
    i = bisect.bisect_right(starts, ts) - 1
    if i < 0:
        return None
    step = steps[i]
    return step if ts <= step.ts + step.dur else None


def per_step_count(value: float) -> str:
    """A count averaged over steps: `3`, or `2.33` when the steps differ."""
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def short_work_name(kind: str, name: str) -> str:
    """A kernel's decoded short name; memsets and memcpys are already short."""
    return decode(name).short if kind == "kernel" else name


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


def launch_waits(work: list[GpuWork], min_us: float = 0.0) -> list[float]:
    """The idle stretches of `gaps` where the GPU waited on the CPU: the next work's launch call returned only
    after everything before it had finished, so the GPU had nothing queued."""
    found = []
    end = None
    for w in sorted(work, key=lambda w: w.ts):
        if end is not None and w.ts - end > min_us and w.launch is not None and w.launch_end > end:
            found.append(w.ts - end)
        end = w.end if end is None else max(end, w.end)
    return found


# --- verdict -------------------------------------------------------------------------------------------------


MIN_GAP_US = 1.0  # shorter idle stretches on the GPU lane are the hardware's own spacing between kernels
STARVED_SHARE = 0.5  # the GPU waited on launches for at least this share of its window: the CPU sets the pace
CLOSE_TO_LINE = (0.8, 1.25)  # GPU work over CPU issue time in this range: both sides matter


def verdict(trace: Trace) -> Verdict:
    """Who sets the pace: the CPU issuing work (overhead-bound) or the GPU running it (compute-bound).

    Part 1's cheatsheet compares the two totals under `prof.key_averages().table()`: Self CPU time total
    against Self CUDA time total. Read raw, the CPU total also holds the time the CPU spent waiting in
    synchronize calls, above all the profiler's own flush after the last step, which lasts as long as the
    GPU still has queued work: the busier the GPU, the bigger the CPU total. So we weigh the CPU's issue time
    (the total less those waits) against the GPU total, and look at the GPU lane itself: an idle stretch
    where the next work's launch call returned only after the GPU had run dry is the GPU waiting on the CPU.
    Overhead-bound when issuing takes longer than running, or the GPU spent STARVED_SHARE of its window
    waiting on launches; compute-bound otherwise. The summary says when the raw totals would answer otherwise.
    """
    n = len(trace.steps)
    cpu_total = trace.self_cpu_total_us
    waits = trace.sync_wait_us
    issue = max(0.0, cpu_total - waits)
    closing = trace.closing_sync
    closing_us = closing.dur if closing is not None else None
    if not trace.has_gpu:
        return Verdict(
            "no GPU data",
            "no GPU data: the trace has no GPU lane (a CPU-only profile), so there is no GPU to be idle; "
            f"Self CPU total {_us(cpu_total)}, {_us(issue / n)} per step",
            n,
            cpu_total,
            0.0,
            waits,
            closing_us,
            issue / n,
        )

    lane = trace.gpu_lane()
    gpu_total = trace.self_gpu_total_us
    busy = busy_time(lane)
    window = max(w.end for w in lane) - lane[0].ts
    idle = gaps(lane, min_us=MIN_GAP_US)
    starved = launch_waits(lane, min_us=MIN_GAP_US)
    starved_us = sum(starved)
    starved_share = starved_us / window if window > 0 else 0.0
    lags = [w.lag_us for w in lane if w.launch is not None]
    max_lag = max(lags) if lags else None

    if issue > gpu_total:
        kind = "overhead-bound"
        why = "issuing the work takes the CPU longer than the GPU takes to run it, so the GPU waits for launches"
    elif starved_share >= STARVED_SHARE:
        kind = "overhead-bound"
        why = (
            f"the GPU sat idle waiting for the next launch {starved_share:.0%} of its window: the recorded ops "
            "issue the work quickly but late, so the CPU's time goes where the table does not look (between steps)"
        )
    else:
        kind = "compute-bound"
        why = "the GPU's work takes longer than the CPU needs to issue it, so launch costs hide behind it"
    ratio = gpu_total / issue if issue > 0 else float("inf")
    close = CLOSE_TO_LINE[0] <= ratio <= CLOSE_TO_LINE[1]
    if close:
        why += f" (close to the line: {ratio:.2f}x as much GPU work as CPU issue time, both sides matter)"
    table_says = "overhead-bound" if cpu_total > gpu_total else "compute-bound"

    sentences = [f"{kind}: {why}", _totals_sentence(cpu_total, gpu_total, waits, closing)]
    sentences.append(f"Per step ({n}): the CPU issues work for {_us(issue / n)}, the GPU is busy {_us(busy / n)}")
    lane_text = (
        f"The GPU waited on a launch {len(starved)} time{'s' if len(starved) != 1 else ''} "
        f"({_us(starved_us)}, {starved_share:.0%} of its {_us(window)} window; idle {1 - busy / window:.0%} in all)"
        if window > 0
        else "The GPU lane holds a single instant"
    )
    if max_lag is not None:
        lane_text += f"; its work started up to {_us(max_lag)} after the launch call"
    sentences.append(lane_text)
    if table_says != kind:
        alone = f"The table's totals alone would say {table_says} ({_us(cpu_total)} against {_us(gpu_total)})"
        if kind == "compute-bound":
            sentences.append(
                f"{alone}, but {_waits_phrase(waits, closing)}: the CPU waiting for the GPU, not issuing work, "
                f"decides it. Without the waits the CPU spends {_us(issue)} issuing {_us(gpu_total)} of GPU "
                "work: compute-bound"
            )
        else:
            sentences.append(f"{alone}, yet the GPU ran dry waiting for launches")
    if kind == "overhead-bound":
        sentences.append("The profiler adds CPU time to every op: time the code without it before concluding")
    return Verdict(
        kind,
        ". ".join(sentences) + ".",
        n,
        cpu_total,
        gpu_total,
        waits,
        closing_us,
        issue / n,
        gpu_busy_us_per_step=busy / n,
        gpu_window_us=window,
        gpu_idle_fraction=max(0.0, 1.0 - busy / window) if window > 0 else 0.0,
        gaps=len(idle),
        longest_gap_us=max(idle, default=0.0),
        launch_waits=len(starved),
        launch_wait_us=starved_us,
        launch_wait_fraction=starved_share,
        max_gpu_lag_us=max_lag,
        table_totals_say=table_says,
        close_to_line=close,
    )


def _totals_sentence(cpu_total: float, gpu_total: float, waits: float, closing: RuntimeCall | None) -> str:
    text = f"Table totals: Self CPU {_us(cpu_total)}, Self CUDA {_us(gpu_total)}"
    if closing is not None:
        text += f"; {_us(closing.dur)} of the CPU total is the profiler's flush, the {closing.name} after the last step"
    other_waits = waits - (closing.dur if closing is not None else 0.0)
    if other_waits > 0:
        text += f"; {_us(other_waits)} is waiting in {'other ' if closing is not None else ''}synchronize calls"
    return text


def _waits_phrase(waits: float, closing: RuntimeCall | None) -> str:
    if closing is None:
        return f"{_us(waits)} of the CPU total is synchronize waits"
    if closing.dur == waits:
        return f"{_us(closing.dur)} of the CPU total is the profiler's closing {closing.name}"
    return f"{_us(waits)} of the CPU total is synchronize waits, {_us(closing.dur)} of it the profiler's closing {closing.name}"


def _us(value: float) -> str:
    """µs as the table prints them: ms from 1 ms on."""
    return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.1f} µs"


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
    cpu, busy = trace.cpu_us_per_step(), trace.gpu_busy_us_per_step()
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
                "lag_us": _round(w.lag_us),
            }
            for w in step.gpu
        ]
        cpu_ops = [{**row, "cpu_us": round(row["cpu_us"], 3), "self_us": round(row["self_us"], 3)} for row in step.op_rows()]
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
                "runtime_calls": runtime_rows(step.runtime),
                "idle_cpu_ops": [{"name": n, "count": c} for n, c in step.idle_ops().items()] if trace.has_gpu else [],
                "cpu_ops": cpu_ops,
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
    closing = trace.closing_sync
    first_ts = trace.steps[0].ts
    return {
        "trace": trace.name,
        "device": trace.device,
        "steps_from": "ProfilerStep" if trace.from_profiler_steps else WHOLE_TRACE,
        "self_cpu_total_us": round(trace.self_cpu_total_us, 3),
        "self_gpu_total_us": round(trace.self_gpu_total_us, 3),
        "closing_sync": None
        if closing is None
        else {"name": closing.name, "start_us": round(closing.ts - first_ts, 3), "dur_us": round(closing.dur, 3)},
        "steps": steps,
        "outside_steps": {  # times from the first step's start
            "runtime_calls": runtime_rows(trace.runtime_outside_steps),
            "cpu_ops": [
                {"name": op.name, "is_label": op.is_label, "start_us": round(op.ts - first_ts, 3), "dur_us": round(op.dur, 3)}
                for op in trace.ops_outside_steps
            ],
            "gpu": [
                {"kind": w.kind, "name": w.name, "launched_by": w.launched_by, "start_us": round(w.ts - first_ts, 3), "dur_us": round(w.dur, 3)}
                for w in trace.gpu_outside_steps
            ],
        },
        "kernels": kernels,
        "verdict": trace.verdict().to_dict(),
        "notes": trace.notes,
    }


def runtime_rows(calls: list[RuntimeCall]) -> list[dict]:
    """Runtime calls by name, in the order of first appearance: count and total time."""
    rows: dict[str, dict] = {}
    for call in calls:
        row = rows.setdefault(call.name, {"name": call.name, "count": 0, "total_us": 0.0})
        row["count"] += 1
        row["total_us"] += call.dur
    return [{**row, "total_us": round(row["total_us"], 3)} for row in rows.values()]


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
