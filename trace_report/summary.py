"""A model's trace at a glance: where the GPU's time goes, by kind of work, by module and by kernel, and what the GPU
waited on when it was idle. `trace-report` prints it first; `profile_model.py` after its profile.

    by kind      every kernel, memset and memcpy of the recorded steps in one of KINDS, by what its decoded name says
                 it computes (kernel_names), or by where it ran: whatever runs inside torch.optim's
                 `Optimizer.step#...` range is the optimizer's. The kinds add up to the steps' GPU time.
    by module    when the trace names modules: per module type, summed over its instances (16 layers' LlamaMLP in
                 one row), the GPU time of everything it ran, its children's included (`total`), and of what no child
                 module ran (`self`). The self times and the rows outside every module add up to the GPU time. The
                 modules come from `nn.Module: LlamaMLP` ranges, as profile_model.py records them, where the
                 backward counts for the module whose forward made it; or else from the Python frames of a trace
                 recorded with `with_stack=True` (`nn.Module: LlamaMLP_0`), which hold the forward only: autograd
                 runs the backward outside every module's frame (on its own thread on a GPU), so it is "(no module)".
    top kernels  by total time, each with its decoded name, its kind, the op that launched it and its module.
    idle         the GPU lane's idle time, split: waiting on a launch (the next launch call returned after the GPU ran
                 dry: the CPU is behind), waiting on a synchronize (the CPU sat in a synchronize call while the GPU
                 ran dry, then had to launch again) and the rest (gaps under a microsecond, waits on other streams).

Without a GPU lane (a CPU profile) the CPU ops stand in for kernels: each op's self time, by kind and module.

Every piece of GPU work is given to the op whose launch call it came from (the reader links them by correlation id,
on whichever thread launched it: the main thread for the forward and the optimizer's foreach ops, autograd's
for the backward). A GPU work item that no launch call claims is counted and said ("not linked"), never dropped.

The module ranges are named (profiling_in_pytorch/model/ranges.py writes them; the reader reads the Python frames
into each op's `modules`, the same chain of types, forward only):

    nn.Module: LlamaMLP                                                  a forward call of a LlamaMLP
    nn.Module: LlamaForCausalLM > LlamaModel > LlamaDecoderLayer > LlamaMLP > Linear.backward
                                                                         a backward node a Linear's forward made,
                                                                         the modules around it then outermost first

Like the rest of this package, no torch here.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from trace_report.console import Column, Console, fitted_table
from trace_report.frames import Rows, Tabular, records
from trace_report.kernels import (COPY, KINDS, MODULE_PREFIX, decode, distinct_short_names, in_optimizer,
                                 kind_of_kernel, kind_of_op)
from trace_report.model import MODULES_FROM_RANGES, MODULES_FROM_STACKS, Trace
from trace_report.pace import MIN_GAP_US, Verdict, verdict as judge
from trace_report.reader import read_trace

BACKWARD_SUFFIX = ".backward"
CHAIN_SEPARATOR = " > "
AUTOGRAD_NODE = "autograd::engine::evaluate_function: "  # a backward node's box, on the thread that runs it
AUTOGRAD_BACKWARD = "autograd's backward nodes"  # where the backward runs, in a trace whose modules are Python frames

TOP_KERNELS = 12

# --- what the summary holds ----------------------------------------------------------------------------------


@dataclass
class KindRow:
    kind: str
    us: float  # over all recorded steps
    count: int


@dataclass
class ModuleRow:
    module: str  # a module type, or "(no module) <where>" for what ran outside every module
    calls: int  # forward calls over all recorded steps
    total_us: float
    self_us: float
    backward_us: float  # of total_us: in the backward


@dataclass
class TopRow:
    name: str
    short: str
    decoded: str
    kind: str
    count: int
    total_us: float
    launched_by: str  # the launching op (on a CPU trace: the op itself)
    module: str  # the module type that ran it (`Linear`, `LlamaMLP (backward)`), or "" outside modules
    graph: str = ""  # the `## Call CompiledFxGraph <hash> ##` range it ran in (torch.compile), or ""
    region: str = ""  # and the `Torch-Compiled Region: 0/0` around that range, or ""
    issued_by: str = ""  # a collective launched by `record_param_comms`: the c10d op or FSDP range around it
    backward_issue: bool = False  # and that op ran in autograd's backward (DDP's reducer hooks)
    ddp_forward: bool = False  # or inside `DistributedDataParallel.forward`


@dataclass
class IdleSplit:
    window_us: float
    busy_us: float
    launch_us: float
    launch_gaps: int
    sync_us: float
    sync_gaps: int

    @property
    def idle_us(self) -> float:
        return max(0.0, self.window_us - self.busy_us)

    @property
    def other_us(self) -> float:
        return max(0.0, self.idle_us - self.launch_us - self.sync_us)


@dataclass
class Summary(Tabular):
    trace: str
    on_gpu: bool  # False: a CPU profile, whose ops' self times stand in for kernels
    steps: int
    total_us: float  # the steps' GPU time (kernels, memsets, memcpys summed), or their ops' self CPU time
    items: int  # the GPU work items (or CPU ops) the summary read
    max_per_step: int  # kernels in the busiest step (on a CPU trace: distinct CPU ops, its op table's rows)
    kinds: list[KindRow]
    modules: list[ModuleRow]  # empty when the trace names no module
    top: list[TopRow]
    not_linked: int  # GPU work no launch call claims (no launching op known)
    idle: IdleSplit | None
    verdict: str  # the verdict's first sentence
    notes: list[str] = field(default_factory=list)
    module_source: str | None = None  # where the modules come from: Trace.module_source, when there are rows

    @property
    def has_modules(self) -> bool:
        return bool(self.modules)

    TABLES = ("kinds", "modules", "top")

    def frame_rows(self, table: str | None = None) -> Rows:
        """A table as DataFrame rows (frames.py): `to_dict`'s by_kind, by_module or top, per step."""
        key = {"kinds": "by_kind", "modules": "by_module", "top": "top"}[self._table(table)]
        columns = {"by_kind": ["kind", "us_per_step", "share", "per_step"],
                   "by_module": ["module", "calls_per_step", "total_us_per_step", "total_share", "self_us_per_step",
                                 "self_share", "backward_us_per_step"],
                   "top": ["name", "short_name", "decoded", "kind", "per_step", "us_per_step", "share",
                           "launched_by", "module", "compiled_graph", "issued_by"]}[key]
        return records(columns, self.to_dict()[key])

    def to_dict(self) -> dict:
        n = self.steps
        return {
            "measure": "gpu_time" if self.on_gpu else "cpu_self_time",
            "steps": n,
            "total_us": round(self.total_us, 3),
            "total_us_per_step": round(self.total_us / n, 3),
            "items": self.items,
            "max_per_step": self.max_per_step,
            "by_kind": [
                {"kind": r.kind, "us_per_step": round(r.us / n, 3), "share": _share(r.us, self.total_us),
                 "per_step": round(r.count / n, 3)}
                for r in self.kinds
            ],
            "by_module": [
                {"module": r.module, "calls_per_step": round(r.calls / n, 3), "total_us_per_step": round(r.total_us / n, 3),
                 "total_share": _share(r.total_us, self.total_us), "self_us_per_step": round(r.self_us / n, 3),
                 "self_share": _share(r.self_us, self.total_us), "backward_us_per_step": round(r.backward_us / n, 3)}
                for r in self.modules
            ],
            "top": [
                {"name": r.name, "short_name": r.short, "decoded": r.decoded, "kind": r.kind,
                 "per_step": round(r.count / n, 3), "us_per_step": round(r.total_us / n, 3),
                 "share": _share(r.total_us, self.total_us), "launched_by": r.launched_by, "module": r.module,
                 "compiled_graph": r.graph or None, "issued_by": r.issued_by or None}
                for r in self.top
            ],
            "not_linked": self.not_linked,
            "idle": None if self.idle is None else {
                "window_us": round(self.idle.window_us, 3), "busy_us": round(self.idle.busy_us, 3),
                "idle_us": round(self.idle.idle_us, 3), "waiting_on_launches_us": round(self.idle.launch_us, 3),
                "launch_gaps": self.idle.launch_gaps, "waiting_on_synchronize_us": round(self.idle.sync_us, 3),
                "synchronize_gaps": self.idle.sync_gaps, "other_us": round(self.idle.other_us, 3),
            },
            "verdict": self.verdict,
            "notes": self.notes,
            "module_source": self.module_source,
        }


# --- reading it from a trace ---------------------------------------------------------------------------------


def summarize(trace: Trace | str | Path, verdict: Verdict | str | None = None) -> Summary:
    """The summary of a trace (a `Trace`, or the path of one). `verdict`: the trace's verdict or its summary text,
    when the caller has it already (on a large trace it costs as much as the rest of the summary)."""
    if not isinstance(trace, Trace):
        trace = read_trace(trace)
    verdict = _first_sentence(verdict if isinstance(verdict, str) else (verdict or judge(trace)).summary)
    if trace.has_gpu:
        return _summarize_gpu(trace, verdict)
    return _summarize_cpu(trace, verdict)


def _summarize_gpu(trace: Trace, verdict: str) -> Summary:
    # One pass over the GPU work, grouping what repeats (a name launched from one place); the rest reads the groups.
    groups: dict[tuple, list] = {}
    not_linked = 0
    for work in trace.gpu_work():
        launch = work.launch
        if launch is None:
            key = (work.kind, work.name, (), None, ())
            not_linked += 1
        else:
            key = (work.kind, work.name, launch.launch_path, launch.launched_by, launch.modules)
        group = groups.get(key)
        if group is None:
            groups[key] = [work.dur, 1]
        else:
            group[0] += work.dur
            group[1] += 1
    notes = []
    if not_linked:
        notes.append(f"{not_linked} GPU work items are linked to no launch call (no correlation id or arrow matches "
                     "one): their launching op and module are unknown")
    tally = _Tally(groups, lambda kind, name, place, launched_by: COPY if kind != "kernel" else kind_of_kernel(
        name, place.in_optimizer, launched_by), stacks=trace.module_source == MODULES_FROM_STACKS)
    modules = tally.modules.rows(_module_calls(trace))
    return Summary(
        trace=trace.name, on_gpu=True, steps=len(trace.steps), total_us=tally.total_us, items=tally.items,
        max_per_step=max((len(step.kernels) for step in trace.steps), default=0), kinds=tally.kind_rows(),
        modules=modules, top=tally.top_rows(short_and_decoded), not_linked=not_linked,
        idle=idle_split(trace), verdict=verdict, notes=notes + _module_notes(trace, modules),
        module_source=trace.module_source if modules else None,
    )


def _summarize_cpu(trace: Trace, verdict: str) -> Summary:
    groups: dict[tuple, list] = {}
    per_step = []
    stacks = trace.module_source == MODULES_FROM_STACKS
    for step in trace.steps:
        names = set()
        for op in step.ops:
            if op.is_label:
                continue
            names.add(op.name)
            path = op.path + (op.name,) if op.name.startswith(MODULE_PREFIX) else op.path
            if stacks and not path and op.name.startswith(AUTOGRAD_NODE):
                path = (op.name,)  # a backward node's own time is the backward's, as the ops inside it are
            key = ("op", op.name, path, op.name, op.modules)
            group = groups.get(key)
            if group is None:
                groups[key] = [op.self_us, 1]
            else:
                group[0] += op.self_us
                group[1] += 1
        per_step.append(len(names))  # the rows of the step's op table
    tally = _Tally(groups, lambda kind, name, place, launched_by: kind_of_op(name, place.in_optimizer),
                   stacks=stacks)
    modules = tally.modules.rows(_module_calls(trace))
    return Summary(
        trace=trace.name, on_gpu=False, steps=len(trace.steps), total_us=tally.total_us, items=tally.items,
        max_per_step=max(per_step, default=0), kinds=tally.kind_rows(), modules=modules,
        top=tally.top_rows(lambda kind, name: (name, "")), not_linked=0, idle=None, verdict=verdict,
        notes=["a CPU profile: each CPU op's self time stands in for a kernel's GPU time"] + _module_notes(trace, modules),
        module_source=trace.module_source if modules else None,
    )


class _Tally:
    """The groups (item kind, name, path, launching op, modules) -> [µs, count], read into kinds, modules and names
    (modules: the chain from the Python frames, empty where the path's ranges name the modules)."""

    def __init__(self, groups: dict[tuple, list], kind_of, stacks: bool = False):
        self.kinds: dict[str, list] = {kind: [0.0, 0] for kind in KINDS}
        self.modules = _ModuleTally()
        self.by_name: dict[tuple[str, str, str], _NameTally] = {}
        places: dict[tuple, _Place] = {}  # (path, modules) -> where it ran: paths repeat across names
        for (item, name, path, launched_by, modules), (us, count) in groups.items():
            place = places.get((path, modules))
            if place is None:
                place = places[(path, modules)] = _Place.of(path, modules, stacks)
            kind = kind_of(item, name, place, launched_by)
            row = self.kinds[kind]
            row[0] += us
            row[1] += count
            self.modules.add(place, us)
            key = (item, name, kind)  # aten::div in a module and in the optimizer: two rows
            tally = self.by_name.get(key)
            if tally is None:
                tally = self.by_name[key] = _NameTally(kind)
            tally.add(us, count, launched_by, place)
            if path and any(box.startswith(GRAPH_CALL) for box in path):
                tally.graphs[_compiled_graph(path)] += count
            if launched_by in RECORDING_WRAPPERS:
                tally.issuers[_issuer(path)] += count
        self.total_us = sum(row[0] for row in self.kinds.values())
        self.items = sum(row[1] for row in self.kinds.values())

    def kind_rows(self) -> list[KindRow]:
        rows = [KindRow(kind, us, n) for kind, (us, n) in self.kinds.items() if n]
        return sorted(rows, key=lambda r: -r.us)

    def top_rows(self, describe) -> list[TopRow]:
        ranked = sorted(self.by_name.items(), key=lambda item: -item[1].total_us)[:TOP_KERNELS]
        told_apart = distinct_short_names(name for (item, name, _), _ in ranked if item == "kernel")
        rows = []
        for (item, name, _), tally in ranked:
            short, decoded = describe(item, name)
            short = told_apart.get(name, short)  # two kernels whose short names are one: what tells them apart
            launcher = tally.launchers.most_common(1)[0][0]
            place = tally.places.most_common(1)[0][0]
            module = (place.chain[-1] + (" (backward)" if place.backward else "")) if place.chain else ""
            graph, region = tally.graphs.most_common(1)[0][0] if tally.graphs else ("", "")
            issuer = tally.issuers.most_common(1)[0][0] if tally.issuers else ("", False, False)
            rows.append(TopRow(name, short, decoded, tally.kind, tally.count, tally.total_us, launcher or "-", module,
                               graph, region, *issuer))
        return rows


@dataclass(frozen=True)
class _Place:
    """Where a piece of work ran: its module chain (outermost first), forward or backward, inside the optimizer."""

    chain: tuple[str, ...]
    backward: bool
    in_optimizer: bool
    outside: str  # with no module: the outermost box around it, to say where it ran

    @classmethod
    def of(cls, path: tuple[str, ...], modules: tuple[str, ...] = (), stacks: bool = False) -> _Place:
        """From the ranges in `path`, or from `modules`, the chain the Python frames gave (`stacks`: the trace's
        modules come from them). With stacks the whole backward is outside every module, one row rather than one
        per kind of autograd node; with ranges only the nodes no module made are, each named."""
        chain: tuple[str, ...] = modules
        backward = False
        for name in () if modules else reversed(path):
            if name.startswith(MODULE_PREFIX) and name.endswith(BACKWARD_SUFFIX):
                chain = tuple(name[len(MODULE_PREFIX) : -len(BACKWARD_SUFFIX)].split(CHAIN_SEPARATOR))
                backward = True
                break
        if not backward and not modules:
            chain = tuple(name[len(MODULE_PREFIX) :] for name in path if name.startswith(MODULE_PREFIX))
        optimizer = in_optimizer(path)
        outside = path[0] if path else ""
        if stacks and outside.startswith(AUTOGRAD_NODE):
            outside = AUTOGRAD_BACKWARD
        return cls(chain, backward, optimizer, outside)


@dataclass
class _NameTally:
    kind: str
    count: int = 0
    total_us: float = 0.0
    launchers: Counter = field(default_factory=Counter)
    places: Counter = field(default_factory=Counter)
    graphs: Counter = field(default_factory=Counter)  # (compiled graph's range, its region) -> count
    issuers: Counter = field(default_factory=Counter)  # (issuing op, in the backward, in DDP's forward) -> count

    def add(self, us: float, count: int, launched_by: str | None, place: _Place) -> None:
        self.count += count
        self.total_us += us
        self.launchers[launched_by] += count
        self.places[place] += count


# Ops that wrap a collective to record it and say nothing of which: the op around them issued it.
RECORDING_WRAPPERS = {"record_param_comms"}


def _issuer(path: tuple[str, ...]) -> tuple[str, bool, bool]:
    """The op or range that issued a recorded collective (`c10d::allreduce_`, `FSDP::all_gather (layers.0)`), whether
    it ran in autograd's backward, and whether in DDP's forward."""
    issuer = next((box for box in reversed(path) if box.startswith(("c10d::", "FSDP::"))), "")
    backward = any(box.startswith(AUTOGRAD_NODE) for box in path)
    return issuer, backward, "DistributedDataParallel.forward" in path


def _compiled_graph(path: tuple[str, ...]) -> tuple[str, str]:
    """The innermost `## Call CompiledFxGraph` range of a launch path and the `Torch-Compiled Region` around it."""
    graph = next(box for box in reversed(path) if box.startswith(GRAPH_CALL))
    region = next((box for box in reversed(path[: path.index(graph)]) if box.startswith("Torch-Compiled Region")), "")
    return graph, region


class _ModuleTally:
    def __init__(self):
        self.total: dict[str, float] = defaultdict(float)
        self.self: dict[str, float] = defaultdict(float)
        self.backward: dict[str, float] = defaultdict(float)
        self.outside: dict[str, float] = defaultdict(float)
        self.depth: dict[str, int] = {}  # how deep a module type sits (outermost 0): orders equal totals
        self.named = False

    def add(self, place: _Place, us: float) -> None:
        if not place.chain:
            self.outside[place.outside] += us
            return
        self.named = True
        self.self[place.chain[-1]] += us
        for depth, module in enumerate(place.chain):
            if module in place.chain[:depth]:
                continue  # a module type inside itself (nested Sequentials): its time counts once
            self.total[module] += us
            if place.backward:
                self.backward[module] += us
            self.depth[module] = min(depth, self.depth.get(module, depth))

    def rows(self, calls: Counter) -> list[ModuleRow]:
        if not self.named:
            return []
        rows = [ModuleRow(m, calls.get(m, 0), us, self.self.get(m, 0.0), self.backward.get(m, 0.0)) for m, us in self.total.items()]
        rows.sort(key=lambda r: (-r.total_us, self.depth[r.module], r.module))
        outside = [ModuleRow(f"(no module) {where or 'outside every op'}", 0, us, us, 0.0) for where, us in self.outside.items()]
        return rows + sorted(outside, key=lambda r: -r.total_us)


def _module_calls(trace: Trace) -> Counter:
    """Forward calls per module type, over the steps: the `nn.Module: X` boxes (ops or labels), or the Python frames
    the reader counted per step."""
    calls: Counter = Counter()
    if trace.module_source == MODULES_FROM_STACKS:
        for step in trace.steps:
            calls.update(step.module_calls)
        return calls
    for step in trace.steps:
        for op in step.ops:
            name = op.name
            if name.startswith(MODULE_PREFIX) and not name.endswith(BACKWARD_SUFFIX):
                calls[name[len(MODULE_PREFIX) :]] += 1
    return calls


def _module_notes(trace: Trace, modules: list[ModuleRow]) -> list[str]:
    """What the by-module rows stand on, when they come from the Python frames: the forward's modules only."""
    if not modules or trace.module_source != MODULES_FROM_STACKS:
        return []
    note = "modules from the trace's Python stacks (with_stack=True): the forward's module calls"
    if any(op.name.startswith(AUTOGRAD_NODE) for step in trace.steps for op in step.ops):
        note += (
            "; the backward runs in autograd's nodes, outside every module's frame (on autograd's own thread on a "
            f"GPU), so it counts as (no module) {AUTOGRAD_BACKWARD}: profile_model.py's ranges give each backward "
            "node its module"
        )
    return [note]


def short_and_decoded(kind: str, name: str) -> tuple[str, str]:
    if kind != "kernel":
        return name, ""
    decoded = decode(name)
    return decoded.short, decoded.describe()


# --- idle time -----------------------------------------------------------------------------------------------


def idle_split(trace: Trace) -> IdleSplit | None:
    """The GPU lane's idle time over its window, split by what the GPU waited on (see the module's docstring)."""
    lane = trace.gpu_lane()
    if not lane:
        return None
    syncs = sorted((c for c in [*trace.runtime_outside_steps, *(c for s in trace.steps for c in s.runtime)] if c.is_sync),
                   key=lambda c: c.ts)
    starts = [c.ts for c in syncs]
    latest_end, running = [], float("-inf")
    for call in syncs:  # the latest end among the synchronize calls that started so far
        running = max(running, call.end)
        latest_end.append(running)
    busy = launch_us = sync_us = 0.0
    launch_gaps = sync_gaps = 0
    end = None
    for work in lane:
        start, stop = work.ts, work.ts + work.dur
        if end is None:
            busy, end = work.dur, stop
            continue
        if start > end:
            gap = start - end
            busy += work.dur
            if gap > MIN_GAP_US:
                i = bisect.bisect_right(starts, end) - 1
                if i >= 0 and latest_end[i] >= end and (work.launch is None or work.launch.ts >= starts[i]):
                    sync_us += gap
                    sync_gaps += 1
                elif work.launch is not None and work.launch_end > end:
                    launch_us += gap
                    launch_gaps += 1
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    return IdleSplit(end - lane[0].ts, busy, launch_us, launch_gaps, sync_us, sync_gaps)


# --- printing ------------------------------------------------------------------------------------------------


def print_summary(summary: Summary, console: Console, *, rows: int | None = None) -> None:
    """The summary as `trace-report` prints it first: kinds, modules, top kernels, idle time, verdict."""
    n = summary.steps
    what = "GPU time" if summary.on_gpu else "CPU time (ops' self time)"
    unit = "kernels, memsets and memcpys" if summary.on_gpu else "CPU ops"
    console.print(
        f"[bold]Where the {escape(what)} goes[/bold] · {_us(summary.total_us / n)} per step over {n} step"
        f"{'s' if n != 1 else ''} · {_count(summary.items / n) if summary.items < 10 * n else f'{summary.items / n:,.0f}'} "
        f"{unit} per step"  # one kernel over two steps is 0.5 a step, not 0
    )
    for note in summary.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    _print_kinds(summary, console)
    if summary.has_modules:
        _print_modules(summary, console, rows)
    _print_top(summary, console, rows)
    if summary.idle is not None:
        _print_idle(summary.idle, console)
    console.print(f"[bold]verdict:[/bold] {escape(summary.verdict)} (the numbers at the end)")
    console.print()


def _print_kinds(summary: Summary, console: Console) -> None:
    n = summary.steps
    table = Table(title="by kind of work", title_justify="left")
    table.add_column("kind")
    table.add_column("µs/step", justify="right")
    table.add_column("share", justify="right")
    table.add_column("/step", justify="right")
    for row in summary.kinds:
        table.add_row(row.kind, f"{row.us / n:,.1f}", _pct(row.us, summary.total_us), _count(row.count / n))
    console.print(table)


def _print_modules(summary: Summary, console: Console, rows: int | None) -> None:
    n = summary.steps
    # Where the modules come from, under the table: the title stays one line on a terminal of 100 columns.
    table = Table(title="by module (summed over instances; total holds its children, self does not)", title_justify="left",
                  caption=MODULE_SOURCES.get(summary.module_source), caption_justify="left")
    table.add_column("module", overflow="fold")
    table.add_column("calls/step", justify="right")
    table.add_column("total µs/step", justify="right")
    table.add_column("total", justify="right")
    table.add_column("self", justify="right")
    backward = summary.module_source != MODULES_FROM_STACKS  # Python frames give no module a backward: no column
    if backward:
        table.add_column("of total: backward", justify="right")
    shown = summary.modules if rows is None else summary.modules[:rows]
    for row in shown:
        cells = [
            escape(row.module), _count(row.calls / n) if row.calls else "", f"{row.total_us / n:,.1f}",
            _pct(row.total_us, summary.total_us), _pct(row.self_us, summary.total_us),
        ]
        if backward:
            cells.append(_pct(row.backward_us, row.total_us) if row.total_us else "-")
        table.add_row(*cells)
    console.print(table)
    if len(shown) < len(summary.modules):
        console.print(f"[dim]… {len(summary.modules) - len(shown)} more modules (--rows 0 for all)[/dim]")


MODULE_SOURCES = {  # the by-module table's caption: where the modules come from
    MODULES_FROM_RANGES: "modules from the trace's nn.Module ranges (as profile_model.py records them)",
    MODULES_FROM_STACKS: "modules from the trace's Python stacks (with_stack): the forward's calls only",
}


def _print_top(summary: Summary, console: Console, rows: int | None = None) -> None:
    n = summary.steps
    title = "top kernels by total time" if summary.on_gpu else "top CPU ops by self time"
    shown = summary.top if rows is None else summary.top[:rows]
    graphs = _graph_tags(shown)
    columns = [
        Column("kernel" if summary.on_gpu else "op", least=NAME_LEAST, fold="name"),
        Column("kind", least=13, most=13),  # "copy and memset" in two lines
        Column("/step", right=True), Column("µs/step", right=True), Column("share", right=True),
    ]
    cells = [[row.short, row.kind, _count(row.count / n), f"{row.total_us / n:,.1f}", _pct(row.total_us, summary.total_us)]
             for row in shown]
    if summary.on_gpu:
        columns.append(Column("launched by", least=12, most=LAUNCHER_MOST, fold="op"))
        for row, line in zip(shown, cells):
            line.append(_launcher(row, graphs))
    if summary.has_modules:  # where the terminal has room for it; the by-module table has them all
        columns.append(Column("module", least=12, most=20, fold="op", optional=True))
        for row, line in zip(shown, cells):
            line.append(row.module or "-")
    console.print(fitted_table(columns, cells, console.width, title=title, title_justify="left"))
    for tag, (graph, where) in graphs.items():
        console.print(f"  {escape(tag)}: {escape(graph)}" + (f", {escape(where)}" if where else ""), overflow="fold")
    for issuer, what in dict.fromkeys((row.issued_by, _issuer_note(row)) for row in shown if row.issued_by):
        if what:
            console.print(f"  {escape(issuer)}: {escape(what)}")


NAME_LEAST = 24  # a kernel name's column: 72 characters (kernels.name.SHORT_LIMIT) in three lines
LAUNCHER_MOST = 22  # `aten::cudnn_convolution_backward` in two lines, broken at a seam
GRAPH_CALL = "## Call CompiledFxGraph "


def _graph_tags(rows: list[TopRow]) -> dict[str, tuple[str, str]]:
    """The compiled graphs the rows' kernels came from, each by a short tag (`graph fbchdju`, its hash's first
    characters) -> its range's whole name and where the trace says it ran (its `Torch-Compiled Region`, a module):
    said once under the table, not in every row (the range's name is 80 characters)."""
    tags: dict[str, tuple[str, str]] = {}
    for row in rows:
        if row.graph:
            tag = _graph_tag(row.graph)
            where = "; ".join(part for part in (row.region, f"module {row.module}" if row.module else "") if part)
            tags.setdefault(tag, (row.graph, where))
    return tags


def _graph_tag(graph: str) -> str:
    return "graph " + graph[len(GRAPH_CALL):].strip(" #")[:7]


def _issuer_note(row: TopRow) -> str:
    """What a collective's issuing op was there for, where its place says: DDP's reducer all-reduces the gradient
    buckets from autograd's hooks; DDP's forward broadcasts the buffers."""
    if row.issued_by.startswith("c10d::allreduce") and row.backward_issue:
        return "the gradient buckets' all-reduces, DDP's reducer issuing them from autograd's gradient hooks"
    if row.issued_by.startswith("c10d::broadcast") and row.ddp_forward:
        return "DDP's forward broadcasting the module's buffers from rank 0"
    return ""


def _launcher(row: TopRow, graphs: dict) -> str:
    """The launching op as the table says it: a compiled graph's own launch (its `## Call CompiledFxGraph` range, or
    a Triton kernel's launcher named like the kernel) by the graph's tag; a collective's recording wrapper
    (`record_param_comms`, which says no collective) by the c10d op or FSDP range that issued it."""
    if row.issued_by:
        return row.issued_by
    if row.graph and (row.launched_by.startswith(GRAPH_CALL) or row.launched_by == row.name
                      or row.launched_by.startswith(("triton_", "cpp_fused_"))):
        return _graph_tag(row.graph)
    return row.launched_by


def _print_idle(idle: IdleSplit, console: Console) -> None:
    if idle.window_us <= 0:
        return
    parts = [
        f"waiting on launches {_us(idle.launch_us)} ({_pct(idle.launch_us, idle.window_us)}, {idle.launch_gaps} gaps)",
        f"on a synchronize {_us(idle.sync_us)} ({_pct(idle.sync_us, idle.window_us)}, {idle.sync_gaps} gaps)",
        f"other {_us(idle.other_us)} ({_pct(idle.other_us, idle.window_us)})",
    ]
    console.print(
        f"[bold]GPU idle[/bold] {_us(idle.idle_us)} of its {_us(idle.window_us)} window "
        f"({_pct(idle.idle_us, idle.window_us)}): " + escape("; ".join(parts))
    )


# --- small helpers -------------------------------------------------------------------------------------------


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".")


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _count(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def _us(value: float) -> str:
    return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.1f} µs"
