"""Split chains, for `fusion`: two pointwise ops the data links but the stream keeps apart.

On an eager transformers Llama the SwiGLU's `silu(gate) * up` runs as gate GEMM, silu, up GEMM, mul: the up
projection's GEMM runs between silu and mul on the stream, so no chain holds both, and `fusion` listed only the
epilogues `mm → silu` and `mm → mul`, while Inductor fuses exactly silu and mul (`triton_poi_fused__unsafe_view_mul_
silu_8` on the H100 fixture). A trace carries no tensor identities, so the link is inferred from what it does carry:
the ops' order on the CPU, their input shapes and types, the module ranges around them, the op that launched each
kernel. The last op P of a chain on a stream and the first op C of the stream's next chain are linked when

    1. both are plain pointwise ops (`op_bytes.pointwise_output`: no copy, fill, norm, reduction or lookup, whose
       outputs are not their inputs' broadcast shape), launched from one CPU thread;
    2. P ran inside the innermost module call around C (its `nn.Module: X` range, the very call, not another call of
       the same module): the SwiGLU's mul runs in LlamaMLP's call, and so does silu, inside SiLUActivation's. On a
       thread with no module range at all (a transformers model profiled as it comes: shapes, no stacks, no ranges)
       the other rules decide alone: on the llama-1b eager fixture without its ranges they link the same 16
       silu → mul a step and nothing else;
    3. C reads a tensor of exactly the shape and type P writes;
    4. each op that launched GPU work between them (on any thread, in launch order) has known shapes and types,
       reads no tensor of the size and type of P's output (it could be P's consumer, or write over P's output) and
       writes no tensor of the size of one of P's inputs in place (a fused kernel, at C's place, would read the new
       values): the up GEMM reads x and its weight, neither of silu's output's size;
    5. the tensors of P's output's size and type made since P (P's own, and those of the ops between: the up GEMM's
       output) are no more than C reads of that size and type: C takes them all, P's among them. `silu(g);
       u = mm(x, W); u + 1` is not linked: the add may read u alone;
    6. the stream runs nothing between them that the trace does not tie to a launching op.

Sizes compare as the byte model compares them (elements and type: a view changes the shape, not the size), so a
coincidence (a weight of the same size as P's output) stops a link, never makes one. What stays unproven: that C
reads P's output rather than an older tensor of the same size (the gate GEMM's output, which silu read): then P's
output went unused, which a model does not compute. Each link is said in the report as inferred from shapes and
order. Nothing here imports torch.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from functools import cached_property

from trace_report.model import CpuOp, GpuWork, Step
from trace_report.op_bytes import (WRITE_ONLY, Tensor, compute_output, op_traffic, pointwise_output,
                                                  tensor_inputs)
from trace_report.kernels import ELEMENTWISE, MODULE_PREFIX, kind_of_op


class StepFlow:
    """One step's launching ops in launch order, its module calls per thread and its GPU work per stream: what the
    rule of the module's docstring reads. Each is indexed on first use: a step whose pairs the shapes alone rule out
    indexes nothing. With the rule, `fusion.analyze` of the llama-1b eager fixture takes 8.6 ms (median of 40, this
    2-core machine) against 5.3 without; the whole report 0.85 s either way."""

    def __init__(self, step: Step):
        self.step = step

    @cached_property
    def launchers(self) -> list[CpuOp]:
        found = {id(w.launch.launcher): w.launch.launcher for w in self.step.gpu
                 if w.launch is not None and w.launch.launcher is not None}
        return sorted(found.values(), key=lambda op: op.ts)

    @cached_property
    def launch_starts(self) -> list[float]:
        return [op.ts for op in self.launchers]

    @cached_property
    def modules(self) -> dict[tuple, list[CpuOp]]:
        """The module calls per thread, in the order they start (an outer call before an inner one that starts
        with it)."""
        calls: dict[tuple, list[CpuOp]] = defaultdict(list)
        for op in self.step.ops:
            if op.name.startswith(MODULE_PREFIX):
                calls[(op.pid, op.tid)].append(op)
        for ordered in calls.values():
            ordered.sort(key=lambda op: (op.ts, -op.dur))
        return calls

    @cached_property
    def module_starts(self) -> dict[tuple, list[float]]:
        return {thread: [op.ts for op in calls] for thread, calls in self.modules.items()}

    @cached_property
    def streams(self) -> dict[tuple, list[GpuWork]]:
        works: dict[tuple, list[GpuWork]] = defaultdict(list)
        for work in self.step.gpu:
            works[(work.pid, work.tid)].append(work)
        return works

    @cached_property
    def stream_starts(self) -> dict[tuple, list[float]]:
        return {lane: [w.ts for w in works] for lane, works in self.streams.items()}

    def link(self, producer: CpuOp, producer_end: GpuWork, consumer: CpuOp, consumer_start: GpuWork) -> tuple | None:
        """The names of the ops that launched work between `producer` and `consumer`, in order, when the rule infers
        that the consumer reads the producer's output; else None. `producer_end` is the producer's last kernel,
        `consumer_start` the consumer's first, on one stream."""
        if (producer.pid, producer.tid) != (consumer.pid, consumer.tid) or producer.ts >= consumer.ts:
            return None
        if kind_of_op(producer.name) != ELEMENTWISE or kind_of_op(consumer.name) != ELEMENTWISE:
            return None
        made, produced_from = pointwise_output(producer), tensor_inputs(producer)
        read = tensor_inputs(consumer) if pointwise_output(consumer) is not None else None
        if made is None or produced_from is None or read is None:
            return None
        if not any(i.shape == made.shape and i.type == made.type for i in read):
            return None
        call = self._innermost_call(consumer)
        if call is None and self.modules.get((consumer.pid, consumer.tid)):
            return None  # the thread has module calls, none around the consumer
        if call is not None and not (call.ts <= producer.ts and producer.ts + producer.dur <= call.ts + call.dur):
            return None
        if not self._stream_is_launched(producer_end, consumer_start):
            return None
        between = self._launched_between(producer, consumer)
        same_size = 1  # tensors of the size and type of P's output made since P: P's own
        inputs = {i.tensor for i in produced_from}
        for op in between:
            op_reads, output = tensor_inputs(op), _output(op)
            if op_reads is None or output is None or any(i.tensor == made.tensor for i in op_reads):
                return None
            if _writes_in_place(op) and op_reads and op_reads[0].tensor in inputs:
                return None
            same_size += output == made.tensor
        if same_size > sum(i.tensor == made.tensor for i in read):
            return None
        return tuple(dict.fromkeys(op.name for op in between))

    def _innermost_call(self, op: CpuOp) -> CpuOp | None:
        """The innermost module call around `op` on its thread: the latest to start of those that hold it."""
        thread = (op.pid, op.tid)
        calls = self.modules.get(thread)
        if not calls:
            return None
        for i in range(bisect.bisect_right(self.module_starts[thread], op.ts) - 1, -1, -1):
            call = calls[i]
            if call.ts + call.dur >= op.ts + op.dur:
                return call
        return None

    def _launched_between(self, producer: CpuOp, consumer: CpuOp) -> list[CpuOp]:
        lo = bisect.bisect_right(self.launch_starts, producer.ts)
        hi = bisect.bisect_left(self.launch_starts, consumer.ts)
        return [op for op in self.launchers[lo:hi] if op is not producer and op is not consumer]

    def _stream_is_launched(self, producer_end: GpuWork, consumer_start: GpuWork) -> bool:
        """Whether every piece of work between the two on their stream has a launching op (whose shapes rule 4
        reads)."""
        lane = (producer_end.pid, producer_end.tid)
        works, starts = self.streams.get(lane, []), self.stream_starts.get(lane, [])
        lo, hi = bisect.bisect_right(starts, producer_end.ts), bisect.bisect_left(starts, consumer_start.ts)
        return all(w.launch is not None and w.launch.launcher is not None for w in works[lo:hi])


def _output(op: CpuOp) -> Tensor | None:
    """What an op between writes: a GEMM's or attention's product, else its traffic's output; None when unknown."""
    product = compute_output(op)
    if product is not None:
        return product
    traffic = op_traffic(op)
    return traffic.output if traffic is not None else None


def _writes_in_place(op: CpuOp) -> bool:
    """`aten::add_`, `aten::copy_`, `aten::fill_`: the op writes its first input (op_bytes' convention)."""
    base = op.name.removeprefix("aten::")
    return base in WRITE_ONLY or (base.endswith("_") and not base.endswith("__"))
