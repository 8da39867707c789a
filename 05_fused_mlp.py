"""Lesson 05: the fused MLP. Gate and up projections in one Triton GEMM with the GeGLU in its epilogue.

`03_simple_mlp.py --compile` fuses the GELU and the multiply into one kernel, but that kernel still reads the
gate and up projections from memory after two GEMMs wrote them there: two [tokens, hidden] tensors go to HBM
and come back. Here the activation moves into the GEMM itself. The gate and up weights are stored interleaved
(row 2j of one [2 * hidden, dim] matrix is gate row j, row 2j+1 is up row j), so one tile of the GEMM holds the
gate and the up values of the same output columns, side by side in registers. The epilogue computes
gelu_tanh(gate) * up there and writes h once; then cuBLAS runs the down projection. Two kernels per forward
instead of five (or four compiled).

What to look for in the trace, per step under `fused_mlp_fwd`: one `_geglu_gemm_tma_kernel` (Triton; on GPUs
before Hopper, or for a handful of tokens, `_geglu_gemm_kernel`) and one cuBLAS GEMM. No aten::gelu, no
aten::mul: on the CPU side the fused kernel is a Triton launch, not an ATen op. At a handful of tokens
(`--batch 8 --seq 1`) the count reads 3: cuBLAS splits the down projection along K into a `splitK` GEMM and a
`splitKreduce_kernel` that adds the partial sums, and the check says so.

    uv run 05_fused_mlp.py                                # the post's shape, bf16, on a GPU
    uv run 05_fused_mlp.py --compile                      # same two kernels: the Triton op is opaque to Inductor
    TRITON_INTERPRET=1 uv run 05_fused_mlp.py --batch 2 --seq 4 --dim 64 --hidden 128   # no GPU

This lesson profiles the inference forward (under torch.no_grad(): nothing kept for a backward); the module
also trains, which `06_train_mlp.py --variant fused` profiles. It runs in bf16 or fp16. Its first call per shape
compiles the kernel and times a few launch configurations, outside the profiled steps.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.mlp import POST_SIZES, SimpleGeGLUMLP
from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP
from profiling_in_pytorch.mlp.fused import require_runnable as require_fused_runnable
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch import checks as ex

LABEL = "fused_mlp_fwd"


FUSED_KERNEL = r"_geglu_gemm"


def expectations(device_type, sizes=None, dtype="bf16"):
    """On a GPU: two kernels, the fused one and cuBLAS's down projection. Under Triton's interpreter on a CPU the
    kernel runs as Python, named in the trace all the same, and only down_proj is an aten::mm."""
    fused = ex.kernel_matching(FUSED_KERNEL, 1, text="one fused gate/up GEMM + GeGLU kernel (_geglu_gemm_*) per step")
    if device_type != "cuda":
        return [ex.profiler_steps(), fused, ex.cpu_op_runs("aten::mm", per_step=1), ex.no_cpu_op("aten::gelu", "aten::mul")]
    return [
        ex.profiler_steps(),
        ex.kernels_per_step(2),
        fused,
        ex.gemms_per_step(2),  # the fused gate/up GEMM (Triton) and cuBLAS's down projection
        ex.no_separate_kernel_for("gelu", "mul"),
    ] + ([ex.gemm_rates(gemms_of(*sizes), dtype)] if sizes else [])


def gemms_of(batch, seq, dim, hidden):
    """The step's two GEMMs, (name, M, K, N): gate and up as one product over the interleaved weights, then down."""
    return [("gate/up + GeGLU", batch * seq, dim, 2 * hidden), ("down", batch * seq, hidden, dim)]


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, dtypes=("bf16", "fp16"), **POST_SIZES)
    args = parser.parse_args(argv)
    sizes = [args.batch, args.seq, args.dim, args.hidden]
    run = lesson.setup(__file__, args, label=LABEL, tag=sizes, dtypes=("bf16", "fp16"))
    require_fused_runnable(*sizes, run.device)

    # The post's module, then the fused one with its weights, checked against an fp32 run before profiling.
    # The reference and the fused module (with its interleaved gate/up copy) and an fp32 check: three forwards.
    lesson.require_memory(run, 3 * forward_elements(*sizes) * 4, "the two modules and the fp32 check")
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype).eval()
    fused = FusedGeGLUMLP.from_module(reference)
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    outputs_agree = lesson.check_output("FusedGeGLUMLP", fused, reference, x)
    model = torch.compile(fused) if args.compile else fused

    def step():
        with torch.no_grad(), record_function(LABEL):
            return model(x)

    expected = expectations(run.device.type, sizes, run.dtype_name)
    lesson.announce(expected, run, compiled_already=True)
    step()  # the first forward per shape compiles the Triton kernel and times its launch configurations
    lesson.synchronize(run.device)

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

    lesson.save(prof, run, baseline)  # traces/05_fused_mlp/<tag>.json, the op table <tag>.txt and a picture of a step <tag>.png
    lesson.check(expected, run)
    lesson.next_steps(run, compare_with=[lesson.trace_of(run, "03_simple_mlp", sizes, compiled=True)])
    return 0 if outputs_agree else 1  # the trace is written, but a module that computes something else fails


if __name__ == "__main__":
    raise SystemExit(main())
