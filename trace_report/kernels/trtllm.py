"""TensorRT-LLM's generated kernels, which vLLM and SGLang also run on Blackwell (sm100) and Hopper: batched GEMMs in
low-precision formats, and fused attention.

    bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_TN_transOut_schedS_sm100f
        a batched GEMM (a mixture of experts' experts): A in MXFP8 e4m3, B in MXFP4 e2m1 (block-scaled, "Mx"), fp32
        accumulation, a 128x16x256 tile, built for sm100 ("f": the family-portable target)
    gemm_Bfloat16_E4m3E4m3_Fp32_t128x8x128u2_s6_..._sm100a     a GEMM: fp8 inputs, bf16 output
    fmhaSm100aKernel_QkvE4m3OBfloat16H128PagedKvCausalP64VarSeqQ128Kv128PersistentSwapsAbForGen
        fused attention: fp8 Q, K and V, bf16 output, head dim 128, a paged KV cache, causal, for generation (decode)
    fmha_v2_flash_attention_bf16_64_128_S_qkv_128_sm90_kernel   TRT-LLM's older fused attention (fmha v2)
    xqa_kernel, kernel_mha                                       XQA: attention for decoding, a query per head group
"""

from __future__ import annotations

import re

from trace_report.kernels.kinds import ATTENTION, GEMM
from trace_report.kernels.name import KernelName, arch_label


# The element types TRT-LLM's kernel generator writes into names; "Mx" marks a block-scaled (microscaling) format.
TYPES = {
    "E4m3": "fp8 e4m3", "E5m2": "fp8 e5m2", "E2m1": "fp4 e2m1", "MxE4m3": "MXFP8 e4m3", "MxE2m1": "MXFP4 e2m1",
    "MxInt4": "MX int4", "Bfloat16": "bf16", "Fp16": "fp16", "Fp32": "fp32", "Int8": "int8", "Int4": "int4",
}
_TYPE = "|".join(sorted(TYPES, key=len, reverse=True))


def decode_trtllm(name: str, core: str) -> KernelName | None:
    return _gemm(name, core) or _fmha(name, core)


def _gemm(name: str, core: str) -> KernelName | None:
    m = re.match(r"(bmm|gemm|gemmGatedAct|bmmGatedAct)_((?:(?:" + _TYPE + r")+_)+)t(\d+x\d+x\d+)\w*?(?:_sm(\d+)([af]?))?$",
                 core)
    if not m:
        return None
    kind, types, tile, sm, suffix = m.groups()
    words = [re.findall(_TYPE, group) for group in types.strip("_").split("_")]
    details: list[tuple[str, str]] = []
    # Groups of types: the output's (when three groups), then A's and B's, then the accumulator's.
    if len(words) >= 3:
        details.append(("output", TYPES[words[0][0]]))
        operands = words[1]
    else:
        operands = words[0]
    if operands:
        details.append(("inputs", " x ".join(TYPES[t] for t in operands)))
    details.append(("accumulate", TYPES[words[-1][-1]]))
    details.append(("tile", tile))
    if "GatedAct" in kind:
        details.append(("epilogue", "a gated activation (SwiGLU) in the epilogue"))
    if sm:
        details.append(("arch", arch_label(sm) + (f" ({suffix}: {'family' if suffix == 'f' else 'arch'}-specific)" if suffix else "")))
    batched = kind.startswith("bmm")
    short = f"TRT-LLM {'batched ' if batched else ''}GEMM {' x '.join(TYPES[t] for t in operands)} t{tile}"
    return KernelName(name, short, "TensorRT-LLM (generated)", True, ("bmm" if batched else "mm",), tuple(details),
                      work=GEMM)


def _fmha(name: str, core: str) -> KernelName | None:
    m = re.match(r"fmhaSm(\d+)[af]?Kernel_(\w+)$", core)
    if m:
        sm, rest = m.groups()
        details: list[tuple[str, str]] = [("arch", arch_label(sm))]
        types = re.match(r"(?:Qkv|Q)(" + _TYPE + r")(?:Kv(" + _TYPE + r"))?O(" + _TYPE + r")", rest)
        if types:
            details.append(("inputs", TYPES[types.group(1)]))
            details.append(("output", TYPES[types.group(3)]))
        head = re.search(r"H(\d+)", rest)
        if head:
            details.append(("head dim", head.group(1)))
        for word, text in (("PagedKv", "paged KV cache"), ("Causal", "causal mask"), ("ForGen", "generation (decode)"),
                           ("Context", "context (prefill)"), ("Persistent", "persistent grid")):
            if word in rest:
                details.append((word.lower(), text))
        short = f"TRT-LLM fmha sm{sm}" + (f" {TYPES[types.group(1)]}" if types else "") + (
            f" hdim {head.group(1)}" if head else "")
        return KernelName(name, short, "TensorRT-LLM (generated)", False, ("attention",), tuple(details), work=ATTENTION)
    m = re.match(r"fmha_v2_(?:flash_attention_)?(\w+?)_(\d+)_(\d+)_\w*?sm(\d+)_kernel", core)
    if m:
        dtype, rows, cols, sm = m.groups()
        details = [("dtype", dtype), ("tile", f"{rows} query rows x {cols} key/value columns"), ("arch", arch_label(sm))]
        return KernelName(name, core, "TensorRT-LLM (fmha v2)", False, ("attention",), tuple(details), work=ATTENTION)
    if re.match(r"(?:\w+::)*(?:xqa_kernel|kernel_mha)\b", core):
        return KernelName(name, core.split("(", 1)[0], "TensorRT-LLM (XQA)", False, ("attention",),
                          (("what", "attention for decoding: the queries of a head group against the KV cache"),),
                          work=ATTENTION)
    return None
