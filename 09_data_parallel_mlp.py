"""Lesson 09: a training step on N GPUs, data parallel. DDP's gradient all-reduces and FSDP2's all-gathers and
reduce-scatters, and how much of them the backward hides.

Lesson 08 split one layer over the GPUs. The multi-GPU question most training brings is another: every rank holds
the whole model (or a shard of it), trains on its own batch, and the gradients are summed over the ranks before the
optimizer step. The communication is per step, the size of the weights, and it should run while the backward still
computes. The model is the post's MLP stacked `--layers` times with residuals (x = x + mlp(x)), or a transformers
preset built from its config (`--model tiny-llama`, nothing downloaded).

    --strategy ddp    DistributedDataParallel. Every rank keeps all the weights. The backward writes gradients into
                      buckets of about `--bucket_mb` MB (the last layers' first); a bucket is all-reduced, on NCCL's
                      own stream, as soon as its last gradient is written, while autograd goes on with the layers
                      before it. Only the last bucket (the first layer's weights) has nothing left to hide behind.
    --strategy fsdp   FSDP2, `fully_shard` on each layer (a unit) and on the root. Every rank keeps 1/N of each
                      weight. Before a unit's forward its weights are all-gathered (the next unit's while this one
                      computes), freed after it, all-gathered again before its backward (`--no_reshard` keeps them
                      instead: fewer all-gathers, more memory), and its gradients reduce-scattered after it: each
                      rank gets the sum of its own shard.

The step, as the lesson profiles it (ranges `dp_fwd`, `dp_bwd`, `optimizer_step`):

    model = DistributedDataParallel(model, device_ids=[rank], bucket_cap_mb=25)   # or fully_shard(layer) each
    optimizer = torch.optim.AdamW(model.parameters())

    def step():
        optimizer.zero_grad(set_to_none=True)
        with record_function("dp_fwd"):
            loss = F.mse_loss(model(x), target)
        with record_function("dp_bwd"):
            loss.backward()        # DDP's all-reduces (FSDP2's reduce-scatters) start in here
        with record_function("optimizer_step"):
            optimizer.step()       # on every rank the same update of the summed gradients (FSDP2: of its shard)

What to look for, per step of each rank's trace: on GPUs, NCCL kernels (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL`,
`..._AllGather_...`, `..._ReduceScatter_...`) on their own stream beside the backward's GEMMs; DDP's all-reduces
are issued from autograd's thread, under `autograd::engine::evaluate_function: torch::autograd::AccumulateGrad`,
the hook of a bucket's last gradient; FSDP2 names its units in its ranges, `FSDP::all_gather (layers.0)`,
`FSDP::post_backward_reduce (layers.0)`, and trace-report gives each collective its unit (DDP's buckets by the
order the reducer issues them: bucket 0 holds the last layer's gradients). On CPUs, gloo runs each collective on one
of its own threads, under `gloo:all_reduce` or `gloo:all_gather`; it has no reduce-scatter of its own and runs
FSDP2's as an all-reduce (the issuing op, `c10d::_reduce_scatter_base_`, says what was asked). A CPU shows the
counts, the order and which phase issued each collective; its times are gloo's loopback network, not NVLink's.

    torchrun --nproc-per-node 2 09_data_parallel_mlp.py                                  # DDP, the post's shape
    torchrun --nproc-per-node 2 09_data_parallel_mlp.py --strategy fsdp
    torchrun --nproc-per-node 4 09_data_parallel_mlp.py --strategy all --bench --batch 16 --seq 512 --dim 4096 --hidden 11008
    torchrun --nproc-per-node 2 09_data_parallel_mlp.py --model tiny-llama --strategy all
    torchrun --nproc-per-node 2 09_data_parallel_mlp.py --device cpu --batch 2 --seq 4 --dim 16 --hidden 32 --strategy all

(`python3 -m torch.distributed.run` where `torchrun` is not on PATH.) Each rank writes its own trace,
`traces/09_data_parallel_mlp/<tag>_rank<r>.json`; rank 0 prints, checks and reads all ranks' traces together.
"""

from trace_report.errors import UsageError, exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import argparse

import torch
import torch.distributed as dist
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from trace_report.cli import positive_int, positive_number
from profiling_in_pytorch.device import pick_dtype
from profiling_in_pytorch.mlp import POST_SIZES
from profiling_in_pytorch.model.presets import PRESETS
from profiling_in_pytorch.parallel import data, runs
from profiling_in_pytorch.parallel.launch import leaves_at_once, one_voice, parse_on_every_rank, process_group
from profiling_in_pytorch.parallel.launch import require_torchrun
from trace_report import attribution
from trace_report import ranks as rank_traces
from profiling_in_pytorch import checks as ex

FORWARD, BACKWARD, OPTIMIZER = "dp_fwd", "dp_bwd", "optimizer_step"
DEFAULT_LAYERS, DEFAULT_BUCKET_MB = 4, 25.0  # 25 MB: DDP's own default bucket size
EXPOSED_MARGIN = 0.15  # beyond the collectives nothing can hide: the ranks' skew, collectives of unequal size


def strategies_flag(text):
    """`ddp`, `fsdp`, `ddp,fsdp` or `all`: the strategies to profile, in the order given."""
    names = list(data.STRATEGIES) if text == "all" else [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in data.STRATEGIES]
    if unknown or not names:
        bad = unknown[0] if unknown else text
        raise argparse.ArgumentTypeError(f"unknown strategy {bad!r}: use {', '.join(data.STRATEGIES)} or all")
    return tuple(dict.fromkeys(names))


def require_valid(args, ranks):
    """The flags that do not go together here, each one line (exit 2), before anything is built."""
    if args.compile:
        raise UsageError("this lesson runs the training step eagerly: drop --compile")
    if args.no_reshard and "fsdp" not in args.strategy:
        raise UsageError("--no_reshard keeps FSDP2's gathered weights from the forward to the backward: add "
                         "--strategy fsdp")


def build_workload(args, device, dtype, rank) -> data.Workload:
    """The model and this rank's batch: the same weights on every rank (seed 0), each rank its own batch (seed
    1 + rank), as a data loader would give it."""
    torch.manual_seed(0)
    if args.model == data.MLP:
        return data.mlp_workload(args.batch, args.seq, args.dim, args.hidden, args.layers, device, dtype,
                                 batch_seed=1 + rank)
    return data.preset_workload(args.model, args.batch, args.seq, device, dtype, batch_seed=1 + rank)


def model_tag(args):
    """The model's part of the file names: the stacked MLP's sizes and layers, or the preset and its batch."""
    if args.model == data.MLP:
        return [args.batch, args.seq, args.dim, args.hidden, f"L{args.layers}"]
    return [args.model, args.batch, args.seq]


def file_tag(args, strategy, world):
    """The trace's name: the model, the world size, the strategy and what changes its trace."""
    how = [f"b{args.bucket_mb:g}mb"] if strategy == "ddp" else ["noreshard"] if args.no_reshard else []
    return [*model_tag(args), f"dp{world}", strategy, *how]


def expectations(strategy, args, model):
    """What each strategy's trace shows on every rank (read by trace_report/attribution.py)."""
    checks = [ex.profiler_steps(), ex.labels_per_step(FORWARD, BACKWARD, OPTIMIZER)]
    if strategy == "ddp":
        buckets = data.ddp_buckets(model)
        if buckets:
            n = len(buckets)
            sizes = ", ".join(f"{b / 2**20:,.2f}" for b in buckets[:6]) + (", ..." if n > 6 else "")
            # DDP also broadcasts rank 0's buffers before each forward (broadcast_buffers=True, its default): a
            # transformers model's rotary frequencies; the stacked MLP has none.
            buffers = {"Broadcast": 1} if any(True for _ in model.module.buffers()) else {}
            checks.append(ex.collectives_by_kind({"AllReduce": n, **buffers}, why=f"one all-reduce per gradient "
                                                 f"bucket: DDP's reducer holds {n}, of {sizes} MB, for --bucket_mb "
                                                 f"{args.bucket_mb:g}" + ("; one broadcast of the buffers, before the "
                                                                          "forward" if buffers else "")))
            if n > 1:
                checks += [
                    ex.collectives_start_in_backward(BACKWARD, "AllReduce", n - 1, why="a bucket is all-reduced once "
                                                     "its last gradient is written; only the last bucket comes at "
                                                     "the end"),
                    ex.exposed_share_at_most(min(1.0, 1 / n + EXPOSED_MARGIN), what="all-reduce",
                                             why=f"only the last of {n} buckets has no backward left beside it"),
                ]
            else:
                checks.append(ex.exposed_share_at_least(0.9, why="one bucket: its all-reduce starts once the whole "
                                                        "backward is done, and nothing is left to hide it"))
    else:
        counts = data.fsdp_collectives(model, reshard_after_forward=not args.no_reshard)
        units = len(data.units(model))
        again = "once" if args.no_reshard else "twice (forward, then backward: resharded after the forward)"
        checks.append(ex.collectives_by_kind(counts, why=f"{units} units: each all-gathered {again}, each gradient "
                                             "reduce-scattered once" + (", and the root's, gathered once" if
                                                                        data.root_keeps_parameters(model) else "")))
        checks += [] if counts["ReduceScatter"] < 2 else [
            ex.collectives_start_in_backward(BACKWARD, "ReduceScatter", counts["ReduceScatter"] - 1,
                                             why="a unit's gradients are reduce-scattered once its backward is done, "
                                             "while the units before it compute theirs"),
            ex.exposed_share_at_most(min(1.0, 2 / sum(counts.values()) + EXPOSED_MARGIN),
                                     what="all-gather and reduce-scatter",
                                     why="FSDP2 prefetches the next unit's all-gather; only the first all-gather and "
                                     "the last reduce-scatter have nothing beside them"),
        ]
    return checks


def profile_strategy(strategy, args, ranks):
    """One strategy on this rank: the model wrapped, warmed, profiled, its trace written; rank 0 checks and reads
    every rank's trace."""
    name = {"ddp": f"DDP, buckets of {args.bucket_mb:g} MB", "fsdp": "FSDP2" + (", no reshard" if args.no_reshard
                                                                               else "")}[strategy]
    run = runs.rank_run(__file__, args, strategy, ranks, label=f"{FORWARD}, {BACKWARD}, {OPTIMIZER} · {name} · "
                        f"{ranks.describe()}", tag=file_tag(args, strategy, ranks.world))
    work = build_workload(args, run.device, run.dtype, ranks.rank)
    params = sum(p.numel() for p in work.model.parameters())
    # Weights, gradients and AdamW's two moments, and the activations of a few layers: a floor, not the peak.
    lesson.require_memory(run, 4 * params * run.dtype.itemsize, "the weights, their gradients and AdamW's state")
    lesson.console.print(f"model: {work.what}, {params:,} parameters; {work.tokens:,} tokens per rank")
    model = data.wrap(work.model, strategy, ranks, bucket_mb=args.bucket_mb,
                      reshard_after_forward=not args.no_reshard)
    optimizer = torch.optim.AdamW(model.parameters())

    def step():
        optimizer.zero_grad(set_to_none=True)
        with record_function(FORWARD):
            loss = work.loss(model)
        with record_function(BACKWARD):
            loss.backward()
        with record_function(OPTIMIZER):
            optimizer.step()

    # Two steps first: DDP rebuilds its buckets in the order the first backward wrote the gradients, AdamW makes
    # its state, NCCL its communicators.
    for _ in range(2):
        step()
    lesson.synchronize(run.device)

    # Guess first, then look.
    expected = expectations(strategy, args, model)
    lesson.announce(expected, run, compiled_already=True)

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run, barrier=dist.barrier)  # every rank, in step

    # The profile, as the post writes it: five steps, the last three recorded, no synchronize inside.
    with profile(
        activities=run.activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
    ) as prof:
        for _ in range(5):
            step()
            prof.step()
    lesson.synchronize(run.device)

    lesson.save(prof, run, baseline)  # traces/09_data_parallel_mlp/<tag>_rank<r>.json, on every rank
    dist.barrier()  # every rank's trace is written before rank 0 reads them all
    if ranks.leader:
        every_rank = runs.every_rank(run, ranks.rank, ranks.world)
        lesson.check(expected, run)
        read = rank_traces.read_ranks(every_rank, parallel=False)  # small traces: one process is quicker
        rank_traces.print_ranks(read, lesson.console)
        attribution.print_owners(read, lesson.console)
        lesson.next_steps(run, ranks=every_rank)


@leaves_at_once
@exits_cleanly
@one_voice
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument("--strategy", type=strategies_flag, default=("ddp",), metavar="NAME[,NAME...]",
                        help="ddp, fsdp, both separated by a comma, or all (default: ddp)")
    parser.add_argument("--model", type=data.model_flag, default=data.MLP, metavar="NAME",
                        help=f"{data.MLP} (the post's MLP stacked --layers times) or a transformers preset built from "
                        f"its config: {', '.join(PRESETS)} (default: {data.MLP})")
    parser.add_argument("--layers", type=positive_int, default=DEFAULT_LAYERS, metavar="N",
                        help=f"with --model mlp: the MLPs stacked, each an FSDP2 unit (default: {DEFAULT_LAYERS})")
    parser.add_argument("--bucket_mb", type=positive_number, default=DEFAULT_BUCKET_MB, metavar="MB",
                        help=f"DDP's gradient bucket size, bucket_cap_mb (default: {DEFAULT_BUCKET_MB:g}, DDP's own)")
    parser.add_argument("--no_reshard", action="store_true",
                        help="FSDP2 with reshard_after_forward=False: the weights stay gathered for the backward")
    parser.add_argument("--bench", action="store_true",
                        help="after the profiles, time the training step on one GPU against N, in this run")
    args = parse_on_every_rank(parser, argv)
    require_torchrun(__file__, argv)

    # torchrun started one process per rank: join them (NCCL between GPUs, gloo between CPU processes).
    with process_group(args.device) as ranks:
        require_valid(args, ranks)
        for strategy in args.strategy:
            profile_strategy(strategy, args, ranks)
        if args.bench:
            # Outside the profiles: one GPU's training step against each strategy's, timed in this run on every rank.
            dtype = pick_dtype(args.dtype, ranks.device)
            data.bench_and_report(__file__, args, ranks, lesson.console,
                                  lambda: build_workload(args, ranks.device, dtype, ranks.rank),
                                  model_tag(args), _what(args), dtype)
    return 0


def _what(args) -> str:
    if args.model == data.MLP:
        return f"the post's MLP ×{args.layers}, {args.batch}×{args.seq} tokens, {args.dim}→{args.hidden}"
    return f"{args.model}, {args.batch}×{args.seq} tokens"


if __name__ == "__main__":
    raise SystemExit(main())
