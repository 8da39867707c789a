"""cuBLAS and cuBLASLt's GEMM kernels, NVIDIA's: the names have changed with every architecture.

    nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT      cuBLASLt's JIT-built kernels, Hopper and Blackwell (sm90, sm100)
    ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn       named after the architecture (Volta to Hopper)
    sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_..._ffma_...   xmma: cuBLAS's (and cuDNN's) kernel library
    cublasLt::splitKreduce_kernel<...>, gemv2T_kernel_val<...>, gemmk1_kernel<...>   helpers and small cases

nvjet names are not documented by NVIDIA. We decode only the fields we can check against the trace:
the output tile and the k-block x stages (their shared-memory footprint matches the kernel's `shared memory`:
(256 + 128) x 64 x 2 bytes x 4 stages = 196,608 of 213,188 bytes), the cluster shape, `_bias_` (the bias add
runs in the epilogue, as `aten::addmm` asks) and the three layout letters. Other fields are shown raw.

FP8 GEMMs (torch._scaled_mm, torchao's float8 linears) are nvjet kernels too; measured on an H100 (torch 2.11, CUDA
13.0, docs/fp8.md), the name's type letters start with one per fp8 operand, `q` for e4m3 and `r` for e5m2, B's
first (cuBLAS's column-major view: torch's second matrix): `nvjet_sm90_qqtst_...` against `tst` for bf16, and
torch._scaled_mm(e5m2, e4m3) runs `qrtst`. The scale mode is a token: none for one scale per tensor, `ovscale` (outer-vector scales) for torch's rowwise scaling,
`Avec128_Bvec128` for 1 x 128 blocks on both operands, `Ablk128_Bvec128` for 128 x 128 blocks on cuBLAS's A (torch's
second matrix, the weight) and 1 x 128 on B (the activation).
"""

from __future__ import annotations

import re

from trace_report.kernels.name import ARCH_BY_FAMILY, DTYPES, KernelName, arch_label, base_function, is_gemm


def decode_nvjet(name: str, core: str) -> KernelName | None:
    m = re.match(r"nvjet_(?:sm(\d+)_)?(.*)$", core)
    if not m:
        return None
    sm, rest = m.group(1), m.group(2)
    tokens = rest.split("_")
    details: list[tuple[str, str]] = []
    if sm:
        details.append(("arch", arch_label(sm)))
    tiles = [t for t in tokens if re.fullmatch(r"\d+x\d+", t)]
    if len(tiles) >= 1:
        details.append(("tile", tiles[0]))
    if len(tiles) >= 2:
        k, stages = tiles[1].split("x")
        details.append(("k-block", f"{k} x {stages} stages"))
    if len(tiles) >= 3:
        details.append(("cluster", tiles[2]))
    fp8 = re.match(r"([qr])([qr])", tokens[0]) if tokens else None
    if fp8:
        b, a = (FP8_LETTERS[letter] for letter in fp8.groups())
        details.append(("inputs", f"fp8 {a} (A and B)" if a == b else f"fp8 {a} (A), {b} (B)"))
        details.append(("scales", fp8_scale_mode(tokens)))
    elif "h" in tokens:
        details.append(("inputs", DTYPES["h"]))
    if "bias" in tokens:
        details.append(("epilogue", "bias in the epilogue"))
    coop = next((t for t in tokens if t.startswith("coop")), None)
    if coop:
        details.append(("schedule", f"cooperative ({coop})"))
    layout = tokens[-1] if tokens and re.fullmatch(r"[TN]{2,3}", tokens[-1]) else None
    if layout:
        details.append(("layout", layout))
    return KernelName(name, core, "cuBLAS (nvjet)", True, ("mm",) if "bias" not in tokens else ("mm", "add"), tuple(details))


FP8_LETTERS = {"q": "e4m3", "r": "e5m2"}  # nvjet's type letters for fp8 operands, measured (module docstring)


def fp8_scale_mode(tokens: list[str]) -> str:
    """How an FP8 nvjet kernel applies its scales, from its name's tokens (see the module docstring)."""
    if "ovscale" in tokens:
        return "rowwise (one per row of A, one per column of B)"
    blocks = [re.fullmatch(r"([AB])(vec|blk)(\d+)", t) for t in tokens]
    blocks = [m for m in blocks if m]
    shapes = [f"1 x {m.group(3)}" if m.group(2) == "vec" else f"{m.group(3)} x {m.group(3)}" for m in blocks]
    if len(blocks) == 2 and shapes[0] == shapes[1]:
        return f"both operands per {shapes[0]} block (blockwise)"
    if blocks:  # cuBLAS's A and B are torch's second and first matrix (the module docstring)
        return ", ".join(f"cuBLAS's {m.group(1)} per {shape} block" for m, shape in zip(blocks, shapes))
    return "one per tensor (tensorwise)"


def decode_cublas_arch_named(name: str, core: str) -> KernelName | None:
    # ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn, volta_sgemm_128x64_nn, ...
    m = re.match(r"(maxwell|pascal|volta|turing|ampere|ada|hopper)_(.*)$", core)
    if not m or not is_gemm(core):
        return None
    sm = ARCH_BY_FAMILY[m.group(1)]
    tokens = m.group(2).split("_")
    details: list[tuple[str, str]] = [("arch", arch_label(sm))]
    dtype = next((DTYPES[t] for t in tokens if t in DTYPES and t not in ("s", "h")), None)
    if dtype is None:
        lead = next((t for t in tokens if t.endswith("gemm")), "")
        dtype = {"s": "fp32", "h": "fp16", "d": "fp64"}.get(lead[:1]) if lead in ("sgemm", "hgemm", "dgemm") else None
    if dtype:
        details.append(("dtype", dtype))
    tiles = [t for t in tokens if re.fullmatch(r"\d+x\d+", t)]
    if tiles:
        details.append(("tile", tiles[0]))
    if "stages" in tokens and len(tiles) >= 2:
        k, stages = tiles[1].split("x")
        details.append(("k-block", f"{k} x {stages} stages"))
    layout = tokens[-1] if re.fullmatch(r"[tn]{2}", tokens[-1]) else None
    if layout:
        details.append(("layout", layout))
    return KernelName(name, core, "cuBLAS", True, ("mm",), tuple(details))


def decode_xmma(name: str, core: str) -> KernelName | None:
    # sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel
    m = re.match(r"sm(\d+)_xmma_(\w+?)_(.*)$", core)
    if not m:
        return None
    sm, op, rest = m.groups()
    tokens = rest.split("_")
    details: list[tuple[str, str]] = [("arch", arch_label(sm))]
    types = next((t for t in tokens if re.fullmatch(r"(bf16|f16|f32|tf32|i8|e4m3|e5m2)+", t)), None)
    if types:
        details.append(("dtype", DTYPES.get(re.match(r"bf16|f16|f32|tf32|i8|e4m3|e5m2", types).group(0), types)))
    tile = re.search(r"tilesize(\d+x\d+x\d+)", rest)
    if tile:
        details.append(("tile", tile.group(1)))
    stage = re.search(r"stage(\d+)", rest)
    if stage:
        details.append(("stages", stage.group(1)))
    layout = next((t for t in tokens if re.fullmatch(r"[tn]{2}", t)), None)
    if layout:
        details.append(("layout", layout))
    if "ffma" in tokens:
        details.append(("math", "CUDA cores (ffma: fp32 fused multiply-add)"))
    elif "warpgroupsize" in rest or "wgmma" in tokens:
        details.append(("math", "tensor cores (wgmma: Hopper's warpgroup MMA)"))
    elif any(t.startswith("tensor") for t in tokens):
        details.append(("math", "tensor cores (" + next(t for t in tokens if t.startswith("tensor"))[6:] + " mma)"))
    gemm = "gemm" in op or "gemv" in op
    return KernelName(name, core, "cuBLAS (xmma)", gemm, ("mm",) if gemm else (), tuple(details))


def decode_cublas_helper(name: str, core: str) -> KernelName | None:
    # A GEMM split along K writes partial sums that a second kernel adds up: one GEMM, two kernels.
    if base_function(core) == "splitKreduce_kernel":  # `cublasLt::splitKreduce_kernel<...>(...)` in traces
        return KernelName(name, "splitKreduce_kernel", "cuBLAS", False, ("split-K reduce",), (("role", "adds a split-K GEMM's partial sums"),))
    return None
