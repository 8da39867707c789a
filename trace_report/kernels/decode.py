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
                                                      strip_wrapper, template_arguments)

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


# --- names that one table shows together --------------------------------------------------------------------

_NAMESPACES = re.compile(r"(?:\(anonymous namespace\)::|\b\w+::)+")
PART_LIMIT = 28  # a told-apart part's characters: the short name and two parts still fit SHORT_LIMIT


def distinct_short_names(names) -> dict[str, str]:
    """Each name's short name, told apart where two would read the same in one table: the template arguments that
    differ between them (`bn_bw_1C11_kernel_new<…> (128)` and `(32)`, `CatArrayBatchedCopy<cat> (OpaqueType<4u>)`), or
    else the words of the name that only one has (`cuDNN conv fprop sm80 128x128x16 (alignc4)`); a number where
    nothing tells them apart. Rows of one table never share a name: a reader could not tell which row is which."""
    names = list(dict.fromkeys(names))
    shorts = {name: decode(name).short for name in names}
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(shorts[name], []).append(name)
    for short, group in groups.items():
        if len(group) < 2:
            continue
        parts = _differences([_readable(name) for name in group])
        taken: set[str] = set(shorts.values()) - {short}
        for i, (name, part) in enumerate(zip(group, parts), 1):
            told = f"{short} ({part})" if part else short
            if told in taken or len(told) > SHORT_LIMIT:
                told = f"{short[: SHORT_LIMIT - 6]}{'…' if len(short) > SHORT_LIMIT - 6 else ''} #{i}"
            taken.add(told)
            shorts[name] = told
    return shorts


def _differences(readable: list[str]) -> list[str]:
    """For names that share a short name: what tells each apart, as short as it can be said: the template arguments
    that differ, or else the words only some of them have; empty strings where neither tells them all apart."""
    candidates = []
    arguments = [template_arguments(_template_head(name)) for name in readable]
    if all(arguments) and len({len(a) for a in arguments}) == 1:
        candidates.append([", ".join(p for p in row if p) for row in zip(*(_argument_differences(column)
                                                                          for column in zip(*arguments)))])
    # Words only some of them have: tile sizes, split-K, alignment flags in a generated name, a lambda's type.
    words = [re.findall(r"[A-Za-z0-9]+", name) for name in readable]
    common = set.intersection(*(set(w) for w in words))
    candidates.append([" ".join(dict.fromkeys(w for w in ws if w not in common)) for ws in words])
    for parts in candidates:
        cut = [_cut(part) for part in parts]
        if len(set(cut)) == len(cut):
            return cut
    return [""] * len(readable)


def _argument_differences(column: tuple[str, ...]) -> list[str]:
    """One template argument across the names: "" each where all agree; where they differ, each one's argument
    without namespaces, or, where all are one template (`OpaqueType<4u>`, `OpaqueType<8u>`), its differing part."""
    if len(set(column)) == 1:
        return [""] * len(column)
    plain = [_NAMESPACES.sub("", argument) for argument in column]
    inner = [template_arguments(argument) for argument in plain]
    heads = {argument.split("<", 1)[0] for argument in plain}
    if len(heads) == 1 and all(inner) and len({len(i) for i in inner}) == 1 and len(plain[0]) > PART_LIMIT:
        head = heads.pop()
        below = [", ".join(p for p in row if p) for row in zip(*(_argument_differences(c) for c in zip(*inner)))]
        return [f"{head}<{part}>" for part in below]
    return plain


def _template_head(name: str) -> str:
    """The function and its template arguments, without the parameter list."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not name[i:].startswith("(anonymous namespace)"):
            return name[:i]
    return name


def _cut(part: str) -> str:
    return part if len(part) <= PART_LIMIT else part[: PART_LIMIT - 1] + "…"
