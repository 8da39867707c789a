"""`decode(name)`: what a kernel's name says, whoever wrote the kernel; the family modules are tried in turn.

A name that follows no known pattern still gets a short name that fits a table cell (its function's name without
template arguments and parameters), no family and no details; `classify.kind_of_kernel` then asks the op that
launched it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from trace_report.kernels import amd, aten, attention, collectives, cublas, cudnn, cutlass, libraries
from trace_report.kernels import triton, trtllm
from trace_report.kernels.demangle import demangle
from trace_report.kernels.name import (SHORT_LIMIT, KernelName, drop_return_type, is_gemm, shorten,
                                                      strip_wrapper)

# Most specific first: a family whose names could also match a broader pattern (cuDNN's `sm80_xmma_fprop_...` before
# cuBLAS's xmma GEMMs, this suite's `_geglu_gemm_kernel` before Liger's `_geglu_..._kernel`, FlashAttention 3 inside
# CUTLASS's `device_kernel<...>` before CUTLASS) comes before it.
DECODERS = (
    collectives.decode_collective,
    cublas.decode_nvjet,
    triton.decode_inductor,
    attention.decode_fmha_cutlass,
    attention.decode_flash_attention,
    attention.decode_flash_attention_3,
    cudnn.decode_cudnn_sdpa,
    cudnn.decode_cudnn,
    trtllm.decode_trtllm,
    cutlass.decode_cutlass,
    cutlass.decode_cutlass_templated,
    cublas.decode_cublas_arch_named,
    cublas.decode_xmma,
    cublas.decode_cublas_helper,
    amd.decode_tensile,
    amd.decode_amd_library,
    triton.decode_fused_geglu,
    triton.decode_fp8_mlp,
    triton.decode_liger,
    aten.decode_aten,
    libraries.decode_library,
    triton.decode_old_inductor,
)


@lru_cache(maxsize=8192)
def decode(name: str) -> KernelName:
    """Decode a kernel name; a name no family claims keeps its name, shortened to fit a table cell."""
    readable = _readable(name)
    core = strip_wrapper(readable)
    for decoder in DECODERS:
        found = decoder(readable, core)
        if found is not None:
            return _fitted(found, name)
    if is_gemm(readable):
        return _fitted(KernelName(readable, shorten(readable), "GEMM library", True, ("mm",)), name)
    return _fitted(KernelName(readable, shorten(readable)), name)


def _readable(name: str) -> str:
    """The name as C++ would print it: demangled, without ROCm's code-object suffixes (`attn_fwd.kd`,
    `f [clone .kd]`) and without a return type before the function (`std::enable_if<...>::type vllm::f<...>(...)`)."""
    name = re.sub(r"(?: \[clone \.kd\]|\.kd)$", "", name)
    if name.startswith("_Z"):
        name = demangle(name)
    return drop_return_type(name)


def _fitted(decoded: KernelName, name: str) -> KernelName:
    """The decoded name as the trace spells it (a mangled name stays mangled: the diff compares names byte for byte),
    its short name cut to a table cell's two lines."""
    short = decoded.short
    if len(short) > SHORT_LIMIT:
        short = short[: SHORT_LIMIT - 1] + "…"
    if short == decoded.short and name == decoded.name:
        return decoded
    return KernelName(name, short, decoded.family, decoded.is_gemm, decoded.ops, decoded.details, decoded.work,
                      decoded.helper_work)


def short_name(name: str) -> str:
    return decode(name).short


def math_unit(name: str) -> str:
    """"tensor cores", "CUDA cores", or "" when a GEMM's name does not say: `s16816`, `tensorop`, `wgmma` and
    nvjet's 16-bit `_h_` and FP8 `qq` inputs mean tensor cores; `ffma`, `sgemm` and `simt` mean fp32 on the CUDA cores; on AMD, MFMA
    instructions run on its matrix cores ("matrix cores")."""
    decoded = decode(name)
    unit = dict(decoded.details).get("math", "")
    if unit:
        return "tensor cores" if unit.startswith("tensor") else "matrix cores" if unit.startswith("matrix") else (
            "CUDA cores")
    if decoded.family == "cuBLAS (nvjet)" and dict(decoded.details).get("inputs", "").startswith(("16-bit", "fp8")):
        return "tensor cores"
    if re.search(r"(^|_)[shi]\d{4,}gemm", name):
        return "tensor cores"
    if re.search(r"sgemm", name, re.IGNORECASE):
        return "CUDA cores"
    return ""
