"""Lesson 10: the FP8 rung. The post's MLP in 8-bit floats (e4m3), and what the trace says the format costs.

Lesson 05's fused module runs its GEMMs at the bf16 GEMM rate; the next factor is the number format. An H100 or
H200 multiplies e4m3 at about twice the bf16 rate, and its GEMMs read half the bytes. But a GEMM in FP8 needs its
inputs in FP8, each with a scale: s = amax / 448 (e4m3's largest value), q = x / s rounded to 3 mantissa bits.
Eagerly that is an amax reduction and a division and a cast per activation, each a pass over memory, which is
exactly the kind of kernel Part 2 teaches to fuse away. At the post's shape those passes over the [8192, 3072]
intermediate cost more than the FP8 GEMMs save. So: which recipe pays, and what does its trace hold?

    --variant rowwise     torch._scaled_mm, one scale per token and per weight channel (cuBLAS applies both in
                          its epilogue): the scaling is torch ops, which --compile fuses into 2 Triton kernels
    --variant tensorwise  torch._scaled_mm, one scale per tensor: the same kernels, and what outlier tokens break
    --variant torchao     torchao's Float8DynamicActivationFloat8WeightConfig (rowwise): the library recipe,
                          one quantized nn.Linear each for gate, up and down (3 FP8 GEMMs)
    --variant fused       ours (profiling_in_pytorch/mlp/triton_ops/fp8_geglu.py): x to e4m3 in one small kernel;
                          the gate/up GEMM in e4m3 with the GeGLU in its epilogue, which also writes m in e4m3 with
                          one scale per token per 128 columns (the tile's own amax: a per-token scale would need
                          every tile of the row); then the down GEMM on those 1 x 128 blocks (cuBLAS on Hopper,
                          with W_down in 128 x 128 tiles: `Ablk128_Bvec128` in its name)

What to look for in the trace, per step under `fp8_mlp_fwd`: the FP8 GEMMs (trace-report decodes their names:
`nvjet_sm90_qqtst_...` is e4m3 in, and `ovscale` rowwise, `Avec128_Bvec128` 1 x 128 blocks, no token one scale
per tensor), the scaling and cast kernels around them (eager: abs, amax, division, clamp and casts, one kernel
each; compiled: 2 Inductor kernels; fused: one), and no gelu or mul kernel where they are fused.

Before profiling, every variant that runs here is checked against fp32, its error printed beside bf16's: FP8 is
not bf16 (about 6% against bf16's 0.4%), and a tensorwise scale loses the other tokens when a few are 100x larger.

    uv run 10_fp8_mlp.py                                 # the fused FP8 module, the post's shape, on Hopper
    uv run 10_fp8_mlp.py --variant rowwise --compile     # torch._scaled_mm, the scaling fused by Inductor
    uv run 10_fp8_mlp.py --variant rowwise               # no FP8 GPU: the same scaling maths on the CPU, in fp32
    TRITON_INTERPRET=1 uv run 10_fp8_mlp.py --dtype bf16 --batch 2 --seq 8 --dim 64 --hidden 256   # our kernels

Inference only (under torch.no_grad()); training stays bf16 (lesson 06). FP8 tensor cores start at sm_89; our
fused kernels read through TMA, Hopper (sm_90) or newer. Without them (a CPU, an older GPU) the lesson says so and
profiles the recipe's scaling maths with its GEMMs in fp32 on the dequantized operands: the same scaling ops.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from trace_report.errors import UsageError
from profiling_in_pytorch.lesson import fp8 as fp8_lesson
from profiling_in_pytorch.mlp import POST_SIZES, SimpleGeGLUMLP
from profiling_in_pytorch.mlp.fp8 import EmulatedFP8GeGLUMLP
from profiling_in_pytorch.mlp.fused import require_runnable as require_triton_runnable
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch import checks as ex

LABEL = "fp8_mlp_fwd"


def fp8_gemms(variant: str, batch: int, seq: int, dim: int, hidden: int) -> list[tuple[str, int, int, int]]:
    """A step's FP8 GEMMs, (name, M, K, N): gate and up as one product over interleaved weights (torchao: one each),
    then down."""
    tokens = batch * seq
    first = ([("gate/up + GeGLU" if variant == "fused" else "gate/up", tokens, dim, 2 * hidden)] if variant != "torchao"
             else [("gate", tokens, dim, hidden), ("up", tokens, dim, hidden)])
    return first + [("down", tokens, hidden, dim)]


def expectations(variant: str, compiled: bool, device_type: str, down: str | None, emulated: bool = False,
                 sizes=None):
    """What each recipe's trace should hold, per step (measured on an H100, docs/fp8.md); with `sizes` (batch, seq,
    dim, hidden), each FP8 GEMM's TFLOP/s against the GPU's e4m3 ceiling too."""
    if emulated and device_type == "cuda":  # a GPU without FP8: the scaling maths as kernels around bf16/fp32 GEMMs
        return [ex.profiler_steps(), ex.scaling_kernels_per_step(None, "the recipe's amax, division, clamp and casts")]
    if device_type != "cuda":  # the scaling maths as CPU ops, or our kernels under Triton's interpreter
        if variant == "fused" and down is not None:
            return [ex.profiler_steps(), ex.kernel_matching(r"_quantize_rows_kernel"),
                    ex.kernel_matching(r"_fp8_geglu_gemm_kernel"), ex.kernel_matching(r"_fp8_blockscaled_gemm_kernel"),
                    ex.no_cpu_op("aten::gelu", "aten::mul")]
        if compiled:  # Inductor's C++ kernels fuse each tensor's scaling as its Triton kernels do on a GPU
            return [ex.profiler_steps(), ex.no_cpu_op("aten::amax", "aten::abs"),
                    ex.scaling_kernels_per_step(None, "Inductor's cpp_fused_... kernels, amax and cast in each")]
        return [ex.profiler_steps(), ex.cpu_op_runs("aten::amax", per_step=2),  # x's, then m's
                ex.scaling_kernels_per_step(None, "abs, amax, division, clamp and cast for x and for m")]
    common = [ex.profiler_steps()] + ([ex.gemm_rates(fp8_gemms(variant, *sizes), "fp8")] if sizes else [])
    if variant == "fused":
        down_kernel, down_pattern = {  # cuBLAS names the weight (torch's second matrix) first: A is W_down
            "cublas": ("cuBLAS's nvjet on 1 x 128 blocks of m and of W_down", r"nvjet.*Avec128_Bvec128"),
            "cublas-tiles": ("cuBLAS's nvjet on 1 x 128 blocks of m and 128 x 128 tiles of W_down",
                             r"nvjet.*Ablk128_Bvec128"),
        }.get(down, ("our block-scaled Triton GEMM", r"_fp8_blockscaled_gemm_kernel"))
        return common + [
            ex.kernels_per_step(3),
            ex.fp8_gemms_per_step(2),
            ex.kernel_matching(r"_fp8_geglu_gemm_kernel", text="the gate/up GEMM with the GeGLU and m's cast in its "
                               "epilogue"),
            ex.kernel_matching(down_pattern, text=f"the down GEMM: {down_kernel}, the fastest at the first call"),
            ex.scaling_kernels_per_step(1, "x's amax and cast (_quantize_rows_kernel); m's are in the GEMM"),
            ex.no_separate_kernel_for("gelu", "mul"),
        ]
    gemms = 3 if variant == "torchao" else 2  # torchao quantizes gate_proj, up_proj and down_proj one by one
    if compiled and variant == "tensorwise":
        # A tensor's amax is a reduction over all of it: Inductor splits it in two kernels (a partial amax per
        # block of rows, then the last), and the division and cast wait for it: three kernels per tensor.
        return common + [
            ex.fp8_gemms_per_step(gemms),
            ex.scaling_kernels_per_step(6, "per tensor (x, then m with gelu and mul): a partial amax, the final "
                                        "amax, then the cast"),
            ex.kernels_per_step(gemms + 6),
        ]
    if compiled:
        return common + [
            ex.fp8_gemms_per_step(gemms),
            ex.scaling_kernels_per_step(2, "Inductor fuses x's amax and cast into one kernel, and gelu, mul and m's "
                                        "amax and cast into another"),
            ex.kernels_per_step(gemms + 2),
        ]
    return common + [
        ex.fp8_gemms_per_step(gemms),
        ex.scaling_kernels_per_step(None, "abs, amax, division, clamp and casts, one kernel each, for x and for m"),
    ]


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, dtypes=("bf16", "fp32"), **POST_SIZES)
    parser.add_argument("--variant", choices=tuple(fp8_lesson.RECIPES), default="fused",
                        help="which FP8 recipe to profile (default: fused, ours); all are checked against fp32")
    args = parser.parse_args(argv)
    sizes = [args.batch, args.seq, args.dim, args.hidden]
    run = lesson.setup(__file__, args, label=LABEL, tag=[args.variant, *sizes], dtypes=("bf16", "fp32"))
    recipe = fp8_lesson.RECIPES[args.variant]
    why_not = fp8_lesson.unavailable(recipe, run.device)
    if run.device.type == "cuda" and why_not is None and run.dtype != torch.bfloat16:
        raise UsageError("the FP8 recipes take bf16 in and give bf16 out on a GPU: drop --dtype or pass bf16")
    emulated = why_not is not None  # no FP8 here: the recipe's maths with its GEMMs in fp32, on this device
    if emulated and args.variant == "torchao":
        raise UsageError("torchao's float8 layers need a GPU with FP8 tensor cores: --variant rowwise shows the "
                         "same scaling maths without one")
    if not emulated and args.variant == "fused" and run.device.type != "cuda":  # Triton's interpreter
        require_triton_runnable(*sizes, run.device)
        if run.dtype != torch.bfloat16:
            raise UsageError("our FP8 kernels take bf16 under the interpreter too: add --dtype bf16")
    if emulated:
        lesson.console.print(f"[yellow]note:[/yellow] {why_not}: this run profiles the {args.variant} recipe's scaling "
                             "maths in fp32 (each GEMM on its dequantized operands): its scaling ops are those an FP8 "
                             "GPU's trace holds around its FP8 GEMMs.", soft_wrap=True)

    # The post's module, then the FP8 one built from its weights (quantized once, here), checked against fp32.
    lesson.require_memory(run, 4 * forward_elements(*sizes) * 4, "the modules and the fp32 checks")
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    if emulated and args.variant == "fused":
        module = EmulatedFP8GeGLUMLP(reference)
    else:
        module = fp8_lesson.build(args.variant, reference)
    accurate = fp8_lesson.check_accuracy(args.variant, module, reference, x, runnable=not emulated)
    # Our module times its down GEMMs at its first call (the check above) and keeps the fastest: ask which.
    down = module.down_for(args.batch * args.seq) if hasattr(module, "down_for") else None
    fp8_lesson.print_bytes(args.batch * args.seq, args.dim, args.hidden)
    model = torch.compile(module, dynamic=False) if args.compile else module

    def step():
        with torch.no_grad(), record_function(LABEL):
            return model(x)

    expected = expectations(args.variant, args.compile, run.device.type, down, emulated, sizes)
    lesson.announce(expected, run, compiled_already=True)
    step()  # the first forward compiles (Triton's JIT, Inductor) and tunes our kernels' launch configurations
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

    lesson.save(prof, run, baseline)  # traces/10_fp8_mlp/<variant>_<sizes>_<mode>.json, its op table and a picture of a step
    lesson.check(expected, run)
    lesson.next_steps(run, compare_with=[lesson.trace_of(run, "05_fused_mlp", sizes, compiled=False)])
    return 0 if accurate else 1  # the trace is written, but a recipe outside its bound fails the run


if __name__ == "__main__":
    raise SystemExit(main())
