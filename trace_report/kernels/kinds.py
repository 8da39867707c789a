"""Kinds of work a reader recognises, and which one a kernel (or a CPU op) does.

    GEMM             matrix multiplies, any library's: cuBLAS, CUTLASS, Tensile, hipBLASLt, CK, Triton templates
    convolution      cuDNN's and MIOpen's convolutions and their helpers (Winograd, FFT, implicit GEMM)
    attention        fused attention: FlashAttention, cuDNN's SDPA, xformers, FlashInfer, TRT-LLM's fmha, ...
    normalization    layer, RMS, batch and group norm, forward and backward
    elementwise      pointwise math: activations, adds and muls, casts that compute, quantization
    reduction        sums, means, softmax, losses, scans, pooling (RoIAlign and RoIPool too)
    copy and memset  memcpy, memset, layout transforms, concatenation, fills
    communication    NCCL/RCCL collectives and symmetric-memory ones (their time includes waiting for other ranks)
    optimizer        whatever runs inside torch.optim's step, foreach and fused optimizer kernels
    embedding and indexing   gathers, scatters, embedding lookups and their backward
    sorting, top-k and MoE routing   sorts, top-k, a mixture of experts' routing and token permutation, the boxes
                     non-maximum suppression keeps (torchvision's nms)
    other            what neither the name, the ops it lists, nor the op that launched it tells

Two tables decide: OP_KINDS by op name (ATen's, a library's, or what a kernel's name lists), WORK_WORDS by the words
of a library kernel's name (MIOpen's `MIOpenBatchNormFwdTrainSpatial` is a normalization). `classify` applies them.
"""

from __future__ import annotations

import re

GEMM, CONVOLUTION, ATTENTION, NORMALIZATION = "GEMM", "convolution", "attention", "normalization"
ELEMENTWISE, REDUCTION, COPY, COMMUNICATION = "elementwise", "reduction", "copy and memset", "communication"
OPTIMIZER, INDEXING, ROUTING, OTHER = "optimizer", "embedding and indexing", "sorting, top-k and MoE routing", "other"
KINDS = (GEMM, CONVOLUTION, ATTENTION, NORMALIZATION, ELEMENTWISE, REDUCTION, COPY, COMMUNICATION, OPTIMIZER, INDEXING,
         ROUTING, OTHER)
MEMORY_BOUND = (ELEMENTWISE, REDUCTION, NORMALIZATION, COPY, INDEXING)  # what a fused kernel could save the bytes of
MODULE_PREFIX = "nn.Module: "

# Op names (ATen's, without `aten::`, or any library's last word) -> kind. First match wins.
OP_KINDS = [
    (r"^(mm|addmm|bmm|baddbmm|matmul|linear|_addmm_activation|addbmm|addmv|mv|dot|einsum|_scaled_mm|_scaled_grouped_mm"
     r"|_grouped_mm|_int_mm|gemm|gemv|\w*_gemm|\w*scaled_mm|cutlass_scaled_mm\w*|moe_wna16_gemm|fused_experts\w*)$", GEMM),
    (r"conv(?!ert)|cudnn_convolution|miopen_convolution", CONVOLUTION),
    (r"attention|attn|sdpa|flash|fmha|paged_attention|flex_decoding", ATTENTION),
    (r"(layer|rms|batch|group|instance)_?norm|norm_(fwd|bwd|forward|backward)", NORMALIZATION),
    (r"^(sort|argsort|topk|top_k|\w*topk\w*|\w*top_k\w*|msort|kthvalue|unique\w*|\w*moe_align\w*|\w*moe_sum\w*"
     r"|\w*routing\w*|\w*permute\w*_experts?|\w*gating\w*|moe_forward|\w*moe\w*|(?:\w+_)?nms(?:_\w+)?)$", ROUTING),
    (r"^(embedding|embedding_backward|embedding_dense_backward|embedding_bag|_embedding_bag\w*|index|index_select|gather"
     r"|scatter|scatter_add|scatter_reduce|index_put|_index_put_impl|index_add|index_copy|take|masked_select|nonzero"
     r"|masked_scatter|\w*embedding\w*|\w*index\w*|repeat_interleave|searchsorted|bucketize)$", INDEXING),
    (r"^(copy|_to_copy|to|clone|contiguous|fill|zero|zeros|zeros_like|ones|ones_like|full|full_like|new_zeros"
     r"|new_empty|cat|stack|arange|triu/tril|triu|tril|memcpy|memset|copy_device_to_device|\w*reshape_and_cache\w*"
     r"|\w*transpose\w*|pad|constant_pad_nd|roll|flip|repeat|narrow_copy|split_with_sizes_copy|_foreach_copy)$", COPY),
    (r"softmax|^(sum|mean|var|std|var_mean|max|min|amax|amin|argmax|argmin|logsumexp|cumsum|cumprod|prod|all|any|norm"
     r"|nll_loss\w*|cross_entropy\w*|mse_loss|l1_loss|\w*_loss|\w*_loss_backward|reduce\w*|split-K reduce|aminmax"
     r"|count_nonzero|histc|bincount|\w*pool\w*|_adaptive_avg_pool\w*|avg_pool\w*|max_pool\w*|\w*roi_align\w*)$", REDUCTION),
    (r"^(add|sub|rsub|mul|div|neg|pow|rsqrt|sqrt|exp|exp2|log|log1p|log2|tanh|sigmoid|silu|gelu|relu|relu6|hardtanh"
     r"|threshold|where|masked_fill|lerp|addcmul|addcdiv|clamp|clamp_min|clamp_max|abs|sin|cos|reciprocal|dropout"
     r"|native_dropout|bernoulli|erf|erfinv|maximum|minimum|eq|ne|lt|gt|le|ge|compare|sign|square|logical_not"
     r"|logical_and|logical_or|bitwise_\w+|floor|ceil|round|trunc|isneginf|isinf|isnan|nan_to_num|mse|mse_backward"
     r"|elu|leaky_relu|softplus|mish|hardswish|hardsigmoid|glu|\w*act_and_mul\w*|\w*silu_and_mul\w*|\w*gelu\w*"
     r"|\w*rotary\w*|\w*rope\w*|\w*quant\w*|\w*fp8\w*|\w*fp4\w*|uniform|normal|random|randn|rand|exponential"
     r"|geometric|cauchy|log_normal|(?!embedding)\w+_backward)$", ELEMENTWISE),
]
_OP_KINDS = [(re.compile(pattern, re.I), kind) for pattern, kind in OP_KINDS]


def kind_of_ops(ops) -> str | None:
    """The kind of the first op (of a kernel's listed ops) that OP_KINDS names; None when none does."""
    for op in ops:
        op = op.rstrip("_") if op.endswith("_") and not op.startswith("_foreach") else op
        for pattern, kind in _OP_KINDS:
            if pattern.search(op):
                return kind
    return None


# The words of a library kernel's name -> the kind of work, for the families whose names are words (cuDNN, MIOpen,
# Composable Kernel, AITER, FlashInfer, vLLM, ...), not codes. First match wins: attention before convolution (cuDNN's
# attention kernels say `fprop`), normalization before reduction.
WORK_WORDS = [
    # Compound names whose words would mislead one by one: vLLM's `reshape_and_cache_flash_kernel` writes the KV
    # cache (no attention), `rotary_embedding_kernel` is elementwise (no lookup), `cross_device_reduce_1stage` an
    # all-reduce over peer GPUs' memory (no reduction of one tensor).
    (r"reshape_and_cache|concat_and_cache|store_?kv|kv_?cache_?(?:write|store)|append_paged_kv|to_dense", COPY),
    (r"kv_indices", INDEXING),
    # Detection's ops (torchvision's, and mmcv's and detectron2's of the same names): RoIAlign and RoIPool pool each
    # box's bins (an average of bilinear samples, a max) as a pooling layer pools its windows; NMS selects the boxes
    # to keep, by score (its kernel marks the pairs that overlap past the threshold).
    (r"roi_?align|roi_?pool", REDUCTION),
    (r"(?<![a-z])nms(?![a-z])", ROUTING),
    (r"rotary|\brope|swiglu|geglu|silu_and_mul|act_and_mul|gelu_and_mul", ELEMENTWISE),
    (r"cross_device_reduce|custom_?all_?reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast",
     COMMUNICATION),
    (r"finalize_matmul|moe::dev::(?!activation)", ROUTING),
    (r"bwd_weight|bwd_data", CONVOLUTION),
    (r"fmha|flash|attention|attn|paged_?att|prefill|decode_?att|sdpa|softmax_gemm|xqa|merge_?state|\bmha"
     r"|\bsage_(?:fwd|bwd|attn)", ATTENTION),
    (r"conv(?!ert)|winograd|fft2d|wgrad|dgrad|fprop|igemm_(?:fwd|bwd|wrw)|implicit_?gemm|im2col|col2im", CONVOLUTION),
    (r"norm|\bbn_|bn_(?:fw|bw)|batchnorm|gammabeta", NORMALIZATION),
    (r"top_?k|sort|routing|moe_?align|gating|expand_?input|finalize_?moe|sampling|permute_?(?:tokens|experts)|bitmatrix",
     ROUTING),
    (r"gemm|gemv|matmul|\bbmm|_mm_|scaled_mm|mfma|\bxdl|grouped_mm|fp8_mm|fused_moe_kernel|moe_gemm|wv_?splitk", GEMM),
    (r"embedding|gather|scatter|index|indices|lookup|permute_(?:1D|2D|indices|sparse|pooled)|jagged|bucketize|offsets",
     INDEXING),
    (r"nchw|nhwc|transpose|copy|cache|memcpy|memset|\bpack|concat|fill|tensor_?transform", COPY),
    (r"softmax|reduce|reduction|\bsum|mean|scan|cumsum|loss|pool|amax|argmax|nllcriterion", REDUCTION),
    (r"\bact\b|activation|silu|gelu|relu|rope|quant|scale|elementwise|pointwise|\badd|\bmul|cast|convert|dropout"
     r"|tensorop|op2d|op3d|tensor_op|to_float|from_float|qparam|\bscal_kernel|axpy", ELEMENTWISE),
]
_WORK_WORDS = [(re.compile(pattern, re.I), kind) for pattern, kind in WORK_WORDS]


def kind_of_words(text: str) -> str:
    """The kind of work a library kernel's name says by its words (WORK_WORDS), or "" when none does."""
    # camelCase names split into words (`BatchNormFwd` -> `Batch_Norm_Fwd`), which the tables read: the joined text
    # would find `sort` in `tensorTransform`.
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return next((kind for pattern, kind in _WORK_WORDS if pattern.search(words)), "")
