"""Each variant's forward against one GPU, measured in the same run with every rank in step.

One timed call is: a barrier (every rank leaves it together, with nothing queued on its GPU), then the forward
between two CUDA events (on a CPU, two perf_counter reads). A call's time is the slowest rank's: the all-reduce ties
the ranks together, and a model's next layer waits for the last of them. The figure is the median of many calls
after warm-up. It includes what it costs the CPU to issue the forward whenever that is longer than the GPU's work
(the GPU starts idle after the barrier): a forward that is CPU-bound here is CPU-bound in a model too, unless the
CPU runs far enough ahead of the GPU. "CPU µs" is rank 0's host time to issue one call, for that comparison.

Each variant's speedup is read against one GPU run the same way (eager against eager, a CUDA graph against a CUDA
graph, compiled against compiled), beside the one against one GPU eager. Speed goals (bf16) are reported beside the
table, never asserted, like with like: on 2 GPUs the post's shape at least 1.7× one GPU and the 7B-sized layer
(16×512 tokens, 4096→11008) 1.9×; on 4 GPUs 2.0× and 3.5×.

The sequence-parallel variants (seqpar, async-tp) return each rank's token slice of y: their time is the whole layer
on N GPUs (every token's GEMMs, 1/N of the hidden features each), read against one GPU's forward of all the tokens,
as the others are; their output is checked against the same rows of one GPU's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.distributed as dist
from rich.table import Table

from profiling_in_pytorch.timers import percentile
from trace_report.files import writable_dir, writable_file, write_atomically
from profiling_in_pytorch.device import describe_device, dtype_name, pick_dtype
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.accuracy import check_output, fp32_reference
from profiling_in_pytorch.parallel import variants as registry  # `variants` is the list of names asked for, below

GPU_CALLS, GPU_WARMUP = 200, 20
CPU_CALLS, CPU_WARMUP = 10, 2
# (sizes, GPUs) -> × one GPU, bf16
SPEED_GOALS = {((64, 128, 768, 3072), 2): 1.7, ((16, 512, 4096, 11008), 2): 1.9,
               ((64, 128, 768, 3072), 4): 2.0, ((16, 512, 4096, 11008), 4): 3.5}


@dataclass
class Row:
    """One line of the timing table."""

    name: str
    us: float  # per forward, the slowest rank's, median over calls
    cpu_us: float  # rank 0's host time to issue one forward, median
    allreduce_us: float | None  # the same collectives alone (None for one GPU)
    problem: str | None = None  # when the variant's output is wrong, why
    # How the forward runs: "eager", "graph" (captured in a CUDA graph) or "compiled"; a variant's speedup is read
    # against one GPU run the same way, since the way alone moves one GPU's time (the post's shape on an H200: eager
    # 314.1 µs, in a CUDA graph 256.1, 1.23x, where eager's CPU issues slower than the GPU runs).
    way: str = "eager"


def timed(fn: Callable[[], object], device: torch.device) -> tuple[float, float]:
    """(median µs per call, the slowest rank's; median µs the CPU spends issuing one call) over many calls."""
    on_gpu = device.type == "cuda"
    calls, warmup = (GPU_CALLS, GPU_WARMUP) if on_gpu else (CPU_CALLS, CPU_WARMUP)
    for _ in range(warmup):
        fn()
    if on_gpu:
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    issue, wall = [], []
    for i in range(calls):
        dist.barrier()  # on NCCL it blocks the CPU until every rank's GPU got there: all start together, idle
        start = time.perf_counter()
        if on_gpu:
            events[i][0].record()
        fn()
        if on_gpu:
            events[i][1].record()
        issue.append((time.perf_counter() - start) * 1e6)
        if not on_gpu:
            wall.append(issue[-1])  # a CPU's forward is done when it returns
    if on_gpu:
        torch.cuda.synchronize()
        wall = [before.elapsed_time(after) * 1e3 for before, after in events]
    slowest = torch.tensor(wall, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return percentile(slowest.tolist(), 50), percentile(issue, 50)


def allreduce_alone(tokens: int, dim: int, chunks: int, dtype: torch.dtype, device: torch.device) -> float:
    """The all-reduces of one forward with nothing else: y whole ([tokens, dim]), or in `chunks` pieces at once."""
    y = torch.zeros(tokens, dim, dtype=dtype, device=device)  # zeros: summing them again and again stays finite
    bounds = [tokens * i // chunks for i in range(chunks + 1)]

    def run():
        pending = [dist.all_reduce(y[a:b], async_op=True) for a, b in zip(bounds, bounds[1:])]
        for work in pending:
            work.wait()

    return timed(run, device)[0]


def sequence_collectives_alone(tokens: int, dim: int, world: int, dtype: torch.dtype, device: torch.device) -> float:
    """The sequence-parallel forward's collectives with nothing else: all-gather x, then reduce-scatter y."""
    mine = torch.zeros(tokens // world, dim, dtype=dtype, device=device)
    whole = torch.zeros(tokens, dim, dtype=dtype, device=device)

    def run():
        dist.all_gather_into_tensor(whole, mine)
        dist.reduce_scatter_tensor(mine, whole)

    return timed(run, device)[0]


def bench(reference, x: torch.Tensor, ranks, variants: Sequence[str], *, chunks: int,
          sm_carveout: int | None = None) -> list[Row]:
    """One GPU's forward (the post's module whole, on each rank's GPU), then each variant's, in this run. On GPUs,
    one GPU and the graphable variants are timed twice: as they are, and captured in a CUDA graph."""
    device = ranks.device
    on_gpu = device.type == "cuda"
    if not on_gpu:
        # As lesson.setup does for a compiled lesson: a CUDA build of torch without a GPU says so at each compile.
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    want = fp32_reference(reference, x)
    tokens, dim = x.numel() // x.shape[-1], x.shape[-1]
    whole = allreduce_alone(tokens, dim, 1, x.dtype, device)
    pieces = allreduce_alone(tokens, dim, chunks, x.dtype, device) if "overlap" in variants else None
    split = (sequence_collectives_alone(tokens, dim, ranks.world, x.dtype, device)
             if any(v in registry.SEQUENCE_SHARDED for v in variants) else None)
    one = "1 GPU" if on_gpu else "1 process"
    rows = [_row(one, reference, x, want, device, None)]  # the post's module, whole
    if on_gpu:
        rows.append(_row(f"{one}, CUDA graph", registry.GraphedForward(reference, x), x, want, device, None, "graph"))
    if any(v in registry.COMPILED for v in variants):
        rows.append(_row(f"{one}, compiled", torch.compile(reference), x, want, device, None, "compiled"))
    for variant in variants:
        for graph in (False, True) if on_gpu and variant in registry.GRAPHABLE else (False,):
            model = registry.build(variant, reference, x, ranks, chunks=chunks, cuda_graph=graph,
                                  sm_carveout=sm_carveout)
            collectives = pieces if variant == "overlap" else split if variant in registry.SEQUENCE_SHARDED else whole
            mine = registry.wanted_rows(want, variant, ranks.rank, ranks.world)
            way = "graph" if graph else "compiled" if variant in registry.COMPILED else "eager"
            rows.append(_row(registry.describe(variant, chunks, graph, sm_carveout), model, x, mine, device,
                             collectives, way))
            del model
            if on_gpu:
                torch.cuda.empty_cache()
    return rows


def _row(name: str, model, x: torch.Tensor, want: torch.Tensor, device: torch.device,
         allreduce_us: float | None, way: str = "eager") -> Row:
    with torch.no_grad():
        accuracy = check_output(model(x), want, x.dtype)

        def forward():
            return model(x)

        us, cpu_us = timed(forward, device)
    return Row(name, us, cpu_us, allreduce_us, None if accuracy.ok else accuracy.describe(), way)


def goal(sizes: Sequence[int], world: int, device: torch.device, dtype: torch.dtype) -> float | None:
    """The speed goal for this run, × one GPU, where there is one: 2 or 4 GPUs in bf16 at the post's or the 7B
    shape."""
    if device.type != "cuda" or dtype != torch.bfloat16:
        return None
    return SPEED_GOALS.get((tuple(sizes), world))


def headers(rows: Sequence[Row]) -> list[str]:
    one = rows[0].name  # "1 GPU" or "1 process"
    return ["variant", "µs per forward", f"× {one} run the same way", f"× {one} eager", "collectives alone µs",
            "CPU µs to issue"]


def baselines(rows: Sequence[Row]) -> dict[str, float]:
    """One GPU's µs per forward for each way it ran (the rows without collectives): eager, graph, compiled."""
    return {row.way: row.us for row in rows if row.allreduce_us is None}


def table(rows: Sequence[Row], title: str) -> Table:
    """The rows as a rich table: µs per forward, × one GPU run the same way and × one GPU eager, the collectives
    alone, the CPU's share."""
    base = baselines(rows)
    out = Table(title=title)
    names = headers(rows)
    out.add_column(names[0], no_wrap=True)  # a variant's name whole; the headers of the numbers fold instead
    for name in names[1:]:
        out.add_column(name, justify="right", overflow="fold")
    for row in rows:
        out.add_row(*_cells(row, base))
    return out


def markdown(rows: Sequence[Row], title: str) -> str:
    """The same table in Markdown, for docs/tensor-parallel.md."""
    base = baselines(rows)
    lines = [f"{title}\n", "| " + " | ".join(headers(rows)) + " |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += ["| " + " | ".join(_cells(row, base)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _cells(row: Row, base: dict[str, float]) -> list[str]:
    name = row.name + (f" (WRONG: {row.problem})" if row.problem else "")
    collectives = "-" if row.allreduce_us is None else f"{row.allreduce_us:,.1f}"
    same, eager = (f"{base[way] / row.us:.2f}" if way in base else "-" for way in (row.way, "eager"))
    return [name, f"{row.us:,.1f}", same, eager, collectives, f"{row.cpu_us:,.1f}"]


def goal_line(rows: Sequence[Row], target: float) -> str:
    """The speed goal against the fastest correct variant, like with like (× one GPU run the same way; a variant
    in a CUDA graph against one GPU in a CUDA graph): reported, never asserted."""
    base = baselines(rows)
    split = [r for r in rows if r.problem is None and r.allreduce_us is not None and r.way in base]
    best = max(split, key=lambda r: base[r.way] / r.us, default=None)
    if best is None:
        return f"goal: {target:.2f}× one GPU run the same way; no variant computed the right output"
    speedup = base[best.way] / best.us
    verdict = "reached" if speedup >= target else "not reached"
    return (f"goal: {target:.2f}× one GPU run the same way; best here {speedup:.2f}× ({best.name}, against "
            f"{best.way if best.way != 'graph' else 'a CUDA graph'} on one GPU): {verdict}")


def bench_and_report(script: str, args, ranks, console) -> bool:
    """Time the post's module on one GPU and each of `args.variant` on all ranks; rank 0 prints the table (and the
    speed goal where there is one) and writes it in Markdown beside the traces,
    `<batch>_<seq>_<dim>_<hidden>_tp<N>_<variants>[_carve<N>][_nccl<N>ch]_bench[_<dtype>][_cpu].md` (the variants
    joined by `+`, `all` for every one), so that runs of other variants keep their tables. Returns whether every
    output was right."""
    sizes = (args.batch, args.seq, args.dim, args.hidden)
    device, dtype = ranks.device, pick_dtype(args.dtype, ranks.device)
    knobs = ([f"carve{args.sm_carveout}"] if args.sm_carveout else []) + (
        [f"nccl{args.nccl_channels}ch"] if args.nccl_channels else [])
    names = ["all"] if set(args.variant) == set(registry.VARIANTS) else [
        f"{name.replace('-', '')}{args.chunks}" if name in ("overlap", "overlap-ce") else name for name in args.variant]
    parts = [*sizes, f"tp{ranks.world}", "+".join(names), *knobs, "bench"] + ([dtype_name(dtype)] if dtype != torch.bfloat16 else [])
    parts += [device.type] if device.type != "cuda" else []
    folder = writable_dir(Path(args.trace_dir) / Path(script).stem, "traces")
    path = writable_file(folder / ("_".join(map(str, parts)) + ".md"), "the timings")
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(device, dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)
    with console.status("timing each forward"):
        rows = bench(reference, x, ranks, args.variant, chunks=args.chunks, sm_carveout=args.sm_carveout)
    if ranks.leader:
        calls = GPU_CALLS if device.type == "cuda" else CPU_CALLS
        title = (f"forward µs, {args.batch}×{args.seq} tokens, {args.dim}→{args.hidden}, {ranks.world} ranks "
                 f"({ranks.backend}), {dtype_name(dtype)}, {describe_device(device)}: the slowest rank, median of "
                 f"{calls} calls")
        console.print()
        console.print(table(rows, title))
        target = goal(sizes, ranks.world, device, dtype)
        if target is not None:
            console.print(goal_line(rows, target))
        write_atomically(path, markdown(rows, title))
        console.print(f"timings: {path}")
    return all(row.problem is None for row in rows)
