"""Read a GPU kernel's name the way the post does: what library made it, what it computes, how it is tiled.

Kernel names are the only thing a trace tells us about a kernel, and they are dense. A few families follow
patterns worth decoding:

    nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT      cuBLAS on Hopper: a 256x128 output tile, ...
    cutlass_80_tensorop_bf16_s16816gemm_bf16_64x64_64x4_tn_align8     CUTLASS (also inside cuBLAS) on sm80
    ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn       cuBLAS's own Ampere kernels
    triton_poi_fused__unsafe_view_gelu_mul_0            Inductor: a pointwise Triton kernel fusing 3 ops
    void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(...)...>(...)
                                                        ATen's eager GELU, 300 characters of C++ template
    sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_..._ffma_...   cuBLAS fp32 on CUDA cores (ffma)
    fmha_cutlassF_bf16_aligned_64x64_rf_sm80(...)       SDPA's memory-efficient attention (xformers' CUTLASS)
    void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, ...>, ...>(...)
                                                        FlashAttention-2, as vendored in PyTorch
    cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0
                                                        cuDNN's attention, generated for this problem

`decode(name)` returns what we could read; a name that follows no known pattern passes through unchanged
(its short name is the name itself and it carries no details). Nothing here imports torch: the report
must start fast.

nvjet names are not documented by NVIDIA. We decode only the fields we can check against the trace:
the output tile and the k-block x stages (their shared-memory footprint matches the kernel's `shared memory`:
(256 + 128) x 64 x 2 bytes x 4 stages = 196,608 of 213,188 bytes), the cluster shape, `_bias_` (the bias add
runs in the epilogue, as `aten::addmm` asks) and the three layout letters. Other fields are shown raw.

`math_unit(name)` says which units a GEMM's name commits to: tensor cores (`s16816`, `tensorop`, wgmma; nvjet's
16-bit `_h_`) or CUDA cores (`ffma`, `sgemm`, `simt`): Part 3 reads the math backend's FP32 GEMMs that way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

ARCHS = {
    "50": "Maxwell",
    "60": "Pascal",
    "70": "Volta",
    "75": "Turing",
    "80": "Ampere",
    "86": "Ampere",
    "89": "Ada",
    "90": "Hopper",
    "100": "Blackwell",
    "120": "Blackwell",
}
ARCH_BY_FAMILY = {"maxwell": "50", "pascal": "60", "volta": "70", "turing": "75", "ampere": "80", "ada": "89", "hopper": "90"}

DTYPES = {
    "h": "16-bit (fp16/bf16)",
    "bf16": "bf16",
    "f16": "fp16",
    "fp16": "fp16",
    "f32": "fp32",
    "fp32": "fp32",
    "tf32": "tf32",
    "s": "fp32",
    "i8": "int8",
    "e4m3": "fp8 e4m3",
    "e5m2": "fp8 e5m2",
}

# Inductor prefixes its Triton kernels with the kind of loop it generated.
INDUCTOR_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
    "sca": "scan",
}

# Op names that contain underscores, so that `fused__unsafe_view_gelu_mul` splits into
# `_unsafe_view, gelu, mul` and not `_unsafe, view, gelu, mul`. Longest match wins.
MULTI_WORD_OPS = {
    "_unsafe_view",
    "_unsafe_index",
    "_to_copy",
    "_softmax",
    "prepare_softmax_online",
    "_safe_softmax",
    "_log_softmax",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "native_layer_norm",
    "native_layer_norm_backward",
    "native_batch_norm",
    "native_group_norm",
    "native_dropout",
    "gelu_backward",
    "silu_backward",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
    "embedding_dense_backward",
    "convolution_backward",
    "index_put",
    "index_select",
    "masked_fill",
    "constant_pad_nd",
    "scalar_tensor",
    "lift_fresh",
    "var_mean",
    "clamp_min",
    "clamp_max",
    "full_like",
    "zeros_like",
    "ones_like",
    "empty_like",
    "new_zeros",
    "rms_norm",
    "layer_norm",
    "group_norm",
    "batch_norm",
    "scatter_add",
    "slice_scatter",
    "select_scatter",
    "as_strided",
    "_log_softmax_backward_data",
    "_softmax_backward_data",
    "nll_loss_forward",
    "nll_loss_backward",
}

# Ops that only rewrite a tensor's shape and strides: as ATen ops they launch nothing.
METADATA_OPS = {
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "transpose",
    "t",
    "expand",
    "squeeze",
    "unsqueeze",
    "slice",
    "select",
    "as_strided",
    "alias",
}
# Ops that a fused kernel's name may list without them adding arithmetic: the views, and the copies and casts
# that fuse into the loads and stores.
VIEW_OPS = METADATA_OPS | {"clone", "_to_copy", "convert_element_type"}

# The functor or kernel inside an ATen kernel's C++ name tells which op it runs. First match wins, so
# the more specific patterns come first.
ATEN_OPS = [
    (r"GeluBackward|gelu_backward", "gelu_backward"),
    (r"Gelu", "gelu"),
    (r"silu_backward|SiluBackward", "silu_backward"),
    (r"silu", "silu"),
    (r"sigmoid", "sigmoid"),
    (r"tanh", "tanh"),
    (r"MulFunctor|mul_kernel", "mul"),
    (r"DivFunctor|div_true|div_trunc|div_floor", "div"),
    (r"CUDAFunctor(?:OnSelf|OnOther)?_add|AddFunctor|add_kernel", "add"),
    (r"sub_kernel|SubFunctor", "sub"),
    (r"threshold_kernel|clamp_min", "relu"),
    (r"masked_fill", "masked_fill"),
    (r"triu_tril_kernel<\w+, \w+, true", "triu"),
    (r"triu_tril_kernel", "tril"),
    (r"isneginf", "isneginf"),
    (r"and_kernel_cuda", "all"),
    (r"FillFunctor|fill_kernel", "fill"),
    (r"CatArrayBatchedCopy", "cat"),
    (r"direct_copy_kernel|copy_kernel|copy_device_to_device", "copy"),
    (r"(?<!Log)SoftMaxForward<(?!.*LogSoftMax)|softmax_warp_forward|(?<!log_)softmax", "softmax"),
    (r"layer_norm|LayerNorm", "layer_norm"),
    (r"RMSNorm|rms_norm", "rms_norm"),
    (r"sum_functor|ReduceAdd", "sum"),
    (r"MeanOps", "mean"),
    (r"MaxOps|max_values|max_kernel", "max"),
    (r"MinOps|min_values|min_kernel", "min"),
    (r"exp_kernel|ExpFunctor", "exp"),
    (r"rsqrt", "rsqrt"),
    (r"sqrt", "sqrt"),
    (r"pow_tensor|pow_kernel", "pow"),
    (r"neg_kernel", "neg"),
    (r"AbsFunctor|abs_kernel", "abs"),
    (r"where_kernel", "where"),
    (r"index_select|indexSelect", "index_select"),
    (r"embedding(?!_backward)", "embedding"),
    (r"CompareEqFunctor|CompareFunctor", "compare"),
]

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

# ATen kernels that live in an anonymous namespace, outside at::native (the names carry no `at::`).
ATEN_ANONYMOUS = {"softmax_warp_forward", "softmax_warp_backward", "cunn_SoftMaxForward", "cunn_SoftMaxForwardSmem"}

_GEMM = re.compile(r"nvjet|gemm|gemv|cutlass|xmma|cublas|matmul", re.IGNORECASE)
_NOT_GEMM = re.compile(r"flash|fmha|attention|splitKreduce|reduce_kernel|elementwise", re.IGNORECASE)


@dataclass(frozen=True)
class KernelName:
    """What a kernel's name says.

    name:    the name as the trace has it (byte for byte: the diff compares these).
    short:   a name that fits a table row (the name itself when it is short or unknown).
    family:  who generated it: "cuBLAS (nvjet)", "cuBLAS", "CUTLASS", "Inductor (Triton)",
             "Liger-Kernel (Triton)", "profiling_in_pytorch (Triton)", "ATen", or "" when unknown.
    is_gemm: a matrix multiply (a GEMM or GEMV).
    ops:     the ops it computes, as far as the name tells (`("gelu", "mul")`, `("mm",)`, ...).
    details: (field, value) pairs for the decode column: arch, tile, dtype, layout, epilogue, ...
    """

    name: str
    short: str
    family: str = ""
    is_gemm: bool = False
    ops: tuple[str, ...] = ()
    details: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def has_bias_epilogue(self) -> bool:
        return any(k == "epilogue" and "bias" in v for k, v in self.details)

    @property
    def inductor_kind(self) -> str:
        return next((v for k, v in self.details if k == "kind"), "") if self.family.startswith("Inductor") else ""

    @property
    def compute_ops(self) -> tuple[str, ...]:
        """The ops that do arithmetic: a kernel fusing `_unsafe_view, gelu, mul` computes gelu and mul."""
        return tuple(op for op in self.ops if op not in VIEW_OPS)

    def describe(self) -> str:
        """One line: family, then the decoded fields; empty for an unknown name."""
        if not self.family:
            return ""
        parts = [self.family + (" GEMM" if self.is_gemm and "GEMM" not in self.family else "")]
        parts += [f"{k} {v}" if k not in ("arch", "epilogue") else v for k, v in self.details]
        return " · ".join(parts)


@lru_cache(maxsize=4096)
def decode(name: str) -> KernelName:
    """Decode a kernel name; unknown names pass through unchanged."""
    core = _strip_wrapper(name)
    for decoder in (_nvjet, _inductor, _fmha_cutlass, _flash_attention, _cudnn_sdpa, _cutlass, _cublas_arch_named,
                    _xmma, _cublas_helper, _fused_geglu, _liger, _aten):
        found = decoder(name, core)
        if found is not None:
            return found
    if is_gemm(name):
        return KernelName(name, _shorten(name), "GEMM library", True, ("mm",))
    return KernelName(name, _shorten(name))


def short_name(name: str) -> str:
    return decode(name).short


def is_gemm(name: str) -> bool:
    """A matrix multiply, by name: cuBLAS/CUTLASS/nvjet/xmma kernels and Inductor's mm templates."""
    if name.startswith("triton_tem_fused_"):
        return bool(re.search(r"(^|_)(mm|addmm|bmm|baddbmm)(_|$)", name[len("triton_tem_fused_") :]))
    if name.startswith("triton_"):
        return False
    return bool(_GEMM.search(name)) and not _NOT_GEMM.search(name)


def math_unit(name: str) -> str:
    """"tensor cores", "CUDA cores", or "" when a GEMM's name does not say: `s16816`, `tensorop`, `wgmma` and
    nvjet's 16-bit `_h_` mean tensor cores; `ffma`, `sgemm` and `simt` mean fp32 on the CUDA cores."""
    decoded = decode(name)
    unit = dict(decoded.details).get("math", "")
    if unit:
        return "tensor cores" if unit.startswith("tensor") else "CUDA cores"
    if decoded.family == "cuBLAS (nvjet)" and dict(decoded.details).get("inputs") == DTYPES["h"]:
        return "tensor cores"
    if re.search(r"(^|_)[shi]\d{4,}gemm", name):
        return "tensor cores"
    if re.search(r"sgemm", name, re.IGNORECASE):
        return "CUDA cores"
    return ""


def arch_label(sm: str) -> str:
    family = ARCHS.get(sm)
    return f"sm{sm} ({family})" if family else f"sm{sm}"


# --- decoders: each returns a KernelName or None when the name is not of its family -------------------------


def _nvjet(name: str, core: str) -> KernelName | None:
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
    if "h" in tokens:
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


def _inductor(name: str, core: str) -> KernelName | None:
    m = re.match(r"triton_([a-z]{3})_(.*)$", core)
    if not m or m.group(1) not in INDUCTOR_KINDS:
        return None
    kind = INDUCTOR_KINDS[m.group(1)]
    fused = re.sub(r"_\d+$", "", m.group(2))  # the trailing number only tells kernels apart
    ops = split_fused_ops(fused[len("fused_") :]) if fused.startswith("fused_") else ()
    details: list[tuple[str, str]] = [("kind", kind)]
    if ops:
        details.append(("fuses", ", ".join(ops)))
    gemm = is_gemm(core)
    return KernelName(name, core, "Inductor (Triton)", gemm, ops, tuple(details))


def _fmha_cutlass(name: str, core: str) -> KernelName | None:
    # fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params): the fused
    # multi-head attention of xformers, upstreamed into PyTorch as SDPA's memory-efficient backend.
    m = re.match(r"fmha_cutlass([FB])_([a-z0-9]+)_(aligned|notaligned)_(\d+x\d+)(?:_(rf|gmem))?_sm(\d+)", core)
    if not m:
        return None
    direction, dtype, aligned, tile, storage, sm = m.groups()
    details: list[tuple[str, str]] = [
        ("pass", "forward" if direction == "F" else "backward"),
        ("dtype", DTYPES.get(dtype, dtype)),
        ("alignment", "aligned inputs" if aligned == "aligned" else "unaligned inputs"),
        ("tile", tile),
    ]
    if storage:
        where = "registers" if storage == "rf" else "global memory"
        details.append(("accumulator", f"the output's running sum in {where} ({storage})"))
    details.append(("arch", "built for " + arch_label(sm)))
    short = core.split("(", 1)[0]
    return KernelName(name, short, "CUTLASS fused attention (SDPA memory-efficient, from xformers)", False, ("attention",), tuple(details))


def _flash_attention(name: str, core: str) -> KernelName | None:
    # void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false,
    # cutlass::bfloat16_t, ...>, ...>(pytorch_flash::Flash_fwd_params): the traits are head dim, the block's
    # query rows and key/value columns, and its warps. The flash-attn package names the same kernels without
    # PyTorch's namespace (`flash::` or none).
    m = re.match(
        r"(?:(\w+)::)?flash_(fwd|bwd)(_splitkv)?\w*?_kernel<Flash_(?:fwd|bwd)_kernel_traits<(\d+), (\d+), (\d+), (\d+)",
        core,
    )
    if not m:
        return None
    namespace, direction, split, head_dim, rows, cols, warps = m.groups()
    details: list[tuple[str, str]] = [
        ("pass", "forward" if direction == "fwd" else "backward"),
        ("head dim", head_dim),
        ("tile", f"{rows} query rows x {cols} key/value columns"),
        ("warps", warps),
    ]
    dtype = re.search(r"cutlass::(bfloat16_t|half_t)", core)
    if dtype:
        details.append(("dtype", {"bfloat16_t": "bf16", "half_t": "fp16"}[dtype.group(1)]))
    if split:
        details.append(("split", "keys and values split across blocks (split-KV)"))
    family = "FlashAttention-2" + (" (vendored in PyTorch)" if namespace == "pytorch_flash" else "")
    prefix = f"{namespace}::" if namespace else ""
    short = f"{prefix}flash_{direction}{split or ''}_kernel<{head_dim}, {rows}x{cols}, {warps} warps>"
    return KernelName(name, short, family, False, ("attention",), tuple(details))


def _cudnn_sdpa(name: str, core: str) -> KernelName | None:
    # cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0:
    # generated by cuDNN for this problem; a flash-style forward (fprop), on Hopper's warpgroup MMA (wgmma),
    # a 16-bit path, pre-tuned configuration ("knob") 7, a 64x128x64 tile, a 1x1x1 thread-block cluster (cga).
    m = re.match(r"cudnn_generated_\w*?sdpa_sm(\d+)_(\w+)$", core)
    if not m:
        return None
    sm, rest = m.groups()
    tokens = rest.split("_")
    details: list[tuple[str, str]] = [("arch", arch_label(sm))]
    if "flash" in tokens:
        details.append(("algorithm", "flash-style (tiles of keys and values, online softmax)"))
    passes = {"fprop": "forward", "bprop": "backward"}
    direction = next((passes[t] for t in tokens if t in passes), None)
    if direction:
        details.append(("pass", direction))
    units = {"wgmma": "tensor cores (wgmma: Hopper's warpgroup MMA)", "wmma": "tensor cores (wmma)", "hmma": "tensor cores (hmma)"}
    unit = next((units[t] for t in tokens if t in units), None)
    if unit:
        details.append(("math", unit))
    dtype = next((t for t in tokens if t in ("f16", "bf16", "f8", "fp8")), None)
    if dtype:
        details.append(("inputs", "16-bit (f16 in the name)" if dtype == "f16" else DTYPES.get(dtype, dtype)))
    if "knob" in tokens and tokens.index("knob") + 1 < len(tokens):
        details.append(("knob", f"{tokens[tokens.index('knob') + 1]} (a pre-tuned configuration)"))
    tile = next((t for t in tokens if re.fullmatch(r"\d+x\d+x\d+", t)), None)
    if tile:
        details.append(("tile", tile))
    cluster = next((t[3:] for t in tokens if re.fullmatch(r"cga\d+x\d+x\d+", t)), None)
    if cluster:
        details.append(("cluster", cluster))
    return KernelName(name, core, "cuDNN (generated)", False, ("attention",), tuple(details))


def _cutlass(name: str, core: str) -> KernelName | None:
    # cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8
    # cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized_...
    m = re.match(r"cutlass(?:3x)?_(?:sm)?(\d+)_(.*)$", core)
    if not m:
        return None
    sm, rest = m.group(1), m.group(2)
    tokens = rest.split("_")
    details: list[tuple[str, str]] = [("arch", arch_label(sm))]
    if tokens and tokens[0] in ("tensorop", "wmma", "simt"):
        unit = {"tensorop": "tensor cores (mma)", "wmma": "tensor cores (wmma)", "simt": "CUDA cores (simt)"}
        details.append(("math", unit[tokens[0]]))
    dtype = next((DTYPES[t] for t in tokens if t in DTYPES and t != "s" and t != "h"), None)
    if dtype:
        details.append(("dtype", dtype))
    inst = next((t for t in tokens if re.fullmatch(r"[a-z]?\d+gemm", t)), None)
    if inst and inst[0] == "s":
        details.append(("accumulate", "fp32"))
    tiles = [t for t in tokens if re.fullmatch(r"\d+x\d+(x\d+)?", t)]
    if tiles:
        details.append(("tile", tiles[0]))
    if len(tiles) >= 2 and tiles[1].count("x") == 1:
        k, stages = tiles[1].split("x")
        details.append(("k-block", f"{k} x {stages} stages"))
    elif len(tiles) >= 2:
        details.append(("cluster", tiles[1]))
    layout = next((t for t in tokens if re.fullmatch(r"[tn]{2,3}", t)), None)
    if layout:
        details.append(("layout", layout))
    align = next((t for t in tokens if re.fullmatch(r"align\d+", t)), None)
    if align:
        details.append(("alignment", align[5:] + " elements"))
    epilogue = next((t for t in tokens if t in ("relu", "gelu", "bias", "silu")), None)
    if epilogue:
        details.append(("epilogue", f"{epilogue} in the epilogue"))
    ops = ("mm",) + ((epilogue,) if epilogue else ())
    return KernelName(name, core, "CUTLASS", "gemm" in rest or "gemv" in rest, ops, tuple(details))


def _cublas_arch_named(name: str, core: str) -> KernelName | None:
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


def _xmma(name: str, core: str) -> KernelName | None:
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
    elif any(t.startswith("tensor") for t in tokens):
        details.append(("math", "tensor cores (" + next(t for t in tokens if t.startswith("tensor"))[6:] + " mma)"))
    gemm = "gemm" in op or "gemv" in op
    return KernelName(name, core, "cuBLAS (xmma)", gemm, ("mm",) if gemm else (), tuple(details))


def _cublas_helper(name: str, core: str) -> KernelName | None:
    # A GEMM split along K writes partial sums that a second kernel adds up: one GEMM, two kernels.
    if _base_function(core) == "splitKreduce_kernel":  # `cublasLt::splitKreduce_kernel<...>(...)` in traces
        return KernelName(name, "splitKreduce_kernel", "cuBLAS", False, ("split-K reduce",), (("role", "adds a split-K GEMM's partial sums"),))
    return None


# This suite's own Triton kernels (profiling_in_pytorch/mlp/triton_ops/): GEMMs with the GeGLU in the epilogue, named
# like Liger's (`_geglu_..._kernel`) but not Liger's, so they are told apart before Liger's pattern can claim them.
# Per kernel: its pass, what its epilogue adds to the product, and the ops it does by the names ATen gives them eagerly
# (a second trace, trace-report A B, finds the first's GEMM epilogue `mm -> gelu -> mul` fused into it).
FUSED_GEGLU = {
    "gemm": ("forward", "x @ [gate|up].T, then gelu_tanh(gate) * up", ("mm", "gelu", "mul")),
    "backward": ("backward", "dy @ W_down, then the GeGLU's derivative", ("mm", "mul", "gelu_backward")),
}


def _fused_geglu(name: str, core: str) -> KernelName | None:
    m = re.fullmatch(r"_geglu_(gemm|backward)(_tma)?_kernel", core)
    if not m:
        return None
    direction, epilogue, ops = FUSED_GEGLU[m.group(1)]
    details = [("pass", direction), ("epilogue", epilogue)]
    if m.group(2):
        details.append(("loads", "TMA, persistent grid (Hopper and newer)"))
    return KernelName(name, core, "profiling_in_pytorch (Triton)", True, ops, tuple(details))


def _liger(name: str, core: str) -> KernelName | None:
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


def _aten(name: str, core: str) -> KernelName | None:
    if "at::native::" not in name and not core.startswith("at::") and _base_function(core) not in ATEN_ANONYMOUS:
        return None
    base = _base_function(core)
    op = next((op for pattern, op in ATEN_OPS if re.search(pattern, name)), None)
    templated = _aten_template(name, core, op)  # foreach, fused optimizers, functors: see the end of this file
    if templated is not None:
        return templated
    short = f"{base}<{op}>" if op else (base + ("<…>" if "<" in core else ""))
    details = (("kernel", base),) + ((("op", op),) if op else ())
    return KernelName(name, short, "ATen", False, (op,) if op else (), details)


# --- helpers ---------------------------------------------------------------------------------------------------


def split_fused_ops(text: str) -> tuple[str, ...]:
    """`_unsafe_view_gelu_mul` -> ("_unsafe_view", "gelu", "mul"): underscores join words and separate ops."""
    words: list[str] = []
    leading = False
    for token in text.split("_"):
        if token == "":
            leading = True  # a double underscore: the next op's name starts with "_"
            continue
        words.append(("_" if leading else "") + token)
        leading = False
    ops: list[str] = []
    i = 0
    while i < len(words):
        for j in range(len(words), i, -1):
            candidate = "_".join(words[i:j])
            if j - i == 1 or candidate in MULTI_WORD_OPS:
                ops.append(candidate)
                i = j
                break
    return tuple(ops)


def _strip_wrapper(name: str) -> str:
    """`void cutlass::Kernel2<cutlass_80_...>(Params)` -> `cutlass_80_...`; `void f<...>(...)` -> `f<...>(...)`."""
    core = name[5:] if name.startswith("void ") else name
    m = re.match(r"(?:cutlass::)?(?:Kernel2?|device_kernel)<(\w+)", core)
    if m:
        return m.group(1)
    return core


def _base_function(core: str) -> str:
    """The function's name without namespaces, template arguments or parameters."""
    core = re.sub(r"\(anonymous namespace\)::", "", core)  # its parenthesis is not the parameter list
    depth = 0
    end = len(core)
    for i, ch in enumerate(core):
        if ch in "<(" and depth == 0:
            end = i
            break
    head = core[:end]
    head = re.sub(r"\(anonymous namespace\)::", "", head)
    return head.split("::")[-1] or head


def _shorten(name: str, limit: int = 80) -> str:
    """Long C++ names lose their template arguments and parameters; short names stay as they are."""
    if len(name) <= limit:
        return name
    core = name[5:] if name.startswith("void ") else name
    base = _base_function(core)
    return base + ("<…>" if "<" in core else "(…)")


# --- ATen's templated kernels: what each computes -----------------------------------------------------------
#
# ATen names its CUDA kernels after the machinery, not the math: `multi_tensor_apply_kernel<...>` runs a foreach op
# over lists of tensors (the optimizers' `_foreach_*`), `vectorized_elementwise_kernel<...>` any elementwise op. The
# math is a template argument: a functor (`BinaryOpScalarFunctor<c10::BFloat16, 1, 1, 0>, std::multiplies<float>`)
# or the function a lambda comes from (`mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}...`). Many of these
# kernels live in `(anonymous namespace)`, where `_base_function` stops reading: without what follows they all read
# `at::native::<…>`.

# Foreach functors: the op family, and which math functor makes which op of it.
FOREACH_FAMILIES = {
    "UnaryOpFunctor": "unary",
    "BinaryOpScalarFunctor": "binary",
    "BinaryOpScalarListFunctor": "binary",
    "BinaryOpListFunctor": "binary",
    "BinaryOpListAlphaFunctor": "binary",
    "BinaryOpScalarTensorFunctor": "binary",
    "PointwiseOpScalarFunctor": "pointwise",
    "PointwiseOpScalarListFunctor": "pointwise",
    "PointwiseOpListFunctor": "pointwise",
    "TernaryOpScalarFunctor": "ternary",
    "TernaryOpListFunctor": "ternary",
    "TernaryOpScalarListFunctor": "ternary",
}
FOREACH_MATH = {
    "binary": {"multiplies": "mul", "plus": "add", "minus": "sub", "divides": "div"},
    "pointwise": {"multiplies": "addcmul", "divides": "addcdiv"},
    "ternary": {"LerpFunctor": "lerp"},
}
FOREACH_WHOLE = {"ZeroFunctor": "zero", "CopyFunctor": "copy", "LpNormFunctor": "norm", "LpMaxFunctor": "max"}
# What torch.optim's foreach Adam and AdamW (the default on a GPU) do with each op, in the order they run it.
ADAM_FOREACH_ROLES = {
    "_foreach_mul_": "AdamW's weight decay (param × (1 - lr·λ)) or the second moment's decay (exp_avg_sq × β2)",
    "_foreach_lerp_": "the first moment: exp_avg.lerp_(grad, 1 - β1)",
    "_foreach_addcmul_": "the second moment: exp_avg_sq += (1 - β2)·grad²",
    "_foreach_sqrt": "the denominator: √exp_avg_sq",
    "_foreach_div_": "the denominator over √(1 - β2^step), the bias correction",
    "_foreach_add_": "the denominator plus eps",
    "_foreach_addcdiv_": "the update: param -= step_size · exp_avg / denominator",
}
FUSED_OPTIMIZERS = {"FusedAdamMathFunctor": "adam", "FusedSgdMathFunctor": "sgd", "FusedAdagradMathFunctor": "adagrad"}
# Kernels and functors ATEN_OPS does not name, by what they compute.
ATEN_TEMPLATE_OPS = [
    # A scan's operator is a std:: functor in its template: std::plus is a cumulative sum (a Llama's position ids)
    (r"scan_(?:innermost|outer)_dim.*std::multiplies", "cumprod"),
    (r"scan_(?:innermost|outer)_dim", "cumsum"),
    (r"gather_kernel", "gather"),
    (r"LogSoftMaxForward|log_softmax_forward", "log_softmax"),
    (r"LogSoftMaxBackward|log_softmax_backward", "log_softmax_backward"),
    (r"SoftMaxBackward|softmax_backward", "softmax_backward"),
    (r"lpnorm_cleanup", "_foreach_norm"),
    (r"RowwiseMoments|LayerNorm|layer_norm|GammaBetaBackward|ComputeInternalGradients|ComputeGradientFusedParams", "layer_norm"),
    (r"RmsNorm|rms_norm", "rms_norm"),
    (r"SoftMax|softmax", "softmax"),
    (r"nll_loss_forward", "nll_loss_forward"),
    (r"nll_loss_backward", "nll_loss_backward"),
    (r"embedding_backward|EmbeddingBackward|krn_partials_per_segment|krn_partial_segment_offset|compute_grad_weight"
     r"|sum_and_scatter|compute_num_of_partial_segments|segment_offsets", "embedding_backward"),
    (r"indexing_backward|index_put", "index_put"),
    (r"triu_tril", "triu/tril"),
    (r"NormTwoOps|NormOps|NormZeroOps|NormOneOps|norm_kernel", "norm"),
    (r"WelfordOps", "var_mean"),
    (r"ArgMaxOps|argmax", "argmax"),
    (r"Cos\b|cos_kernel", "cos"),
    (r"Sin\b|sin_kernel", "sin"),
    (r"arange|range_kernel", "arange"),
]
_WRAPPER_FUNCTORS = {"Binary", "AUnary", "BUnary", "Unary", "CUDA", "Trivial", "Opmath"}
_NOT_THE_MATH = {"gpu_kernel_impl", "gpu_kernel_impl_nocast", "launch_vectorized_kernel", "launch_legacy_kernel",
                 "operator", "opmath_gpu_kernel_with_scalars", "gpu_kernel_with_scalars", "opmath_symmetric_gpu_kernel_with_scalars"}


def _aten_template(name: str, core: str, op: str | None) -> KernelName | None:
    """Decode an ATen kernel that `_aten` cannot read whole: a foreach or fused-optimizer `multi_tensor_apply_kernel`,
    or a kernel whose op is in a template argument or whose name sits in an anonymous namespace. None when `_aten`'s
    own reading stands (it found the op in a plain function's name)."""
    base = _plain_base(core)
    if "multi_tensor_apply" in base:
        return _foreach_kernel(name, base, _template_arguments(core))
    if op is not None and _base_function(core) == base:
        return None
    op = _template_op(core, base) or op
    short = f"{base}<{op}>" if op and op != base else base
    details = (("kernel", base),) + ((("op", op),) if op and op != base else ())
    return KernelName(name, short, "ATen", False, (op,) if op else (), details)


def _foreach_kernel(name: str, base: str, arguments: list[str]) -> KernelName:
    """`multi_tensor_apply_kernel<Metadata, Functor<T, depth, r_args_depth, res_arg_index>, Math, ...>`: the foreach op
    (in place when the result goes to the first list, res_arg_index 0) or the fused optimizer it runs."""
    functor_text = next((a for a in arguments if "Functor" in a), "")
    functor = _plain_base(functor_text)
    numbers = re.findall(r"(?<![\w.])(\d+)(?![\w.])", functor_text)
    if functor in FUSED_OPTIMIZERS:
        kind = FUSED_OPTIMIZERS[functor]
        adamw = kind == "adam" and re.search(r"ADAM_MODE\)1|ADAM_MODE::ADAMW", functor_text)
        op = f"_fused_{'adamw' if adamw else kind}_"
        details = (("kernel", base), ("op", op), ("optimizer", f"torch.optim's fused {'AdamW' if adamw else kind.capitalize()}: every step of the update in one kernel"))
        return KernelName(name, f"{base}<{op}>", "ATen", False, (op,), details)
    family = FOREACH_FAMILIES.get(functor)
    if functor in FOREACH_WHOLE:
        math = FOREACH_WHOLE[functor]
    elif family == "unary":
        math = _plain_base(arguments[2] if len(arguments) > 2 else "").lower().replace("negate", "neg") or None
    elif family:
        math_arg = _plain_base(arguments[2] if len(arguments) > 2 else "")
        math = FOREACH_MATH[family].get(math_arg, math_arg.lower() or None)
    else:
        math = None
    if math is None:
        return KernelName(name, base, "ATen", False, (), (("kernel", base), ("op", "a foreach op")))
    in_place = family is not None and bool(numbers) and numbers[-1] == "0"
    op = f"_foreach_{math}" + ("_" if in_place and not math.endswith("_") else "")
    details: tuple[tuple[str, str], ...] = (("kernel", base), ("op", op))
    if op in ADAM_FOREACH_ROLES:
        details += (("role", f"Adam/AdamW (foreach): {ADAM_FOREACH_ROLES[op]}"),)
    return KernelName(name, f"{base}<{op}>", "ATen", False, (op,), details)


def _template_op(core: str, base: str) -> str | None:
    """The op an ATen kernel computes, read from its template arguments: the function its lambda comes from, else its
    innermost functor, else its reduction; named as ATEN_OPS names it where it can; else the kernel's own name."""
    arguments = " ".join(_template_arguments(core))
    for candidate in (_lambda_function(arguments), _functor(arguments), _reduction(arguments)):
        if candidate:
            return _named_op(candidate) or _clean_function_name(candidate)
    return _named_op(f"{base} {arguments}")


def _named_op(text: str) -> str | None:
    return next((op for pattern, op in ATEN_TEMPLATE_OPS + ATEN_OPS if re.search(pattern, text)), None)


def _lambda_function(text: str) -> str | None:
    """`at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}...` -> `mse_kernel_cuda`."""
    for m in re.finditer(r"(\w+)\((?:[^()]|\([^()]*\))*\)(?: const)?::\{lambda", text):
        if m.group(1) not in _NOT_THE_MATH:
            return m.group(1)
    return None


def _functor(text: str) -> str | None:
    """The innermost functor that is not a wrapper: `BinaryFunctor<..., MulFunctor<float>>` -> `MulFunctor`,
    `CUDAFunctorOnSelf_add<float>` -> `add`."""
    found = None
    for m in re.finditer(r"\b(\w*?)Functor(?:OnSelf|OnOther)?(?:_(\w+))?\b", text):
        stem, suffix = m.group(1), m.group(2)
        if suffix:
            found = suffix
        elif stem and stem not in _WRAPPER_FUNCTORS:
            found = f"{stem}Functor"
    return found


def _reduction(text: str) -> str | None:
    """`ReduceOp<float, at::native::NormTwoOps<...>>` -> `NormTwoOps`."""
    m = re.search(r"ReduceOp<[^,]+,\s*(?:[\w:]+::)?(\w+)", text)
    return m.group(1) if m else None


def _clean_function_name(function: str) -> str:
    """`mse_backward_cuda_kernel` -> `mse_backward`, `GeluCUDAKernelImpl` -> `Gelu`, `FillFunctor` -> `Fill`."""
    cleaned = re.sub(r"(?:_cuda)?_kernel(?:_cuda)?(?:_impl)?(?:_\dd)?$|CUDAKernelImpl$|Kernel(?:Impl)?$|Functor$|_impl$|_cuda$", "", function)
    return cleaned or function


def _plain_base(text: str) -> str:
    """A function or type's own name: namespaces, `(anonymous namespace)`, template arguments and parameters dropped."""
    text = text.strip()
    text = text[5:] if text.startswith("void ") else text
    text = text.replace("(anonymous namespace)::", "")
    return _base_function(text)


def _template_arguments(core: str) -> list[str]:
    """The kernel's top-level template arguments: `f<A<1>, B, C>(...)` -> ["A<1>", "B", "C"]."""
    core = core.replace("(anonymous namespace)::", "")
    start = core.find("<")
    if start < 0:
        return []
    arguments, depth, current = [], 0, []
    for ch in core[start + 1 :]:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            arguments.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    arguments.append("".join(current).strip())
    return arguments
