"""Lesson 3, hand-tuned (Part 2): the same GeGLU MLP with its activation in Liger's Triton kernel, from the Hub.

Eagerly, `03_simple_mlp.py` runs the GELU and the multiply as two kernels, and the [tokens, hidden] tensor
between them goes to memory and back. `--compile` fixes that by generating a fused Triton kernel. Here the
fused kernel is written by hand, by the Liger-Kernel authors, and loaded from the Hugging Face Hub exactly
as the post does:

    liger = get_kernel("kernels-community/liger-kernels", version=1)
    mlp = liger.layers.LigerGEGLUMLP(Config(hidden_size, intermediate_size, hidden_act="gelu_pytorch_tanh"))

What to look for in the trace, per step under `kernels_mlp_fwd`: the same three GEMMs as `03_simple_mlp.py`
(same shapes, same cuBLAS kernels) and, between them, one `_geglu_tanh_forward_kernel`, which reads the gate
and up projections once and writes their GELU-product once. No `aten::gelu`, no `aten::mul`: on the CPU
side the kernel is a Triton launch, not an ATen op. No compilation either.

    uv run 03_kernels_mlp.py                                 # the Hub, as in the post
    uv run 03_kernels_mlp.py --kernel_source pypi            # offline: the liger-kernel package, same kernel
    uv run 03_kernels_mlp.py --kernel_repo ./liger-kernels   # a local kernel repository

Without `--kernel_source`, the sources are tried in order: `--kernel_repo`, `LOCAL_KERNELS`, the Hub, and the
liger-kernel package when the Hub cannot be reached. One line says which one was used and why.
Run `03_simple_mlp.py` with the same sizes first (eager and `--compile`): two checks compare with its traces.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.mlp import POST_SIZES, SimpleGeGLUMLP
from profiling_in_pytorch.mlp.liger import SOURCES, require_runnable, resolve_liger_geglu_mlp
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch import checks as ex

LABEL = "kernels_mlp_fwd"

def expectations(args, device_type, simple_eager, simple_compiled):
    """Part 2's claims for Liger's layer (numbered as in docs/claims.md); the two paths are
    03_simple_mlp.py's eager and compiled traces of the same sizes. Without a GPU only a local repository's
    layer runs (Liger's Triton kernel cannot), and it may hold anything: we guess only what any GeGLU MLP shows."""
    if device_type != "cuda":
        return [ex.profiler_steps(claim="P2-01"), ex.cpu_op_runs("aten::mm", per_step=3, claim="P2-18")]
    checks = [
        ex.profiler_steps(claim="P2-01"),
        ex.kernels_per_step(4, claim="P2-17"),
        ex.gemms_per_step(3, claim="P2-17"),
        ex.geglu_kernel(per_step=1, claim="P2-17"),
        ex.no_separate_kernel_for("gelu", "mul", claim="P2-17"),
        ex.same_gemm_kernels_as(simple_eager, what="03_simple_mlp.py's eager trace", claim="P2-18",
                                missing="run 03_simple_mlp.py with the same sizes first"),
        ex.geglu_kernel_vs_inductor(simple_compiled, claim="P2-19"),
    ]
    if not args.compile:
        checks.append(ex.not_compiled(claim="P2-17"))
    return checks


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument(
        "--kernel_source", choices=SOURCES, default=None,
        help="where LigerGEGLUMLP comes from (default: --kernel_repo, LOCAL_KERNELS, the Hub, then the "
        "liger-kernel package if the Hub cannot be reached)",
    )
    parser.add_argument(
        "--kernel_repo", metavar="PATH", default=None,
        help="a local kernel repository (build/<variant>/metadata.json + package), loaded through kernels",
    )
    args = parser.parse_args(argv)
    sizes = [args.batch, args.seq, args.dim, args.hidden]

    # Find the layer first, and say where from: the source is part of the trace's name.
    with lesson.console.status("looking for LigerGEGLUMLP"):
        liger = resolve_liger_geglu_mlp(source=args.kernel_source, kernel_repo=args.kernel_repo)
    run = lesson.setup(__file__, args, label=LABEL, tag=sizes + [liger.tag])
    lesson.console.print(liger.describe(), soft_wrap=True, markup=False)
    require_runnable(liger, run.device)

    # The post's module first, built as 03_simple_mlp.py builds it (same seed, same weights, same input);
    # then Liger's layer with those weights, checked against it before anything is profiled.
    # Two modules (the reference and Liger's layer) and an fp32 check beside them: count three forwards.
    lesson.require_memory(run, 3 * forward_elements(*sizes) * 4, "the two modules and the fp32 check")
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    mlp = liger.build_holding(reference, args.dim, args.hidden).to(run.device, run.dtype).eval()
    outputs_agree = lesson.check_output("LigerGEGLUMLP", mlp, reference, x)
    if args.compile:
        mlp = torch.compile(mlp)

    def step():
        with torch.no_grad(), record_function(LABEL):
            return mlp(x)

    # Guess first, then look: what Part 2 says this trace shows. Two claims compare with 03_simple_mlp.py's
    # traces of the same sizes: its eager GEMMs and its compiled fused kernel.
    simple_eager = lesson.trace_of(run, "03_simple_mlp", sizes, compiled=False)
    simple_compiled = lesson.trace_of(run, "03_simple_mlp", sizes, compiled=True)
    expected = expectations(args, run.device.type, simple_eager, simple_compiled)
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

    lesson.save(prof, run, baseline)  # traces/03_kernels_mlp/<tag>.json, the op table <tag>.txt and a picture of a step <tag>.png
    lesson.check(expected, run)
    lesson.next_steps(run, compare_with=[simple_eager, simple_compiled])
    return 0 if outputs_agree else 1  # the trace is written, but a layer that computes something else fails


if __name__ == "__main__":
    raise SystemExit(main())
