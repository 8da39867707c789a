"""Communication in a trace: which collectives ran, how long, and how much of that time nothing else hid.

Where a collective shows in a torch.profiler trace depends on the backend:

    NCCL (GPUs)   a kernel on the GPU lane, named for what it does:
                  `ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)` (NCCL 2.19 on),
                  `ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)` (before),
                  or `ncclDevKernel_Generic_1(...)` for the combinations NCCL builds no kernel of its own for (its
                  LL128 and Simple protocols, among others): that name says nothing, the op that launched it does
    gloo (CPUs)   no kernel: gloo runs the collective on its own threads, under a record function named for it,
                  `gloo:all_reduce`, a box on one of gloo's threads in the CPU lane

Either way the caller's thread shows the op that asked for it, `c10d::allreduce_` (inside `_c10d_functional::
all_reduce` when DTensor or torch.compile asked), which only enqueues it: its time is not the collective's.

A collective is *exposed* for as long as nothing else runs beside it: on a GPU, no other kernel; on a CPU, none of
the ops that do the arithmetic (`aten::mm`, `aten::gelu`, Inductor's `cpp_fused_...`). Exposed time is time the
collective adds to the step; the rest hides behind compute. An NCCL kernel starts when its GPU reaches it and ends
once every rank has sent its share: on the rank that got there first its duration includes waiting for the others.
Several ranks' traces (`read_ranks`) show that wait as skew: on one host the ranks share a clock, so the same
collective's start on each rank can be compared.

`communication(trace)` returns `None` for a trace without collectives. Nothing here imports torch.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from rich.markup import escape
from rich.table import Table

from profiling_in_pytorch.console import Console, clipped
from profiling_in_pytorch.errors import UsageError
from profiling_in_pytorch.traces.kernels.collectives import GENERIC_NOTE, NcclKernel, decode_nccl
from profiling_in_pytorch.traces.model import CpuOp, GpuWork, Trace, per_step_count
from profiling_in_pytorch.traces.reader import read_trace

# What the ops and record functions of torch.distributed are called: c10d's ops on the caller's thread, and the
# record functions the backends open around the collective itself (`gloo:all_reduce`, `nccl:all_reduce`).
_OP_COLLECTIVES = {
    "allreduce": "AllReduce", "all_reduce": "AllReduce", "allreduce_coalesced": "AllReduce",
    "allgather": "AllGather", "all_gather": "AllGather", "allgather_base": "AllGather",
    "all_gather_into_tensor": "AllGather", "allgather_into_tensor_coalesced": "AllGather",
    "reduce_scatter": "ReduceScatter", "reduce_scatter_base": "ReduceScatter", "reduce_scatter_tensor": "ReduceScatter",
    "reduce_scatter_tensor_coalesced": "ReduceScatter", "broadcast": "Broadcast", "reduce": "Reduce",
    "alltoall": "AllToAll", "alltoall_base": "AllToAll", "all_to_all": "AllToAll", "all_to_all_single": "AllToAll",
    "send": "SendRecv", "recv": "SendRecv", "recv_any_source": "SendRecv", "barrier": "Barrier",
}
ISSUING_PREFIX = "c10d::"  # the dispatcher's ops every path goes through: dist.all_reduce, DTensor, torch.compile
BACKEND_LABEL = re.compile(r"^(?P<backend>gloo|nccl|mpi|ucc):(?P<what>\w+)$")


def collective_of_op(name: str) -> str | None:
    """`c10d::allreduce_`, `_c10d_functional::all_reduce`, `gloo:all_reduce` -> "AllReduce"; None otherwise."""
    if "::" in name:
        namespace, _, what = name.partition("::")
        if namespace not in ("c10d", "_c10d_functional", "c10d_functional"):
            return None
    else:
        found = BACKEND_LABEL.match(name)
        if found is None:
            return None
        what = found["what"]
    return _OP_COLLECTIVES.get(what.strip("_"))


# --- collectives in one trace ----------------------------------------------------------------------------------

# The ops that do arithmetic in a CPU trace: what a collective on gloo's threads can hide behind.
CPU_COMPUTE_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::gelu", "aten::mul", "aten::add"}
CPP_KERNEL = re.compile(r"cpp_fused_\w+_\d+$")


@dataclass
class Collective:
    """One collective as the trace shows it: an NCCL kernel on the GPU lane, or a backend's record function on a CPU
    thread; its place in its step (`index`, by start time) and how long of it nothing else ran beside."""

    where: str  # "gpu" or "cpu"
    name: str
    collective: str  # "AllReduce", ...; "?" when neither the name nor the launching op says
    ts: float
    dur: float
    step: str
    index: int = 0
    exposed_us: float = 0.0
    nccl: NcclKernel | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass
class StepCommunication:
    """One profiler step's collectives, their time on the lane (overlaps counted once) and the exposed part of it."""

    step: str
    ts: float  # the step's start
    collectives: list[Collective] = field(default_factory=list)
    issued: Counter = field(default_factory=Counter)  # collective -> the c10d ops that asked for it, this step
    comm_us: float = 0.0
    exposed_us: float = 0.0

    def count(self, collective: str | None = None) -> int:
        return sum(1 for c in self.collectives if collective is None or c.collective == collective)


@dataclass
class Communication:
    """A trace's collectives, step by step."""

    trace: str
    where: str  # "gpu" (NCCL kernels), "cpu" (a backend's record functions) or "none" (only the ops that issued them)
    steps: list[StepCommunication]

    @property
    def collectives(self) -> list[Collective]:
        return [c for s in self.steps for c in s.collectives]

    def per_step(self, collective: str | None = None) -> list[int]:
        return [s.count(collective) for s in self.steps]

    def issued_per_step(self, collective: str | None = None) -> list[int]:
        return [sum(n for c, n in s.issued.items() if collective is None or c == collective) for s in self.steps]

    @property
    def comm_us_per_step(self) -> float:
        return sum(s.comm_us for s in self.steps) / len(self.steps)

    @property
    def exposed_us_per_step(self) -> float:
        return sum(s.exposed_us for s in self.steps) / len(self.steps)

    @property
    def exposed_share(self) -> float | None:
        """Exposed time over collective time, across the steps; None without collective time."""
        comm = sum(s.comm_us for s in self.steps)
        return sum(s.exposed_us for s in self.steps) / comm if comm > 0 else None

    def kinds(self) -> list[tuple[str, str, int, float]]:
        """(name, what it is, count, mean µs) per distinct collective name, in order of first appearance."""
        rows: dict[str, list] = {}
        for c in self.collectives:
            row = rows.setdefault(c.name, [c, 0, 0.0])
            row[1] += 1
            row[2] += c.dur
        return [(name, _what(first), n, total / n) for name, (first, n, total) in rows.items()]

    def to_dict(self) -> dict:
        share = self.exposed_share
        return {
            "where": self.where,
            "comm_us_per_step": round(self.comm_us_per_step, 3),
            "exposed_us_per_step": round(self.exposed_us_per_step, 3),
            "exposed_share": None if share is None else round(share, 4),
            "steps": [
                {
                    "name": s.step,
                    "comm_us": round(s.comm_us, 3),
                    "exposed_us": round(s.exposed_us, 3),
                    "issued": dict(s.issued),
                    "collectives": [
                        {
                            "name": c.name,
                            "collective": c.collective,
                            "start_us": round(c.ts - s.ts, 3),  # from the step's start
                            "dur_us": round(c.dur, 3),
                            "exposed_us": round(c.exposed_us, 3),
                            **(_nccl_fields(c.nccl) if c.nccl else {}),
                        }
                        for c in s.collectives
                    ],
                }
                for s in self.steps
            ],
        }


def communication(trace: Trace) -> Communication | None:
    """The trace's collectives per step (NCCL kernels, or a backend's record functions on a CPU); None if it has none.

    A trace whose GPU lane holds NCCL kernels is read from them; otherwise from the backends' record functions
    (gloo's). A trace that only shows the c10d ops issuing collectives, without their time, is read as "none".
    """
    if not trace.steps:
        return None
    issued = [_issued(step.ops) for step in trace.steps]
    nccl = [(w, decode_nccl(w.name)) for w in trace.gpu_lane() if w.kind == "kernel"]
    if any(kernel is not None for _, kernel in nccl):
        compute = _merged((w.ts, w.end) for w, kernel in nccl if kernel is None)
        steps = []
        for step, asked in zip(trace.steps, issued):
            found = [
                Collective("gpu", kernel.name, kernel.collective or _launching_collective(w), w.ts, w.dur, step.name,
                           nccl=kernel)
                for w in step.gpu if w.kind == "kernel" and (kernel := decode_nccl(w.name)) is not None
            ]
            steps.append(_step(step.name, step.ts, found, asked, compute))
        return Communication(trace.name, "gpu", steps)
    labels = [[op for op in step.ops if op.is_label and BACKEND_LABEL.match(op.name)] for step in trace.steps]
    if any(labels):
        ops = [op for step in trace.steps for op in step.ops] + trace.ops_outside_steps
        compute = _merged((op.ts, op.ts + op.dur) for op in ops if _is_cpu_compute(op))
        steps = []
        for step, asked, found in zip(trace.steps, issued, labels):
            collectives = [
                Collective("cpu", op.name, collective_of_op(op.name) or "?", op.ts, op.dur, step.name) for op in found
            ]
            steps.append(_step(step.name, step.ts, collectives, asked, compute))
        return Communication(trace.name, "cpu", steps)
    if any(issued):
        steps = [StepCommunication(s.name, s.ts, issued=asked) for s, asked in zip(trace.steps, issued)]
        return Communication(trace.name, "none", steps)
    return None


def _step(name: str, ts: float, collectives: list[Collective], issued: Counter,
          compute: list[tuple[float, float]]) -> StepCommunication:
    collectives.sort(key=lambda c: c.ts)
    ends = [b for _, b in compute]  # once per step, not once per collective: a rank's trace holds thousands
    for i, c in enumerate(collectives):
        c.index = i
        c.exposed_us = _uncovered([(c.ts, c.end)], compute, ends)
    lane = _merged((c.ts, c.end) for c in collectives)
    return StepCommunication(name, ts, collectives, issued, sum(b - a for a, b in lane),
                             _uncovered(lane, compute, ends))


def _issued(ops: Iterable[CpuOp]) -> Counter:
    """The c10d ops of a step, by collective: what the code asked for, whichever backend ran it."""
    asked = (collective_of_op(op.name) for op in ops if not op.is_label and op.name.startswith(ISSUING_PREFIX))
    return Counter(c for c in asked if c is not None)


def _launching_collective(work: GpuWork) -> str:
    """For NCCL's generic kernel: the collective of the op or record function that launched it."""
    for name in reversed(work.launch_path):
        if (found := collective_of_op(name)) is not None:
            return found
    return "?"


def _is_cpu_compute(op: CpuOp) -> bool:
    return not op.is_label and (op.name in CPU_COMPUTE_OPS or CPP_KERNEL.search(op.name) is not None)


def _merged(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals, as sorted disjoint intervals."""
    out: list[list[float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def _uncovered(intervals: list[tuple[float, float]], cover: list[tuple[float, float]],
               ends: list[float] | None = None) -> float:
    """How much of `intervals` (disjoint) no interval of `cover` (sorted, disjoint; `ends`: their ends) covers."""
    ends = [b for _, b in cover] if ends is None else ends
    total = 0.0
    for start, end in intervals:
        covered = 0.0
        i = bisect.bisect_right(ends, start)  # the first cover interval that ends after `start`
        while i < len(cover) and cover[i][0] < end:
            covered += min(end, cover[i][1]) - max(start, cover[i][0])
            i += 1
        total += (end - start) - covered
    return total


def _what(c: Collective) -> str:
    if c.nccl is not None:
        if c.nccl.generic:
            return f"{c.collective} ({GENERIC_NOTE})"
        return c.nccl.describe()
    found = BACKEND_LABEL.match(c.name)
    backend = found["backend"] if found else "?"
    return f"{c.collective}, run by {backend} on its own thread (no kernel: this record function is the collective)"


def _nccl_fields(kernel: NcclKernel) -> dict:
    return {"op": kernel.op, "dtype": kernel.dtype, "algorithm": kernel.algorithm, "protocol": kernel.protocol}


# --- several ranks ---------------------------------------------------------------------------------------------

RANK_NAME = re.compile(r"^(?P<run>.+)_rank(?P<rank>\d+)\.json(?:\.gz)?$")
META_CHARS = 4 << 20  # the metadata Kineto writes before traceEvents fits in far less


@dataclass
class RankTrace:
    rank: int
    trace: Trace
    comm: Communication | None
    host: str | None = None


@dataclass
class Skew:
    """The same collectives on every rank, matched by step and order: how far apart they started."""

    matched: int  # collectives found on every rank
    median_us: float
    max_us: float
    max_at: str  # "ProfilerStep#3, collective 1"
    waits_us_per_step: dict[int, float]  # rank -> per step, how long its collectives waited for the last rank to start
    last: Counter  # rank -> how often it started last

    def to_dict(self) -> dict:
        return {
            "matched": self.matched,
            "median_us": round(self.median_us, 3),
            "max_us": round(self.max_us, 3),
            "max_at": self.max_at,
            "waits_us_per_step": {str(rank): round(us, 3) for rank, us in self.waits_us_per_step.items()},
            "last_to_start": {str(rank): n for rank, n in self.last.items()},
        }


def is_rank_set(paths: Sequence[str | Path]) -> bool:
    """Two or more traces of one run, one per rank: `<run>_rank<r>.json`, the same <run>, each rank once."""
    found = [RANK_NAME.match(Path(p).name) for p in paths]
    if len(paths) < 2 or not all(found):
        return False
    return len({m["run"] for m in found}) == 1 and len({int(m["rank"]) for m in found}) == len(found)


def read_ranks(paths: Sequence[str | Path]) -> list[RankTrace]:
    """Read each rank's trace; the rank comes from the trace's own `distributedInfo`, else from `_rank<r>` in its
    name, else from its place on the command line. Sorted by rank; the same rank twice is an error (one line)."""
    ranks = []
    for i, path in enumerate(paths):
        meta = trace_metadata(path)
        info = distributed_info(meta)
        named = RANK_NAME.match(Path(path).name)
        rank = info.get("rank") if isinstance(info.get("rank"), int) else int(named["rank"]) if named else i
        trace = read_trace(path)
        host = meta.get("host_name") if isinstance(meta.get("host_name"), str) else None
        ranks.append(RankTrace(rank, trace, communication(trace), host))
    seen = Counter(r.rank for r in ranks)
    if twice := [rank for rank, n in seen.items() if n > 1]:
        raise UsageError(f"rank {twice[0]} comes twice among the traces: give each rank's trace once")
    return sorted(ranks, key=lambda r: r.rank)


def windows_overlap(ranks: Sequence[RankTrace]) -> bool:
    """Do the ranks' profiled windows (first step's start to last step's end) overlap in time? They do for the ranks
    of one run on one host; traces of different runs, or from hosts whose clocks differ, do not."""
    windows = [(r.trace.steps[0].ts, r.trace.steps[-1].ts + r.trace.steps[-1].dur) for r in ranks if r.trace.steps]
    return bool(windows) and max(a for a, _ in windows) <= min(b for _, b in windows)


def skew(ranks: Sequence[RankTrace]) -> Skew | None:
    """Match each rank's collectives by (step, index) and compare their starts; None without any on every rank, or
    when the ranks' windows do not overlap in time (then their clocks cannot be compared)."""
    if not windows_overlap(ranks):
        return None
    by_rank = [{(c.step, c.index): c for c in r.comm.collectives} if r.comm else {} for r in ranks]
    keys = [k for k in by_rank[0] if all(k in other for other in by_rank[1:])] if by_rank else []
    if not keys:
        return None
    spreads, waits, last = [], Counter(), Counter()
    for key in keys:
        starts = {r.rank: found[key].ts for r, found in zip(ranks, by_rank)}
        latest = max(starts.values())
        spreads.append((latest - min(starts.values()), key))
        last[max(starts, key=starts.get)] += 1
        for rank, start in starts.items():
            waits[rank] += latest - start
    worst, (step, index) = max(spreads)
    steps = max(1, len({step for step, _ in keys}))
    return Skew(
        len(keys),
        statistics.median(s for s, _ in spreads),
        worst,
        f"{step}, collective {index}",
        {r.rank: waits[r.rank] / steps for r in ranks},
        last,
    )


def trace_metadata(path: str | Path) -> dict:
    """The small top-level fields Kineto writes before `traceEvents` (distributedInfo, host_name, ...); {} if the
    file does not start that way. The events themselves are read by reader.read_trace."""
    try:
        opener = gzip.open if _is_gzip(path) else open
        with opener(path, "rt", encoding="utf-8-sig") as f:
            head = f.read(META_CHARS)
    except (OSError, EOFError, UnicodeDecodeError):
        return {}
    cut = head.find('"traceEvents"')
    if cut < 0:
        return {}
    try:
        meta = json.loads(head[:cut].rstrip().rstrip(",") + "}")
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def distributed_info(meta: dict) -> dict:
    """The `distributedInfo` the profiler writes when a process group exists (backend, rank, world_size, ...); {}
    where it wrote none."""
    info = meta.get("distributedInfo")
    return info if isinstance(info, dict) else {}


def _is_gzip(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


# --- printing (trace-report) -----------------------------------------------------------------------------------


def print_communication(comm: Communication, console: Console, *, rows: int | None = None) -> None:
    """The collectives of one trace: what they are, per step their time and the exposed part of it."""
    if comm.where == "none":
        asked = Counter()
        for s in comm.steps:
            asked.update(s.issued)
        text = ", ".join(f"{c} ×{per_step_count(n / len(comm.steps))}" for c, n in asked.items())
        console.print(
            f"[bold]Communication[/bold]: collectives issued per step: {escape(text)}; the trace holds no time for "
            "them (no NCCL kernel on a GPU lane, no backend's record function)\n",
        )
        return
    where = "NCCL kernels on the GPU lane" if comm.where == "gpu" else "record functions on the backend's CPU threads"
    console.print(f"[bold]Communication[/bold] ({where}; exposed: nothing else ran beside it)")
    kinds = Table()
    kinds.add_column("collective", overflow="fold")
    kinds.add_column("/step", justify="right")
    kinds.add_column("avg µs", justify="right")
    kinds.add_column("what the name says", overflow="fold")
    for name, what, n, mean in comm.kinds()[:rows]:
        kinds.add_row(escape(name), per_step_count(n / len(comm.steps)), f"{mean:,.1f}",
                      escape(clipped(what, max(20, console.width // 2 - 12), 3)))
    console.print(kinds)
    steps = Table()
    steps.add_column("step")
    steps.add_column("collectives", justify="right")
    steps.add_column("issued (c10d ops)", justify="right")
    steps.add_column("comm µs", justify="right")
    steps.add_column("exposed µs", justify="right")
    steps.add_column("exposed", justify="right")
    for s in comm.steps[:rows]:
        share = f"{s.exposed_us / s.comm_us:.0%}" if s.comm_us > 0 else "-"
        steps.add_row(s.step, str(s.count()), str(sum(s.issued.values())), f"{s.comm_us:,.1f}", f"{s.exposed_us:,.1f}",
                      share)
    console.print(steps)
    share = comm.exposed_share
    if share is not None:
        console.print(
            f"per step: {comm.comm_us_per_step:,.1f} µs of collectives, {comm.exposed_us_per_step:,.1f} µs of them "
            f"exposed ({share:.0%}): "
            + ("nothing hides them, the step waits for them" if share > 0.9 else
               "mostly hidden behind compute" if share < 0.25 else "partly hidden behind compute"),
        )
    console.print()


def print_ranks(ranks: Sequence[RankTrace], console: Console) -> None:
    """One row per rank, then how far apart the ranks reached each collective."""
    names = ", ".join(f"rank {r.rank}: {r.trace.name}" for r in ranks)
    console.print(f"[bold]{len(ranks)} ranks[/bold] · {escape(names)}", soft_wrap=True)
    lag = skew(ranks)
    steps = ", ".join(sorted({str(len(r.trace.steps)) for r in ranks}))
    table = Table(title=f"per rank, per step (means over {steps} steps)")
    for name in ("rank", "CPU µs", "GPU busy µs", "collectives", "comm µs", "exposed µs", "waiting µs"):
        table.add_column(name, justify="right")
    for r in ranks:
        busy = r.trace.gpu_busy_us_per_step()
        comm = r.comm
        timed = comm is not None and comm.where != "none"
        table.add_row(
            str(r.rank),
            f"{r.trace.cpu_us_per_step():,.1f}",
            "-" if busy is None else f"{busy:,.1f}",
            per_step_count(sum(comm.per_step()) / len(comm.steps)) if timed else "0",
            f"{comm.comm_us_per_step:,.1f}" if timed else "-",
            f"{comm.exposed_us_per_step:,.1f}" if timed else "-",
            f"{lag.waits_us_per_step[r.rank]:,.1f}" if lag else "-",
        )
    console.print(table)
    console.print(
        "  comm: collectives' time on the lane; exposed: the part with nothing else running; waiting: how long "
        "this rank's collectives started before the last rank's",
        soft_wrap=True,
    )
    hosts = {r.host for r in ranks if r.host}
    if not windows_overlap(ranks):
        console.print(
            "skew: the ranks' profiled windows do not overlap in time: traces of different runs, or from hosts whose "
            "clocks differ, so their collectives cannot be compared",
            soft_wrap=True,
        )
    elif lag is None:
        console.print("skew: no collective found on every rank, nothing to compare")
    else:
        last = ", ".join(f"rank {rank} ×{n}" for rank, n in lag.last.most_common())
        console.print(
            f"skew between ranks at each collective's start ({lag.matched} matched by step and order): median "
            f"{lag.median_us:,.1f} µs, max {lag.max_us:,.1f} µs ({escape(lag.max_at)}); last to start: {escape(last)}",
            soft_wrap=True,
        )
        console.print(
            "  a collective ends once the last rank has joined it: the others wait for it, and on a GPU that wait "
            "is inside the NCCL kernel's duration",
            soft_wrap=True,
        )
    if len(hosts) > 1:
        console.print("[yellow]note:[/yellow] the traces come from different hosts, whose clocks differ: the skew "
                      "is not comparable", soft_wrap=True)
    console.print()
