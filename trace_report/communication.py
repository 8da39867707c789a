"""Communication in a trace: which collectives ran, how long, and how much of that time nothing else hid.

Where a collective shows in a torch.profiler trace depends on the backend:

    NCCL (GPUs)   a kernel on the GPU lane, named for what it does:
                  `ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)` (NCCL 2.19 on),
                  `ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)` (before),
                  or `ncclDevKernel_Generic_1(...)` for the combinations NCCL builds no kernel of its own for (its
                  LL128 and Simple protocols, among others): that name says nothing, the op that launched it does
    gloo (CPUs)   no kernel: gloo runs the collective on its own threads, under a record function named for it,
                  `gloo:all_reduce`, a box on one of gloo's threads in the CPU lane
    symmetric memory (async-TP, GPUs)   no NCCL: inside `fused_all_gather_matmul` / `fused_matmul_reduce_scatter`
                  (torch.ops.symm_mem's record functions) the transfers are memcpys between the GPUs' mapped
                  buffers, run by the copy engine on a second stream (`Memcpy DtoD` or `Memcpy PtoP`), and the
                  ranks meet in small kernels (`c10d::symmetric_memory::barrier_kernel`, `put_signal_kernel`,
                  `wait_signal_kernel`): each is one collective here (AllGather or ReduceScatter, from the record
                  function, or any op or record function whose name says it, `copy_engine_all_gather`; Barrier for
                  the kernels), and the matmuls beside them are the compute that hides them. A CUDA graph's replay
                  launches its copies from `cudaGraphLaunch`, which names no collective: a `Memcpy PtoP` (between
                  two GPUs) is then a PeerCopy

Either way the caller's thread shows the op that asked for it, `c10d::allreduce_` (inside `_c10d_functional::
all_reduce` when DTensor or torch.compile asked), which only enqueues it: its time is not the collective's.

A collective is *exposed* for as long as nothing else runs beside it: on a GPU, no other kernel; on a CPU, none of
the ops that do the arithmetic (`aten::mm`, `aten::gelu`, Inductor's `cpp_fused_...`). Exposed time is time the
collective adds to the step; the rest hides behind compute. An NCCL kernel starts when its GPU reaches it and ends
once every rank has sent its share: on the rank that got there first its duration includes waiting for the others.
Several ranks' traces (`read_ranks`) show that wait as skew: on one host the ranks share a clock, so the same
collective's start on each rank can be compared, and each kernel's time splits into its wait (before the last rank
arrived) and its transfer (after).

Each collective's bytes come from what c10d recorded of it (`record_param_comms`'s `In msg nelems`, `Out msg nelems`,
`dtype`, `Group size`, which Kineto also copies onto the NCCL kernel it launched), a copy's from the memcpy's own
`bytes`; a CUDA graph's replay records neither for its NCCL kernels (no op runs around them), so their bytes are
unknown. From the bytes, nccl-tests' algbw and busbw (links.py: what they mean, and the link's peak they compare to).

`communication(trace)` returns `None` for a trace without collectives. Nothing here imports torch.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from rich import box
from rich.markup import escape
from rich.table import Table

from trace_report.console import Console, clipped
from trace_report.frames import Rows, Tabular, records
from trace_report.kernels.collectives import GENERIC_NOTE, NcclKernel, decode_nccl
from trace_report.kernels.collectives import is_symmetric_memory_kernel
from trace_report.links import DTYPE_BYTES, Link, bus_factor, gbps, link_of
from trace_report.model import CpuOp, GpuWork, Trace, per_step_count
from trace_report.timeline import uncovered, union

# What the ops and record functions of torch.distributed are called: c10d's ops on the caller's thread, and the
# record functions the backends open around the collective itself (`gloo:all_reduce`, `nccl:all_reduce`).
_OP_COLLECTIVES = {
    "allreduce": "AllReduce", "all_reduce": "AllReduce", "allreduce_coalesced": "AllReduce",
    "allgather": "AllGather", "all_gather": "AllGather", "allgather_base": "AllGather",
    "all_gather_into_tensor": "AllGather", "allgather_into_tensor_coalesced": "AllGather",
    "reduce_scatter": "ReduceScatter", "reducescatter": "ReduceScatter", "reduce_scatter_base": "ReduceScatter",
    "reduce_scatter_tensor": "ReduceScatter", "reduce_scatter_tensor_coalesced": "ReduceScatter", "broadcast": "Broadcast", "reduce": "Reduce",
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
    work: GpuWork | None = None  # the NCCL kernel itself (its launch and the path of ops that launched it)
    bytes: int | None = None  # the collective's whole buffer as nccl-tests counts it (links.py); None: not recorded
    group_size: int | None = None  # the ranks taking part
    # With every rank's trace (ranks.skew): how long this kernel ran before the last rank arrived, and after.
    wait_us: float | None = None
    transfer_us: float | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def algbw_gbps(self) -> float | None:
        """Bytes ÷ the kernel's (or copy's) whole duration, waiting for the other ranks included."""
        return gbps(self.bytes, self.dur) if self.bytes is not None else None

    @property
    def busbw_gbps(self) -> float | None:
        return _times(self.algbw_gbps, self.bus_factor)

    @property
    def transfer_busbw_gbps(self) -> float | None:
        """busbw over the transfer alone, from the last rank's arrival to the end: the link's figure."""
        if self.bytes is None or self.transfer_us is None:
            return None
        return _times(gbps(self.bytes, self.transfer_us), self.bus_factor)

    @property
    def bus_factor(self) -> float | None:
        """busbw ÷ algbw. A copy-engine copy is one transfer from one peer: what crossed the link, factor 1; a copy
        within one GPU crosses no link, none."""
        if self.where == "gpu" and self.nccl is None:
            return 1.0 if "PtoP" in self.name else None
        return bus_factor(self.collective, self.group_size) if self.group_size else None


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
class KindRow:
    """The collectives of one name and kind: how many, their mean time, and their bandwidth over the ones whose bytes
    the trace says (bytes summed over time summed: a long collective weighs more, as on the link)."""

    name: str
    collective: str
    what: str
    count: int
    mean_us: float
    bytes: float | None  # mean, of those whose bytes are known
    algbw_gbps: float | None
    busbw_gbps: float | None
    wait_us: float | None = None  # means over those matched on every rank (ranks.skew)
    transfer_us: float | None = None
    transfer_busbw_gbps: float | None = None

    @classmethod
    def of(cls, found: list[Collective]) -> "KindRow":
        first, n = found[0], len(found)
        sized = [c for c in found if c.bytes is not None]
        on_bus = [c for c in sized if c.bus_factor is not None]
        timed = [c for c in found if c.transfer_us is not None]
        on_link = [c for c in on_bus if c.transfer_us is not None]
        return cls(
            first.name, first.collective, _what(first), n, sum(c.dur for c in found) / n,
            sum(c.bytes for c in sized) / len(sized) if sized else None,
            gbps(sum(c.bytes for c in sized), sum(c.dur for c in sized)) if sized else None,
            gbps(sum(c.bytes * c.bus_factor for c in on_bus), sum(c.dur for c in on_bus)) if on_bus else None,
            sum(c.wait_us for c in timed) / len(timed) if timed else None,
            sum(c.transfer_us for c in timed) / len(timed) if timed else None,
            gbps(sum(c.bytes * c.bus_factor for c in on_link), sum(c.transfer_us for c in on_link))
            if on_link else None,
        )


@dataclass
class Communication(Tabular):
    """A trace's collectives, step by step."""

    trace: str
    where: str  # "gpu" (NCCL kernels), "cpu" (a backend's record functions) or "none" (only the ops that issued them)
    steps: list[StepCommunication]
    gpu_name: str | None = None  # the device's name, for its link's peak

    @property
    def link(self) -> Link | None:
        return link_of(self.gpu_name) if self.where == "gpu" else None

    @property
    def collectives(self) -> list[Collective]:
        return [c for s in self.steps for c in s.collectives]

    @property
    def group_size(self) -> int | None:
        """The ranks most of its collectives ran among."""
        sizes = Counter(c.group_size for c in self.collectives if c.group_size)
        return sizes.most_common(1)[0][0] if sizes else None

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
        """(name, what it is, count, mean µs) per distinct collective name and kind, in order of first appearance
        (one memcpy name serves async-TP's all-gather and its reduce-scatter: a row each)."""
        return [(k.name, k.what, k.count, k.mean_us) for k in self.kind_rows()]

    def kind_rows(self) -> list["KindRow"]:
        """`kinds()` with their bytes and bandwidth: per distinct name and kind, in order of first appearance."""
        rows: dict[tuple[str, str], list[Collective]] = {}
        for c in self.collectives:
            rows.setdefault((c.name, c.collective), []).append(c)
        return [KindRow.of(found) for found in rows.values()]

    TABLES = ("collectives", "kinds")

    def frame_rows(self, table: str | None = None) -> Rows:
        """DataFrame rows (frames.py): one per collective with its step, as `to_dict` has them, or one per kind."""
        if self._table(table) == "kinds":
            return records(list(KindRow.__dataclass_fields__), [vars(k) for k in self.kind_rows()])
        rows = [{"step": s["name"], **c} for s in self.to_dict()["steps"] for c in s["collectives"]]
        return records(COLLECTIVE_COLUMNS, rows)

    def to_dict(self) -> dict:
        share = self.exposed_share
        link = self.link
        return {
            "where": self.where,
            "link": None if link is None else {"name": link.name, "total_gbps": link.total_gbps,
                                               "per_direction_gbps": link.per_direction_gbps(self.group_size)},
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
                            **_bandwidth_fields(c),
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
    decoded: dict[str, NcclKernel | None] = {}  # once per distinct name: a trace repeats a few names thousands of times

    def nccl_of(name: str) -> NcclKernel | None:
        if name not in decoded:
            decoded[name] = decode_nccl(name)
        return decoded[name]

    world = distributed_info(trace.meta).get("world_size")
    world = world if isinstance(world, int) and world > 0 else None
    gpu_name = trace.device_properties.get("name") if isinstance(trace.device_properties.get("name"), str) else None
    lane = trace.gpu_lane()
    nccl = [(w, nccl_of(w.name)) for w in lane if w.kind == "kernel"]
    symmetric = {id(w): kind for w in lane if (kind := symmetric_memory_collective(w)) is not None}
    if symmetric or any(kernel is not None for _, kernel in nccl):
        compute = union((w.ts, w.end) for w, kernel in nccl if kernel is None and id(w) not in symmetric)
        steps = []
        for step, asked in zip(trace.steps, issued):
            found = [
                Collective("gpu", kernel.name, kernel.collective or _launching_collective(w), w.ts, w.dur, step.name,
                           nccl=kernel, work=w, bytes=message_bytes(_message(w)), group_size=_group(w, world))
                for w in step.gpu if w.kind == "kernel" and (kernel := nccl_of(w.name)) is not None
            ]
            found += [Collective("gpu", w.name, symmetric[id(w)], w.ts, w.dur, step.name, work=w,
                                 bytes=_copied(w), group_size=world)
                      for w in step.gpu if id(w) in symmetric]
            steps.append(_step(step.name, step.ts, found, asked, compute))
        return Communication(trace.name, "gpu", steps, gpu_name)
    labels = [[op for op in step.ops if op.is_label and BACKEND_LABEL.match(op.name)] for step in trace.steps]
    if any(labels):
        ops = [op for step in trace.steps for op in step.ops] + trace.ops_outside_steps
        compute = union((op.ts, op.ts + op.dur) for op in ops if _is_cpu_compute(op))
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


# A record function or op named for the collective its copies make (`copy_engine_all_gather`), and what a copy
# between two GPUs is when nothing around its launch names one (a CUDA graph's replay).
COLLECTIVE_IN_NAME = re.compile(r"all_?gather|reduce_?scatter|all_?reduce|all_to_all|alltoall", re.IGNORECASE)
PEER_COPY = "PeerCopy"

# The record functions torch.ops.symm_mem opens around its fused ops (async-TP), and the collective each performs.
SYMMETRIC_MEMORY_OPS = {"fused_all_gather_matmul": "AllGather", "fused_matmul_reduce_scatter": "ReduceScatter",
                        "symm_mem::fused_all_gather_matmul": "AllGather",
                        "symm_mem::fused_matmul_reduce_scatter": "ReduceScatter"}


def symmetric_memory_collective(work: GpuWork) -> str | None:
    """The collective a piece of GPU work does for PyTorch's symmetric memory, None if it is not such work: a memcpy
    launched inside one of torch.ops.symm_mem's fused ops (its transfers between the GPUs' mapped buffers) or inside
    a record function named for a collective (`copy_engine_all_gather`; not c10d's ops, whose own copies around an
    NCCL kernel are not the transfer), a copy between two GPUs that nothing names (PeerCopy), or a symmetric-memory
    kernel (the ranks' barrier and signals: "Barrier"; its one- and two-shot collectives, by name)."""
    if work.kind == "kernel":
        if not is_symmetric_memory_kernel(work.name):
            return None
        for what in ("all_reduce", "all_gather", "reduce_scatter"):
            if what in work.name:
                return _OP_COLLECTIVES[what]
        return "Barrier"
    if work.kind != "memcpy":
        return None
    for name in reversed(work.launch_path):
        if name in SYMMETRIC_MEMORY_OPS:
            return SYMMETRIC_MEMORY_OPS[name]
        if "::" in name or BACKEND_LABEL.match(name):  # c10d's ops and NCCL's labels: their copies are not the transfer
            continue
        if (said := COLLECTIVE_IN_NAME.search(name)) is not None:
            return _OP_COLLECTIVES[said[0].lower()]
    return PEER_COPY if "PtoP" in work.name else None


# --- a collective's bytes ----------------------------------------------------------------------------------------


def message_bytes(args: dict | None) -> int | None:
    """A collective's bytes as nccl-tests counts them, from c10d's record of it: the larger of its input and output
    element counts (an all-gather's output holds every rank's piece, a reduce-scatter's input does; an all-reduce's
    are equal) times the dtype's size. None where the args do not say both."""
    if not args:
        return None
    counts = [n for key in ("In msg nelems", "Out msg nelems") if type(n := args.get(key)) is int and n >= 0]
    size = DTYPE_BYTES.get(args.get("dtype"))
    return max(counts) * size if counts and size else None


def _message(work: GpuWork) -> dict | None:
    """The NCCL kernel's own record of its message, else that of the `record_param_comms` op that launched it (before
    torch 2.1 Kineto copied nothing onto the kernel)."""
    if work.comm_args and "In msg nelems" in work.comm_args:
        return work.comm_args
    launcher = work.launch.launcher if work.launch is not None else None
    return launcher.comm_args if launcher is not None else None


def _group(work: GpuWork, world: int | None) -> int | None:
    size = (_message(work) or {}).get("Group size")
    return size if type(size) is int and size > 0 else world


def _copied(work: GpuWork) -> int | None:
    """A copy's bytes, as the memcpy's record says them."""
    size = (work.comm_args or {}).get("bytes") if work.kind == "memcpy" else None
    return size if type(size) is int and size >= 0 else None


def _times(value: float | None, factor: float | None) -> float | None:
    return value * factor if value is not None and factor is not None else None


def _step(name: str, ts: float, collectives: list[Collective], issued: Counter,
          compute: list[tuple[float, float]]) -> StepCommunication:
    collectives.sort(key=lambda c: c.ts)
    ends = [b for _, b in compute]  # once per step, not once per collective: a rank's trace holds thousands
    for i, c in enumerate(collectives):
        c.index = i
        c.exposed_us = uncovered([(c.ts, c.end)], compute, ends)
    lane = union((c.ts, c.end) for c in collectives)
    return StepCommunication(name, ts, collectives, issued, sum(b - a for a, b in lane),
                             uncovered(lane, compute, ends))


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


def _what(c: Collective) -> str:
    if c.nccl is not None:
        if c.nccl.generic:
            return f"{c.collective} ({GENERIC_NOTE})"
        return c.nccl.describe()
    if c.where == "gpu" and c.name.startswith("Memcpy"):  # by name: a rank's collectives may have dropped `work`
        what = ("between two GPUs (from or to a peer's mapped buffer)" if "PtoP" in c.name else
                "between buffers of this GPU (its shard into the buffer the peers read, or back)")
        graph = (" (launched by a CUDA graph's replay: which collective it serves, the trace does not say)"
                 if c.collective == PEER_COPY else "")
        return f"{c.collective}: a copy-engine transfer {what}, no SM used{graph}"
    if c.where == "gpu":
        return f"{c.collective}: a symmetric-memory kernel (the ranks meeting through each other's memory, no NCCL)"
    found = BACKEND_LABEL.match(c.name)
    backend = found["backend"] if found else "?"
    return f"{c.collective}, run by {backend} on its own thread (no kernel: this record function is the collective)"


COLLECTIVE_COLUMNS = ["step", "name", "collective", "start_us", "dur_us", "exposed_us", "op", "dtype", "algorithm",
                      "protocol", "bytes", "group_size", "algbw_gbps", "busbw_gbps", "wait_us", "transfer_us",
                      "transfer_busbw_gbps"]  # a row of to_dict's collectives, its step first


def _nccl_fields(kernel: NcclKernel) -> dict:
    return {"op": kernel.op, "dtype": kernel.dtype, "algorithm": kernel.algorithm, "protocol": kernel.protocol}


def _bandwidth_fields(c: Collective) -> dict:
    fields = {"bytes": c.bytes, "group_size": c.group_size, "algbw_gbps": _rounded(c.algbw_gbps),
              "busbw_gbps": _rounded(c.busbw_gbps)}
    if c.transfer_us is not None:
        fields.update(wait_us=round(c.wait_us, 3), transfer_us=round(c.transfer_us, 3),
                      transfer_busbw_gbps=_rounded(c.transfer_busbw_gbps))
    return fields


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# --- a rank's trace: the metadata Kineto writes beside its events (Trace.meta) ----------------------------------


def distributed_info(meta: dict) -> dict:
    """The `distributedInfo` the profiler writes when a process group exists (backend, rank, world_size, ...); {}
    where it wrote none."""
    info = meta.get("distributedInfo")
    return info if isinstance(info, dict) else {}


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
    where = "record functions on the backend's CPU threads"
    if comm.where == "gpu":
        nccl = {c.nccl is not None for c in comm.collectives}
        where = ("NCCL kernels" if nccl == {True} else "symmetric memory's copies and kernels" if nccl == {False} else
                 "NCCL kernels and symmetric memory's copies") + " on the GPU lane"
    console.print(f"[bold]Communication[/bold] ({where}; exposed: nothing else ran beside it)")
    shown = comm.kind_rows()[:rows]
    sized = any(k.bytes is not None for k in shown)
    kinds = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    kinds.add_column("collective", no_wrap=True)  # an identifier: never folded
    kinds.add_column("/step", justify="right", no_wrap=True)
    kinds.add_column("avg µs", justify="right", no_wrap=True)
    if sized:
        kinds.add_column("size", justify="right", no_wrap=True)
        kinds.add_column("algbw GB/s", justify="right", no_wrap=True)
        kinds.add_column("busbw GB/s", justify="right", no_wrap=True)
    for k in shown:
        cells = [escape(_short(k.name)), per_step_count(k.count / len(comm.steps)), f"{k.mean_us:,.1f}"]
        if sized:
            cells += [size_text(k.bytes), figure_text(k.algbw_gbps), figure_text(k.busbw_gbps)]
        kinds.add_row(*cells)
    console.print(kinds)
    for k in shown:  # below the table, not in a column: the table keeps its names whole in 100 columns
        short = _short(k.name)
        console.print(f"  {escape(short)}: {escape(clipped(k.what, 2 * console.width - len(short) - 6, 1))}")
    if sized:
        console.print(_bandwidth_note(comm, shown))
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


def _bandwidth_note(comm: Communication, rows: list[KindRow]) -> str:
    """What algbw and busbw are, and the best busbw against the link's peak where the GPU names its link."""
    text = ("  algbw: size ÷ kernel time, waits for other ranks included; busbw (nccl-tests): algbw × 2(n−1)/n for an "
            "all-reduce, (n−1)/n for all-gather, reduce-scatter, all-to-all, 1 for broadcast or a peer copy")
    link, best = comm.link, max((k.busbw_gbps for k in rows if k.busbw_gbps is not None), default=None)
    if link is not None and best is not None:
        peak = link.per_direction_gbps(comm.group_size)
        text += f"; best {best:,.0f} GB/s, {best / peak:.0%} of {comm.gpu_name}'s {link.describe(comm.group_size)}"
    return escape(text)


def _short(name: str) -> str:
    """A collective's name for a table cell: a symmetric-memory kernel's without `void`, template and arguments."""
    if name.startswith("Memcpy") or "(" not in name:
        return name
    base = name.split("(", 1)[0].removeprefix("void ")
    return re.sub(r"<.*>$", "", base)


def size_text(nbytes: float | None) -> str:
    if nbytes is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,.0f} B"


def figure_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
