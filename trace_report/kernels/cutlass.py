"""CUTLASS's kernels, NVIDIA's open GEMM templates, as PyTorch, cuBLAS and cuDNN instantiate them.

    cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8          CUTLASS 2, named by its profiler
    cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized_...   CUTLASS 3
    void cutlass::Kernel2<cutlass_80_...>(Params)                               the same, wrapped by its launcher
    void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<...>>(...)  a CUTLASS 3 kernel instantiated in
                                                                                C++ (PyTorch's _scaled_mm, grouped mm)
"""

from __future__ import annotations

import re

from trace_report.kernels.kinds import CONVOLUTION, GEMM
from trace_report.kernels.name import DTYPES, KernelName, arch_label


def decode_cutlass(name: str, core: str) -> KernelName | None:
    # cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8
    # cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized_...
    # cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8: no arch, a convolution (cuDNN's)
    m = re.match(r"cutlass(?:3x)?_(?:sm)?(\d+)?_?((?:tensorop|wmma|simt)_.*|.*)$", core)
    if not m:
        return None
    sm, rest = m.group(1), m.group(2)
    tokens = rest.split("_")
    details: list[tuple[str, str]] = [("arch", arch_label(sm))] if sm else []
    if tokens and tokens[0] in ("tensorop", "wmma", "simt"):
        unit = {"tensorop": "tensor cores (mma)", "wmma": "tensor cores (wmma)", "simt": "CUDA cores (simt)"}
        details.append(("math", unit[tokens[0]]))
    dtype = next((DTYPES[t] for t in tokens if t in DTYPES and t != "s" and t != "h"), None)
    if dtype:
        details.append(("dtype", dtype))
    inst = next((t for t in tokens if re.fullmatch(r"[a-z]?\d+(?:gemm|fprop|dgrad|wgrad)", t)), None)
    if inst and inst[0] == "s":
        details.append(("accumulate", "fp32"))
    conv = re.search(r"\d(fprop|dgrad|wgrad)", rest)
    if conv:
        what = {"fprop": "convolution, forward", "dgrad": "convolution, data gradient",
                "wgrad": "convolution, weight gradient"}[conv.group(1)]
        details.insert(0, ("what", what))
    tiles = [t for t in tokens if re.fullmatch(r"\d+x\d+(x\d+)?", t)]
    if tiles:
        details.append(("tile", tiles[0]))
    if len(tiles) >= 2 and tiles[1].count("x") == 1:
        k, stages = tiles[1].split("x")
        details.append(("k-block", f"{k} x {stages} stages"))
    elif len(tiles) >= 2:
        details.append(("cluster", tiles[1]))
    layout = next((t for t in tokens if re.fullmatch(r"[tn]{2,3}|nhwc|nchw|ndhwc", t)), None)
    if layout:
        details.append(("layout", layout))
    align = next((t for t in tokens if re.fullmatch(r"align\d+", t)), None)
    if align:
        details.append(("alignment", align[5:] + " elements"))
    epilogue = next((t for t in tokens if t in ("relu", "gelu", "bias", "silu")), None)
    if epilogue:
        details.append(("epilogue", f"{epilogue} in the epilogue"))
    if not sm and not conv and not any(k in ("math", "tile") for k, _ in details):
        return None  # `cutlass_...` with neither an arch, a math unit nor a tile: not a CUTLASS profiler name
    family = "CUTLASS (in cuDNN)" if "cudnn" in name else "CUTLASS"
    if conv:
        return KernelName(name, core, family, False, ("convolution",), tuple(details), work=CONVOLUTION)
    ops = ("mm",) + ((epilogue,) if epilogue else ())
    return KernelName(name, core, family, "gemm" in rest or "gemv" in rest, ops, tuple(details))


CUTLASS_TYPES = {"bfloat16_t": "bf16", "half_t": "fp16", "float_e4m3_t": "fp8 e4m3", "float_e5m2_t": "fp8 e5m2",
                 "tfloat32_t": "tf32", "float_e2m1_t": "fp4 e2m1", "int8_t": "int8"}


def decode_cutlass_templated(name: str, core: str) -> KernelName | None:
    """`cutlass::device_kernel<...GemmUniversal<...>>`, `cutlass::Kernel<...ImplicitGemmConvolution<...>>`: a CUTLASS
    template instantiated by C++ code, read from its template arguments."""
    if not re.match(r"(?:\w+::)*(?:device_kernel|Kernel2?|kernel)<", core) or "cutlass" not in core:
        return None
    conv = "Conv" in core or "conv::" in core
    if not conv and not re.search(r"gemm|Gemm|Mma", core):
        return None
    details: list[tuple[str, str]] = []
    arch = re.search(r"arch::Sm(\d+)|_sm(\d+)|Sm(\d+)", core)
    if arch:
        details.append(("arch", arch_label(next(g for g in arch.groups() if g))))
    dtype = re.search(r"cutlass::(" + "|".join(CUTLASS_TYPES) + ")", core)
    if dtype:
        details.append(("dtype", CUTLASS_TYPES[dtype.group(1)]))
    tile = re.search(r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)> ?>", core)
    if tile:
        details.append(("tile", "x".join(tile.groups())))
    owner = re.search(r"<(\w+)::", core)
    if owner and owner.group(1) not in ("cutlass", "cute"):
        details.append(("instantiated by", owner.group(1)))
    what = "convolution" if conv else "grouped GEMM" if "Grouped" in core or "grouped" in core else "GEMM"
    short = f"CUTLASS {what}" + "".join(f" {v}" for k, v in details if k in ("dtype", "tile"))
    return KernelName(name, short, "CUTLASS", not conv, ("convolution",) if conv else ("mm",), tuple(details),
                      work=CONVOLUTION if conv else GEMM)
