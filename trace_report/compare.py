"""Two traces side by side: which op's GPU work got slower, by kind of work, and what only one of them runs.
`TraceDiff.of(a, b)` builds it; `trace-report A B` prints it and a notebook shows it (compare_report.py's
`diff(a, b)`), `--json` carries it (`TraceDiff.to_dict`).

Kernel names alone cannot pair two traces' work: the same model on an H100 and on an MI300X shares no GEMM's name
(`nvjet_sm90_tst_...` against `Cijk_Alik_Bljk_...`), and even ATen's elementwise kernels differ in their template
arguments. What both traces share is the CPU side: the op that launched the work and the boxes around it. So the diff
pairs ops, not kernels:

    an op       the CPU op whose launch calls made the GPU work (`GpuWork.launched_by`), with the boxes around it
                (`launch_path`: labels, module ranges, `aten::linear > aten::matmul`), and its rank among the ops of
                that name and place in a step: the second `aten::mm` under `mlp_fwd > aten::linear > aten::matmul`.
                Its kernels, memsets and memcpys and their GPU time are averaged over the recorded steps.
    matched     first by (op, place, rank); what is left, by op name and order (a label renamed, the module tree of
                another version of the model); then an op of Inductor's (`triton_poi_fused__unsafe_view_gelu_mul_0`,
                launched from its own range, not from an aten op) takes the ops of the other trace that its kernel's
                name lists (`gelu`, `mul`), the nearest ones in step order, and a CUDA graph's replay (one
                `cudaGraphLaunch`, no op around its kernels) those whose ops or kernels it runs; the rest ran in one
                trace only.
    new work    a matched op that runs more of a kind of work in one trace (a split-K GEMM's second kernel, the memset
                cuBLAS runs before a GEMM on one GPU and not on another).

Beside the ops: the GPU time per kind of work (kernels.kind_of_kernel), and, for kernels, the old lists (only in A,
only in B, in both), now by decoded short name, so that `vectorized_elementwise_kernel<8, ...GeluCUDAKernelImpl...>`
and its `<4, ...>` twin are one kernel. They read well between two runs on one vendor's GPUs (eager against
--compile); across vendors they list every kernel twice, and the report prints only their count.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from trace_report.frames import Rows, Tabular, records
from trace_report.fusion import canonical_op
from trace_report.graphs import is_graph_launch
from trace_report.kernels import COPY, KINDS, decode, in_optimizer, kind_of_kernel
from trace_report.model import GpuWork, Trace, rounded
from trace_report.noise import Change, Gate, change, gate

PATH, ORDER, FUSED, ONLY_FIRST, ONLY_SECOND = "path", "order", "fused", "only_in_first", "only_in_second"
NOT_LINKED = "(no launch call)"  # GPU work the trace links to no launch call: no op to give it to
_COMPILED_GRAPH = re.compile(r"^## Call CompiledFxGraph \w+ ##$")
_INDUCTOR_NUMBER = re.compile(r"^(triton_\w+?)_\d+$")
_EPSILON = 1e-6  # per-step counts are averages: equal when they differ by less


# --- what the diff holds -------------------------------------------------------------------------------------


@dataclass
class OpRun:
    """One op of a trace as it recurs step after step: its place, rank, and its GPU work per step (averaged)."""

    name: str  # the launching op (`aten::mm`, `triton_poi_fused__unsafe_view_gelu_mul_0`), or NOT_LINKED
    where: tuple[str, ...]  # the boxes around it, outermost first, compiled graphs' hashes left out
    index: int  # its rank among the ops of this name and place in a step, from 0
    order: int  # where it first ran: the trace's ops in order of first appearance
    items: float = 0.0  # kernels, memsets and memcpys per step
    us: float = 0.0  # their GPU time per step (durations summed)
    work: Counter = field(default_factory=Counter)  # (kind of work, short name) -> per step
    fuses: frozenset[str] = frozenset()  # the ops an Inductor kernel of it fuses, as canonical_op names them
    replay: bool = False  # a CUDA graph's replay (one cudaGraphLaunch)
    step_us: list[float] = field(default_factory=list)  # its GPU time in each step of the trace (0 where it ran not)

    @property
    def key(self) -> tuple:
        return (_name_key(self.name), self.where, self.index)

    @property
    def kinds(self) -> Counter:
        """Kind of work -> items per step."""
        counts: Counter = Counter()
        for (kind, _), n in self.work.items():
            counts[kind] += n
        return counts

    def to_dict(self) -> dict:
        return {"name": self.name, "where": list(self.where), "index": self.index}


@dataclass
class OpMatch:
    """One row of the diff by op: the first trace's op(s) against the second's. Two lists, because a fused kernel
    of one trace stands for several ops of the other; one of them is empty for an op that ran in one trace only."""

    first: list[OpRun]
    second: list[OpRun]
    how: str  # PATH, ORDER, FUSED, ONLY_FIRST, ONLY_SECOND

    @property
    def op(self) -> OpRun:
        """The op the row is named after: the fused kernel's op for a fused row, else the first trace's."""
        if self.how == FUSED and len(self.second) == 1:
            return self.second[0]
        return (self.first or self.second)[0]

    @property
    def replaced(self) -> list[OpRun]:
        """The ops a fused kernel took (the other side of a fused row)."""
        if self.how != FUSED:
            return []
        return self.first if self.op is self.second[0] else self.second

    @property
    def replaced_side(self) -> str:
        return "A" if self.replaced is self.first else "B"

    @property
    def first_us(self) -> float:
        return sum(op.us for op in self.first)

    @property
    def second_us(self) -> float:
        return sum(op.us for op in self.second)

    @property
    def first_items(self) -> float:
        return sum(op.items for op in self.first)

    @property
    def second_items(self) -> float:
        return sum(op.items for op in self.second)

    @property
    def delta_us(self) -> float:
        return self.second_us - self.first_us

    @property
    def change(self) -> Change:
        """The change with its noise (noise.py): each side's ops summed step by step."""
        return change(_summed(op.step_us for op in self.first), _summed(op.step_us for op in self.second))

    @property
    def ratio(self) -> float | None:
        return self.second_us / self.first_us if self.first_us > 0 else None

    def to_dict(self) -> dict:
        def side(ops: list[OpRun]) -> dict | None:
            if not ops:
                return None
            kernels = Counter()
            for op in ops:
                kernels.update({short: n for (_, short), n in op.work.items()})
            return {
                "ops": [op.to_dict() for op in ops],
                "per_step": rounded(sum(op.items for op in ops)),
                "us_per_step": rounded(sum(op.us for op in ops)),
                "kernels": [{"short_name": short, "per_step": rounded(n)} for short, n in kernels.items()],
            }

        op = self.op
        return {
            "op": op.name, "where": list(op.where), "index": op.index, "matched_by": self.how,
            "first": side(self.first), "second": side(self.second),
            "delta_us": rounded(self.delta_us), "ratio": rounded(self.ratio),
            "spread": self.change.to_dict(), "call": self.change.call,
        }


@dataclass
class NewWork:
    """A matched op that runs more of one kind of work in one trace than in the other."""

    match: OpMatch
    kind: str  # a kind of kernel (kernels.KINDS), or "memset" / "memcpy"
    per_step: tuple[float, float]
    names: tuple[str, ...]  # short names of that kind on the side with more, the other side's left out when it can

    @property
    def side(self) -> str:
        return "second" if self.per_step[1] > self.per_step[0] else "first"

    def to_dict(self) -> dict:
        op = self.match.op
        return {"op": op.name, "where": list(op.where), "index": op.index, "kind": self.kind,
                "per_step": [rounded(n) for n in self.per_step], "more_in": self.side, "kernels": list(self.names)}


@dataclass
class KindDiff:
    kind: str
    per_step: tuple[float, float]  # GPU work items
    us_per_step: tuple[float, float]

    @property
    def ratio(self) -> float | None:
        a, b = self.us_per_step
        return b / a if a > 0 else None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "per_step": [rounded(n) for n in self.per_step],
                "us_per_step": [rounded(us) for us in self.us_per_step], "ratio": rounded(self.ratio)}


@dataclass
class KernelGroup:
    """Kernels by decoded short name: the full names behind it (template arguments and the like apart) and how
    many run per step in each trace."""

    short: str
    names: list[str]
    per_step: list[float]  # [first, second]
    step_us: tuple[list[float], list[float]] = ((), ())  # their GPU time in each step, per trace

    @property
    def change(self) -> Change:
        return change(*self.step_us)

    def to_dict(self) -> dict:
        row = {"name": self.names[0], "short_name": self.short, "per_step": [rounded(n) for n in self.per_step],
               "spread": self.change.to_dict(), "call": self.change.call}
        if len(self.names) > 1:
            row["names"] = list(self.names)
        return row


@dataclass
class TraceDiff(Tabular):
    """Two traces side by side (see the module's docstring)."""

    first: Trace
    second: Trace
    only_in_first: list[KernelGroup]  # by short name
    only_in_second: list[KernelGroup]
    in_both: list[KernelGroup]
    ops: list[OpMatch] = field(default_factory=list)  # the biggest change in GPU time first
    kinds: list[KindDiff] = field(default_factory=list)
    new_work: list[NewWork] = field(default_factory=list)
    vendors: tuple[str | None, str | None] = (None, None)

    @classmethod
    def of(cls, first: Trace, second: Trace):
        """The diff of two traces, as an instance of `cls`: compare_report.diff makes the one a notebook shows."""
        only_a, only_b, both = kernel_groups(first, second)
        ops = match_ops(op_runs(first), op_runs(second))
        return cls(
            first, second, only_a, only_b, both,
            ops=sorted(ops, key=lambda m: -abs(m.delta_us)),  # stable: equal changes keep the step's order
            kinds=kind_diff(first, second),
            new_work=[w for m in ops if m.how in (PATH, ORDER) for w in new_work(m)],
            vendors=(vendor(first), vendor(second)),
        )

    @property
    def same_vendor(self) -> bool:
        """True unless both traces say whose GPU ran them and the two differ."""
        a, b = self.vendors
        return a is None or b is None or a == b

    def only_in(self, how: str) -> list[OpMatch]:
        return [m for m in self.ops if m.how == how]

    @property
    def step_change(self) -> Change:
        """All the steps' GPU work (durations summed), A against B, with its noise."""
        return change([s.gpu_time_us for s in self.first.steps], [s.gpu_time_us for s in self.second.steps])

    def gate(self, pct: float) -> Gate:
        """`--fail_slower PCT` (noise.Gate): the matched ops, and all the GPU work together, weighed."""
        steps = [sum(s.gpu_time_us for s in t.steps) / (len(t.steps) or 1) for t in (self.first, self.second)]
        rows = [("all GPU work", "", self.step_change, 1.0, ())]
        for m in self.ops:
            c = m.change
            share = max(c.first.mean_us / steps[0] if steps[0] else 0.0, c.second.mean_us / steps[1] if steps[1] else 0.0)
            kernels = tuple(dict.fromkeys(short for op in m.first + m.second for (_, short) in op.work))
            rows.append((m.op.name + op_rank(self.ops, m), where_text(m.op.where), c, share, kernels))
        return gate(rows, pct)

    TABLES = ("ops", "kernels", "kinds")

    def frame_rows(self, table: str | None = None) -> Rows:
        """DataFrame rows (frames.py): by op or by kernel (short name) with each side's per-step mean and spread,
        the change, its noise and the call; or by kind of work."""
        table = self._table(table)
        if table == "kinds":
            return records(["kind", "per_step_a", "per_step_b", "us_per_step_a", "us_per_step_b", "ratio"], [
                {"kind": k.kind, "per_step_a": rounded(k.per_step[0]), "per_step_b": rounded(k.per_step[1]),
                 "us_per_step_a": rounded(k.us_per_step[0]), "us_per_step_b": rounded(k.us_per_step[1]),
                 "ratio": rounded(k.ratio)} for k in self.kinds])
        if table == "kernels":
            named = [(g, "only_in_first") for g in self.only_in_first] + [
                (g, "only_in_second") for g in self.only_in_second] + [(g, "in_both") for g in self.in_both]
            rows = [{"kernel": g.short, "in": where, "per_step_a": rounded(g.per_step[0]),
                     "per_step_b": rounded(g.per_step[1]), **_change_row(g.change)} for g, where in named]
            return records(["kernel", "in", "per_step_a", "per_step_b", *CHANGE_COLUMNS], rows)
        rows = [{"op": m.op.name + op_rank(self.ops, m), "where": where_text(m.op.where), "matched_by": m.how,
                 "per_step_a": rounded(m.first_items), "per_step_b": rounded(m.second_items),
                 **_change_row(m.change)} for m in self.ops]
        return records(["op", "where", "matched_by", "per_step_a", "per_step_b", *CHANGE_COLUMNS], rows)

    def __repr__(self) -> str:  # the traces' events are no line to read
        return f"<TraceDiff {self.first.name} against {self.second.name}: {len(self.ops)} ops>"

    def to_dict(self, gate: Gate | None = None) -> dict:
        """The diff as plain data; `gate`: `self.gate(PCT)`'s outcome, under "gate" (null without one)."""
        return {
            "vendors": list(self.vendors),
            "by_op": [m.to_dict() for m in self.ops],
            "by_kind": [k.to_dict() for k in self.kinds],
            "ops_only_in_first": [m.to_dict() for m in self.only_in(ONLY_FIRST)],
            "ops_only_in_second": [m.to_dict() for m in self.only_in(ONLY_SECOND)],
            "new_work_in_matched_ops": [w.to_dict() for w in self.new_work],
            "only_in_first": [g.to_dict() for g in self.only_in_first],
            "only_in_second": [g.to_dict() for g in self.only_in_second],
            "in_both": [g.to_dict() for g in self.in_both],
            "step_time_us": [_step_times(self.first), _step_times(self.second)],
            "gpu_time_per_step": {"spread": self.step_change.to_dict(), "call": self.step_change.call},
            "gate": None if gate is None else gate.to_dict(),
        }


# --- the diff ------------------------------------------------------------------------------------------------


def kernel_groups(first: Trace, second: Trace) -> tuple[list[KernelGroup], list[KernelGroup], list[KernelGroup]]:
    """Kernels by decoded short name: only in the first trace, only in the second, in both."""
    groups: dict[str, KernelGroup] = {}
    for side, trace in enumerate((first, second)):
        for name, n in trace.kernel_names().items():
            short = decode(name).short
            group = groups.setdefault(short, KernelGroup(short, [], [0.0, 0.0], ([], [])))
            if name not in group.names:
                group.names.append(name)
            group.per_step[side] += n
        shorts = {name: decode(name).short for name in trace.kernel_names()}
        for group in groups.values():
            group.step_us[side].extend([0.0] * len(trace.steps))
        for i, step in enumerate(trace.steps):
            for work in step.kernels:
                groups[shorts[work.name]].step_us[side][i] += work.dur
    only_a = [g for g in groups.values() if g.per_step[1] == 0]
    only_b = [g for g in groups.values() if g.per_step[0] == 0]
    return only_a, only_b, [g for g in groups.values() if g.per_step[0] and g.per_step[1]]


def op_runs(trace: Trace) -> list[OpRun]:
    """The trace's ops that launched GPU work, in order of first appearance, each with its work per step."""
    runs: dict[tuple, OpRun] = {}
    for i, step in enumerate(trace.steps):
        ranks: Counter = Counter()
        for name, where, works in _step_ops(step.gpu):
            ranks[(_name_key(name), where)] += 1
            key = (_name_key(name), where, ranks[(_name_key(name), where)] - 1)
            run = runs.get(key)
            if run is None:
                run = runs[key] = OpRun(name, where, key[2], len(runs), replay=_is_replay(name),
                                        step_us=[0.0] * len(trace.steps))
            for work in works:
                run.items += 1
                run.us += work.dur
                run.step_us[i] += work.dur
                run.work[(work_kind(work), decode(work.name).short if work.kind == "kernel" else work.name)] += 1
                if work.kind == "kernel" and not run.replay and decode(work.name).family.startswith("Inductor"):
                    run.fuses |= {canonical_op(op) for op in decode(work.name).ops}
    n = len(trace.steps) or 1
    for run in runs.values():
        run.items /= n
        run.us /= n
        run.work = Counter({key: count / n for key, count in run.work.items()})
    return list(runs.values())


def _step_ops(gpu: list[GpuWork]) -> list[tuple[str, tuple[str, ...], list[GpuWork]]]:
    """A step's GPU work by the op box that launched it, in launch order: (op name, place, its work).

    One box is one op even when it launched several kernels (a split-K GEMM and its reduction); two calls of the
    same op are two. A CUDA graph's replay is one op, named after its launch call, inside whatever boxes; another
    launch from no op (a kernel launched from Python inside a label) is one op per call, named after the label.
    """
    ops: dict[int, tuple[str, tuple[str, ...], list[GpuWork]]] = {}
    unlinked: list[GpuWork] = []
    for work in sorted(gpu, key=lambda w: w.launch_ts if w.launch is not None else w.ts):
        launch = work.launch
        if launch is None:
            unlinked.append(work)
            continue
        box = None if _is_replay(launch.name) else launch.launcher
        ident = id(box) if box is not None else id(launch)
        entry = ops.get(ident)
        if entry is None:
            if box is not None:
                name, where = launch.launched_by or NOT_LINKED, box.path
            elif _is_replay(launch.name):
                name, where = launch.name, launch.launch_path
            else:
                name, where = launch.launched_by or NOT_LINKED, launch.launch_path[:-1]
            entry = ops[ident] = (name, _place(where), [])
        entry[2].append(work)
    found = list(ops.values())
    if unlinked:
        found.append((NOT_LINKED, (), unlinked))
    return found


def work_kind(work: GpuWork) -> str:
    """A kind of work: kinds.kind_of_kernel's for a kernel (its name, else its launching op's kind); "memset" or
    "memcpy" for the rest."""
    if work.kind != "kernel":
        return work.kind
    return kind_of_kernel(work.name, in_optimizer(work.launch_path), work.launched_by)


def kind_diff(first: Trace, second: Trace) -> list[KindDiff]:
    """GPU work items and time per step, per kind of work (memsets and memcpys together, as summary counts them)."""
    totals = {kind: [0, 0, 0.0, 0.0] for kind in KINDS}  # items A, items B, µs A, µs B, over all steps
    for side, trace in enumerate((first, second)):
        for work in trace.gpu_work():
            kind = work_kind(work)
            row = totals[COPY if kind in ("memset", "memcpy") else kind]
            row[side] += 1
            row[2 + side] += work.dur
    na, nb = len(first.steps) or 1, len(second.steps) or 1
    rows = [KindDiff(kind, (a / na, b / nb), (ua / na, ub / nb)) for kind, (a, b, ua, ub) in totals.items() if a or b]
    return sorted(rows, key=lambda r: -max(r.us_per_step))


def new_work(match: OpMatch) -> list[NewWork]:
    """What a matched op runs more of in one trace: per kind of work, a count that differs."""
    a, b = match.first[0], match.second[0]
    a_kinds, b_kinds = a.kinds, b.kinds
    found = []
    for kind in list(dict.fromkeys([*a_kinds, *b_kinds])):
        counts = (a_kinds.get(kind, 0.0), b_kinds.get(kind, 0.0))
        if abs(counts[0] - counts[1]) < _EPSILON:
            continue
        more, other = (b, a) if counts[1] > counts[0] else (a, b)
        names = [short for (k, short) in more.work if k == kind]
        fresh = [short for short in names if (kind, short) not in other.work]
        found.append(NewWork(match, kind, counts, tuple(fresh or names)))
    return found


# --- matching ------------------------------------------------------------------------------------------------


def match_ops(first: list[OpRun], second: list[OpRun]) -> list[OpMatch]:
    """Pair two traces' ops (see the module's docstring); the rows come in the first trace's order, the second's
    ops of its own after them."""
    partner: dict[int, OpRun] = {}  # id of a first-trace op -> its second-trace op
    how: dict[int, str] = {}
    by_key = {op.key: op for op in second}
    taken: set[int] = set()
    for op in first:  # the same op, at the same place, the same rank
        other = by_key.get(op.key)
        if other is not None:
            partner[id(op)], how[id(op)] = other, PATH
            taken.add(id(other))
    # What is left, by name and order: the same ops in boxes that differ (a renamed label, another model version).
    left_b: dict[str, list[OpRun]] = {}
    for op in second:
        if id(op) not in taken:
            left_b.setdefault(_name_key(op.name), []).append(op)
    for op in first:
        if id(op) not in partner and left_b.get(_name_key(op.name)):
            other = left_b[_name_key(op.name)].pop(0)
            partner[id(op)], how[id(op)] = other, ORDER
            taken.add(id(other))
    unmatched_a = [op for op in first if id(op) not in partner]
    unmatched_b = [op for op in second if id(op) not in taken]
    fused = _fused(first, second, partner, unmatched_a, unmatched_b)
    claimed = {id(op) for match in fused for op in match.first + match.second}
    rows = [OpMatch([op], [partner[id(op)]], how[id(op)]) for op in first if id(op) in partner]
    rows += fused
    rows += [OpMatch([op], [], ONLY_FIRST) for op in unmatched_a if id(op) not in claimed]
    rows += [OpMatch([], [op], ONLY_SECOND) for op in unmatched_b if id(op) not in claimed]
    return rows


def _fused(first: list[OpRun], second: list[OpRun], partner: dict[int, OpRun], unmatched_a: list[OpRun],
           unmatched_b: list[OpRun]) -> list[OpMatch]:
    """Fused kernels' ops (Inductor's) and graph replays of one trace, each with the unmatched ops of the other it
    took.

    Which of the other trace's ops a fused kernel took, its name says only by op name (`gelu`, `mul`), and a model
    runs a `mul` in every layer: an op goes to the fused kernel nearest to it in step order, counted between the ops
    both traces share (the GEMMs around a layer's elementwise ops, say), then by its place within that stretch. A
    fused kernel never takes another's: no telling which took what.

    A graph replay runs the kernels that were captured, under the same names: replay after replay, each takes the
    other trace's ops in step order whose GPU work it runs, until it has run out of work to give them.
    """
    pairs = [(a, partner[id(a)]) for a in first if id(a) in partner]
    position_a = _positions(first, {id(a) for a, _ in pairs})
    position_b = _positions(second, {id(b) for _, b in pairs})
    rows = []
    for fusers, fuser_at, others, other_at, fused_second in (
        (unmatched_b, position_b, unmatched_a, position_a, True),
        (unmatched_a, position_a, unmatched_b, position_b, False),
    ):
        takes = _replayed([op for op in fusers if op.replay], [op for op in others if not op.replay])
        taken = {id(op) for took in takes.values() for op in took}
        inductor = [op for op in fusers if op.fuses]
        takes.update({id(op): [] for op in inductor})
        for op in others:
            if op.fuses or op.replay or id(op) in taken:
                continue
            names = {canonical_op(op.name)} | {canonical_op(box) for box in op.where if box.startswith("aten::")}
            fits = [f for f in inductor if f.fuses & names]
            if fits:
                here = other_at[id(op)]
                best = min(fits, key=lambda f: (abs(fuser_at[id(f)][0] - here[0]), abs(fuser_at[id(f)][1] - here[1])))
                takes[id(best)].append(op)
        for op in fusers:  # in step order
            took = takes.get(id(op))
            if took:
                rows.append(OpMatch(took, [op], FUSED) if fused_second else OpMatch([op], took, FUSED))
    return rows


def _replayed(replays: list[OpRun], others: list[OpRun]) -> dict[int, list[OpRun]]:
    """Each graph replay (id) with the ops it took: in order, those whose work (short names, per step) fits in what
    it ran and the ops before it did not take."""
    takes: dict[int, list[OpRun]] = {}
    taken: set[int] = set()
    for replay in replays:
        left = Counter({short: n for (_, short), n in replay.work.items()})
        takes[id(replay)] = []
        for op in others:
            need = Counter({short: n for (_, short), n in op.work.items()})
            if id(op) in taken or any(left[short] < n - _EPSILON for short, n in need.items()):
                continue
            takes[id(replay)].append(op)
            taken.add(id(op))
            left.subtract(need)
            if sum(left.values()) < _EPSILON:
                break
    return takes


def _positions(ops: list[OpRun], shared: set[int]) -> dict[int, tuple[int, float]]:
    """Each op's place: how many shared ops come before it, and how far it is into the stretch between them (0–1)."""
    stretches: list[list[OpRun]] = [[]]
    for op in ops:
        if id(op) in shared:
            stretches.append([])
        else:
            stretches[-1].append(op)
    places = {}
    for i, stretch in enumerate(stretches):
        for j, op in enumerate(stretch):
            places[id(op)] = (i, (j + 0.5) / len(stretch))
    return places


# --- small helpers -------------------------------------------------------------------------------------------


def vendor(trace: Trace) -> str | None:
    """Whose GPU ran the trace: by the device's name, else by the runtime's calls (`cuda...`, `hip...`) and kernel
    names; None when nothing says."""
    device = (trace.device or "").lower()
    for word, name in (("nvidia", "NVIDIA"), ("amd", "AMD"), ("instinct", "AMD"), ("radeon", "AMD"), ("intel", "Intel")):
        if word in device:
            return name
    for step in trace.steps:
        for call in step.runtime:
            if call.name.startswith(("cuda", "cuLaunch", "cuMem")):
                return "NVIDIA"
            if call.name.startswith("hip"):
                return "AMD"
    return None


def _is_replay(name: str) -> bool:
    return is_graph_launch(name) or name.startswith("hipGraphLaunch")


def where_text(where: tuple[str, ...]) -> str:
    """A place as a reader scans it: `mlp_fwd > linear > matmul`, module ranges by their class."""
    parts = []
    for box in where:
        box = box.removeprefix("aten::").removeprefix("nn.Module: ")
        box = box.removeprefix("autograd::engine::evaluate_function: ")
        parts.append("CompiledFxGraph" if box.startswith("## Call CompiledFxGraph") else box)
    return " > ".join(parts)


def _place(where: tuple[str, ...]) -> tuple[str, ...]:
    """The boxes around an op with what differs from run to run left out: a compiled graph's hash."""
    return tuple("## Call CompiledFxGraph ##" if _COMPILED_GRAPH.match(box) else box for box in where)


def _name_key(name: str) -> str:
    """An op's name for matching: Inductor's kernel ranges without their trailing number (`..._gelu_mul_0`), which
    counts kernels within one compiled graph and shifts when another graph fuses differently."""
    m = _INDUCTOR_NUMBER.match(name)
    return m.group(1) if m else name


def op_rank(rows: list[OpMatch], m: OpMatch) -> str:
    """` #2` for the second of the ops of one name at one place in a step (in step order), "" for the only one."""
    alike = sorted((r.op.order for r in rows if (r.op.name, r.op.where) == (m.op.name, m.op.where)))
    return f" #{alike.index(m.op.order) + 1}" if len(alike) > 1 else ""


CHANGE_COLUMNS = ["us_a", "std_us_a", "us_b", "std_us_b", "delta_us", "change_pct", "noise_pct", "call"]


def _change_row(c: Change) -> dict:
    """A row's change as DataFrame columns: each side's mean and standard deviation, the change, the noise, the call."""
    return {"us_a": rounded(c.first.mean_us), "std_us_a": rounded(c.first.std_us), "us_b": rounded(c.second.mean_us),
            "std_us_b": rounded(c.second.std_us), "delta_us": rounded(c.delta_us), "change_pct": rounded(c.change_pct, 2),
            "noise_pct": rounded(c.noise_pct, 2), "call": c.call}


def _summed(per_step) -> list[float]:
    """Ops' per-step times added step by step (a fused row's several ops of one trace)."""
    lists = list(per_step)
    return [sum(values) for values in zip(*lists)] if lists else []


def _step_times(trace: Trace) -> dict:
    cpu, busy = trace.cpu_us_per_step(), trace.gpu_busy_us_per_step()
    return {"trace": trace.name, "cpu_us_per_step": round(cpu, 3), "gpu_busy_us_per_step": rounded(busy)}
