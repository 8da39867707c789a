"""Read a Chrome trace written by torch.profiler the way the post reads it in Perfetto: `read_trace(path)`.

`source` streams the events; here we keep the few fields we use of each (names interned: kernels repeat a lot),
skip an event whose fields are not a profiler's (a pid that is a list, args that are a string, ...) and count
why (`Trace.skipped_events`), then build the model (`model`):

- ops nest by time on their thread (`nesting.nest`): each op's self time, the boxes around it (its path) and how
  much GPU work was launched from inside it;
- GPU work links to the runtime call that launched it (`_link`): a kernel and its launch share
  `args.correlation`, as does the ac2g arrow between them. The op that launched the kernel is the innermost
  `cpu_op` around that runtime call on its thread: for `nn.Linear`'s GEMM that is `aten::mm` (inside
  `aten::matmul`, inside `aten::linear`, inside `mlp_fwd`), kept as the call's `launcher`, with its input shapes
  and types when the profile recorded them (`record_shapes=True`);
- everything is grouped by `ProfilerStep#N`, the active steps of the profiler's schedule: a CPU box or runtime
  call belongs to the step its CPU timestamp falls in, and GPU work to the step of the call that launched it,
  even when the GPU runs it later. GPU work whose launch call the trace names but does not hold was launched
  before the recording began (the warmup step's, still running when the GPU is behind): it belongs to no step.
  A trace without `ProfilerStep` events is read as one step.

- modules: the suite's `nn.Module: X` ranges are ops (or labels) and sit in the paths; without them, a trace
  recorded with `with_stack=True` names each module call in a Python frame, `nn.Module: X_N`, and `_place_in_modules`
  gives each op and runtime call the module types around it (`modules`), leaving the ops and their paths as they are.

The table's "Self CPU time total" is summed here too (`nesting.self_cpu_total`), where every box's thread is known.
"""

from __future__ import annotations

import bisect
import gc
import gzip
import itertools
import math
import re
import zlib
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from trace_report.errors import UsageError, first_line
from trace_report.device import gpu_label
from trace_report.kernels import MODULE_PREFIX
from trace_report.memory import MEMORY_EVENT, memory_event
from trace_report.model import MODULES_FROM_RANGES, MODULES_FROM_STACKS, WHOLE_TRACE
from trace_report.model import CpuOp, GpuWork, RuntimeCall, Step, Trace, skipped_reasons
from trace_report import nesting
from trace_report.overlaps import clip_stream_overlaps, other_spans
from trace_report.python_frames import user_line
from trace_report.timeline import devices_note
from trace_report.source import (ARG_KEYS, RAW, RECORDS, UNSET, Record, RecordArgs, TraceSource, args_dict,
                                 open_text, raw_value)

GPU_KINDS = {
    "kernel": "kernel",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
}
# What c10d's `record_param_comms` records of a collective's message, and Kineto copies onto the NCCL kernel it
# launched (torch 2.1 on; before, on the op alone); "bytes" is a memcpy's, for the copy engine's collectives.
COMM_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size", "Process Group Name",
             "bytes")
COMM_OP = "record_param_comms"
# Ops whose FLOPs hang on a scalar argument (attention's is_causal, a convolution's or a pooling's stride, padding,
# dilation): their "Concrete Inputs" are kept (flops/attention.py, flops/conv.py); no other op's, to keep the read lean.
CONCRETE_OPS = re.compile(r"attention|conv|pool")
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "xpu_runtime", "privateuse1_runtime"}
OP_CATS = {"cpu_op", "operator"}
ANNOTATION_CATS = {"user_annotation"}
PYTHON_CATS = {"python_function"}  # with_stack=True: Python frames; they nest ops, the table leaves them out
STEP_PREFIX = "ProfilerStep#"
_NO_ARGS = RecordArgs()
_KEY_OF = {key: (attr, key) for attr, key in ARG_KEYS}
_COMM_KEYS = tuple(_KEY_OF[key] for key in COMM_ARGS)
MEMORY_ARGS = tuple(_KEY_OF[key] for key in ("Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"))
_KIND_OF_CAT = {
    **{cat: "op" for cat in OP_CATS},
    **{cat: "label" for cat in ANNOTATION_CATS},
    **{cat: "runtime" for cat in RUNTIME_CATS},
    **{cat: "gpu" for cat in GPU_KINDS},
    **{cat: "python" for cat in PYTHON_CATS},
}
# What a field may be, by exact type (a bool is not a number here): pids, tids, ids and correlations are numbers or
# strings (a list would not even be a dict key); times are numbers.
_SCALAR = (int, float, str)
_NUMBER = (int, float)
_NAN = float("nan")
isfinite = math.isfinite
_HOST_CATS = {"trace", "cuda_sync", "gpu_user_annotation", "fwdbwd", "python_function"}  # no device's own work
_INSTANCE = re.compile(r"_\d+$")  # `nn.Module: Linear_3`: torch numbers a type's instances; the type is `Linear`


def read_trace(path: str | Path, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Read a torch.profiler Chrome trace (.json or .json.gz); bad input raises UsageError, one line. `progress`, when
    given, is called as the file is read with the bytes read so far and the file's size (console.read_progress)."""
    path = Path(path)
    collector = _Collector(path)
    # Reading makes a few objects per event and frees none: Python's cyclic collector would walk all that were kept,
    # again and again, for no garbage. Off while reading, 26 MB of JSON read in 0.69 s instead of 1.09 (2 cores).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read(path, collector, progress)
    finally:
        if collecting:
            gc.enable()


def _read(path: Path, collector: _Collector, progress: Callable[[int, int], None] | None) -> Trace:
    with open_text(path) as text:
        source = TraceSource(text, path, RECORDS)
        add = collector.add
        try:
            for batch in source.batches(progress):
                collector.events += len(batch)
                for event in batch:
                    add(event)
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
    if collector.skipped and not (collector.ops or collector.runtime or collector.gpu or collector.steps):
        reasons = skipped_reasons(collector.skipped)
        raise UsageError(f"{path}: not a well-formed torch.profiler trace: none of the events it needs can be read ({reasons})")
    try:
        return collector.build(path, source.meta)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as err:
        # JSON that parses but whose fields are not a profiler's (a number where an object should be, ...)
        raise UsageError(f"{path}: not a well-formed torch.profiler trace ({type(err).__name__}: {first_line(err)})") from None


class _Collector:
    """Keeps the few fields we use from each event; names are interned (kernels repeat a lot)."""

    def __init__(self, path: Path):
        self.path = path
        self.events = 0
        self.timed = 0
        self.names: dict[str, str] = {}
        self.durations: dict[float, float] = {}
        self.lanes: dict[Any, Any] = {}  # pid and tid values, shared: a big trace repeats a handful of them
        self.shapes: dict[tuple, tuple] = {}  # input dims, types, launch dimensions: one tuple per distinct value
        self.raw_shapes: dict[tuple, tuple] = {}  # (dims' text, types' text) -> (dims, types)
        self.concrete_names: dict[str, bool] = {}  # op name -> whether its Concrete Inputs are kept
        self.steps: list[tuple[str, float, float, Any, Any]] = []  # name, ts, dur, pid, tid
        self.ops: list[CpuOp] = []
        self.runtime: list[RuntimeCall] = []
        self.gpu: list[GpuWork] = []
        self.python_frames = nesting.Boxes()  # for self times: they nest the ops
        self.module_frames: list[tuple[Any, Any, float, float, str]] = []  # pid, tid, ts, dur, name: `nn.Module: X_N`
        # pid, tid, ts, dur, `train.py:42`: the frames of the reader's own code (user_line), and each name's line
        self.source_frames: list[tuple[Any, Any, float, float, str]] = []
        self.user_lines: dict[str, str | None] = {}
        self.flow_start: dict[Any, tuple] = {}  # ac2g id -> (pid, tid, ts) of the runtime call
        self.flow_end: dict[tuple, Any] = {}  # (pid, tid, ts) of the GPU work -> ac2g id
        self.skipped: Counter = Counter()  # why -> how many events we could not use (a pid that is a list, ...)
        self.memory: list = []  # profile_memory=True: the allocator's `[memory]` instant events (memory.py)
        # pid, tid, ts, dur of the "X" events of categories read for nothing else (a stream's gpu_user_annotation and
        # cuda_sync, ...): a few dozen in a profiler's trace, for what Perfetto drops beside the GPU work (overlaps.other_spans)
        self.other_boxes: list[tuple] = []
        self.unread: Counter = Counter()  # those categories, by name: a device this reader does not read (MTIA's)

    def add(self, ev: Any) -> None:
        """One event, as the source's Record (`source.Record`: the fields read here, `args` a RecordArgs)."""
        if type(ev) is not Record:
            raise UsageError(f"{self.path}: traceEvents holds {type(ev).__name__} values, not event objects: not a Chrome trace")
        ph = ev.ph
        if ph == "X":
            self.timed += 1
            cat = ev.cat
            if type(cat) is not str:
                self.skipped["a cat that is not a string"] += 1
                return
            kind = _KIND_OF_CAT.get(cat)
            if kind is None:
                cat = cat.lower()  # Kineto writes them in lower case; other writers may not
                kind = _KIND_OF_CAT.get(cat)
                if kind is None:  # a category we do not read; its box may still cross the GPU work on a stream
                    self.other_boxes.append((ev.pid, ev.tid, ev.ts, ev.dur))
                    self.unread[cat] += 1
                    return
            ts, dur, name, args, pid, tid = ev.ts, ev.dur, ev.name, ev.args, ev.pid, ev.tid
            why = None
            if type(ts) is not float:  # json gives a float for 1.5 or 1e3, an int for 15: both are times
                try:
                    ts = float(ts) if type(ts) is int else _NAN
                except OverflowError:  # an integer too large for a float
                    ts = _NAN
            if type(dur) is not float:
                try:
                    dur = float(dur) if type(dur) is int else 0.0 if dur is None else _NAN
                except OverflowError:
                    dur = _NAN
            if not isfinite(ts):  # NaN or Infinity: JSON that Python reads, but no time a profiler wrote
                why = "a ts that is not a finite number"
            elif not isfinite(dur):
                why = "a dur that is not a finite number"
            elif type(name) is not str:
                why = "a name that is not a string"
            elif pid is not None and type(pid) not in _SCALAR:
                why = "a pid that is not a number or string"
            elif tid is not None and type(tid) not in _SCALAR:
                why = "a tid that is not a number or string"
            elif args is None:
                args = _NO_ARGS
            elif type(args) is not RecordArgs:
                why = "args that are not an object"
            if why is None and (kind == "runtime" or kind == "gpu"):
                correlation = args.correlation
                if correlation is not None and type(correlation) not in _SCALAR:
                    why = "a correlation that is not a number or string"
            if why is not None:
                self.skipped[why] += 1
                return
            name = self.names.setdefault(name, name)
            if dur:  # one float per distinct duration (ns apart, a profile repeats them): 24 bytes an event
                dur = self.durations.setdefault(dur, dur)
            lanes = self.lanes
            pid, tid = lanes.setdefault(pid, pid), lanes.setdefault(tid, tid)
            if kind == "op" and name.startswith(STEP_PREFIX):  # traces of 2021 put the steps among the ops
                kind = "label"
            if kind == "op":
                dims, types = args.input_dims, args.input_types
                if type(dims) is RAW:
                    dims, types = self._shapes(dims, types)
                else:
                    dims, types = self._shapes_of(dims, types)
                # positional: CpuOp's fields in order (keywords cost 0.1 s of a 260k-op read)
                self.ops.append(CpuOp(name, ts, dur, pid, tid, False, 0.0, 0, (), dims, types, (),
                                      _comm_args(args) if name == COMM_OP else None,
                                      self._concrete(args) if self._uses_concrete(name) else ()))
            elif kind == "label":
                if name.startswith(STEP_PREFIX):
                    self.steps.append((name, ts, dur, pid, tid))
                else:
                    self.ops.append(CpuOp(name, ts, dur, pid, tid, is_label=True))
            elif kind == "runtime":
                self.runtime.append(RuntimeCall(name, ts, dur, pid, tid, correlation))
            elif kind == "gpu":
                registers, shared, occupancy = args.registers, args.shared_memory, args.occupancy
                # positional: GpuWork's fields in order (kind, name, ts, dur, pid, tid, correlation, launch, registers,
                # shared_memory, grid, block, occupancy, comm_args), as CpuOp's above
                self.gpu.append(GpuWork(
                    GPU_KINDS[cat], name, ts, dur, pid, tid, correlation, None,
                    registers if isinstance(registers, int) else None,
                    shared if isinstance(shared, int) else None,
                    self._dims3(args.grid), self._dims3(args.block),
                    float(occupancy) if type(occupancy) in _NUMBER and math.isfinite(occupancy) else None,
                    _comm_args(args) if args.in_nelems is not UNSET or args.bytes is not UNSET else None))
            else:
                self.python_frames.add(pid, tid, ts, dur)
                if name.startswith(MODULE_PREFIX):
                    self.module_frames.append((pid, tid, ts, dur, name))
                elif ".py(" in name:
                    line = self.user_lines.get(name, False)
                    if line is False:
                        line = self.user_lines[name] = user_line(name)
                    if line is not None:
                        self.source_frames.append((pid, tid, ts, dur, line))
        elif (ph == "s" or ph == "f") and ev.cat == "ac2g":
            flow_id, pid, tid, ts = ev.id, ev.pid, ev.tid, ev.ts
            if type(flow_id) not in _SCALAR:
                self.skipped["an id that is not a number or string"] += 1
            elif pid is not None and type(pid) not in _SCALAR:
                self.skipped["a pid that is not a number or string"] += 1
            elif tid is not None and type(tid) not in _SCALAR:
                self.skipped["a tid that is not a number or string"] += 1
            elif type(ts) not in _NUMBER:
                self.skipped["a ts that is not a finite number"] += 1
            elif ph == "s":
                self.flow_start[flow_id] = (pid, tid, ts)
            else:
                self.flow_end[(pid, tid, ts)] = flow_id
        elif ph == "i" and ev.name == MEMORY_EVENT:
            event = memory_event({"ts": ev.ts, "pid": ev.pid, "tid": ev.tid, "args": args_dict(ev.args, MEMORY_ARGS)})
            if event is None:
                self.skipped["a [memory] event whose args are not the profiler's"] += 1
            else:
                self.memory.append(event)

    def _shapes(self, dims: Any, types: Any) -> tuple[tuple, tuple]:
        """An op's input dims and types from their raw text, each distinct text decoded once."""
        key = (bytes(dims), bytes(types) if type(types) is RAW else types)
        found = self.raw_shapes.get(key)
        if found is None:
            found = self.raw_shapes[key] = self._shapes_of(raw_value(dims), raw_value(types))
        return found

    def _shapes_of(self, dims: Any, types: Any) -> tuple[tuple, tuple]:
        """An op's input dims and types, as tuples (a model's ops repeat a few hundred: one tuple each)."""
        if type(dims) is list:
            dims = tuple(tuple(d) if type(d) is list else () for d in dims)
            try:
                dims = self.shapes.setdefault(dims, dims)
            except TypeError:  # a list of tensors' shapes holds lists, which no dict key can: kept as it is
                pass
        else:
            dims = ()
        if dims and type(types) is list:  # beside each shape: "c10::BFloat16", "float", "Scalar", ...
            types = tuple(self.names.setdefault(t, t) if type(t) is str else "" for t in types)
            types = self.shapes.setdefault(types, types)
        else:
            types = ()
        return dims, types

    def _uses_concrete(self, name: str) -> bool:
        """CONCRETE_OPS, asked once per name (a regex search per op cost 0.4 s of 400k events)."""
        found = self.concrete_names.get(name)
        if found is None:
            found = self.concrete_names[name] = CONCRETE_OPS.search(name) is not None
        return found

    def _concrete(self, args: Any) -> tuple:
        """An op's "Concrete Inputs" as a tuple of strings ("" where a value is not recorded); () without them."""
        values = raw_value(args.concrete_inputs)
        if type(values) is not list:
            return ()
        values = tuple(v if type(v) is str else "" for v in values)
        return self.shapes.setdefault(values, values)

    def _dims3(self, value: Any) -> tuple | None:
        """A launch dimension as the trace gives it (`[24576, 1, 1]`), or None; one tuple per distinct value."""
        dims = _dims3(value)
        return dims if dims is None else self.shapes.setdefault(dims, dims)

    def build(self, path: Path, meta: dict) -> Trace:
        # Before any time is read: work that ran past the next on its stream ends where the next starts (overlaps.py).
        # Each stream's events of other categories are counted with its work for what Perfetto drops.
        overlaps = clip_stream_overlaps(self.gpu, other_spans(self.other_boxes))
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

        unrecorded = _link(self.runtime, self.gpu, self.flow_start, self.flow_end)
        self.flow_start.clear()
        self.flow_end.clear()
        launches = Counter(id(work.launch) for work in self.gpu if work.launch is not None)
        # One sort of each thread's boxes for both walks: the ops and runtime calls first, then the steps, then the
        # Python frames, which nest the ops but are no box of the table's (the self CPU total leaves them out).
        lanes = nesting.by_thread(itertools.chain(((o.pid, o.tid, o.ts, o.dur) for o in self.ops),
                                                  ((c.pid, c.tid, c.ts, c.dur) for c in self.runtime),
                                                  ((pid, tid, ts, dur) for _, ts, dur, pid, tid in self.steps)),
                                  self.python_frames)
        nesting.nest(self.ops, self.runtime, launches, lanes)
        self_cpu_total, cpu_undrawn = nesting.self_cpu_total(lanes, len(self.ops) + len(self.runtime) + len(self.steps))
        if cpu_undrawn:
            overlaps = replace(overlaps, cpu_undrawn=cpu_undrawn)
        # Modules: the suite's ranges when the trace has them (they hold the backward too), else the Python frames.
        module_source = None
        if any(name.startswith(MODULE_PREFIX) for name in {op.name for op in self.ops}):
            module_source = MODULES_FROM_RANGES
        elif self.module_frames:
            module_source = MODULES_FROM_STACKS
            frames = _place_in_modules(self.module_frames, self.ops, self.runtime)
            starts = [s.ts for s in steps]
            for pid, tid, ts, dur, module in frames:
                step = _step_at(steps, starts, ts)
                if step is not None:
                    step.module_calls[module] += 1
        self.module_frames.clear()
        if self.source_frames:
            _place_in_source(self.source_frames, self.ops)
            self.source_frames.clear()

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
            # GPU work belongs to the step whose CPU launched it, wherever it runs; work launched before the
            # recording belongs to no step; only work the trace links to nothing goes to the step it runs in.
            if work.launch is not None:
                step = _step_at(steps, starts, work.launch_ts)
            else:
                step = None if id(work) in unrecorded else _step_at(steps, starts, work.ts)
            (step.gpu if step is not None else gpu_outside).append(work)
        for step in steps:
            step.gpu.sort(key=lambda w: w.ts)
        for outside in (ops_outside, runtime_outside, gpu_outside):
            outside.sort(key=lambda item: item.ts)

        labels = Counter(op.name for op in self.ops if op.is_label)
        device_properties: dict = {}
        props = meta.get("deviceProperties")
        if isinstance(props, list) and props and isinstance(props[0], dict):
            device_properties = props[0]
        kernels = {work.name for work in self.gpu if work.kind == "kernel"}
        device = gpu_label(device_properties, kernels, {call.name for call in self.runtime})
        if not self.gpu:
            unread = [f"{cat} ×{n:,}" for cat, n in self.unread.most_common() if cat not in _HOST_CATS][:3]
            notes.append("no GPU work in the trace: a CPU-only profile (or CUDA activity was not recorded)" + (
                f"; it holds events of categories this reader does not read: {', '.join(unread)} (a device's or a "
                "profiler mode's it does not know, MTIA's, CUPTI's range profiler: the tables leave them out)"
                if unread else ""))
        elif (several := devices_note(self.gpu)) is not None:
            notes.append(several)
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
            skipped_events=self.skipped,
            device_properties=device_properties,
            module_source=module_source,
            meta=meta,
            memory_events=self.memory,
            overlaps=overlaps,
        )


def _comm_args(args: Any) -> dict | None:
    """A collective's message (COMM_ARGS), those of its args the record has; None without any."""
    return args_dict(args, _COMM_KEYS) or None


def _dims3(value: Any) -> tuple | None:
    """A launch dimension as the trace gives it (`[24576, 1, 1]`), or None."""
    if type(value) is list and len(value) == 3:  # as Kineto writes it: without the generator below, 3x sooner
        x, y, z = value
        if type(x) is int and type(y) is int and type(z) is int:
            return (x, y, z)
    return tuple(value) if isinstance(value, list) and all(isinstance(v, int) for v in value) else None


def _place_in_source(frames: list[tuple], ops: list[CpuOp]) -> None:
    """Give each op the innermost frame of the reader's own code open when it starts (CpuOp.source)."""
    threads: dict[tuple, list] = defaultdict(list)
    for pid, tid, ts, dur, line in frames:
        threads[(pid, tid)].append((ts, -dur, line))
    _place(_timelines(threads, lambda outer, line: line, None), (ops,), "source")


def _timelines(threads: dict[tuple, list], nest, empty) -> dict[tuple, tuple[list[float], list]]:
    """Per thread, what its frames (ts, -dur, label) say from each instant on: `nest(outer, label)` for the frame
    open then, inside the value of the one around it (`empty` outside all), as points and values (from points[i] on,
    until points[i + 1], values[i] holds). The frames nest on their thread as Python calls do."""
    timelines: dict[tuple, tuple[list[float], list]] = {}
    for lane, items in threads.items():
        items.sort(key=lambda item: item[:2])  # by start, outer (longer) frames first
        points: list[float] = []
        values: list = []
        stack: list[tuple[float, object]] = []  # (end, value) of the frames open now
        for ts, neg_dur, label in items:
            while stack and stack[-1][0] <= ts:  # it returned before this frame: not around it
                end = stack.pop()[0]
                points.append(end)
                values.append(stack[-1][1] if stack else empty)
            end = ts - neg_dur
            if stack:  # a frame that outlasts its caller's (a clock's rounding) ends with it: the points stay sorted
                end = min(end, stack[-1][0])
            stack.append((end, nest(stack[-1][1] if stack else empty, label)))
            points.append(ts)
            values.append(stack[-1][1])
        while stack:
            end = stack.pop()[0]
            points.append(end)
            values.append(stack[-1][1] if stack else empty)
        timelines[lane] = (points, values)
    return timelines


def _place(timelines: dict, groups, attribute: str) -> None:
    """Set each box's `attribute` to its thread's value at the box's start: the last instant at or before it (a frame
    that starts with the box holds it, one that ends as it starts does not)."""
    for boxes in groups:
        for box in boxes:
            timeline = timelines.get((box.pid, box.tid))
            if timeline is not None:
                i = bisect.bisect_right(timeline[0], box.ts) - 1
                if i >= 0:
                    setattr(box, attribute, timeline[1][i])


def _place_in_modules(frames: list[tuple], ops: list[CpuOp], runtime: list[RuntimeCall]) -> list[tuple]:
    """Give each op and runtime call the module types whose frames (`nn.Module: X_N`, with_stack=True) hold it.

    The frames nest on their thread as Python calls do, and a box belongs to the frames open when it starts (as
    `Step.phase` takes boxes by their start). The frames are few (one per module call) and the boxes many, so each
    thread's frames become a timeline first, the chain of module types open from each instant on (one tuple per
    frame, shared by the boxes inside it), and each box finds its instant by bisection: no sort of the boxes.
    Returns the frames as (pid, tid, ts, dur, module type), for the module calls per step.
    """
    types: dict[str, str] = {}  # frame name -> module type: a model repeats a few dozen names
    threads: dict[tuple, list] = defaultdict(list)
    typed = []
    for pid, tid, ts, dur, name in frames:
        module = types.get(name)
        if module is None:
            module = types[name] = _INSTANCE.sub("", name[len(MODULE_PREFIX) :])
        typed.append((pid, tid, ts, dur, module))
        threads[(pid, tid)].append((ts, -dur, module))
    # one tuple per frame, the chain of module types open, shared by the boxes inside it
    _place(_timelines(threads, lambda outer, module: outer + (module,), ()), (ops, runtime), "modules")
    return typed


def _link(runtime: list[RuntimeCall], gpu: list[GpuWork], flow_start: dict, flow_end: dict) -> set[int]:
    """Set each piece of GPU work's `launch`, its runtime call: by correlation id, else by the ac2g arrow.

    Returns the ids of the work whose launch the trace names (a correlation id, an arrow) but does not hold: work
    launched before the profiler recorded the CPU, such as the warmup step's, which can run well into the first
    recorded step when the GPU is behind (Part 3's math attention: 8 kernels, into ProfilerStep#4).
    """
    by_corr = {call.correlation: call for call in runtime if call.correlation is not None}
    by_place = None
    unrecorded: set[int] = set()
    for work in gpu:
        call = by_corr.get(work.correlation) if work.correlation is not None else None
        flow_id = None
        if call is None and flow_end:
            flow_id = flow_end.get((work.pid, work.tid, work.ts))
            place = flow_start.get(flow_id) if flow_id is not None else None
            if place is not None:
                if by_place is None:
                    by_place = {(c.pid, c.tid, c.ts): c for c in runtime}
                call = by_place.get((place[0], place[1], float(place[2])))
        work.launch = call
        if call is None and (work.correlation is not None or flow_id is not None):
            unrecorded.add(id(work))
    return unrecorded


def _step_at(steps: list[Step], starts: list[float], ts: float) -> Step | None:
    i = bisect.bisect_right(starts, ts) - 1
    if i < 0:
        return None
    step = steps[i]
    return step if ts <= step.ts + step.dur else None
