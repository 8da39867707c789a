"""Kernels of the libraries a model's code calls beside PyTorch: inference engines (vLLM, SGLang, FlashInfer,
TensorRT-LLM's runtime kernels), training libraries (Transformer Engine, Apex, DeepGEMM, DeepEP), recommendation
(FBGEMM), quantization (bitsandbytes, Marlin), vision (torchvision's detection ops). Their names are words, not codes:
`vllm::rms_norm_kernel<...>`, `flashinfer::BatchPrefillWithPagedKVCacheKernel<...>`. The namespace says the library,
the words the kind of work (kinds.WORK_WORDS); what the words leave open, the launching op decides.
"""

from __future__ import annotations

import re

from trace_report.kernels.kinds import COMMUNICATION, GEMM, NORMALIZATION, OPTIMIZER, kind_of_words
from trace_report.kernels.name import KernelName, base_function, plain_base, template_arguments


# (pattern on the readable name, library). First match wins.
LIBRARIES = [
    (r"\bvllm::|^_C::", "vLLM"),
    (r"\bsgl_hip::|\bsglang::|\bsgl_kernel", "SGLang (sgl-kernel)"),
    (r"\bflashinfer::", "FlashInfer"),
    (r"\btensorrt_llm::|^moe::dev::", "TensorRT-LLM"),
    (r"\btransformer_engine::|^nvte_", "Transformer Engine"),
    (r"\bapex::|^multi_tensor_apply_kernel<.*(?:Adam|LAMB|Novograd)Functor", "Apex"),
    # Apex's fused LayerNorm and RMSNorm (csrc/layer_norm_cuda_kernel.cu, copied into Megatron and others)
    (r"^cuApply(?:Layer|RMS)Norm|^cuCompute(?:Part)?Grad(?:GammaBeta|Input)$", "Apex"),
    (r"\bvision::ops::", "torchvision"),  # its detection ops: roi_align, nms, roi_pool, ps_roi_*, deform_conv2d
    (r"\bdeep_gemm::", "DeepGEMM"),
    (r"\bdeep_ep::|\bdpsk::ep::", "DeepEP"),
    (r"\bdpsk::", "DeepSeek's kernels"),
    (r"\bxformers::", "xformers"),
    (r"\bfbgemm(?:_gpu)?::|^split_embedding_|^bounds_check_indices|^permute_pooled_embs|^recat_copy|"
     r"^linearize_index|^to_dense_representation|^jagged_|^dense_to_jagged", "FBGEMM"),
    (r"\bbitsandbytes::|^kgemm_4bit|^kDequantize|^kQuantize", "bitsandbytes"),
    (r"\bmarlin::|^Marlin", "Marlin"),
    (r"\bmegablocks::|\bgrouped_gemm::", "MegaBlocks"),
    (r"\bmscclpp::", "MSCCL++"),
    (r"\bcub::|\bat_cuda_detail::cub::", "CUB"),
    (r"\bthrust::", "Thrust"),
    (r"\bcurand|\bcufft|\bvector_fft|\bregular_fft", "cuFFT/cuRAND"),
]
_LIBRARIES = [(re.compile(pattern), family) for pattern, family in LIBRARIES]


def decode_library(name: str, core: str) -> KernelName | None:
    # The function's own namespace first; a kernel in the global namespace is known by its arguments' types
    # (vLLM's ROCm paged attention: `paged_attention_ll4mi_QKV_mfma16_kernel<..., (vllm::Fp8KVCacheDataType)0, ...>`).
    head = core.split("(", 1)[0].split("<", 1)[0]
    family = next((family for pattern, family in _LIBRARIES if pattern.search(head)), None)
    if family is None and "::" not in head:
        family = next((family for pattern, family in _LIBRARIES if pattern.search(core)), None)
    if family is None:
        return None
    base = base_function(core)
    work = kind_of_words(base) or kind_of_words(head.replace("fbgemm", "fbg"))  # FBGEMM's name is no GEMM
    if family == "DeepEP" and re.search(r"dispatch|combine|notify", base):
        work = COMMUNICATION  # expert parallelism's all-to-all: tokens to their experts' ranks and back
    if family == "Apex" and base.startswith("cuCompute"):
        work = NORMALIZATION  # its layer norm's backward: the input's gradient, gamma's and beta's
    details = (("kernel", base),)
    # A kernel that runs a functor says which (Apex's `multi_tensor_apply_kernel<..., AdamFunctor<...>, ...>`: the
    # optimizer); its other template arguments are sizes and types.
    functor = next((plain_base(a) for a in template_arguments(core) if re.search(r"Functor\b", plain_base(a))), "")
    short = f"{base}<{functor}>" if functor else base + ("<…>" if "<" in core else "")
    if re.search(r"Adam|LAMB|Lamb|Novograd|SGD|Sgd|Adagrad", functor):
        work = OPTIMIZER  # a fused optimizer's step, wherever it ran
    return KernelName(name, short, family, work == GEMM, (), details, work=work)
