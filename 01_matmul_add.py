"""Lesson 1 (Part 1): `torch.add(torch.matmul(x, w), b)`, two ops, two kernels.

Part 1 starts from the smallest thing that does real work: a matmul, then an add, as two PyTorch calls on
three (size, size) tensors. Eagerly, each call is its own kernel launch: a GEMM, then an elementwise add
that reads the GEMM's output back from memory.

    uv run 01_matmul_add.py                         # size 64: the CPU's launch work dwarfs the GPU's
    uv run 01_matmul_add.py --size 4096             # the GEMM dominates: the CPU runs ahead of the GPU
    uv run 01_matmul_add.py --size 4096 --warmup    # three calls first: the cold first step is gone
    uv run 01_matmul_add.py --size 4096 --compile   # one aten::addmm, a bias copy and one GEMM
    uv run 01_matmul_add.py --size 64 --batched     # Part 1's detour: (size, size, size) inputs, aten::bmm
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch import checks as ex

LABEL = "matmul_add"


def matmul_add(x, w, b):
    return torch.add(torch.matmul(x, w), b)


def expectations(args):
    """Part 1's claims that this run's trace can show (numbered as in docs/claims.md). Part 1 reads the
    eager traces for time (who waits, cold and warm steps) and the compiled one for what the compiler changed."""
    checks = [ex.profiler_steps(claim="P1-03"), ex.closing_sync(claim="P1-11")]
    if args.compile:
        return checks + [
            ex.compiled_region_rows(claim="P1-13"),
            ex.one_op_replaces(("aten::addmm",), ("aten::mm", "aten::add"), claim="P1-14"),
            ex.same_gemm_family_as_eager(claim="P1-14"),
            ex.bias_copy_then_gemm(claim="P1-15"),
            ex.more_cpu_than_eager(claim="P1-16"),
        ]
    # A 2048³ GEMM is ~17 GFLOP: tens of µs on a GPU, about what the CPU spends launching it. Below, the CPU sets
    # the pace; above, the GPU does, and the CPU runs ahead of it.
    big = args.size >= 2048
    gemm_op = "aten::bmm" if args.batched else "aten::mm"
    checks += [
        ex.compute_bound(dominant="GEMM", claim="P1-02") if big else ex.overhead_bound(claim="P1-01"),
        ex.gpu_lane_lag(cpu_ahead=big, claim="P1-06"),
        ex.steps_alike(claim="P1-05") if args.warmup else ex.cold_first_step(LABEL, claim="P1-04"),
        ex.dispatch_chain(LABEL, "aten::matmul", gemm_op, claim="P1-08" if args.batched else "P1-07"),
        ex.dispatch_chain(LABEL, "aten::add", claim="P1-07"),
    ]
    if args.batched:
        checks.append(ex.runtime_calls_before("aten::matmul", "aten::bmm", claim="P1-08"))
    checks += [
        ex.runtime_calls_per_gemm(claim="P1-09"),
        ex.op_runtime_calls("aten::add", ("cudaLaunchKernel",), claim="P1-09"),
        ex.kernel_resources(claim="P1-10"),
    ]
    if big:
        checks.append(ex.kernel_time_varies(claim="P1-12"))
    return checks


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, size=64)
    parser.add_argument("--warmup", action="store_true", help="run 3 steps before profiling (a warm trace)")
    parser.add_argument("--batched", action="store_true", help="3-D inputs (size, size, size): Part 1's aten::bmm detour")
    args = parser.parse_args(argv)
    tag = [args.size, "{dtype}", "warm" if args.warmup else "cold"] + (["batched"] if args.batched else [])
    run = lesson.setup(__file__, args, label=LABEL, tag=tag)

    # The inputs, made once. x, w and b are all (size, size): the bias too, as in Part 1 (a 2-D bias is what
    # makes the compiled addmm copy it into its output first).
    shape = (args.size,) * (3 if args.batched else 2)
    lesson.require_memory(run, 5 * args.size ** len(shape) * run.dtype.itemsize, "x, w, b, x @ w and their sum")
    torch.manual_seed(0)
    x = torch.randn(shape, device=run.device, dtype=run.dtype)
    w = torch.randn(shape, device=run.device, dtype=run.dtype)
    b = torch.randn(shape, device=run.device, dtype=run.dtype)
    fn = torch.compile(matmul_add) if args.compile else matmul_add

    def step():
        with record_function(LABEL):
            return fn(x, w, b)

    # Guess first, then look: what Part 1 says this trace shows.
    expected = expectations(args)
    lesson.announce(expected, run, compiled_already=args.warmup)  # a warm run's timing below compiles, if anything does

    if args.warmup:
        for _ in range(3):
            step()
        lesson.synchronize(run.device)

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py). A cold
    # run is timed after its profile instead: the timing's calls would warm the step the profile is to catch cold.
    baseline = lesson.time_unprofiled(step, run) if args.warmup else None

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
    if baseline is None:
        baseline = lesson.time_unprofiled(step, run)

    lesson.save(prof, run, baseline)  # traces/01_matmul_add/<tag>.json, the op table <tag>.txt and a picture of a step <tag>.png
    lesson.check(expected, run)
    lesson.next_steps(run)


if __name__ == "__main__":
    main()
