"""What a torch.profiler trace holds, once read: the data model every other module of trace_report reads.

A Chrome trace is a flat list of events. Four kinds matter here,

    cpu_op / user_annotation   boxes on a CPU thread: `aten::linear` > `aten::matmul` > `aten::mm`, and labels
                               such as `ProfilerStep#2` or the lesson's `mlp_fwd`
    cuda_runtime / cuda_driver the calls that hand work to the GPU: `cudaLaunchKernel`, `cuLaunchKernelEx`,
                               `cudaMemsetAsync`, ...; they sit inside the op that made them
    kernel / gpu_memset / gpu_memcpy   the work itself, on a GPU stream
    ac2g flows                 arrows from a runtime call to its GPU work

and, with `with_stack=True`, python_function events: Python frames around the ops, of which `nn.Module: LlamaMLP_0`
names a module's call (its type, numbered per instance). They are no ops: they give each op and runtime call the
modules around it (`CpuOp.modules`), and take part in the self times.

`reader` turns them into the classes below: a `CpuOp` per box, a `RuntimeCall` per call, a `GpuWork` per kernel,
memset or memcpy (linked to the call that launched it, and so to the op), grouped into a `Step` per
`ProfilerStep#N`, in one `Trace`. What falls outside every step is kept apart (`Trace.runtime_outside_steps`,
...), not dropped: above all the profiler's own flush after the last step (`Trace.closing_sync`), where the CPU
waits for the GPU to catch up, which `prof.key_averages().table()` counts in its "Self CPU time total".

The classes hold data and simple views of it (a step's kernels, its GEMMs, its ops by name); the analyses that
weigh it live beside them: `pace` (the verdict), `compare` (two traces), `export` (JSON), `checks` (the claims),
`fusion` (where fusion would pay).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_report.kernels import decode
from trace_report.timeline import busy_time

WHOLE_TRACE = "whole trace"  # the one step of a trace without ProfilerStep events
# A module call is named MODULE_PREFIX + its type, by the suite's ranges (`nn.Module: LlamaMLP`,
# profiling_in_pytorch/model/ranges.py) and by torch for a module's Python frame under with_stack=True
# (`nn.Module: LlamaMLP_0`, numbered per instance).
MODULES_FROM_RANGES = "ranges"  # Trace.module_source: `nn.Module: X` record_function ranges (ops or labels)
MODULES_FROM_STACKS = "python stacks"  # `nn.Module: X_N` python_function events (with_stack=True)


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
    input_types: tuple = ()  # each input's type, beside its shape: "c10::BFloat16", "float", "Scalar", "" (None), ...
    # The module types whose Python frames hold it (with_stack=True), outermost first: ("LlamaModel",
    # "LlamaDecoderLayer", "LlamaMLP", "Linear"). Kept apart from `path` so that the ops' boxes, tables and checks
    # read the same with or without stacks; empty when the trace has none (or names its modules with ranges).
    modules: tuple[str, ...] = ()
    # c10d's `record_param_comms` only: the args that say the collective's message (reader.COMM_ARGS)
    comm_args: dict | None = None
    # The recorded values of its scalar arguments ("Concrete Inputs": "True", "0.125", "[2, 2]"), kept for the ops
    # whose FLOPs depend on them (attention's is_causal, a convolution's stride and padding: reader.CONCRETE_OPS).
    concrete_inputs: tuple = ()
    # The innermost function of the reader's own code around it, `step() in train.py:42` (the line where it starts),
    # from the Python frames (with_stack=True), libraries' frames (torch, transformers, the standard library, ...)
    # left out. None without stacks, or inside a library only (autograd's thread runs the backward with no frame).
    source: str | None = None
    # The op (not a label) directly around it on its thread, as the reader nests the boxes (None at the top): where
    # the roofline looks for the FLOPs of an op that has no formula of its own (`aten::linear` around `aten::addmm`).
    parent_op: CpuOp | None = field(default=None, compare=False, repr=False)


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
    launcher: CpuOp | None = None  # the op `launched_by` names, for its input shapes and types
    modules: tuple[str, ...] = ()  # the module types whose Python frames hold the call (CpuOp.modules)

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
    # What a collective's kernel or copy says of its message: c10d's args, which Kineto copies onto the NCCL kernel
    # it launched (`In msg nelems`, `dtype`, `Group size`, ...), or a memcpy's `bytes`; None for other work
    comm_args: dict | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def launched_by(self) -> str | None:
        return self.launch.launched_by if self.launch else None

    @property
    def is_pageable_copy(self) -> bool:
        """A copy to or from pageable host memory (`Memcpy HtoD (Pageable -> Device)`): CUDA waits for the stream and
        stages it through a pinned buffer of its own, the CPU waiting for the copy."""
        return self.kind == "memcpy" and "Pageable" in self.name

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
    # Module calls per type whose Python frame starts in the step (with_stack=True); the frames are no ops.
    module_calls: Counter = field(default_factory=Counter)

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
            row = rows.get(op.name)
            if row is None:  # not setdefault: its default, a new dict, was built for every op (260k a Mamba trace)
                row = rows[op.name] = {"name": op.name, "count": 0, "cpu_us": 0.0, "self_us": 0.0, "launched_gpu_work": 0}
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


@dataclass(frozen=True)
class Overlaps:
    """What overlapped where nothing may (overlaps.py, and the reader's walk of each thread's boxes): GPU work that ran
    past the start of the next item on its stream, its end clipped to that start (how many, the µs clipped in all),
    how many events on the streams Perfetto will not draw (each starts inside another on its stream and ends after
    it: kernels, and the stream's annotations and syncs that cross them), and how many CPU boxes it will not draw, for
    the same reason, on their thread."""

    clipped: int = 0
    clipped_us: float = 0.0
    undrawn: int = 0
    cpu_undrawn: int = 0

    def __bool__(self) -> bool:
        return bool(self.clipped or self.undrawn or self.cpu_undrawn)

    def plus(self, other: Overlaps) -> Overlaps:
        return Overlaps(self.clipped + other.clipped, self.clipped_us + other.clipped_us, self.undrawn + other.undrawn,
                        self.cpu_undrawn + other.cpu_undrawn)

    @property
    def note(self) -> str | None:
        """One sentence for the report, or None when nothing overlaps."""
        parts = []
        n = self.clipped
        if n:
            text = (f"{n:,} GPU item{'s' if n != 1 else ''} ran into the next on {'their' if n != 1 else 'its'} "
                    f"stream: clipped, {self.clipped_us:,.1f} µs in all")
            if self.undrawn:
                text += f"; {self.undrawn:,} not drawn by Perfetto"
            parts.append(text)
        elif self.undrawn:  # kernels, or a stream's annotations and syncs that cross them
            parts.append(f"{self.undrawn:,} event{'s' if self.undrawn != 1 else ''} on the GPU's streams not drawn by "
                         "Perfetto")
        n = self.cpu_undrawn
        if n:
            parts.append(f"{n:,} CPU box{'es' if n != 1 else ''} start{'s' if n == 1 else ''} inside another on "
                         f"{'their' if n != 1 else 'its'} thread and end{'s' if n == 1 else ''} after it: not drawn "
                         "by Perfetto")
        return "; ".join(parts) or None

    def to_dict(self) -> dict:
        return {"clipped": self.clipped, "clipped_us": round(self.clipped_us, 3), "undrawn": self.undrawn,
                "cpu_undrawn": self.cpu_undrawn}


@dataclass
class Trace:
    """A whole trace as read: its steps, what fell outside them, and the table's totals.

    Its verdict is `pace.verdict(trace)`, its JSON `export.trace_to_dict(trace)`: the model knows nothing of them.
    """

    path: Path
    steps: list[Step]
    from_profiler_steps: bool
    device: str | None = None
    labels: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    # What no step holds, in time order: above all the profiler's closing synchronize after the last step.
    runtime_outside_steps: list[RuntimeCall] = field(default_factory=list)
    ops_outside_steps: list[CpuOp] = field(default_factory=list)
    # GPU work launched outside the steps, or before the recording (the warmup step's: no launch call in the trace)
    gpu_outside_steps: list[GpuWork] = field(default_factory=list)
    # The first GPU's limits as the trace records them (numSms, regsPerMultiprocessor, sharedMemPerMultiprocessor,
    # maxThreadsPerMultiprocessor, warpSize, ...): what a kernel's footprint is weighed against.
    device_properties: dict = field(default_factory=dict)
    # The table's "Self CPU time total": every CPU box's self time (ops, labels, ProfilerStep boxes,
    # runtime calls, in the steps or not). Computed while reading, where the boxes' threads are known.
    self_cpu_total_us: float = 0.0
    # Events the reader could not use (a pid that is a list, args that are a string, ...): why -> how many.
    skipped_events: Counter = field(default_factory=Counter)
    # Where the trace names its modules: MODULES_FROM_RANGES (the suite's `nn.Module: X` ranges, in the ops' paths),
    # MODULES_FROM_STACKS (Python frames, in CpuOp.modules and RuntimeCall.modules), or None. Ranges win when a
    # trace has both: they hold the backward too.
    module_source: str | None = None
    # The file's other top-level keys, wherever they stand around traceEvents: deviceProperties, distributedInfo
    # (a rank's place in its run), the profiler's options, the lessons' unprofiled timing, ...
    meta: dict = field(default_factory=dict)
    # profile_memory=True: every allocation and free, as memory.MemoryEvent (memory.py reads them), in file order.
    memory_events: list = field(default_factory=list)
    # What overlapped where nothing may (overlaps.py): GPU work clipped on its stream, events Perfetto will not draw.
    overlaps: Overlaps = field(default_factory=Overlaps)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def skipped_note(self) -> str | None:
        """What the reader skipped, in one sentence, or None when it read every event it needs."""
        if not self.skipped_events:
            return None
        n = sum(self.skipped_events.values())
        return f"skipped {n} event{'s' if n != 1 else ''} trace-report cannot read: {skipped_reasons(self.skipped_events)}"

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


def skipped_reasons(skipped: Counter) -> str:
    """Why events were skipped, most often first: `2 with a pid that is not a number or string, 1 with args ...`"""
    return ", ".join(f"{count} with {why}" for why, count in skipped.most_common())


def per_step_count(value: float) -> str:
    """A count averaged over steps: `3`, or `2.33` when the steps differ."""
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def short_work_name(kind: str, name: str) -> str:
    """A kernel's decoded short name; memsets and memcpys are already short."""
    return decode(name).short if kind == "kernel" else name


def rounded(value: float | None, digits: int = 3) -> float | None:
    """A number for the JSON output, rounded; None (a value the trace could not give) stays None."""
    return None if value is None else round(value, digits)
