"""Lesson 2 (Part 2): `nn.Linear` with a bias: lesson 1's matmul and add, in one call.

`nn.Linear` computes `x @ W.T + b`. Under it, `aten::linear` transposes the weight (`aten::t`, a view: it
launches nothing) and calls `aten::addmm`, which hands cuBLAS the bias so the add happens in the GEMM's
epilogue: one kernel where lesson 1 had two. `--compile` keeps that GEMM, byte for byte, and removes the CPU
work around it.

    uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64
    uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64 --compile
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch import nn
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch import checks as ex

LABEL = "linear_fwd"


def expectations(args):
    """Part 2's claims for nn.Linear that this run's trace can show (numbered as in docs/claims.md)."""
    checks = [
        ex.profiler_steps(claim="P2-01"),
        ex.kernels_per_step(1, claim="P2-01"),
        ex.bias_in_gemm_epilogue(claim="P2-02"),
        ex.layout_in_kernel_name(claim="P2-06"),
        ex.gemm_rates([("linear", args.batch, args.in_dim, args.out_dim)], getattr(args, "dtype", None) or "bf16"),
    ]
    if args.compile:
        checks += [
            ex.same_gemm_kernels_as_eager(claim="P2-04"),
            ex.compiled_region_rows(claim="P2-04"),
            ex.no_cpu_op("aten::t", claim="P2-05"),
        ]
    else:
        checks += [
            ex.dispatch_chain(LABEL, "aten::linear", "aten::t", claim="P2-02"),
            ex.dispatch_chain(LABEL, "aten::linear", "aten::addmm", claim="P2-02"),
            ex.no_cpu_op("aten::add", claim="P2-02"),
            ex.launches_nothing("aten::t", claim="P2-03"),
        ]
    return checks


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, batch=1024, in_dim=32, out_dim=64)
    args = parser.parse_args(argv)
    run = lesson.setup(__file__, args, label=LABEL, tag=[args.batch, args.in_dim, args.out_dim])

    # The module and its input, made once.
    elements = args.in_dim * args.out_dim + args.out_dim + args.batch * (args.in_dim + args.out_dim)
    lesson.require_memory(run, elements * run.dtype.itemsize, "the weight, the bias, x and the output")
    torch.manual_seed(0)
    linear = nn.Linear(args.in_dim, args.out_dim, bias=True).to(run.device, run.dtype).eval()
    x = torch.randn(args.batch, args.in_dim, device=run.device, dtype=run.dtype)
    if args.compile:
        linear = torch.compile(linear)

    def step():
        with torch.no_grad(), record_function(LABEL):
            return linear(x)

    # Guess first, then look: what Part 2 says this trace shows.
    expected = expectations(args)
    lesson.announce(expected, run, compiled_already=True)  # the timing below compiles, if anything does

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)

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

    lesson.save(prof, run, baseline)  # traces/02_linear/<tag>.json, the op table <tag>.txt and a picture of a step <tag>.png
    lesson.check(expected, run)
    lesson.next_steps(run)


if __name__ == "__main__":
    main()
