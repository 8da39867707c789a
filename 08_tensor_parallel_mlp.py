"""Lesson 08: the post's MLP split over N GPUs, tensor parallel. Gate and up by columns, down by rows, one all-reduce.

Megatron's split of a GeGLU MLP. Each rank keeps hidden/N of the hidden features: its rows of gate_proj's and
up_proj's weights (column-parallel: it computes its slice of g, u, h and m, and since GELU and the product act
feature by feature, nothing is exchanged) and the same columns of down_proj's weight (row-parallel: its
`m_r @ W_down[:, r]ᵀ` is a partial sum of y). One all-reduce adds the N partial sums, and every rank holds y.
Per rank and forward: the three GEMMs at 1/N of the FLOPs, GELU and mul on 1/N of the elements, and the all-reduce
of y, [tokens, dim] (12.6 MB at the post's shape in bf16, as large as x).

Nine ways to run it, `--variant` (several at once: `--variant plain,overlap`, or `all`):

    dtensor           PyTorch's tensor-parallel API: the post's module, parallelize_module(mlp, mesh, plan) with
                      {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(), "down_proj": RowwiseParallel()}
    dtensor-compile   the same under torch.compile
    plain             plain tensors: each rank's slices as three nn.Linear, and one dist.all_reduce
    one-shot          plain's GEMMs, down_proj writing into symmetric memory, and the all-reduce as one kernel that
                      reads every peer's partial sums over NVLink and adds them (torch.ops.symm_mem.one_shot_all_reduce;
                      GPUs only): at the post's shape the 12.6 MB all-reduce is latency-bound, and this is its shortest path
    overlap           the tokens in --chunks pieces: chunk i's all-reduce runs (async_op=True, on NCCL's own stream)
                      while chunk i+1 computes; only the last one has nothing left to hide behind
    overlap-ce        the all-reduce without NCCL or SMs (GPUs only): a reduce-scatter and an all-gather of copy-engine
                      pulls from the peers' symmetric memory, beside down_proj's GEMMs. The tokens are split in one
                      block per rank and each block in --chunks pieces; each rank runs down_proj on the other ranks'
                      blocks first, piece by piece, pulling their partial sums of its own block as they finish, then
                      on its own block on top of those sums, each piece pulled by the peers while the next computes
    seqpar            Megatron's sequence parallelism: each rank holds its slice of the tokens; all_gather_into_tensor
                      of x, the same GEMMs, reduce_scatter_tensor of y (each rank keeps its tokens' rows of y)
    async-tp          the same through PyTorch's symmetric memory (GPUs only): torch.ops.symm_mem's
                      fused_all_gather_matmul (gate and up) and fused_matmul_reduce_scatter (down), the transfers
                      pipelined shard by shard on the copy engine, beside the matmuls
    async-tp-compile  seqpar in functional collectives under torch.compile with Inductor's micro-pipeline TP pass
                      (`_micro_pipeline_tp`), which writes the same fused ops itself (GPUs only)

Two knobs for sharing the SMs between GEMMs and NCCL: `--sm_carveout N` makes overlap's GEMMs that run beside an
all-reduce (gate and up of every chunk but the first) leave N SMs free, `--nccl_channels N` runs NCCL on N
channels, one thread block (one SM) each (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS = N). Without them, NCCL's blocks
take SMs from a GEMM whose grid wants them all: on 2 H100s at the 7B shape the gate GEMM beside an all-reduce ran
166-169 µs instead of 123-131, about 40 µs for the 105 µs it hid (docs/tensor-parallel.md has what the knobs did).

The plain variant, one rank's forward (ShardedGeGLUMLP in profiling_in_pytorch/parallel/sharded.py, whose weights
are the post's module's, sliced; a test keeps this copy identical):

    def forward(self, x):
        g = self.gate_proj(x)
        u = self.up_proj(x)
        h = F.gelu(g, approximate="tanh")
        m = h * u
        y = self.down_proj(m)  # this rank's partial sum: its hidden features' share of every output
        dist.all_reduce(y, group=self.group)  # y summed over the ranks, in place, on every rank
        return y

What to look for, per step of each rank's trace under `tp_mlp_fwd`: on GPUs one NCCL kernel per all-reduce,
`ncclDevKernel_AllReduce_Sum_bf16_RING_LL` (its name says the collective, the op, the dtype, the algorithm and the
protocol); on CPUs no kernel: gloo runs it on its own thread, under `gloo:all_reduce`. DTensor's trace shows why it
loses at the post's shape: its CPU time per step (tensor-subclass dispatch in Python, redistribution) is several
times the GPU's, and nothing overlaps the all-reduce. The overlapped variant's all-reduces run beside the next chunk's
GEMMs. seqpar shows an all-gather before the GEMMs and a reduce-scatter after them (`ncclDevKernel_AllGather_...`,
`ncclDevKernel_ReduceScatter_Sum_bf16_...`), the same bytes as the one all-reduce; async-tp shows no NCCL kernel at
all: `Memcpy PtoP` copies from the peer GPU's buffer on a second stream beside the matmuls, inside the record
functions `fused_all_gather_matmul` and `fused_matmul_reduce_scatter` (docs/tensor-parallel.md has the H100 figures).
overlap-ce shows no NCCL kernel either: beside each down_proj piece a `wait_signal_kernel` and a `Memcpy PtoP` on a
second stream. It is the overlapped variant that beats plain, in a CUDA graph: on 2 H100s at the 7B shape 1,892-1,913
µs (1.85-1.86× one GPU) against plain's 2,018-2,026 (1.74-1.76×); eagerly its ~70 calls a forward can make the CPU
the bottleneck, and at the post's shape its pieces are too small for the copies' latency.
Measured on 2 H200s (NVLink, NCCL 2.28.9, torch 2.11, bf16), forward µs:

    shape                      1 GPU   DTensor        compiled DTensor   plain + all_reduce   all-reduce alone
    post 64×128, 768→3072        241   770 (0.31×)    194 (1.24×)        193 (1.25×)          72
    7B 16×512, 4096→11008      3,442   1,886 (1.82×)  1,844 (1.87×)      1,998 (1.72×)        305

    torchrun --nproc-per-node 2 08_tensor_parallel_mlp.py                          # DTensor, the post's shape
    torchrun --nproc-per-node 2 08_tensor_parallel_mlp.py --variant overlap --chunks 4 --cuda_graph
    torchrun --nproc-per-node 2 08_tensor_parallel_mlp.py --variant plain,overlap-ce --cuda_graph --bench
    torchrun --nproc-per-node 2 08_tensor_parallel_mlp.py --variant all --bench    # every trace, then the timings
    torchrun --nproc-per-node 2 08_tensor_parallel_mlp.py --variant overlap --sm_carveout 16 --nccl_channels 16
    torchrun --nproc-per-node 2 08_tensor_parallel_mlp.py --device cpu --batch 2 --seq 4 --dim 16 --hidden 32

(`python3 -m torch.distributed.run` where `torchrun` is not on PATH.) Each rank writes its own trace,
`traces/08_tensor_parallel_mlp/<tag>_rank<r>.json`; rank 0 prints, checks and reads all ranks' traces together.
"""

from trace_report.errors import UsageError, exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import argparse

import torch
import torch.distributed as dist
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from trace_report.cli import positive_int
from profiling_in_pytorch.mlp import POST_SIZES, SimpleGeGLUMLP
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch.parallel import runs, timing
from profiling_in_pytorch.parallel.launch import leaves_at_once, one_voice, parse_on_every_rank, process_group
from profiling_in_pytorch.parallel.launch import require_torchrun
from profiling_in_pytorch.parallel.sharded import DEFAULT_CHUNKS
from profiling_in_pytorch.parallel.variants import GPU_ONLY, GRAPHABLE, SEQUENCE_SHARDED, VARIANTS, TokenSlice, build
from profiling_in_pytorch.parallel.variants import describe, require_shardable
from trace_report import ranks as rank_traces
from profiling_in_pytorch import checks as ex

LABEL = "tp_mlp_fwd"
EXPOSED_MARGIN = 0.15  # beyond the last chunk's share: its start waits for the slower rank, chunks are not all equal
CE_SMALL_PIECES = ("each piece's pull is a wait for a signal and a copy on one stream, ~20 µs a piece in a CUDA graph "
                   "on 2 H100s: where the pieces' GEMMs are shorter (7 µs at the post's shape), the pulls fall behind "
                   "and the last ones have nothing beside them; at the 7B shape (60 µs GEMMs) they keep up")
ASYNC_TP_EXPOSED = 0.5  # the guess; 2 H100s: 78% (7B, compiled), 98% (post's shape), barriers waiting for a late rank


def variants_flag(text):
    """`dtensor`, `plain,overlap` or `all`: the variants to profile, in the order given."""
    names = list(VARIANTS) if text == "all" else [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown or not names:
        bad = unknown[0] if unknown else text
        raise argparse.ArgumentTypeError(f"unknown variant {bad!r}: use {', '.join(VARIANTS)} or all")
    return tuple(dict.fromkeys(names))


def require_valid(args, ranks):
    """The flags that do not go together here, each one line (exit 2), before anything is built."""
    if args.compile:
        raise UsageError("this lesson compiles DTensor's forward as --variant dtensor-compile: drop --compile")
    if args.cuda_graph and any(v not in GRAPHABLE for v in args.variant):
        raise UsageError(f"--cuda_graph captures the {' or '.join(GRAPHABLE)} variant: name only those in --variant")
    if args.cuda_graph and ranks.device.type != "cuda":
        raise UsageError("--cuda_graph captures a forward in a CUDA graph: it needs GPUs")
    if args.variant == VARIANTS and ranks.device.type != "cuda":  # `all` on a CPU: those that run on one
        args.variant = tuple(v for v in VARIANTS if v not in GPU_ONLY)
        lesson.console.print(f"--variant all on a CPU: {', '.join(GPU_ONLY)} need GPUs, left out")
    gpu_only = [v for v in args.variant if v in GPU_ONLY]
    if gpu_only and ranks.device.type != "cuda":
        raise UsageError(f"--variant {gpu_only[0]} runs on PyTorch's symmetric memory between GPUs: it needs GPUs "
                         "(plain and seqpar are the same splits through gloo on a CPU)")
    if (args.sm_carveout or args.nccl_channels) and ranks.device.type != "cuda":
        raise UsageError("--sm_carveout and --nccl_channels share a GPU's SMs between GEMMs and NCCL: they need GPUs")
    if args.sm_carveout and "overlap" not in args.variant:
        raise UsageError("--sm_carveout frees SMs beside overlap's all-reduces: add overlap to --variant")
    if args.sm_carveout is not None and not hasattr(torch._C, "_set_sm_carveout_experimental"):
        raise UsageError(f"--sm_carveout needs torch._C._set_sm_carveout_experimental, which torch {torch.__version__} "
                         "lacks")
    require_shardable(args.hidden, ranks.world, args.batch * args.seq, args.chunks, args.variant)
    if "dtensor-compile" in args.variant and ranks.device.type == "cpu":  # compiled in the profile and the timings
        lesson.require_cpp_compiler()


def expectations(variant, args, eager_dtensor_trace, on_gpu, plain_trace):
    """What each variant's trace shows on every rank (read by trace_report/communication.py)."""
    checks = [ex.profiler_steps()]
    if variant == "seqpar":
        # gloo has no reduce-scatter of its own: it all-reduces the whole of y and each rank keeps its rows.
        scatter, how = ("ReduceScatter", "each rank keeping its tokens' sums") if on_gpu else (
            "AllReduce", "gloo runs reduce_scatter_tensor as an all-reduce of all of y, each rank keeping its rows")
        checks += [
            ex.collectives_per_step(1, "AllGather", why="x's token slices, gathered before gate and up",
                                    others_ok=True),
            ex.collectives_per_step(1, scatter, why=f"down_proj's partial sums, {how}", others_ok=True),
            ex.exposed_share_at_least(0.9, why="the gather comes before all the compute, the scatter after it",
                                      what="all-gather and reduce-scatter"),
        ]
    elif variant in ("async-tp", "async-tp-compile"):
        checks += [
            ex.no_nccl_kernel(why="symmetric memory: the GPUs read each other's buffers, no NCCL"),
            ex.exposed_share_at_most(ASYNC_TP_EXPOSED, what="transfer", why="each shard's copy runs beside the "
                                     "matmul of the shard before it; the first shard and the last sum wait"),
        ]
    elif variant == "one-shot":
        checks += [
            ex.no_nccl_kernel(why="the GPUs read each other's partial sums from symmetric memory, no NCCL"),
            ex.kernel_matching("one_shot_all_reduce", 1, text="one one-shot all-reduce kernel per step: a barrier, "
                               "then every peer's partial sums read and added"),
        ]
    elif variant == "overlap-ce":
        checks += [ex.no_nccl_kernel(why="the copy engine pulls from the peers' symmetric memory; signal kernels say "
                                     "when a block is ready")]
        world = dist.get_world_size()
        if not args.cuda_graph:  # eagerly each copy is launched inside a record function named for its collective
            checks += [
                ex.collectives_per_step(args.chunks * (world - 1), "ReduceScatter", others_ok=True,
                                        why=f"a pull per piece of each peer's partial sums of this rank's block: "
                                        f"{args.chunks} × {world - 1}"),
                ex.collectives_per_step(args.chunks * world, "AllGather", others_ok=True,
                                        why=f"per piece of the own block's down GEMM, a pull from each peer and the "
                                        f"copy of its own rows: {args.chunks} × {world}"),
            ]
        else:  # a graph's replay launches the copies from cudaGraphLaunch: PeerCopy. Exposure is judged here only:
            # eagerly the CPU can set the pace, each signal, wait and copy a Python call (docs/tensor-parallel.md)
            checks += [
                ex.collectives_per_step(2 * args.chunks * (world - 1), "PeerCopy", others_ok=True,
                                        why="a graph's replay names no collective: per piece, a pull of each peer's "
                                        "partial sums, then one of its finished rows"),
                ex.less_exposed_than(plain_trace, "plain's all-reduce (--variant plain --cuda_graph)",
                                     unless=CE_SMALL_PIECES),
            ]
    elif variant == "overlap":
        chunks, limit = args.chunks, min(1.0, 1 / args.chunks + EXPOSED_MARGIN)
        checks += [
            ex.collectives_per_step(chunks, why=f"one per chunk of ~{args.batch * args.seq // chunks} tokens"),
            ex.exposed_share_at_most(limit, why=f"only the last of {chunks} chunks' all-reduce has no compute left "
                                     f"beside it: 1/{chunks} of their time, and {EXPOSED_MARGIN:.0%} of room"),
        ]
    else:
        checks += [
            ex.collectives_per_step(1, why="down_proj's partial sums of y, added once"),
            ex.exposed_share_at_least(0.9, why="y is summed after all the compute: nothing runs beside it"),
        ]
    if variant == "dtensor":
        checks.append(ex.cpu_time_exceeds_gpu_time())
    if variant == "dtensor-compile":
        checks.append(ex.less_cpu_than(eager_dtensor_trace, "eager DTensor (--variant dtensor)"))
    return checks


def profile_variant(variant, args, ranks):
    """One variant on this rank: built from the post's module, checked, profiled, its trace written and read.
    Returns whether its output matched the single-process module's."""
    name = describe(variant, args.chunks, args.cuda_graph, args.sm_carveout)
    run = runs.rank_run(__file__, args, variant, ranks, label=f"{LABEL} · {name} · {ranks.describe()}")

    # The post's module, whole, on every rank (same seed, same weights), and its input; the variant keeps this
    # rank's slices of the weights. The module, its fp32 check and this rank's part: about three forwards' worth.
    sizes = (args.batch, args.seq, args.dim, args.hidden)
    lesson.require_memory(run, 3 * forward_elements(*sizes) * 4, "the module, its fp32 check and this rank's part")
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    model = build(variant, reference, x, ranks, chunks=args.chunks, cuda_graph=args.cuda_graph,
                  sm_carveout=args.sm_carveout)
    # Every rank's y against the single-process module's (judged in fp32), before profiling; a sequence-parallel
    # rank's rows of y against the same rows of the module's.
    if variant in SEQUENCE_SHARDED:
        reference_output = TokenSlice(reference, variant, ranks.rank, ranks.world)
    else:
        reference_output = reference
    outputs_agree = lesson.check_output(name, model, reference_output, x)

    def step():
        with torch.no_grad(), record_function(LABEL):
            return model(x)

    # Guess first, then look.
    expected = expectations(variant, args, runs.other_variant(run, __file__, args, "dtensor", ranks),
                            on_gpu=run.device.type == "cuda",
                            plain_trace=runs.other_variant(run, __file__, args, "plain", ranks))
    lesson.announce(expected, run, compiled_already=True)
    step()  # compiled, captured and warm before the profile
    lesson.synchronize(run.device)

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

    lesson.save(prof, run, baseline)  # traces/08_tensor_parallel_mlp/<tag>_rank<r>.json, on every rank
    dist.barrier()  # every rank's trace is written before rank 0 reads them all
    if ranks.leader:
        every_rank = runs.every_rank(run, ranks.rank, ranks.world)
        lesson.check(expected, run)
        rank_traces.print_ranks(rank_traces.read_ranks(every_rank, parallel=False), lesson.console)
        other = runs.other_variant(run, __file__, args, "dtensor" if variant == "plain" else "plain", ranks)
        lesson.next_steps(run, compare_with=[other], ranks=every_rank)
    return outputs_agree


@leaves_at_once
@exits_cleanly
@one_voice
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument("--variant", type=variants_flag, default=("dtensor",), metavar="NAME[,NAME...]",
                        help=f"{', '.join(VARIANTS)}, several separated by commas, or all (default: dtensor)")
    parser.add_argument("--chunks", type=positive_int, default=DEFAULT_CHUNKS,
                        help=f"with overlap: the token chunks, one all-reduce each; with overlap-ce: the pieces of "
                        f"each rank's own down GEMM, pulled by the peers one by one (default: {DEFAULT_CHUNKS})")
    parser.add_argument("--cuda_graph", action="store_true",
                        help=f"capture the {', '.join(GRAPHABLE)} forward in a CUDA graph, replayed each step (GPUs "
                        "only)")
    parser.add_argument("--sm_carveout", type=positive_int, default=None, metavar="SMS",
                        help="overlap's GEMMs beside an all-reduce leave this many SMs free for NCCL (PyTorch's "
                        "experimental SM carveout; GPUs only)")
    parser.add_argument("--nccl_channels", type=positive_int, default=None, metavar="N",
                        help="NCCL runs on N channels, one SM each (NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS=N; GPUs "
                        "only)")
    parser.add_argument("--bench", action="store_true",
                        help="after the profiles, time each variant's forward against one GPU's, in this run")
    args = parse_on_every_rank(parser, argv)
    require_torchrun(__file__, argv)

    # torchrun started one process per rank: join them (NCCL between GPUs, gloo between CPU processes).
    with process_group(args.device, nccl_channels=args.nccl_channels) as ranks:
        require_valid(args, ranks)
        outputs_agree = all([profile_variant(variant, args, ranks) for variant in args.variant])
        if args.bench:
            # Outside the profiles: each variant's forward against one GPU's, timed in this run on every rank.
            outputs_agree &= timing.bench_and_report(__file__, args, ranks, lesson.console)
    return 0 if outputs_agree else 1  # the traces are written, but a variant that computes something else fails


if __name__ == "__main__":
    raise SystemExit(main())
