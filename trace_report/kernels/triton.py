"""Triton kernels: Inductor's (torch.compile), Liger-Kernel's and this suite's own, and anyone's by their names.

    triton_poi_fused__unsafe_view_gelu_mul_0            Inductor: a pointwise Triton kernel fusing 3 ops
    _geglu_tanh_forward_kernel                          Liger-Kernel: a plain Python function's name
    _geglu_gemm_kernel                                  this suite's fused GeGLU GEMM (profiling_in_pytorch/mlp)
    _fp8_geglu_gemm_kernel                              and its FP8 kernels (profiling_in_pytorch/mlp/triton_ops/fp8_geglu.py)
"""

from __future__ import annotations

import re

from trace_report.kernels.kinds import ATTENTION, CONVOLUTION, GEMM, kind_of_ops
from trace_report.kernels.name import KernelName, is_gemm
from trace_report.kernels.ops import split_fused_ops


# Inductor prefixes its Triton kernels with the kind of loop it generated.
INDUCTOR_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
    "sca": "scan",
}


# Liger-Kernel's Triton kernels are plain Python function names: `_geglu_tanh_forward_kernel`, ...
LIGER_OPS = (
    "geglu",
    "swiglu",
    "fused_add_rms_norm",
    "rms_norm",
    "layer_norm",
    "group_norm",
    "cross_entropy",
    "fused_linear_cross_entropy",
    "rope",
    "dyt",
    "jsd",
    "kl_div",
    "tvd",
    "poly_norm",
    "relu_squared",
    "softmax",
    "sparsemax",
)


def decode_inductor(name: str, core: str) -> KernelName | None:
    m = re.match(r"triton_([a-z]{3})_(.*)$", core)
    if not m or m.group(1) not in INDUCTOR_KINDS:
        return None
    kind = INDUCTOR_KINDS[m.group(1)]
    fused = re.sub(r"_\d+$", "", m.group(2))  # the trailing number only tells kernels apart
    ops = split_fused_ops(fused[len("fused_") :]) if fused.startswith("fused_") else ()
    details: list[tuple[str, str]] = [("kind", kind)]
    if ops:
        details.append(("fuses", ", ".join(ops)))
    if kind == "template":
        work = template_work(ops)
        return KernelName(name, core, "Inductor (Triton)", work == GEMM, ops, tuple(details), work=work)
    return KernelName(name, core, "Inductor (Triton)", is_gemm(core), ops, tuple(details))


def template_work(ops: tuple[str, ...]) -> str:
    """What an Inductor template kernel (`triton_tem_fused_...`) does: the GEMM, convolution or attention it is a
    template of, by the first op it names that is one (`flex_attention_backward`, `addmm`, `convolution`); the ops
    after it are its epilogue. Inductor writes templates for matrix products and products like them only, so a
    template naming none of them (`triton_tem_fused_0`) is a GEMM."""
    for op in ops:
        kind = kind_of_ops((op,))
        if kind in (ATTENTION, CONVOLUTION, GEMM):
            return kind
    return GEMM


# This suite's own Triton kernels (profiling_in_pytorch/mlp/triton_ops/): GEMMs with the GeGLU in the epilogue, named
# like Liger's (`_geglu_..._kernel`) but not Liger's, so they are told apart before Liger's pattern can claim them.
# Per kernel: its pass, what its epilogue adds to the product, and the ops it does by the names ATen gives them eagerly
# (a second trace, trace-report A B, finds the first's GEMM epilogue `mm -> gelu -> mul` fused into it).
FUSED_GEGLU = {
    "gemm": ("forward", "x @ [gate|up].T, then gelu_tanh(gate) * up", ("mm", "gelu", "mul")),
    "backward": ("backward", "dy @ W_down, then the GeGLU's derivative", ("mm", "mul", "gelu_backward")),
}


def decode_fused_geglu(name: str, core: str) -> KernelName | None:
    m = re.fullmatch(r"_geglu_(gemm|backward)(_tma)?_kernel", core)
    if not m:
        return None
    direction, epilogue, ops = FUSED_GEGLU[m.group(1)]
    details = [("pass", direction), ("epilogue", epilogue)]
    if m.group(2):
        details.append(("loads", "TMA, persistent grid (Hopper and newer)"))
    return KernelName(name, core, "profiling_in_pytorch (Triton)", True, ops, tuple(details))


# This suite's FP8 MLP (profiling_in_pytorch/mlp/triton_ops/fp8_geglu.py): per kernel, whether it multiplies, what it
# does, its scale mode and the ops eager FP8 code does for the same work.
FP8_KERNELS = {
    "_quantize_rows_kernel": (False, "x to fp8 e4m3: amax per row, then scale and cast", "rowwise (one per token)",
                              ("abs", "amax", "div", "clamp", "_to_copy")),
    "_fp8_geglu_gemm_kernel": (True, "x @ [gate|up].T in fp8 e4m3, then gelu_tanh(gate) * up, then m to e4m3 with "
                               "an amax per row of the tile", "x per token, W per channel; m out per 1 x 128 block",
                               ("_scaled_mm", "gelu", "mul", "abs", "amax", "div", "_to_copy")),
    "_fp8_blockscaled_gemm_kernel": (True, "A @ B.T in fp8 e4m3, each K block's partial sums by its own scale",
                                     "A per 1 x 128 block, B per channel", ("_scaled_mm",)),
}


def decode_fp8_mlp(name: str, core: str) -> KernelName | None:
    if core not in FP8_KERNELS:
        return None
    gemm, does, scales, ops = FP8_KERNELS[core]
    details = (("dtype", "fp8 e4m3"), ("does", does), ("scales", scales))
    return KernelName(name, core, "profiling_in_pytorch (Triton)", gemm, ops, details)


def decode_liger(name: str, core: str) -> KernelName | None:
    m = re.fullmatch(r"_(\w+?)(?:_(forward|backward|fwd|bwd))?_kernel", core)
    if not m:
        return None
    op = next((o for o in sorted(LIGER_OPS, key=len, reverse=True) if m.group(1).startswith(o)), None)
    if op is None:
        return None
    details: list[tuple[str, str]] = [("op", m.group(1))]
    if m.group(2):
        details.append(("pass", {"fwd": "forward", "bwd": "backward"}.get(m.group(2), m.group(2))))
    return KernelName(name, core, "Liger-Kernel (Triton)", False, (op,), tuple(details))




def decode_old_inductor(name: str, core: str) -> KernelName | None:
    # triton__0d1d2d3d: Inductor before torch 2.1 named kernels by their arguments' specialisations (`0d`: argument 0
    # divisible by 16), not by the ops they fuse.
    if not re.fullmatch(r"triton__(?:\d+d?)+(?:_\d+)?", core):
        return None
    return KernelName(name, core, "Inductor (Triton, torch 2.0)", False, (), (("fuses", "not in the name before torch 2.1"),))
