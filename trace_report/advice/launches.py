"""Launches the step need not make: a Python loop issuing the same few tiny kernels once per row, and a step whose
GPU waits for launches that CUDA graphs (or a larger batch) would make once.
"""

from __future__ import annotations

import re
from collections import Counter

from trace_report.advice.common import DATALOADER, Reading, cpu_only_saving, source_of, times, us, where_of
from trace_report.advice.findings import WORTH_SHARE, Finding
from trace_report.advice.replay import cut_cpu, scaled_saving, spans_of
from trace_report.model import CpuOp, Step
from trace_report.summary import AUTOGRAD_NODE

LOOP_MIN = 16  # iterations of one body a loop needs to be called one
MAX_INDEXING = 4  # tensors an iteration indexes, at most
INDEXING = ("aten::select", "aten::unbind")  # how a Python loop takes its row: x[i], for row in x
# One vectorised op keeps this share of the loop's CPU and GPU time, least and most.
VECTOR_CPU_KEEP = (0.02, 0.15)
VECTOR_GPU_KEEP = (0.05, 0.5)


class _LoopMemo:
    """What earlier steps of a trace found, for the next: its steps repeat their paths and their ops (111 steps of a
    Mamba trace searched 0.65 s, each alone)."""

    def __init__(self):
        self.loops: dict[tuple[str, ...], tuple[int, int, int] | None] = {}  # a thread's op names -> _longest_loop
        self.layers: dict[tuple[str, ...], bool] = {}  # a thread's op names -> its loop is over a model's layers
        self.inside_aten: dict[tuple, bool] = {}  # per path: inside an op or a DataLoader's __next__


def _loops(step: Step, memo: _LoopMemo | None = None, layers: bool = True) -> list[tuple[list[CpuOp], int]]:
    """Each run of at least LOOP_MIN iterations of the same ops on one thread, each iteration starting with an
    indexing op (`aten::select`: `x[i]`): the loop's top-level ops and its iteration count; without `layers`, not the
    loops over a model's layers (LAYER_OPS)."""
    if sum(op.name in INDEXING for op in step.ops) < LOOP_MIN:
        return []  # no loop here: most steps of most traces end here
    memo = _LoopMemo() if memo is None else memo
    by_thread: dict[tuple, list[CpuOp]] = {}
    inside_aten = memo.inside_aten  # per path: a step repeats a few hundred paths over thousands of ops
    for op in step.ops:
        if op.is_label:
            continue
        nested = inside_aten.get(op.path)
        if nested is None:  # inside an op, or inside a DataLoader's __next__ (the dataloader rule's: a dataset that
            # indexes a stored tensor per sample loops over it too)
            nested = inside_aten[op.path] = any(box.startswith("aten::") or DATALOADER in box for box in op.path)
        if not nested:
            by_thread.setdefault((op.pid, op.tid), []).append(op)
    found = []
    for ops in by_thread.values():
        ops.sort(key=lambda o: o.ts)
        op_names = tuple(o.name for o in ops)
        if op_names not in memo.loops:
            memo.loops[op_names] = _longest_loop(op_names)
        best = memo.loops[op_names]
        if best is None:
            continue
        start, stop, count = best
        if not layers:
            over_layers = memo.layers.get(op_names)
            if over_layers is None:  # once per thread's names: the body's names, not its ops (Mamba's scan: 40 ms)
                body = set(op_names[start:stop])
                over_layers = memo.layers[op_names] = any(marker in name for name in body for marker in LAYER_OPS)
            if over_layers:
                continue
        found.append((ops[start:stop], count))
    return found


def _longest_loop(op_names: tuple[str, ...]) -> tuple[int, int, int] | None:
    """The longest run of alike iterations in a thread's top-level ops (their names, in time order): where it starts
    and stops (indices) and its iteration count; None without LOOP_MIN of them."""
    starts = [i for i, name in enumerate(op_names) if name in INDEXING]
    if len(starts) < LOOP_MIN:
        return None
    starts.append(len(op_names))
    # An iteration may index several tensors (`f(out[i], y[i])`: two selects): try 1 to MAX_INDEXING selects
    # per iteration, from each of the first selects (other indexing before the loop shifts its phase), and keep
    # the period that finds the longest run of alike iterations.
    best = None
    for period, phase in ((p, f) for p in range(1, MAX_INDEXING + 1) for f in range(p)):
        iters = [(starts[k], starts[k + period]) for k in range(phase, len(starts) - period, period)]
        names = [op_names[a:b] for a, b in iters]
        k = 0
        while k < len(names):
            end = k
            while end + 1 < len(names) and names[end + 1] == names[k]:
                end += 1
            count = end - k + 1
            stop = iters[end][1]
            if end + 1 < len(names) and op_names[stop:stop + len(names[k])] == names[k]:
                count += 1
                stop += len(names[k])
            if count >= LOOP_MIN and (best is None or count > best[2]):
                best = (iters[k][0], stop, count)
            k = end + 1
    return best


def loop_kernels(r: Reading) -> list[Finding]:
    """A Python loop over a tensor's rows (`for i in range(n): ... x[i] ...`): the same few ops, and their tiny
    kernels, once per row, and as many autograd nodes in the backward. One vectorised expression (or torch.compile)
    does the loop's work in a few kernels.

    Sources: torch.profiler's pattern matcher (ForLoopIndexingPattern), the PyTorch performance tuning guide."""
    memo = _LoopMemo()
    per_step = {id(s): _loops(s, memo, layers=False) for s in r.steps}
    loops = [(ops, n) for found in per_step.values() for ops, n in found]
    if not loops:
        return []
    body_names = {o.name for ops, _ in loops for o in ops}
    # the backward's nodes of the loop's ops (an inference trace, vLLM's or sglang's, has none)
    backward_nodes = {node for node in r.names_starting(AUTOGRAD_NODE)
                      if any(_backward_of(node, op) for op in body_names)}
    backward = bool(backward_nodes)
    spans_by_step: dict[int, list[tuple[float, float]]] = {}  # each replay's edit asks for a step's spans again

    def spans(step: Step):
        if id(step) not in spans_by_step:
            found = per_step[id(step)] if id(step) in per_step else _loops(step, memo, layers=False)
            items = [o for ops, _ in found for o in ops]
            # the backward's nodes for the loop's ops, on autograd's thread: one per op and row
            if backward_nodes:
                items += [o for o in step.ops if o.name in backward_nodes]
            spans_by_step[id(step)] = spans_of(items)
        return spans_by_step[id(step)]

    both = " (forward and backward)" if backward else ""
    if r.replay is not None:
        saving = r.replay.saving(cut_cpu(spans, VECTOR_CPU_KEEP[1], VECTOR_GPU_KEEP[1]),
                                 [cut_cpu(spans, VECTOR_CPU_KEEP[0], VECTOR_GPU_KEEP[0])])
        basis = r.basis(f"one vectorised op keeps {VECTOR_CPU_KEEP[0]:.0%}-{VECTOR_CPU_KEEP[1]:.0%} of the loop's CPU "
                        f"time{both} and {VECTOR_GPU_KEEP[0]:.0%}-{VECTOR_GPU_KEEP[1]:.0%} of its GPU "
                        "time")
    else:
        saving = cpu_only_saving(r, spans, VECTOR_CPU_KEEP)
        basis = f"the loop's CPU time{both} on a trace without a GPU lane, a vectorised op keeping " \
                f"{VECTOR_CPU_KEEP[0]:.0%}-{VECTOR_CPU_KEEP[1]:.0%} of it"
    ops, n = max(loops, key=lambda item: item[1])
    body = Counter(o.name for o in ops)
    kernels = sum(o.launched for ops_, _ in loops for o in ops_) / r.n
    spent = sum(ops[-1].ts + ops[-1].dur - ops[0].ts for ops, _ in loops) / r.n
    launched = f"{kernels:,.0f} launches and " if kernels else ""
    evidence = (f"a loop of {n} iterations ({times(r.per_step(len(loops)))} a step): "
                f"{', '.join(f'{name} ×{c // max(1, n)}' for name, c in body.most_common(4))} each, "
                f"{launched}{us(spent)} of CPU time a step"
                f"{', and as many autograd nodes in the backward' if backward else ''}")
    change = ("one op over all rows instead of x[i] in a loop, e.g. (w[:, None] * f(x)).sum(0) for "
              "sum(w[i] * f(x[i]) for i in range(n)), f taking a batch; or torch.compile the loop's function")
    return [Finding("loop-kernels", "a Python loop over rows, a few tiny kernels each", evidence, change, saving,
                    r.step_us, basis, source_of(loop_kernels), where=where_of(ops),
                    count_per_step=n * r.per_step(len(loops)))]


# What a model's layer does and a row's work does not: a layer's weights (linear), its attention, its collective. A
# loop whose body holds one is the model's loop over its layers (vLLM's 25-79 a step, each with its attention and
# all-reduce), which no vectorised op replaces: the launches' finding weighs it. Mamba's reference scan, one step of
# the sequence per iteration, multiplies activations (aten::matmul) and stays a loop over rows.
LAYER_OPS = ("aten::linear", "aten::addmm", "attention", "flash", "all_reduce", "all_gather", "c10d::", "nccl")


_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")  # MseLossBackward0, SqueezeBackward1: the node's op, then its number


def _backward_of(node: str, op: str) -> bool:
    """`autograd::engine::evaluate_function: MseLossBackward0` is the backward of `aten::mse_loss`; `AddmmBackward0`
    is not `aten::add`'s (a prefix matched it once, and lesson 12's loop-kernels counted the model's backward GEMMs,
    22 ms a step, as the loop's: 10-22 ms promised, nothing measured on an H100 and an H200)."""
    if ": " not in node:
        return False
    name = _BACKWARD_SUFFIX.sub("", node.split(": ", 1)[1])
    return name.replace("_", "").lower() == op.removeprefix("aten::").replace("_", "").lower()


# A launch-bound step keeps, with CUDA graphs, this share of its CPU issue time, least and most: one graph launch for
# the captured kernels, the Python and the ops outside the graph left (lesson 07: eager 95-135 µs a forward, the graph
# 13-20 µs, on an H100).
GRAPH_CPU_KEEP = (0.1, 0.4)
COMPILED = ("Torch-Compiled Region", "## Call CompiledFxGraph")  # the ranges torch.compile's code records
VLLM_OP = "vllm::"  # vLLM's custom ops (vllm::unified_attention_with_output, vllm::all_reduce): a vLLM step
GRAPHED_SHARE = 0.5  # a step with this share of its GPU work in graph replays is graphed already
# The longest mean wait between launches that is the launches' own cost: tens of µs a kernel in the world's eager steps
# (Mamba 35, ResNet-50 training 65), 580 on an MI250 toy whose gradient accumulation took 6.6 ms to issue. An A100
# AlexNet trace read whole waited 338 ms a gap, 38 times: the host's other work, not its launches.
LAUNCH_GAP_MOST = 1000.0


def overhead(r: Reading) -> list[Finding]:
    """A step the launches pace: the GPU idles between kernels while the CPU issues the next. CUDA graphs issue the
    whole step in one launch (`torch.compile(mode="reduce-overhead")`, or `torch.cuda.graphs` by hand); a larger batch
    gives each launch more work.

    Sources: Part 1 of the series (overhead-bound against compute-bound), PyTorch's CUDA graphs documentation, the
    TensorBoard profiler plugin's recommendation (low GPU utilisation)."""
    v = r.verdict
    if v.kind != "overhead-bound" or v.cause not in (None, "launches") or r.replay is None:
        return []
    if (v.graph_share or 0.0) >= GRAPHED_SHARE:
        return []  # already replayed from CUDA graphs: what is left is the host's work around the replays
    launches = sum(len(s.runtime) for s in r.steps) / r.n
    if not v.launch_waits or (v.launch_wait_us or 0.0) / v.launch_waits > LAUNCH_GAP_MOST:
        return []  # the GPU never waited on a launch, or the CPU does other work between them: no graph takes that away
    if not launches or v.cpu_us_per_step / launches > LAUNCH_GAP_MOST:
        return []  # milliseconds of CPU a launch call (an HTA test trace: 111 ms over 2 calls a step) are not launches
    # A graph cannot hold a synchronisation, and the batch's making stays outside any graph: where those weigh, the
    # sync's and dataloader's findings come first. A tiny one (HF BERT's `if mask:`, 9 µs a step of a 4.3 ms step
    # the launches pace) leaves the rest of the step to the graphs: compile breaks its graph there.
    syncs = [c for s in r.steps for c in s.runtime if c.is_sync]
    names = r.op_names
    loading = [op for s in r.steps for op in s.ops if DATALOADER in op.name] if any(
        DATALOADER in name for name in names) else []
    worth = WORTH_SHARE * r.step_us
    if r.per_step(sum(c.dur for c in syncs)) >= worth or r.per_step(sum(op.dur for op in loading)) >= worth:
        return []

    saving = scaled_saving(r.replay, GRAPH_CPU_KEEP)
    evidence = (f"{v.kind}: the GPU waited on launches {v.launch_waits or 0} times ({us(v.launch_wait_us or 0)}, "
                f"{(v.launch_wait_fraction or 0):.0%} of its window); {launches:,.0f} runtime calls a step, the CPU "
                f"issuing for {us(v.cpu_us_per_step)} against {us(v.gpu_busy_us_per_step or 0)} of GPU work")
    if syncs:
        # the outermost op that asked for it: aten::is_nonzero is a Python `if t:`, aten::item a `.item()`
        where = Counter(next((box for box in c.launch_path if box.startswith("aten::")), c.launched_by or c.name)
                        for c in syncs).most_common(1)[0][0]
        waited = us(r.per_step(sum(c.dur for c in syncs)))
        evidence += f"; {times(r.per_step(len(syncs)))} a step a synchronize ({where}, {waited}), where a compiled graph breaks"
    if any(name.startswith(VLLM_OP) for name in names):
        # a serving engine's step: its own switch, not a torch.compile the reader does not write
        change = ("LLM(..., enforce_eager=False)  # vLLM's default: its CUDA graphs replay the step (vllm serve "
                  "without --enforce-eager)")
    elif any(name.startswith(COMPILED) for name in names):
        # compiled already, without graphs (mode='max-autotune-no-cudagraphs', or the default mode)
        change = ("model = torch.compile(model, mode='reduce-overhead')  # compiled already: add CUDA graphs "
                  "('max-autotune' captures them too); or a larger batch per launch")
    else:
        change = "model = torch.compile(model, mode='reduce-overhead')  # CUDA graphs; or a larger batch per launch"
    basis = r.basis(f"CUDA graphs keep {GRAPH_CPU_KEEP[0]:.0%}-{GRAPH_CPU_KEEP[1]:.0%} of the step's CPU time (one "
                    "launch for the captured kernels)")
    return [Finding("overhead", "the GPU waits for launches", evidence, change, saving, r.step_us, basis,
                    source_of(overhead), count_per_step=launches)]


RULES = (loop_kernels, overhead)
