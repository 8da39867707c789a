"""Lesson 3, hand-tuned: the same GeGLU MLP with its activation in Liger's Triton kernel, from the Hub.

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

The layer gets the weights `SimpleGeGLUMLP` gets for the same seed, and the lesson checks that both give the
same output (within bf16 rounding) before profiling.

    uv run 03_kernels_mlp.py                              # the Hub, as in the post
    uv run 03_kernels_mlp.py --kernel_source pypi         # offline: the liger-kernel package, same kernel
    uv run 03_kernels_mlp.py --kernel_repo ./liger-kernels   # a local kernel repository

Without `--kernel_source`, the sources are tried in order: `--kernel_repo`, `LOCAL_KERNELS`, the Hub, and the
liger-kernel package when the Hub cannot be reached. One line says which one was used and why.
"""

import importlib
from pathlib import Path

import torch

from common.errors import UsageError
from common.expect import (
    cpu_op_runs,
    expectations_by_run,
    geglu_kernel,
    gemms_launched_by,
    gemms_per_step,
    kernels_per_step,
    label_recorded,
    no_separate_kernel_for,
    same_gemm_kernels_as,
)
from common.lesson import console, report_output_check, run_lesson
from common.liger import SOURCES, require_runnable, resolve_liger_geglu_mlp

simple_mlp = importlib.import_module("03_simple_mlp")

# Both sides run the same three GEMMs on the same bf16 inputs; they differ only in how the tanh GELU is
# computed (libdevice's tanh vs ATen's, both in fp32), which can flip the last bit of an intermediate value
# after rounding to bf16. bf16 keeps 8 significant bits, so an output can then land one rounding step away,
# about 1 part in 256: we allow torch's own bf16 tolerance (rtol 1.6e-2) plus an absolute floor for outputs
# near zero.
TOLERANCES = {"bf16": (1.6e-2, 1e-2), "fp16": (1e-3, 1e-3), "fp32": (1e-4, 1e-5)}  # (rtol, atol)

def add_kernel_flags(parser):
    parser.add_argument(
        "--kernel_source",
        choices=SOURCES,
        default=None,
        help="where LigerGEGLUMLP comes from (default: --kernel_repo, LOCAL_KERNELS, the Hub, then the "
        "liger-kernel package if the Hub cannot be reached)",
    )
    parser.add_argument(
        "--kernel_repo",
        metavar="PATH",
        default=None,
        help="a local kernel repository (build/<variant>/metadata.json + package), loaded through kernels",
    )


def find_kernel(args, device):
    """Before anything else: find the layer, say where from, and stop early if it cannot run here."""
    with console.status("looking for LigerGEGLUMLP"):
        args.liger = resolve_liger_geglu_mlp(source=args.kernel_source, kernel_repo=args.kernel_repo)
    console.print(args.liger.describe(), soft_wrap=True, markup=False)  # one line, however long
    require_runnable(args.liger, device)


def build(args, device, dtype):
    # The post's module first, built as 03_simple_mlp.py builds it: same seed, same weights, same input.
    reference = simple_mlp.SimpleGeGLUMLP(args.dim, args.hidden).to(device, dtype)
    x = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)

    mlp = args.liger.build(args.dim, args.hidden)
    try:
        mlp.load_state_dict(reference.state_dict())  # strict: gate_proj, up_proj, down_proj, nothing else
    except RuntimeError as err:
        raise UsageError(
            f"{args.liger.origin}: its LigerGEGLUMLP does not hold SimpleGeGLUMLP's three weights "
            f"({str(err).splitlines()[0]})"
        ) from None
    mlp = mlp.to(device, dtype)

    check_outputs_agree(mlp, reference, x, args.dtype)
    return mlp, (x,)


def check_outputs_agree(mlp, reference, x, dtype_name):
    """One line: does the hand-tuned layer compute what SimpleGeGLUMLP computes? (The lesson exits 1 if not.)"""
    rtol, atol = TOLERANCES[dtype_name]
    with torch.no_grad():
        got, want = mlp(x).float(), reference(x).float()
    diff = (got - want).abs()
    agrees = bool((diff <= atol + rtol * want.abs()).all())
    report_output_check(
        agrees,
        f"output check: LigerGEGLUMLP and SimpleGeGLUMLP {'agree' if agrees else 'DISAGREE'} "
        f"(max |Δ| {diff.max().item():.2e}; {dtype_name} tolerance |Δ| ≤ {atol:g} + {rtol:g}·|ref|)",
    )


def simple_mlp_twin(path: Path) -> Path:
    """`traces/03_kernels_mlp/64_128_768_3072_pypi_eager.json` -> `traces/03_simple_mlp/64_128_768_3072_eager.json`."""
    parts = path.stem.split("_")
    if len(parts) > 5:
        del parts[4]  # the kernel source, the only part 03_simple_mlp.py's file name does not have
    return path.parent.parent / "03_simple_mlp" / ("_".join(parts) + path.suffix)


def same_gemms_as_simple_mlp():
    return same_gemm_kernels_as(
        simple_mlp_twin, what="03_simple_mlp.py's trace", missing="run 03_simple_mlp.py with the same flags first"
    )


# Liger's layer is three nn.Linear and one Triton kernel, compiled or not. Without a GPU only a local
# repository's layer runs (Liger's kernel cannot), so on a CPU we guess only what any GeGLU MLP shows.
expectations = expectations_by_run(
    gpu_eager=[
        kernels_per_step(4),
        gemms_per_step(3),
        gemms_launched_by("aten::mm"),
        geglu_kernel(per_step=1),
        no_separate_kernel_for("gelu", "mul"),
        same_gemms_as_simple_mlp(),
    ],
    gpu_compiled=[
        kernels_per_step(4),
        geglu_kernel(per_step=1),
        no_separate_kernel_for("gelu", "mul"),
        same_gemms_as_simple_mlp(),
    ],
    cpu_eager=[label_recorded("kernels_mlp_fwd", times=3), cpu_op_runs("aten::mm", per_step=3)],
    cpu_compiled=[label_recorded("kernels_mlp_fwd", times=3), cpu_op_runs("aten::mm", per_step=3)],
)


if __name__ == "__main__":
    run_lesson(
        script=__file__,
        label="kernels_mlp_fwd",
        sizes=simple_mlp.MLP_SIZES,
        build=build,
        extra_flags=add_kernel_flags,
        preflight=find_kernel,
        expect=expectations,
        # A local repository can hold any implementation, so the source is part of the file name.
        tag=lambda args: [args.batch, args.seq, args.dim, args.hidden, args.liger.source],
        description=__doc__,
    )
