"""Lesson 3 (Part 2): the post's GeGLU MLP, eager and compiled.

The feed-forward block of Gemma-style transformers: two projections up to the hidden size, a tanh GELU on
one of them as a gate, their product, and a projection back down.

Eagerly that is five kernels per forward, in the forward's order: gate GEMM, up GEMM, GELU, mul, down GEMM.
The GELU and the multiply each read and write a whole [tokens, hidden] tensor: pure memory traffic.
`torch.compile` keeps the three GEMMs as they are (same cuBLAS kernels, byte-identical names) and fuses GELU
and multiply into one Triton kernel, `triton_poi_fused__unsafe_view_gelu_mul_0`.

    uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072
    uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile
    uv run 03_simple_mlp.py --record_shapes          # each aten::mm's input shapes (costs CPU time per op)

The module, as the post writes it (it lives in profiling_in_pytorch/mlp/simple.py, where lessons 03_kernels and 05, the
benchmark and the tests import it; a test keeps this copy identical):

    class SimpleGeGLUMLP(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            g = self.gate_proj(x)
            u = self.up_proj(x)
            h = F.gelu(g, approximate="tanh")
            m = h * u
            y = self.down_proj(m)
            return y
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.mlp import POST_SIZES, SimpleGeGLUMLP
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch import checks as ex

LABEL = "mlp_fwd"


def expectations(args):
    """Part 2's claims for the MLP that this run's trace can show (numbered as in docs/claims.md)."""
    gate, up, down = (f"[{args.batch * args.seq},{k}] x [{k},{n}]" for k, n in
                      ((args.dim, args.hidden), (args.dim, args.hidden), (args.hidden, args.dim)))
    tokens, dtype = args.batch * args.seq, getattr(args, "dtype", None) or "bf16"
    rates = ex.gemm_rates([("gate", tokens, args.dim, args.hidden), ("up", tokens, args.dim, args.hidden),
                           ("down", tokens, args.hidden, args.dim)], dtype, same_work=True, claim="P2-11")
    checks = [ex.profiler_steps(claim="P2-01"), rates]
    if args.compile:
        checks += [
            ex.no_cpu_op("aten::linear", "aten::matmul", "aten::t", "aten::transpose", "aten::reshape", claim="P2-13"),
            ex.cpu_op_runs("aten::mm", per_step=3, claim="P2-13"),
            ex.same_gemm_kernels_as_eager(claim="P2-14"),
            ex.fused_pointwise_kernel("gelu", "mul", claim="P2-15"),
            ex.no_separate_kernel_for("gelu", "mul", claim="P2-15"),
            ex.fused_kernel_beats_eager_pointwise("gelu", "mul", claim="P2-16"),
        ]
    else:
        checks += [
            ex.cpu_op_runs("aten::linear", per_step=3, claim="P2-07"),
            ex.kernels_in_order(("GEMM", "GEMM", "gelu", "mul", "GEMM"), claim="P2-08"),
            ex.runtime_calls_per_gemm(claim="P2-09"),
            ex.views_launch_nothing(claim="P2-10"),
            ex.gemms_launched_by("aten::mm", claim="P2-10"),
            ex.gemm_shapes((gate, up, down), recorded=args.record_shapes, claim="P2-11"),
            ex.gemm_variants(same=(0, 1), other=2, claim="P2-12"),
        ]
    return checks


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument(
        "--record_shapes", action="store_true", help="record each op's input shapes (P2-11); costs CPU time per op"
    )
    args = parser.parse_args(argv)
    tag = [args.batch, args.seq, args.dim, args.hidden] + (["shapes"] if args.record_shapes else [])
    run = lesson.setup(__file__, args, label=LABEL, tag=tag)

    # The module and its input, made once.
    sizes = (args.batch, args.seq, args.dim, args.hidden)
    lesson.require_memory(run, forward_elements(*sizes) * run.dtype.itemsize, "the weights and one forward's tensors")
    torch.manual_seed(0)
    model = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    if args.compile:
        model = torch.compile(model)

    def step():
        with torch.no_grad(), record_function(LABEL):
            return model(x)

    # Guess first, then look: what Part 2 says this trace shows.
    expected = expectations(args)
    lesson.announce(expected, run, compiled_already=True)  # the timing below compiles, if anything does

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)

    # The profile, as the post writes it: five steps, the last three recorded, no synchronize inside.
    with profile(
        activities=run.activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=args.record_shapes,
        profile_memory=False,
        with_stack=False,
    ) as prof:
        for _ in range(5):
            step()
            prof.step()
    lesson.synchronize(run.device)

    lesson.save(prof, run, baseline)  # traces/03_simple_mlp/<tag>.json, the op table <tag>.txt and a picture of a step <tag>.png
    lesson.check(expected, run)
    if args.record_shapes:  # with shapes, trace-report can weigh each op's bytes
        lesson.fusion_candidates(run)  # the first rows of its "Where fusion would pay"
    lesson.next_steps(run)


if __name__ == "__main__":
    main()
