"""Where fusion would pay: runs of memory-bound GPU work between compute kernels, and what fusing them would save.

Part 2's point, for any trace recorded with `record_shapes=True`: in the eager MLP the `[8192, 3072]` intermediate
goes to HBM and back between the GELU and the mul; one kernel doing both reads the two GEMM outputs once and writes
the product once. Per step and per GPU stream (device, stream), in one pass over the GPU work in time order:

    chain      two ops or more whose kernels are memory-bound (elementwise, reductions and norms, copies and memsets:
               summary's kinds, read off the decoded kernel names) and run back to back on the stream. A compute
               kernel (a GEMM, attention) ends the chain; so does any other work (communication, the optimizer's
               foreach kernels, a kernel of no known kind, a copy to or from the host) and work whose launching op
               has no shapes. What a GEMM's own op launches (cuBLAS's memset, a split-K reduce) is the GEMM's.
    split chain
               two pointwise ops, the last of a chain and the first of the stream's next, that work on other data
               keeps apart on the stream but whose data links them, by fusion_dataflow's rule (shapes, order, the
               module call): a transformers Llama's SwiGLU runs gate GEMM, silu, up GEMM, mul, and Inductor fuses
               silu and mul. The link is inferred, not seen, and the report says so.
    epilogue   a GEMM and the elementwise op right after it that reads its output (Part 2's bias add; the GeGLU the
               suite's fused kernel computes in its epilogue): in the epilogue, the output's round trip goes
    prologue   an elementwise op whose output the next GEMM reads: done in the GEMM's loads

Bytes (`op_bytes`): each op's reads and writes, from its input shapes and types. One fused kernel reads the chain's
external inputs once and writes its final outputs once. A trace has no tensor identities, so a heuristic stands in:
an op's input is the output of an earlier op of the chain when it has the same number of elements and type (the
newest such output first; views change shapes, not sizes), and then never leaves the chip; an output no later op
of the chain reads is written. A broadcast input (a bias, a mask) read by several ops is read once; a full-size
external input counts once per op that reads it (`x * sigmoid(x)` counts x twice: more bytes, a smaller saving,
never a larger one). An intermediate the backward keeps (training) is counted as staying on chip: it does not.

Time: the fused bytes at the rate the candidate's own kernels moved theirs in this trace (their bytes over their
time), capped at the GPU's nominal memory bandwidth (peaks.py, by the name the trace records for the GPU, or
`--bandwidth`); the fused bytes at that nominal rate are the floor, shown beside. Why not the nominal rate alone: on
the H200 trace of Part 2's eager MLP, GELU and mul reach 3.3 and 4.1 TB/s of the 4.8 nominal, and Inductor's kernel
that fuses them moves its 151 MB at 2.7 TB/s (56.0 µs): the floor says 31.5 µs, the chain's own rate (3.74 TB/s)
40.4 µs. The saving: the kernels' measured time less the prediction, never negative. Chains and split chains come
first, then epilogues and prologues, each ranked by saving. One candidate (same ops, shapes and types) across layers
and steps is one row with its count; times are per step, averaged over the recorded steps.

With a second trace (eager, then compiled): a candidate is "fused" when kernels of the second trace whose names
list its ops (Inductor's `triton_poi_fused__unsafe_view_gelu_mul_0`: gelu, mul) cover them with fewer kernels, and
their time is set against the prediction; "fused otherwise" when its kernels are gone and its ops run in kernels
that do not take it whole (the gelu of a GEMM -> gelu epilogue fused with the mul instead); "gone" when its kernels
are gone and no kernel's name says where; else it "remains".
"""

from __future__ import annotations

import argparse
import math
import statistics
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from trace_report import peaks
from trace_report.fusion_dataflow import StepFlow
from trace_report.kernels import (ATTENTION, CONVOLUTION, COPY, ELEMENTWISE, GEMM, MEMORY_BOUND, VIEW_OPS,
                                                 decode, kind_of_kernel, kind_of_op)
from trace_report.model import CpuOp, GpuWork, Step, Trace, per_step_count, rounded
from trace_report.op_bytes import Traffic, compute_output, op_traffic, shape_text, tensor_inputs

CHAIN, SPLIT_CHAIN, EPILOGUE, PROLOGUE = "chain", "split chain", "GEMM epilogue", "GEMM prologue"
LABEL_OPS = 12  # a chain's label lists this many steps at most
COMPUTE = {GEMM, ATTENTION, CONVOLUTION}
SHAPES_HINT = "Where fusion would pay needs input shapes: profile with record_shapes=True (a lesson's --record_shapes)"
# Ops a fused kernel's name may leave out: views, and copies that become its loads and stores.
_MOVES = {op.strip("_") for op in VIEW_OPS} | {"copy", "contiguous", "to", "to_copy", "copy_from"}
_ALIASES = {"native_layer_norm": "layer_norm", "native_group_norm": "group_norm", "native_batch_norm": "batch_norm",
            "native_dropout": "dropout", "safe_softmax": "softmax", "fused_rms_norm": "rms_norm",
            **{gemm: "mm" for gemm in ("addmm", "bmm", "baddbmm", "matmul", "linear", "addmm_activation")}}


@dataclass
class Outcome:
    """What the second trace did with a candidate: its status (see the module's docstring), the kernels that took its
    ops, and one run of them: their median times, summed."""

    status: str
    kernels: tuple[str, ...] = ()
    median_us: float | None = None
    in_gemm: bool = False  # one of those kernels is a GEMM: its time is the product's too, not only these ops'


@dataclass
class Candidate:
    """One place fusion would pay, over all its occurrences (layers, steps)."""

    kind: str  # CHAIN, SPLIT_CHAIN, EPILOGUE or PROLOGUE
    ops: tuple[str, ...]  # the launching ops in order, the GEMM's first (epilogue) or last (prologue)
    shape: str  # the largest input of its memory-bound ops: `64×128×3072 bf16`
    kernels: tuple[str, ...]  # the memory-bound kernels fusing removes, as they ran
    bytes_now: int  # per occurrence: what those kernels read and write, one by one
    bytes_fused: int  # per occurrence: what the fused kernel moves (epilogue, prologue: what the GEMM adds)
    steps: int
    across: tuple[str, ...] = ()  # a split chain: the ops that launched work between its two, on the CPU
    count: int = 0  # occurrences over the recorded steps
    measured_us: float = 0.0  # the kernels' time, summed over the occurrences
    predicted_us: float | None = None  # one occurrence fused, at its kernels' own rate (capped at the bandwidth)
    floor_us: float | None = None  # one occurrence fused, at the nominal bandwidth
    outcome: Outcome | None = None  # with a second trace

    @property
    def per_step(self) -> float:
        return self.count / self.steps

    @property
    def measured_us_per_step(self) -> float:
        return self.measured_us / self.steps

    @property
    def predicted_us_per_step(self) -> float | None:
        return None if self.predicted_us is None else self.predicted_us * self.count / self.steps

    @property
    def floor_us_per_step(self) -> float | None:
        return None if self.floor_us is None else self.floor_us * self.count / self.steps

    @property
    def rate_gbs(self) -> float | None:
        """The rate its kernels moved their bytes at, as they ran: GB/s (bytes per µs / 1e3)."""
        return self.bytes_now * self.count / (self.measured_us * 1e3) if self.measured_us > 0 else None

    @property
    def saving_us_per_step(self) -> float | None:
        if self.predicted_us is None:
            return None
        return max(0.0, self.measured_us - self.predicted_us * self.count) / self.steps

    @property
    def bytes_saved_per_step(self) -> float:
        return max(0, self.bytes_now - self.bytes_fused) * self.count / self.steps

    @property
    def is_chain(self) -> bool:
        """A chain on the stream, or one split there that the data links: one kernel of pointwise work, no GEMM's."""
        return self.kind in (CHAIN, SPLIT_CHAIN)

    @property
    def link(self) -> str:
        """How its ops were found to feed each other, as the report says it beside a split chain."""
        if self.kind != SPLIT_CHAIN:
            return ""
        across = ", ".join(op.removeprefix("aten::") for op in self.across) or "other work"
        return f"split by {across} on the stream; the link inferred from shapes and order"

    @property
    def label(self) -> str:
        """Its ops in order, as the table and the lessons print them: `gelu → mul` (ATen's prefix left out); a run of
        one op once with its count (`copy_ ×40`), and a chain of more than LABEL_OPS steps cut in the middle (`a → b →
        … 30 more → y → z`): a model's chain can be hundreds of ops, a table cell holds a few lines."""
        steps: list[list] = []
        for op in (op.removeprefix("aten::") for op in self.ops):
            if steps and steps[-1][0] == op:
                steps[-1][1] += 1
            else:
                steps.append([op, 1])
        words = [op if n == 1 else f"{op} ×{n}" for op, n in steps]
        if len(words) > LABEL_OPS:
            words = [*words[:6], f"… {len(words) - 9} more", *words[-3:]]
        return " → ".join(words)

    def fused_ops(self) -> frozenset[str]:
        """Its ops as a fused kernel's name lists them (`aten::masked_fill_` -> masked_fill), views and copies left
        out."""
        return frozenset(op for op in map(canonical_op, self.ops) if op not in _MOVES)


@dataclass
class Fusion:
    """Where fusion would pay in one trace, ranked by the saving per step."""

    trace: str
    steps: int
    has_gpu: bool
    has_shapes: bool
    device: str | None
    bandwidth_gbs: float | None
    bandwidth_from: str  # "the NVIDIA H200's nominal peak", "given by --bandwidth", "" when unknown
    candidates: list[Candidate] = field(default_factory=list)
    second: str | None = None  # the trace whose kernels the outcomes come from

    @property
    def note(self) -> str | None:
        """The one line said before (or instead of) the table: no shapes, or no bandwidth."""
        if not self.has_shapes:
            return SHAPES_HINT
        if self.bandwidth_gbs is None:
            return (f"no nominal memory bandwidth known for {self.device or 'this GPU'}: no floor, and the predictions"
                    " are not capped (--bandwidth GB/s gives one)")
        return None

    def lines(self, n: int = 3) -> list[str]:
        """The first `n` candidates as short lines, for a lesson to print; the hint alone without shapes."""
        if not self.has_gpu:
            return []
        if not self.has_shapes:
            return [SHAPES_HINT]
        return [_line(c) for c in self.candidates[:n]]

    def to_dict(self) -> dict:
        return {
            "has_shapes": self.has_shapes,
            "note": self.note if self.has_gpu else None,
            "device": self.device,
            "bandwidth_gbs": self.bandwidth_gbs,
            "bandwidth_from": self.bandwidth_from,
            "steps": self.steps,
            "second": self.second,
            "candidates": [_candidate_dict(c) for c in self.candidates],
        }


_ANALYSES: dict[tuple, Fusion] = {}  # (id(trace), bandwidth, id(second)) -> its analysis, while the traces live


def analyze(trace: Trace, bandwidth_gbs: float | None = None, second: Trace | None = None) -> Fusion:
    """Where fusion would pay in `trace` (see the module's docstring); with `second`, what it did with each candidate.
    Reads the GPU work only when the trace has shapes. Once per trace and arguments: the report's section, --json and
    the advice's compile-fusion rule ask alike (30 ms of a 2021 ResNet step's 360 ms report, asked twice)."""
    key = (id(trace), bandwidth_gbs, id(second) if second is not None else None)
    found = _ANALYSES.get(key)
    if found is None:
        found = _ANALYSES[key] = _analyze(trace, bandwidth_gbs, second)
        for held in (trace, second):
            if held is not None:  # gone with either trace: an id is reused only after its object is
                weakref.finalize(held, _ANALYSES.pop, key, None)
    return found


def _analyze(trace: Trace, bandwidth_gbs: float | None, second: Trace | None) -> Fusion:
    device = trace.device_properties.get("name") if isinstance(trace.device_properties.get("name"), str) else None
    bandwidth, source = bandwidth_gbs, "given by --bandwidth"
    if bandwidth is None:
        bandwidth = peaks.bandwidth_gbs(device)
        source = f"the {device}'s nominal peak" if bandwidth is not None else ""
    fusion = Fusion(trace.name, len(trace.steps), trace.has_gpu, has_shapes(trace), device, bandwidth, source)
    if not fusion.has_gpu or not fusion.has_shapes:
        return fusion
    groups: dict[tuple, Candidate] = {}
    for step in trace.steps:
        chains = list(_chains(step))
        on_stream = [found for chain, before, after in chains for found in _candidates(chain, before, after)]
        for kind, links, gemm, across in on_stream + list(_split_chains(step, [chain for chain, _, _ in chains])):
            key = (kind, tuple((link.op.name, link.op.input_dims, link.op.input_types) for link in links),
                   None if gemm is None else (gemm.name, gemm.input_dims, gemm.input_types), across)
            group = groups.get(key)
            if group is None:
                ops = tuple(link.op.name for link in links)
                ops = (gemm.name, *ops) if kind == EPILOGUE else (*ops, gemm.name) if kind == PROLOGUE else ops
                widest = max(links, key=lambda link: link.traffic.output.numel)
                group = groups[key] = Candidate(
                    kind, ops, shape_text(widest.op), tuple(w.name for link in links for w in link.work),
                    sum(link.traffic.read + link.traffic.written for link in links), _bytes_fused(kind, links, gemm),
                    fusion.steps, across)
            group.count += 1
            group.measured_us += sum(w.dur for link in links for w in link.work)
    for candidate in groups.values():
        rate = candidate.rate_gbs
        if bandwidth is not None:
            candidate.floor_us = candidate.bytes_fused / (bandwidth * 1e3)  # bytes / (GB/s) -> µs
            rate = min(rate, bandwidth) if rate is not None else bandwidth
        if rate is not None:
            candidate.predicted_us = candidate.bytes_fused / (rate * 1e3)
    # Chains, split or not, first: torch.compile fuses those; an epilogue or a prologue takes a GEMM of one's own
    # (Part 2's bias add is cuBLAS's epilogue, the GeGLU needed lesson 05's Triton GEMM). Each group by its saving.
    fusion.candidates = sorted(groups.values(), key=lambda c: (not c.is_chain, -(c.saving_us_per_step or 0.0),
                                                               -c.bytes_saved_per_step, -c.measured_us))
    if second is not None:
        fusion.second = second.name
        fused, ran = _fusing_kernels(second), set(second.kernel_names())
        for candidate in fusion.candidates:
            candidate.outcome = _outcome(candidate, fused, ran)
    return fusion


def first_rows(trace: Trace, n: int = 3, bandwidth_gbs: float | None = None) -> list[str]:
    """Where fusion would pay in `trace`, the first `n` candidates as short lines (the hint alone without shapes)."""
    return analyze(trace, bandwidth_gbs).lines(n)


def has_shapes(trace: Trace) -> bool:
    return any(op.input_dims for step in trace.steps for op in step.ops)


def bandwidth_flag(text: str) -> float:
    """`--bandwidth`: GB/s, a number above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a memory bandwidth in GB/s (a number above 0), got {text!r}")
    return value


# --- chains --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Link:
    """One op of a chain, with the GPU work it launched there and its traffic."""

    op: CpuOp
    traffic: Traffic
    work: list[GpuWork]


class _Lane:
    """One stream's open chain and the compute op just before it."""

    __slots__ = ("chain", "before")

    def __init__(self):
        self.chain: list[_Link] = []
        self.before: CpuOp | None = None

    def extend(self, op: CpuOp, traffic: Traffic, work: GpuWork) -> None:
        if self.chain and self.chain[-1].op is op:
            self.chain[-1].work.append(work)  # one op, several kernels: its bytes count once
        else:
            self.chain.append(_Link(op, traffic, [work]))

    def close(self, compute: CpuOp | None) -> tuple | None:
        """End the chain at `compute` (the compute op that ends it, None for any other work)."""
        found = (self.chain, self.before, compute) if self.chain else None
        self.chain = []
        self.before = compute
        return found


_MEMORY, _COMPUTE, _BREAK = "memory", "compute", "break"


def _chains(step: Step) -> Iterator[tuple[list[_Link], CpuOp | None, CpuOp | None]]:
    """(chain, compute op before it, compute op after it): the step's GPU work, in time order, once; each stream's
    chains in their order."""
    lanes: dict[tuple, _Lane] = {}
    for work in step.gpu:
        lane = lanes.get((work.pid, work.tid))
        if lane is None:
            lane = lanes[(work.pid, work.tid)] = _Lane()
        role, op, traffic = _role(work)
        if role is _MEMORY:
            lane.extend(op, traffic, work)
        elif (found := lane.close(op if role is _COMPUTE else None)) is not None:
            yield found
    for lane in lanes.values():
        if (found := lane.close(None)) is not None:
            yield found


def _role(work: GpuWork) -> tuple[str, CpuOp | None, Traffic | None]:
    launcher = work.launch.launcher if work.launch is not None else None
    if work.kind == "kernel":
        kind = kind_of_kernel(work.name)
    elif work.kind == "memset" or "DtoD" in work.name:
        kind = COPY
    else:
        return _BREAK, None, None  # a copy to or from the host: PCIe, not the GPU's memory
    if kind in COMPUTE or (launcher is not None and kind_of_op(launcher.name) in COMPUTE):
        return _COMPUTE, launcher, None
    if kind in MEMORY_BOUND and launcher is not None:
        traffic = op_traffic(launcher)
        if traffic is not None:
            return _MEMORY, launcher, traffic
    return _BREAK, None, None


def _candidates(chain: list[_Link], before: CpuOp | None, after: CpuOp | None):
    """(kind, links, GEMM op or None, ()) for each candidate one occurrence of a chain holds."""
    if len(chain) >= 2:
        yield CHAIN, chain, None, ()
    first, last = chain[0], chain[-1]
    if before is not None and kind_of_op(first.op.name) == ELEMENTWISE:
        out = compute_output(before)
        if out is not None and first.traffic.reads_tensor(out):
            yield EPILOGUE, [first], before, ()
    if after is not None and kind_of_op(last.op.name) == ELEMENTWISE:
        if any(i.tensor == last.traffic.output for i in tensor_inputs(after) or ()):
            yield PROLOGUE, [last], after, ()


def _split_chains(step: Step, chains: list[list[_Link]]):
    """(SPLIT_CHAIN, [last op of a chain, first op of the stream's next chain], None, the ops between) where
    fusion_dataflow infers that the second reads the first's output."""
    by_stream: dict[tuple, list[list[_Link]]] = {}
    for chain in chains:
        first_work = chain[0].work[0]
        by_stream.setdefault((first_work.pid, first_work.tid), []).append(chain)
    flow = None
    for ordered in by_stream.values():
        ordered.sort(key=lambda chain: chain[0].work[0].ts)
        for earlier, later in zip(ordered, ordered[1:]):
            producer, consumer = earlier[-1], later[0]
            flow = flow or StepFlow(step)
            across = flow.link(producer.op, producer.work[-1], consumer.op, consumer.work[0])
            if across is not None:
                yield SPLIT_CHAIN, [producer, consumer], None, across


def _bytes_fused(kind: str, links: list[_Link], gemm: CpuOp | None) -> int:
    """What the fused candidate moves: the chain's fused kernel; for an epilogue or a prologue, what the GEMM adds."""
    if kind in (CHAIN, SPLIT_CHAIN):
        return fused_bytes([link.traffic for link in links])
    traffic = links[0].traffic
    if kind == EPILOGUE:
        # The op reads the GEMM's output in registers and writes its own instead: only the difference moves.
        return max(0, traffic.read + traffic.written - 2 * compute_output(gemm).nbytes)
    # The GEMM reads the op's inputs instead of its output (once: re-reads per tile are left out).
    return max(0, traffic.read - traffic.written)


def fused_bytes(chain: list[Traffic]) -> int:
    """What one kernel doing the whole chain reads and writes (the heuristic of the module's docstring)."""
    produced: list = []  # the chain's outputs so far, oldest first
    consumed: set[int] = set()  # indices into `produced` that a later op read
    broadcast_read: set = set()
    read = 0
    for traffic in chain:
        taken: set[int] = set()  # an output feeds one input of an op: `mul(g, b)` with g, b alike reads b from memory
        for tensor, broadcast in traffic.reads:
            newest_first = range(len(produced) - 1, -1, -1)
            inside = next((i for i in newest_first if i not in taken and produced[i] == tensor), None)
            if inside is not None:
                taken.add(inside)
                consumed.add(inside)
            elif not broadcast:
                read += tensor.nbytes
            elif tensor not in broadcast_read:
                broadcast_read.add(tensor)
                read += tensor.nbytes
        produced.append(traffic.output)
    return read + sum(tensor.nbytes for i, tensor in enumerate(produced) if i not in consumed)


# --- against a second trace ----------------------------------------------------------------------------------


def canonical_op(op: str) -> str:
    """An op's name as a fused kernel's name lists it: `aten::_softmax` -> softmax, `aten::add_` -> add."""
    base = op.removeprefix("aten::").strip("_")
    return _ALIASES.get(base, base)


class Fusing(NamedTuple):
    """A kernel of the second trace that fuses ops, as its name tells: which, its durations, whether it is a GEMM,
    and whether the ops it adds to a GEMM come after it (an epilogue, by its decoded name) and so cannot be a
    prologue's."""

    ops: frozenset[str]
    durations: list[float]
    is_gemm: bool
    epilogue_only: bool


def _fusing_kernels(trace: Trace) -> dict[str, Fusing]:
    """The kernels whose names list the ops they fuse (Inductor's, Liger's, this suite's fused GeGLU GEMMs, a GEMM with
    a bias epilogue), by name."""
    found: dict[str, Fusing] = {}
    for work in trace.gpu_work():
        if work.kind != "kernel":
            continue
        entry = found.get(work.name)
        if entry is None:
            decoded = decode(work.name)
            ops: frozenset[str] = frozenset()
            if decoded.family.startswith(("Inductor", "Liger", "profiling_in_pytorch")) or "fused" in work.name.lower():
                ops = frozenset(canonical_op(op) for op in decoded.compute_ops or decoded.ops)
            elif decoded.is_gemm and decoded.has_bias_epilogue:
                ops = frozenset({"mm", "add"})
            epilogue_only = decoded.is_gemm and any(k == "epilogue" for k, _ in decoded.details)
            entry = found[work.name] = Fusing(ops, [], decoded.is_gemm, epilogue_only)
        entry.durations.append(work.dur)
    return {name: entry for name, entry in found.items() if entry.ops}


def _outcome(candidate: Candidate, fused: dict[str, Fusing], ran: set[str]) -> Outcome:
    need = candidate.fused_ops()
    picked: list[str] = []
    covered: set[str] = set()
    for name, entry in sorted(fused.items(), key=lambda item: -len(item[1].ops & need)):
        if entry.ops & (need - covered):
            picked.append(name)
            covered |= entry.ops & need
        if need and covered >= need:
            break
    median = sum(statistics.median(fused[name].durations) for name in picked) if picked else None
    in_gemm = any(fused[name].is_gemm for name in picked)
    # An epilogue or a prologue is fused only into a GEMM: a Triton kernel whose name lists `mm` and `mul` took the mul
    # with other pointwise ops while cuBLAS still ran the GEMM (Inductor names a kernel after its inputs' origins too).
    # A prologue, not into a GEMM whose name says its extra ops come after the product: the op before the GEMM then
    # still writes what the GEMM reads, inside another GEMM's epilogue.
    into = {CHAIN: True, SPLIT_CHAIN: True, EPILOGUE: in_gemm,
            PROLOGUE: any(fused[n].is_gemm and not fused[n].epilogue_only for n in picked)}
    kernels_now = len(candidate.kernels) + (0 if candidate.is_chain else 1)  # a GEMM's own kernel too
    if need and covered >= need and len(picked) < kernels_now and into[candidate.kind]:
        return Outcome("fused", tuple(picked), median, in_gemm)
    gone = not any(name in ran for name in candidate.kernels)
    if picked and gone:
        return Outcome("fused otherwise", tuple(picked), median, in_gemm)
    return Outcome("gone" if gone else "remains")


# --- as data and as lines ------------------------------------------------------------------------------------


def _line(c: Candidate) -> str:
    head = f"{c.label} ({c.link or c.kind}, {per_step_count(c.per_step)}/step, {c.shape}): "
    head += f"{c.measured_us_per_step:,.1f} µs/step now"
    if c.predicted_us_per_step is None:
        return head + f", {mb(c.bytes_now)} -> {mb(c.bytes_fused)} MB a run"
    return head + (f", {c.predicted_us_per_step:,.1f} fused: saves {c.saving_us_per_step:,.1f} µs/step "
                   f"({mb(c.bytes_now)} -> {mb(c.bytes_fused)} MB a run)")


def _candidate_dict(c: Candidate) -> dict:
    outcome = None if c.outcome is None else {"status": c.outcome.status, "kernels": list(c.outcome.kernels),
                                              "median_us": rounded(c.outcome.median_us),
                                              "in_gemm": c.outcome.in_gemm}
    return {
        "kind": c.kind, "ops": list(c.ops), "across": list(c.across), "link": c.link or None, "shape": c.shape,
        "kernels": list(c.kernels), "count": c.count,
        "per_step": round(c.per_step, 3), "bytes_now": c.bytes_now, "bytes_fused": c.bytes_fused,
        "measured_us": round(c.measured_us, 3), "measured_us_per_step": round(c.measured_us_per_step, 3),
        "rate_gbs": rounded(c.rate_gbs), "predicted_us": rounded(c.predicted_us), "floor_us": rounded(c.floor_us),
        "predicted_us_per_step": rounded(c.predicted_us_per_step), "floor_us_per_step": rounded(c.floor_us_per_step),
        "saving_us_per_step": rounded(c.saving_us_per_step),
        "in_second": outcome,
    }


def mb(nbytes: float) -> str:
    """Bytes as MB (1e6), as the table shows them."""
    return f"{nbytes / 1e6:,.1f}"

