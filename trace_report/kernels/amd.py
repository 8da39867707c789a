"""AMD's kernels (ROCm): Tensile's GEMMs (inside rocBLAS and hipBLASLt), rocBLAS's own, Composable Kernel, MIOpen and
AITER. RCCL's collectives keep NCCL's names (collectives.py); Triton on ROCm keeps Triton's (triton.py).

    Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN_..._ISA942_...
        Tensile: C[i,j] (k batched) = A·B; `Alik` A transposed, `Bljk` B not: layout TN; `BBS` bf16 inputs, fp32
        compute; `MT256x256x64` the macro tile (M x N x K-depth); `MI16x16x1` a 16x16 MFMA (matrix-core) instruction;
        `ISA942` built for gfx942 (MI300X); `Bias` in the epilogue; `UserArgs` hipBLASLt's calling convention
    Cijk_B_PostGSU2                       Tensile's global split-U (split-K): adds a GEMM's partial sums
    void ck::kernel_gemm_xdl_cshuffle_v3<...>, ck_tile::kentry<..., FmhaFwdKernel<...>>   Composable Kernel
    MIOpenBatchNormFwdTrainSpatial, igemm_fwd_gtcx3_nhwc_bf16_..., batched_transpose_32x32_half   MIOpen
    aiter::fmha_fwd_hd128_bf16_rtz, aiter::add_rmsnorm_quant_kernel<...>   AITER, AMD's inference kernels

The ISA tag names the GPU's architecture (gfx90a: MI210/MI250, CDNA2; gfx942: MI300X/MI325X, CDNA3; gfx950: MI350X/
MI355X, CDNA4): where a trace has no device properties, `device` reads it from here.
"""

from __future__ import annotations

import re

from trace_report.kernels.kinds import CONVOLUTION, GEMM, REDUCTION, kind_of_words
from trace_report.kernels.name import KernelName, base_function


# gfx architectures: what a reader knows them as (`gfx_label`).
GFX = {
    "gfx906": "Vega 20, MI50/MI60",
    "gfx908": "CDNA, MI100",
    "gfx90a": "CDNA2, MI210/MI250",
    "gfx940": "CDNA3",
    "gfx941": "CDNA3",
    "gfx942": "CDNA3, MI300X/MI325X",
    "gfx950": "CDNA4, MI350X/MI355X",
    "gfx1100": "RDNA3",
    "gfx1201": "RDNA4",
}
# Tensile's data-type letters. The group after the A and B indices starts with the inputs' type (`S`: fp32; `BBS`: bf16
# A and B, fp32 compute; `B` then `BS`: the same split in two groups); the groups after it name the output's and the
# accumulation's. Only the inputs' type is read here: it is the one every Tensile name carries first.
TENSILE_TYPES = {"S": "fp32", "D": "fp64", "H": "fp16", "B": "bf16", "I8": "int8", "F8": "fp8 e4m3", "B8": "fp8 e5m2",
                 "F8N": "fp8 e4m3 (fnuz)", "B8N": "fp8 e5m2 (fnuz)", "X": "tf32", "C": "complex fp32", "Z": "complex fp64"}
_TENSILE_TYPE = re.compile(r"(F8N|B8N|F8|B8|I8|[SDHBXCZ])")
LAYOUTS = {("Ailk", "Bljk"): "NN", ("Alik", "Bljk"): "TN", ("Ailk", "Bjlk"): "NT", ("Alik", "Bjlk"): "TT"}

# Library families by name: (pattern on the readable name, family). Their kind of work comes from their words.
AMD_LIBRARIES = [
    (r"^(?:ck_tile|ck)::|\bck_tile::|\bck::", "Composable Kernel"),
    (r"^aiter::|\baiter::", "AITER"),
    (r"(?i)^miopen|^naive_conv|^igemm_(?:fwd|bwd|wrw)|^gridwise_convolution|^SubTensorOp|^Op[1-5]dTensor"
     r"|^batched_transpose|^transpose_[A-Z]{4}2[A-Z]{4}|^Im\d?d?2d?Col|^Col2Im|^MIOpen|^miopenSp\d", "MIOpen"),
    (r"^rocblas_|::rocblas_|\brocblas_", "rocBLAS"),
    (r"^rocprim::|\brocprim::|^hipcub::", "rocPRIM"),
]
_AMD_LIBRARIES = [(re.compile(pattern), family) for pattern, family in AMD_LIBRARIES]


def decode_tensile(name: str, core: str) -> KernelName | None:
    if not core.startswith(("Cijk_", "Custom_Cijk_")):
        return None
    tokens = core.split("_")
    if core.startswith("Custom_"):
        tokens = tokens[1:]
    if any(t.startswith("PostGSU") for t in tokens):  # the split-K pass that adds the partial sums
        return KernelName(name, "Tensile split-K reduce (" + next(t for t in tokens if t.startswith("PostGSU")) + ")",
                          "Tensile (rocBLAS/hipBLASLt)", False, ("split-K reduce",),
                          (("role", "adds a split-K (GSU) GEMM's partial sums"),), work=REDUCTION)
    details: list[tuple[str, str]] = []
    a = next((t for t in tokens if re.fullmatch(r"A[a-z]{3,4}", t)), "")
    b = next((t for t in tokens if re.fullmatch(r"B[a-z]{3,4}", t)), "")
    layout = LAYOUTS.get((a, b))
    dtype_token = next((t for t in tokens[1:] if t not in (a, b) and re.fullmatch(r"(?:F8N|B8N|F8|B8|I8|[SDHBXCZ])+B?",
                                                                                   t)), "")
    types = _TENSILE_TYPE.findall(dtype_token)
    if types:
        details.append(("inputs", TENSILE_TYPES[types[0]]))
    tile = next((t[2:] for t in tokens if re.fullmatch(r"MT\d+x\d+x\d+", t)), "")
    if tile:
        details.append(("tile", tile))
    mfma = next((t[2:] for t in tokens if re.fullmatch(r"MI\d+x\d+x\d+(?:x\d+)?", t)), "")
    if mfma:
        details.append(("math", f"matrix cores (MFMA {'x'.join(mfma.split('x')[:2])})"))
    if layout:
        details.append(("layout", layout))
    if "Bias" in tokens:
        details.append(("epilogue", "bias in the epilogue"))
    gsu = next((t for t in tokens if re.fullmatch(r"GSU\d+|GSUAMB\w*", t)), "")
    if gsu and re.search(r"\d", gsu) and gsu != "GSU1":
        details.append(("split", f"split-K (global split-U {gsu[3:]})"))
    isa = next((t[3:] for t in tokens if t.startswith("ISA") and len(t) > 3), "")
    if isa:
        details.append(("arch", gfx_label(f"gfx{isa}")))
    library = "hipBLASLt" if "UserArgs" in tokens else "Tensile"
    short = f"{library} GEMM" + (f" {layout}" if layout else "") + (f" {TENSILE_TYPES[types[0]]}" if types else "") + (
        f" MT{tile}" if tile else "") + (f" gfx{isa}" if isa else "")
    return KernelName(name, short, "Tensile (rocBLAS/hipBLASLt)", True, ("mm",), tuple(details), work=GEMM)


def decode_amd_library(name: str, core: str) -> KernelName | None:
    """Composable Kernel, AITER, MIOpen, rocBLAS's own kernels, rocPRIM: family by name, kind by the name's words."""
    head = core.split("(", 1)[0].split("<", 1)[0]  # the function's own name: a ck_tile type among its arguments is no CK
    family = next((family for pattern, family in _AMD_LIBRARIES if pattern.search(head)), None)
    if family is None:
        return None
    # ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<...>>: the entry point says nothing, its first type argument does.
    inner = re.match(r"(?:\w+::)*kentry<\d+, ((?:\w+::)*\w+)", core)
    base = base_function(inner.group(1)) if inner else base_function(core)
    work = kind_of_words(base) or kind_of_words(core[:200])
    helper_work = CONVOLUTION if family == "MIOpen" and not work else ""  # the launching op first (KernelName)
    details: list[tuple[str, str]] = [("kernel", base)]
    igemm = re.match(r"igemm_(fwd|bwd|wrw)_\w*?_(nhwc|nchw)_(\w+?)_.*?bt(\d+x\d+x\d+)", core)
    if igemm:
        direction, layout, dtype, tile = igemm.groups()
        what = {"fwd": "forward", "bwd": "data gradient", "wrw": "weight gradient"}[direction]
        details += [("what", f"implicit-GEMM convolution, {what}"), ("layout", layout.upper()), ("dtype", dtype),
                    ("tile", tile)]
        base = f"igemm_{direction}_{layout}_{dtype}_bt{tile}"
    short = f"{_SHORT_FAMILY.get(family, family)} {base}" + ("<…>" if "<" in core and not igemm else "")
    return KernelName(name, short, family, work == GEMM, (), tuple(details), work=work, helper_work=helper_work)


_SHORT_FAMILY = {"Composable Kernel": "CK", "MIOpen": "MIOpen", "AITER": "AITER", "rocBLAS": "rocBLAS",
                 "rocPRIM": "rocPRIM"}


def gfx_in_name(name: str) -> str | None:
    """The gfx architecture a kernel's name was built for (Tensile's `ISA942`, a `gfx942` in a code object's name)."""
    m = re.search(r"_ISA(\d{2,4}[a-f]?)_|\b(gfx\d{3,4}[a-f]?)\b", name)
    if not m:
        return None
    return m.group(2) or f"gfx{m.group(1)}"


def gfx_label(gfx: str) -> str:
    """`gfx942` -> `gfx942, CDNA3: MI300X/MI325X`."""
    return f"{gfx}, {GFX[gfx]}" if gfx in GFX else gfx
