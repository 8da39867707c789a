"""Lesson 07: decoding. The post's MLP at a few tokens per forward, forwards in a loop, and CUDA graphs.

Part 1 showed two regimes. At --size 64 the CPU's work to launch a kernel dwarfs the GPU's work to run it, and the
GPU idles: overhead-bound. Decoding a language model puts the MLP there. Each forward sees one new token per
sequence (8 tokens here: --batch 8 --seq 1), each of its kernels runs for a few µs, and generation issues forward
after forward in a loop. Each profiled step below is that loop: --forwards forwards (16) under one label.

Launched one kernel at a time, a forward costs the CPU the Python, the dispatcher and a launch call per kernel,
longer than the GPU needs to run them: the GPU runs a kernel, then waits for the next launch. Fewer kernels help
only if they cost the CPU less. A CUDA graph does: it records the forward's kernels once, with their arguments and
addresses, and each replay hands all of them to the GPU with one call, `cudaGraphLaunch`. The GPU then runs them
back to back, and the CPU's part of a forward is copying the new input into the graph's input buffer and one call.

    variant          the CPU's work per forward                          the GPU's kernels
    eager            Python, the dispatcher, a launch per kernel         gate, up, gelu, mul, down
    compile          Dynamo's guards, Inductor's wrapper, the launches   gate, up, gelu+mul, down
    reduce-overhead  guards, wrappers, graph trees' checks, 1 launch     compile's, from a CUDA graph
    graph            a copy into the graph's input buffer, 1 launch      eager's, from a CUDA graph
    fused            Triton's launcher, a cuBLAS call (lesson 05)        geglu GEMM, down
    fused-graph      a copy into the graph's input buffer, 1 launch      fused's, from a CUDA graph

(cuBLAS splits the down projection's K at a few tokens: a `splitK` GEMM and a `splitKreduce_kernel`.) Measured on an
H200 (benchmark_mlp.py --shapes decode, torch 2.11, bf16; µs per forward): eager 25.3 on the GPU, 70.4 in the loop;
compile 23.9 and 138.3; reduce-overhead 25.0 and 126.7; fused 17.7 and 82.7. The fused module is 1.43x eager on
the GPU and 0.85x in the loop, and reduce-overhead, CUDA graphs included, costs the CPU more per forward than
eager: its guards, wrappers and graph trees' bookkeeping run at every call. This lesson's trace shows where.

What to look for in the trace: launched one by one, the GPU lane is mostly empty, each kernel starting right after
its launch call. Replayed, each forward is one `cudaGraphLaunch` on the CPU lane and its kernels in a tight row on
the GPU lane, all sharing the launch's correlation id (`trace-report TRACE --graph_kernels` groups them by replay).
The loop is also timed without the profiler, which adds CPU time to every op it records: that time per forward,
against the GPU's busy time per forward in the trace, says who sets the pace.

    python3 07_decode_mlp.py                              # eager: 16 forwards per profiled step
    python3 07_decode_mlp.py --variant graph              # the same module captured in a CUDA graph, replayed
    python3 07_decode_mlp.py --variant reduce-overhead    # torch.compile's CUDA graphs (graph trees)
    python3 07_decode_mlp.py --variant fused-graph        # lesson 05's fused module, captured
    python3 07_decode_mlp.py --variant compile --device cpu --batch 2 --dim 64 --hidden 128   # no GPU: no graphs

The capture, as PyTorch's CUDA graphs notes write it (profiling_in_pytorch/mlp/graphs.py, `CapturedForward`):

    static_x = x.clone()                                  # the graph reads its input from here, every replay
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                         # warm up on a side stream: cuBLAS handles and
        for _ in range(3):                                # workspaces, Triton's compile and tuning happen here
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):                         # recorded, not run
        static_y = model(static_x)

    static_x.copy_(new_x); graph.replay()                 # each forward: static_y holds model(new_x)
"""

from trace_report.errors import UsageError, exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from trace_report.cli import DTYPE_NAMES, positive_int
from profiling_in_pytorch.device import pick_device
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP
from profiling_in_pytorch.mlp.fused import require_runnable as require_fused_runnable
from profiling_in_pytorch.mlp.graphs import CapturedForward, compiled_with_cuda_graphs, require_cuda_graphs
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch import checks as ex
from profiling_in_pytorch.checks import graphs as gx

LABEL = "decode_mlp"
DECODE_SIZES = {"batch": 8, "seq": 1, "dim": 768, "hidden": 3072}  # one new token for each of 8 sequences
FORWARDS = 16
VARIANTS = ("eager", "compile", "reduce-overhead", "graph", "fused", "fused-graph")
GRAPHED = ("reduce-overhead", "graph", "fused-graph")
FUSED = ("fused", "fused-graph")
FUSED_DTYPES = ("bf16", "fp16")
NAMES = {
    "eager": "SimpleGeGLUMLP", "compile": "SimpleGeGLUMLP, compiled",
    "reduce-overhead": "SimpleGeGLUMLP, compiled with CUDA graphs", "graph": "SimpleGeGLUMLP in a CUDA graph",
    "fused": "FusedGeGLUMLP", "fused-graph": "FusedGeGLUMLP in a CUDA graph",
}
NO_GRAPHS_ON_CPU = (
    "a CPU has no CUDA graphs: it runs each op as Python calls it, with no launch to save and no GPU to leave "
    "idle, so the loop's time is all CPU time. The graph variants (reduce-overhead, graph, fused-graph) need a GPU"
)


def require_valid(args):
    """The flags that do not go together, each one line (exit 2) before anything runs. --compile, the lessons'
    common flag, is --variant compile here."""
    if args.compile and args.variant not in ("eager", "compile"):
        raise UsageError(f"--compile is --variant compile here; --variant {args.variant} brings its own: drop one")
    if args.compile:
        args.variant = "compile"
    args.compile = args.variant in ("compile", "reduce-overhead")  # compiled by torch.compile: the file says so
    if args.variant in FUSED and args.dtype not in (None, *FUSED_DTYPES):
        raise UsageError(f"--variant {args.variant} runs its Triton kernels in bf16 or fp16, not {args.dtype}")


def expectations(args, device_type, loop):
    """What the loop's trace shows, per variant; `loop` holds the loop's timing once it is measured."""
    f = args.forwards
    checks = [ex.profiler_steps()]
    if device_type != "cuda":  # the ops stand in for kernels; what only a GPU shows is ✗, with that reason
        if args.variant == "compile":
            checks.append(ex.cpu_op_runs("TorchDynamo Cache Lookup", per_step=f))  # the guards, at every forward
        elif args.variant == "fused":
            checks.append(ex.kernel_matching(r"_geglu_gemm", f, text=f"the fused kernel once per forward ({f}× per step)"))
        else:
            checks.append(ex.cpu_op_runs("aten::linear", per_step=3 * f))
        return checks + [gx.loop_against_gpu(loop, f, gpu_bound=False)]
    if args.variant in GRAPHED:
        checks += [gx.one_graph_launch_per_forward(f), gx.replay_back_to_back()]
    if args.variant == "eager":
        checks.append(gx.kernels_per_forward(f, 5, text="gate, up, gelu, mul and down: 5 kernels per forward or more "
                                             "(split-K adds a reduce)"))
    elif args.variant == "compile":
        checks += [gx.kernels_per_forward(f, 4), gx.kernel_per_forward(r"^triton_poi_fused", f, text="Inductor's fused gelu and mul, once per forward")]
    elif args.variant in FUSED:
        checks.append(gx.kernel_per_forward(r"_geglu_gemm", f, text="the fused gate/up GEMM with the GeGLU, once per forward"))
    if args.variant in ("compile", "reduce-overhead"):
        checks.append(ex.cpu_op_runs("TorchDynamo Cache Lookup", per_step=f))  # Dynamo's guards run at every forward
    if args.variant == "reduce-overhead":
        checks.append(gx.cpu_time_breakdown(LABEL, f))  # why it costs the CPU more than eager
    if args.variant in ("eager", "compile", "fused"):
        checks += [gx.gpu_waits_between_kernels(f), ex.overhead_bound()]
    return checks + [gx.loop_against_gpu(loop, f, gpu_bound=args.variant in ("graph", "fused-graph"))]


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **DECODE_SIZES)
    parser.add_argument("--variant", choices=VARIANTS, default="eager",
                        help="eager (the post's module), compile, reduce-overhead (torch.compile's CUDA graphs), "
                        "graph (captured by hand), fused (lesson 05's module) or fused-graph (captured) (default: eager)")
    parser.add_argument("--forwards", type=positive_int, default=FORWARDS, metavar="N",
                        help=f"forwards per profiled step, issued back to back as generation does (default: {FORWARDS})")
    args = parser.parse_args(argv)
    require_valid(args)
    if args.variant in GRAPHED:
        require_cuda_graphs(pick_device(args.device))  # "CUDA graphs need a GPU": one line, before anything runs
    sizes = [args.batch, args.seq, args.dim, args.hidden]
    variant_tag = [] if args.variant in ("eager", "compile") else [args.variant]
    run = lesson.setup(__file__, args, label=f"{LABEL}: {NAMES[args.variant]}, {args.forwards} forwards per step",
                       tag=sizes + [f"{args.forwards}fwd"] + variant_tag,
                       dtypes=FUSED_DTYPES if args.variant in FUSED else DTYPE_NAMES)
    if run.device.type != "cuda":
        lesson.console.print(f"[yellow]note:[/yellow] {NO_GRAPHS_ON_CPU}.")
    if args.variant in FUSED:
        require_fused_runnable(*sizes, run.device)
    # The post's module, another module or a graph's buffers beside it, and the fp32 check: three forwards' worth.
    lesson.require_memory(run, 3 * forward_elements(*sizes) * 4, "the modules, the graph's buffers and the fp32 check")

    # The post's module and the decode step's input (one token per sequence), made once.
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    if args.variant == "compile":
        model = torch.compile(reference)
    elif args.variant == "reduce-overhead":
        model = compiled_with_cuda_graphs(reference)  # torch.compile(mode="reduce-overhead"), a new step per call
    elif args.variant == "graph":
        model = CapturedForward(reference, x)  # warm up on a side stream, capture once; each call copies x in, replays
    elif args.variant == "fused":
        model = FusedGeGLUMLP.from_module(reference)
    elif args.variant == "fused-graph":
        model = CapturedForward(FusedGeGLUMLP.from_module(reference), x)  # its warm-up tunes the Triton kernel
    else:
        model = reference
    outputs_agree = True
    if model is not reference:  # another path than the post's module: checked against fp32 first
        outputs_agree = lesson.check_output(NAMES[args.variant], model, reference, x)

    def step():
        with torch.no_grad(), record_function(LABEL):
            for _ in range(args.forwards):  # one forward per generated token, back to back, as a decode loop
                y = model(x)
        return y

    # Guess first, then look: what the loop's trace shows.
    loop = gx.LoopTime()
    expected = expectations(args, run.device.type, loop)
    lesson.announce(expected, run, compiled_already=True)
    step()  # compiles, records graph trees' graph, tunes Triton: none of it in the timing or the profile
    lesson.synchronize(run.device)

    # The loop without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)
    loop.per_forward_us = baseline.wall_us_per_step / args.forwards
    loop.cpu_us = baseline.cpu_issue_us_per_step / args.forwards
    lesson.console.print(f"per forward: {loop.per_forward_us:,.1f} µs in the loop, the CPU issuing one in "
                         f"{loop.cpu_us:,.1f} µs")

    # The profile, as the posts write it: five steps, the last three recorded, no synchronize inside.
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

    lesson.save(prof, run, baseline)  # traces/07_decode_mlp/<tag>.json and the op table beside it, <tag>.txt
    lesson.check(expected, run)
    fwd = [f"{args.forwards}fwd"]
    others = [lesson.trace_of(run, "07_decode_mlp", sizes + fwd, compiled=False)]
    if args.variant == "fused-graph":
        others.append(lesson.trace_of(run, "07_decode_mlp", sizes + fwd + ["fused"], compiled=False))
    lesson.next_steps(run, compare_with=others)
    return 0 if outputs_agree else 1  # the trace is written, but a module that computes something else fails


if __name__ == "__main__":
    raise SystemExit(main())
