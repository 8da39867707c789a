"""Kernel names of every vendor and library, spelled as real traces spell them, and what `trace_report/kernels/`
reads from each: the family that generated it, whether it is a GEMM, the kind of work (`kind_of_kernel`), and the
details a reader checks (dtype, tile, arch, layout, pass).

The names come from public traces other people's programs wrote (the sources of trace_report/tests/fixtures/world/,
see its README.md: AMD's TraceLens test traces, Holistic Trace Analysis' test data, PyTorch's kineto samples, vLLM
and SGLang serving traces, DeepSeek's profile data), a few from this suite's own H200 fixtures; the comment above each
says where. They are typed out (kernel_names.py), not read from the traces, so that a test names what it checks.
Every expectation is what the package decodes correctly today; where it decodes a name wrongly (a family missed, a
kind mistaken) the test leaves that field unchecked (None) rather than pin the mistake.
"""

from __future__ import annotations

import time

import pytest

from trace_report.device import gpu_label
from trace_report.kernels import (ATTENTION, COMMUNICATION, CONVOLUTION, COPY, ELEMENTWISE, GEMM,
                                                 INDEXING, NORMALIZATION, OPTIMIZER, REDUCTION, ROUTING, decode,
                                                 decode_nccl, demangle, gfx_in_name, gfx_label, kind_of_kernel,
                                                 kind_of_op, math_unit)
from trace_report.kernels.name import SHORT_LIMIT
from trace_report.tests.kernel_names import (
    FA3_FWD, FA3_COMBINE, FA3_BWD, FA3_PREPROCESS, FA2_NAMESPACED_TRAITS, FA3_EARLY, CUTLASS_RELU, CUTLASS_SIMT,
    CUTLASS_WMMA_VOLTA, DPSK_GROUPED_GEMM, XMMA_GEMM, SPLITK_REDUCE, GEMV, CUDNN_BN_BACKWARD, CUDNN_BN_FORWARD,
    CUDNN_NCHW_TO_NHWC, CUDNN_CUTLASS_WGRAD, CUDNN_XMMA_FPROP, CUDNN_WINOGRAD, CUDNN_OFFSETS, ATEN_FILL, ATEN_GELU,
    ATEN_FOREACH_MUL, ATEN_MEAN, ATEN_LAYER_NORM, ATEN_SOFTMAX, ATEN_TOPK, ATEN_INDEX_SELECT, ATEN_CAT,
    ATEN_ADD_CLONE_KD, ATEN_BN_STATS, MULTIMEM_ALL_REDUCE, HIPBLASLT_GEMM, TENSILE_SPLIT_K_GEMM, HIPBLASLT_GFX90A,
    IGEMM_FWD, IGEMM_WRW, CK_RMSNORM, CK_GROUPED_CONV, CK_FMHA_PREFILL, CK_BWD_WEIGHT, AITER_RMSNORM,
    VLLM_FUSED_ADD_RMS_NORM, VLLM_RMS_NORM, VLLM_ACT_AND_MUL, SGLANG_ACT_AND_MUL, VLLM_FP8_QUANT,
    VLLM_ROCM_PAGED_ATTENTION, DEEPEP_DISPATCH, DPSK_TRANSPOSE, CUB_RADIX_SORT, FBGEMM_EMBEDDING, TRTLLM_ROUTING,
    TV_ROI_ALIGN, TV_ROI_ALIGN_BACKWARD, TV_ROI_POOL, TV_NMS, TV_DEFORM_IM2COL, APEX_LN_GRAD_INPUT, APEX_LN_GAMMA_BETA,
)

# --- checking one name ------------------------------------------------------------------------------------------


def case(name: str, family: str | None, kind: str | None, gemm: bool | None, details: dict | None = None,
         short: str | None = None, ops: tuple | None = None, math: str | None = None):
    """One name and what it decodes to; None leaves a field unchecked (see the module's docstring)."""
    label = name if len(name) <= 48 else name[:45] + "..."
    return pytest.param(name, family, kind, gemm, details or {}, short, ops, math, id=label)


FIELDS = "name, family, kind, gemm, details, short, ops, math"


def check(name, family, kind, gemm, details, short, ops, math):
    decoded = decode(name)
    assert decoded.name == name  # the trace's spelling, mangled or not: the diff compares names byte for byte
    if family is not None:
        assert decoded.family == family
    if kind is not None:
        assert kind_of_kernel(name) == kind
    if gemm is not None:
        assert decoded.is_gemm is gemm
    found = dict(decoded.details)
    for key, value in details.items():
        assert found.get(key) == value, (key, found)
    if short is not None:
        assert decoded.short == short
    if ops is not None:
        assert decoded.ops == ops
    if math is not None:
        assert math_unit(name) == math
    # Every short name fits a table cell's two lines, however long the name.
    assert 0 < len(decoded.short) <= SHORT_LIMIT


# --- cuBLAS -----------------------------------------------------------------------------------------------------

CUBLAS = [
    # TraceLens evals/unit_tests_nv/moe/moe_05_large_capacity.json.gz (B300, sm103): nvjet names the arch since sm90
    case("nvjet_sm103_tst_512x8_64x3_2x1_v_bz_NNT", "cuBLAS (nvjet)", GEMM, True,
         {"tile": "512x8", "k-block": "64 x 3 stages", "cluster": "2x1", "layout": "NNT"}, ops=("mm",)),
    # TraceLens tests/traces/b200/eager_trace.json.gz (B200): no arch in the name; the bias add runs in the epilogue
    case("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"tile": "64x64", "k-block": "64 x 16 stages", "cluster": "2x1", "epilogue": "bias in the epilogue",
          "layout": "TNT"}, short="nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", ops=("mm", "add")),
    # this suite's H200 traces: `h` is 16-bit inputs (tensor cores), coopA a cooperative schedule
    # this suite's H100 FP8 traces (torch 2.11, CUDA 13.0; docs/fp8.md): torch._scaled_mm's e4m3 GEMMs, one scale
    # per tensor (no token), rowwise (ovscale), 1 x 128 blocks on both operands, 128 x 128 weight tiles
    case("nvjet_sm90_qqtst_128x160_128x5_2x1_v_bz_coopA_algo2_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e4m3 (A and B)", "scales": "one per tensor (tensorwise)", "tile": "128x160"},
         math="tensor cores"),
    case("nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e4m3 (A and B)", "scales": "rowwise (one per row of A, one per column of B)"}),
    case("nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_Avec128_Bvec128_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"scales": "both operands per 1 x 128 block (blockwise)"}),
    case("nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_Ablk128_Bvec128_TNN", "cuBLAS (nvjet)", GEMM, True,
         {"scales": "cuBLAS's A per 128 x 128 block, cuBLAS's B per 1 x 128 block", "layout": "TNN"}),
    # torch._scaled_mm(e5m2, e4m3) and (e4m3, e5m2) on the same H100: `r` is e5m2, B's letter first
    case("nvjet_sm90_qrtst_24x64_128x16_4x2_h_bz_algo2_TNN", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e5m2 (A), e4m3 (B)"}),
    case("nvjet_sm90_rqtst_64x24_128x16_2x4_h_bz_algo2_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e4m3 (A), e5m2 (B)"}),
    case("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"arch": "sm90 (Hopper)", "tile": "256x128", "k-block": "64 x 4 stages", "cluster": "1x2",
          "inputs": "16-bit (fp16/bf16)", "schedule": "cooperative (coopA)", "layout": "TNT"}, math="tensor cores"),
    # HTA tests/data/df_index_resolver (V100) and trace_filter (A100): fp32 SGEMMs on the CUDA cores
    case("volta_sgemm_128x64_nt", "cuBLAS", GEMM, True,
         {"arch": "sm70 (Volta)", "dtype": "fp32", "tile": "128x64", "layout": "nt"}, math="CUDA cores"),
    case("ampere_sgemm_128x128_tn", "cuBLAS", GEMM, True,
         {"arch": "sm80 (Ampere)", "dtype": "fp32", "tile": "128x128", "layout": "tn"}, math="CUDA cores"),
    # TraceLens tests/traces/h100/google_owlv2...: 118 characters, cut to a cell with an ellipsis
    case(XMMA_GEMM, "cuBLAS (xmma)", GEMM, True,
         {"arch": "sm90 (Hopper)", "dtype": "bf16", "tile": "128x128x64", "layout": "tn"},
         short=XMMA_GEMM[:SHORT_LIMIT - 1] + "…"),
    # the second kernel of a split-K GEMM adds the partial sums: no GEMM itself
    case(SPLITK_REDUCE, "cuBLAS", REDUCTION, False, {"role": "adds a split-K GEMM's partial sums"},
         short="splitKreduce_kernel", ops=("split-K reduce",)),
    # cuBLAS's GEMV: a GEMM by the words of its name
    case(GEMV, None, GEMM, True, short="gemv2T_kernel_val<…>"),
]


@pytest.mark.parametrize(FIELDS, CUBLAS)
def test_cublas(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- CUTLASS ----------------------------------------------------------------------------------------------------

CUTLASS = [
    case(CUTLASS_RELU, "CUTLASS", GEMM, True,
         {"arch": "sm80 (Ampere)", "math": "tensor cores (mma)", "dtype": "bf16", "accumulate": "fp32",
          "tile": "64x64", "k-block": "64 x 4 stages", "layout": "tn", "alignment": "8 elements",
          "epilogue": "relu in the epilogue"},
         short="cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8", ops=("mm", "relu"),
         math="tensor cores"),
    case(CUTLASS_SIMT, "CUTLASS", GEMM, True,
         {"arch": "sm80 (Ampere)", "math": "CUDA cores (simt)", "tile": "128x32", "k-block": "8 x 5 stages",
          "layout": "nn"}, math="CUDA cores"),
    case(CUTLASS_WMMA_VOLTA, "CUTLASS", GEMM, True,
         {"arch": "sm70 (Volta)", "math": "tensor cores (wmma)", "dtype": "fp16", "tile": "32x32", "layout": "tn"}),
    # DeepSeek's FP8 grouped GEMM, a CUTLASS 3 kernel of their own: read from the C++ instantiation
    case(DPSK_GROUPED_GEMM, "CUTLASS", GEMM, True, {"instantiated by": "dpsk"}, short="CUTLASS grouped GEMM"),
]


@pytest.mark.parametrize(FIELDS, CUTLASS)
def test_cutlass(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- cuDNN ------------------------------------------------------------------------------------------------------

CUDNN = [
    case(CUDNN_BN_BACKWARD, "cuDNN", NORMALIZATION, False, {"what": "batch norm, backward"},
         short="bn_bw_1C11_kernel_new<…>"),
    case(CUDNN_BN_FORWARD, "cuDNN", NORMALIZATION, False, {"what": "batch norm, forward (training)"}),
    # the layout transform around a channels-last convolution: a copy, not a convolution
    case(CUDNN_NCHW_TO_NHWC, "cuDNN", COPY, False, {"what": "layout transform NCHW -> NHWC"},
         short="nchwToNhwcKernel<…>"),
    # mangled in the trace (1,644 characters): demangled to read it, kept mangled as the name
    case(CUDNN_CUTLASS_WGRAD, "cuDNN (CUTLASS)", CONVOLUTION, False, {"what": "convolution, weight gradient"},
         short="cuDNN CUTLASS implicit-GEMM conv wgrad", ops=("convolution",)),
    case(CUDNN_XMMA_FPROP, "cuDNN (xmma)", CONVOLUTION, False,
         {"what": "convolution, forward", "arch": "sm80 (Ampere)", "dtype": "tf32", "tile": "64x128x32",
          "layout": "NHWC"}, short="cuDNN conv fprop sm80 64x128x32"),
    # HTA tests/data/critical_path/alexnet (A100)
    case("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "cuDNN", CONVOLUTION, False,
         {"what": "convolution", "arch": "sm80 (Ampere)", "dtype": "fp32", "tile": "128x64",
          "epilogue": "ReLU in the epilogue"}),
    case("cudnn_infer_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "cuDNN", CONVOLUTION, False,
         {"arch": "sm70 (Volta)", "dtype": "fp32"}),
    case(CUDNN_WINOGRAD, "cuDNN", CONVOLUTION, False, {"what": "Winograd convolution"}),
    case(CUDNN_OFFSETS, "cuDNN", CONVOLUTION, False, {"what": "convolution: index precomputation"},
         short="computeOffsetsKernel"),
    # this suite's H200 traces: cuDNN's own attention, generated for the problem
    case("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
         "cuDNN (generated)", ATTENTION, False,
         {"arch": "sm90 (Hopper)", "pass": "forward", "tile": "64x128x64", "cluster": "1x1x1"},
         short="cuDNN SDPA forward sm90 64x128x64", math="tensor cores"),
]


@pytest.mark.parametrize(FIELDS, CUDNN)
def test_cudnn(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- fused attention --------------------------------------------------------------------------------------------

ATTENTION_NAMES = [
    # traceMap's H100 vLLM trace: FlashAttention-3 inside CUTLASS's device_kernel<...>
    case(FA3_FWD, "FlashAttention-3", ATTENTION, False,
         {"pass": "forward", "arch": "sm90 (Hopper)",
          "tile": "64 query rows x 128 key/value columns, head dim 128", "dtype": "bf16"},
         short="FlashAttention-3 fwd sm90 64x128 hdim 128"),
    case(FA3_COMBINE, "FlashAttention-3", ATTENTION, False, {"role": "merges the split-KV partial outputs"},
         short="FlashAttention-3 combine"),
    # DeepSeek's training step: MLA's head dim 192 in the backward
    case(FA3_BWD, "FlashAttention-3", ATTENTION, False,
         {"pass": "backward", "tile": "64 query rows x 128 key/value columns, head dim 192", "dtype": "bf16"},
         short="FlashAttention-3 bwd sm90 64x128 hdim 192"),
    case(FA3_PREPROCESS, "FlashAttention-3", ATTENTION, False, short="FlashAttention-3 preprocess"),
    # this suite's H200 traces: PyTorch's vendored FlashAttention-2, its traits without a namespace
    case("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
         "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, "
         "false, false, true, false>(pytorch_flash::Flash_fwd_params)",
         "FlashAttention-2 (vendored in PyTorch)", ATTENTION, False,
         {"pass": "forward", "head dim": "64", "tile": "128 query rows x 128 key/value columns", "warps": "4",
          "dtype": "bf16"}, short="pytorch_flash::flash_fwd_kernel<64, 128x128, 4 warps>"),
    # the same kernel as TraceLens' H100 traces spell it (traits in pytorch_flash::): attention by its words
    case(FA2_NAMESPACED_TRAITS, None, ATTENTION, False),
    # FlashAttention-3's beta (DeepSeek's training step): attention by its words
    case(FA3_EARLY, None, ATTENTION, False),
    case("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
         "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
         "CUTLASS fused attention (SDPA memory-efficient, from xformers)", ATTENTION, False,
         {"pass": "forward", "dtype": "bf16", "tile": "64x64", "arch": "built for sm80 (Ampere)"},
         short="fmha_cutlassF_bf16_aligned_64x64_rf_sm80"),
    # Triton's attention on ROCm (TraceLens mi300 traces), and with rocprofiler-sdk's code-object suffix
    case("attn_fwd", None, ATTENTION, False, short="attn_fwd"),
    case("attn_fwd.kd", None, ATTENTION, False, short="attn_fwd"),
]


@pytest.mark.parametrize(FIELDS, ATTENTION_NAMES)
def test_attention(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- TensorRT-LLM -----------------------------------------------------------------------------------------------

TRTLLM = [
    # TraceLens' B200 vLLM trace (gpt-oss): a mixture of experts' batched GEMMs, MXFP4 weights x MXFP8 activations
    case("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
         "schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
         "TensorRT-LLM (generated)", GEMM, True,
         {"output": "MXFP8 e4m3", "inputs": "MXFP4 e2m1 x MXFP8 e4m3", "accumulate": "fp32", "tile": "128x16x256",
          "arch": "sm100 (Blackwell) (f: family-specific)"},
         short="TRT-LLM batched GEMM MXFP4 e2m1 x MXFP8 e4m3 t128x16x256", ops=("bmm",)),
    case("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
         "schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f",
         "TensorRT-LLM (generated)", GEMM, True, {"output": "bf16", "inputs": "MXFP4 e2m1 x MXFP8 e4m3"}),
    case("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
         "TensorRT-LLM (generated)", ATTENTION, False,
         {"arch": "sm100 (Blackwell)", "inputs": "fp8 e4m3", "output": "bf16", "head dim": "64",
          "pagedkv": "paged KV cache", "causal": "causal mask", "context": "context (prefill)"},
         short="TRT-LLM fmha sm100 fp8 e4m3 hdim 64"),
    # its MoE routing kernels, named by namespace (libraries.py)
    case(TRTLLM_ROUTING, "TensorRT-LLM", ROUTING, False, short="routingIndicesHistogramKernel<…>"),
]


@pytest.mark.parametrize(FIELDS, TRTLLM)
def test_trtllm(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- Triton -----------------------------------------------------------------------------------------------------

TRITON = [
    # traceMap's H100 vLLM trace (torch.compile'd Llama): x * rsqrt(mean(x²) + eps), an RMSNorm
    case("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "Inductor (Triton)", NORMALIZATION, False,
         {"kind": "reduction", "fuses": "_to_copy, add, mean, mul, pow, rsqrt"},
         ops=("_to_copy", "add", "mean", "mul", "pow", "rsqrt")),
    case("triton_poi_fused_mul_silu_1", "Inductor (Triton)", ELEMENTWISE, False, {"kind": "pointwise"},
         ops=("mul", "silu")),
    case("triton_poi_fused_cat_0", "Inductor (Triton)", COPY, False, ops=("cat",)),
    # TraceLens' xDiT Flux trace: a mean of squares, no rsqrt: a plain reduction
    case("triton_per_fused__to_copy_addmm_mean_pow_view_7", "Inductor (Triton)", REDUCTION, False,
         {"kind": "persistent reduction"}),
    # HTA tests/data/negative_queue_length_values_check: Inductor before torch 2.1 named no ops
    case("triton__0d1d2d", "Inductor (Triton, torch 2.0)", None, False,
         {"fuses": "not in the name before torch 2.1"}),
    # this suite's H200 traces: Liger-Kernel's GeGLU, and this suite's own fused GeGLU GEMM
    case("_geglu_tanh_forward_kernel", "Liger-Kernel (Triton)", ELEMENTWISE, False,
         {"op": "geglu_tanh", "pass": "forward"}),
    case("_geglu_gemm_tma_kernel", "profiling_in_pytorch (Triton)", GEMM, True, {"pass": "forward"},
         ops=("mm", "gelu", "mul")),
    # this suite's FP8 kernels (H100 traces of 10_fp8_mlp.py), and Inductor's kernel that prepares a _scaled_mm's input
    case("_fp8_geglu_gemm_kernel", "profiling_in_pytorch (Triton)", GEMM, True,
         {"dtype": "fp8 e4m3", "scales": "x per token, W per channel; m out per 1 x 128 block"}),
    case("_fp8_blockscaled_gemm_kernel", "profiling_in_pytorch (Triton)", GEMM, True, {"dtype": "fp8 e4m3"}),
    case("_quantize_rows_kernel", "profiling_in_pytorch (Triton)", None, False, {"scales": "rowwise (one per token)"}),
    case("triton_red_fused__scaled_mm__to_copy_abs_amax_clamp_clamp_min_div_gelu_mul_split_1", "Inductor (Triton)",
         None, False, ops=("_scaled_mm", "_to_copy", "abs", "amax", "clamp", "clamp_min", "div", "gelu", "mul",
                           "split")),
]


@pytest.mark.parametrize(FIELDS, TRITON)
def test_triton(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- ATen -------------------------------------------------------------------------------------------------------

ATEN = [
    case(ATEN_FILL, "ATen", COPY, False, {"op": "fill"}, short="vectorized_elementwise_kernel<fill>"),
    case(ATEN_GELU, "ATen", ELEMENTWISE, False, {"op": "gelu"}, short="vectorized_elementwise_kernel<gelu>"),
    # torch.optim's foreach AdamW: the in-place multiply of a list of tensors by a scalar
    case(ATEN_FOREACH_MUL, "ATen", OPTIMIZER, False, {"op": "_foreach_mul_"},
         short="multi_tensor_apply_kernel<_foreach_mul_>"),
    case(ATEN_MEAN, "ATen", REDUCTION, False, {"op": "mean"}, short="reduce_kernel<mean>"),
    case(ATEN_LAYER_NORM, "ATen", NORMALIZATION, False, {"op": "layer_norm"}),
    case(ATEN_SOFTMAX, "ATen", REDUCTION, False, {"op": "softmax"}, short="cunn_SoftMaxForward<softmax>"),
    case(ATEN_TOPK, "ATen", ROUTING, False, short="gatherTopK"),
    case(ATEN_INDEX_SELECT, "ATen", INDEXING, False, {"op": "index_select"}),
    case(ATEN_CAT, "ATen", COPY, False, {"op": "cat"}, short="CatArrayBatchedCopy<cat>"),
    case(ATEN_BN_STATS, "ATen", NORMALIZATION, False, short="batch_norm_collect_statistics_kernel<batch_norm>"),
    # rocprofiler-sdk's traces end a kernel's name with ` [clone .kd]`: the same kernel without it
    case(ATEN_ADD_CLONE_KD, "ATen", ELEMENTWISE, False, {"op": "add"}, short="vectorized_elementwise_kernel<add>"),
]


@pytest.mark.parametrize(FIELDS, ATEN)
def test_aten(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- NCCL, RCCL, symmetric memory -------------------------------------------------------------------------------

COLLECTIVES = [
    # traceMap's H100 vLLM trace (NCCL 2.19 on: op and type before algorithm and protocol)
    case("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "NCCL/RCCL",
         COMMUNICATION, False,
         {"collective": "AllReduce", "op": "Sum", "dtype": "bf16", "algorithm": "RING", "protocol": "LL"},
         short="ncclDevKernel_AllReduce_Sum_bf16_RING_LL", ops=("AllReduce",)),
    case("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL", COMMUNICATION, False,
         {"collective": "AllGather", "algorithm": "RING", "protocol": "LL"}),
    # RCCL on MI300X (traceMap's vLLM trace, TraceLens' DDP ResNet): the generic kernels say no collective
    case("ncclDevKernel_Generic_2(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL", COMMUNICATION, False,
         short="ncclDevKernel_Generic_2"),
    case("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL", COMMUNICATION, False),
    # HTA's test data: NCCL before 2.19, the C type last
    case("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "NCCL/RCCL", COMMUNICATION, False,
         {"collective": "AllReduce", "op": "Sum", "dtype": "fp32", "algorithm": "RING", "protocol": "LL"}),
    case("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "NCCL/RCCL", COMMUNICATION, False,
         {"collective": "SendRecv", "protocol": "SIMPLE"}),
    # TraceLens' B200 vLLM trace: PyTorch's symmetric-memory all-reduce through NVLink multicast, no NCCL
    case(MULTIMEM_ALL_REDUCE, None, COMMUNICATION, False),
]


@pytest.mark.parametrize(FIELDS, COLLECTIVES)
def test_collectives(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


def test_nccl_fields():
    found = decode_nccl("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)")
    assert (found.collective, found.op, found.dtype, found.algorithm, found.protocol) == (
        "AllReduce", "Sum", "bf16", "RING", "LL")
    assert not found.generic
    generic = decode_nccl("ncclDevKernel_Generic_2(ncclDevKernelArgsStorage<4096ul>)")
    assert generic.generic and generic.collective is None  # the launching op says which collective it ran
    assert decode_nccl("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)").dtype == "float"  # the trace's word
    assert decode_nccl(CUTLASS_RELU) is None


# --- AMD: Tensile, MIOpen, Composable Kernel, AITER -------------------------------------------------------------

AMD = [
    # TraceLens' xDiT Flux trace (MI300X): hipBLASLt's calling convention (UserArgs), bias in the epilogue, gfx942
    case(HIPBLASLT_GEMM, "Tensile (rocBLAS/hipBLASLt)", GEMM, True,
         {"inputs": "bf16", "tile": "256x256x32", "math": "matrix cores (MFMA 16x16)", "layout": "TN",
          "epilogue": "bias in the epilogue", "arch": "gfx942, CDNA3, MI300X/MI325X"},
         short="hipBLASLt GEMM TN bf16 MT256x256x32 gfx942", ops=("mm",)),
    # TraceLens' hipBLASLt micro-benchmark: a GEMM split along K in two (GSU2), then the pass that adds the halves
    case(TENSILE_SPLIT_K_GEMM, "Tensile (rocBLAS/hipBLASLt)", GEMM, True,
         {"layout": "NN", "split": "split-K (global split-U 2)", "arch": "gfx942, CDNA3, MI300X/MI325X"},
         short="Tensile GEMM NN bf16 MT256x128x64 gfx942"),
    case("Cijk_B_PostGSU2", "Tensile (rocBLAS/hipBLASLt)", REDUCTION, False,
         {"role": "adds a split-K (GSU) GEMM's partial sums"}, short="Tensile split-K reduce (PostGSU2)"),
    # traceMap's MI300X vLLM trace
    case("Cijk_SB_BiasS_HAS_ScaleAlphaVec_PostGSU4_VW4", "Tensile (rocBLAS/hipBLASLt)", REDUCTION, False,
         short="Tensile split-K reduce (PostGSU4)"),
    # HTA's MI250 trace: built for gfx90a
    case(HIPBLASLT_GFX90A, "Tensile (rocBLAS/hipBLASLt)", GEMM, True,
         {"tile": "64x16x32", "layout": "TN", "arch": "gfx90a, CDNA2, MI210/MI250"}),
    # TraceLens' normalization-layer test (MI300X)
    case("MIOpenBatchNormFwdTrainSpatial", "MIOpen", NORMALIZATION, False,
         short="MIOpen MIOpenBatchNormFwdTrainSpatial"),
    case("MIOpenBatchNormBwdSpatial", "MIOpen", NORMALIZATION, False),
    # TraceLens' DDP ResNet-18 (MI300X): MIOpen's implicit-GEMM convolutions and the transposes around them
    case(IGEMM_FWD, "MIOpen", CONVOLUTION, False,
         {"what": "implicit-GEMM convolution, forward", "layout": "NHWC", "dtype": "bf16", "tile": "128x128x32"},
         short="MIOpen igemm_fwd_nhwc_bf16_bt128x128x32"),
    case(IGEMM_WRW, "MIOpen", CONVOLUTION, False, {"what": "implicit-GEMM convolution, weight gradient"}),
    case("batched_transpose_32x32_half", "MIOpen", COPY, False, short="MIOpen batched_transpose_32x32_half"),
    case("SubTensorOpWithScalar1d", "MIOpen", ELEMENTWISE, False),
    # Composable Kernel, mangled in the traces: ck_tile's entry point says nothing, its first argument does
    case(CK_RMSNORM, "Composable Kernel", NORMALIZATION, False, short="CK Rmsnorm2dFwd<…>"),
    case(CK_GROUPED_CONV, "Composable Kernel", CONVOLUTION, False,
         short="CK kernel_grouped_conv_fwd_xdl_cshuffle_v3<…>"),
    case(CK_FMHA_PREFILL, "Composable Kernel", ATTENTION, False),
    # AITER, AMD's inference kernels: mangled, and plain
    case(AITER_RMSNORM, "AITER", NORMALIZATION, False, short="AITER add_rmsnorm_quant_kernel<…>"),
    case("aiter::fmha_fwd_hd128_bf16_rtz", "AITER", ATTENTION, False, short="AITER fmha_fwd_hd128_bf16_rtz"),
]


@pytest.mark.parametrize(FIELDS, AMD)
def test_amd(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


def test_gfx_in_tensile_names():
    assert gfx_in_name(HIPBLASLT_GEMM) == "gfx942"
    assert gfx_in_name(HIPBLASLT_GFX90A) == "gfx90a"
    assert gfx_in_name("Cijk_B_PostGSU2") is None  # the reduce pass names no ISA
    assert gfx_in_name(CUTLASS_RELU) is None
    assert gfx_label("gfx942") == "gfx942, CDNA3, MI300X/MI325X"
    assert gfx_label("gfx1234") == "gfx1234"  # unknown: the tag alone


# --- other libraries, by namespace ------------------------------------------------------------------------------

LIBRARIES = [
    # traceMap's MI300X vLLM trace: the return type `std::enable_if<...>::type` comes before the function
    case(VLLM_FUSED_ADD_RMS_NORM, "vLLM", NORMALIZATION, False, {"kernel": "fused_add_rms_norm_kernel"},
         short="fused_add_rms_norm_kernel<…>"),
    case(VLLM_RMS_NORM, "vLLM", NORMALIZATION, False, short="rms_norm_kernel<…>"),
    # mangled in ROCm traces: vLLM's and SGLang's SiLU-and-multiply
    case(VLLM_ACT_AND_MUL, "vLLM", ELEMENTWISE, False, short="act_and_mul_kernel<…>"),
    case(SGLANG_ACT_AND_MUL, "SGLang (sgl-kernel)", ELEMENTWISE, False, short="act_and_mul_kernel<…>"),
    case(VLLM_FP8_QUANT, "vLLM", ELEMENTWISE, False),
    case(VLLM_ROCM_PAGED_ATTENTION, "vLLM", ATTENTION, False),
    # DeepSeek's training step: DeepEP's dispatch is expert parallelism's all-to-all
    case(DEEPEP_DISPATCH, "DeepEP", COMMUNICATION, False, short="dispatch<…>"),
    case(DPSK_TRANSPOSE, "DeepSeek's kernels", COPY, False),
    case(CUB_RADIX_SORT, "CUB", ROUTING, False),
    # HTA's trace_diff data: a recommendation model's embedding tables
    case(FBGEMM_EMBEDDING, "FBGEMM", INDEXING, False),
    # torchvision's detection ops (a Faster R-CNN step's box head): RoIAlign and RoIPool pool each box's bins, forward
    # and backward, as pooling is a reduction; NMS picks the boxes to keep; deform_conv2d's im2col is a convolution's
    case(TV_ROI_ALIGN, "torchvision", REDUCTION, False, short="roi_align_forward_kernel_impl<…>"),
    case(TV_ROI_ALIGN_BACKWARD, "torchvision", REDUCTION, False),
    case(TV_ROI_POOL, "torchvision", REDUCTION, False),
    case(TV_NMS, "torchvision", ROUTING, False, short="nms_kernel_impl<…>"),
    case(TV_DEFORM_IM2COL, "torchvision", CONVOLUTION, False),
    # Apex's fused LayerNorm backward: the input's gradient and gamma's and beta's, named for neither
    case(APEX_LN_GRAD_INPUT, "Apex", NORMALIZATION, False),
    case(APEX_LN_GAMMA_BETA, "Apex", NORMALIZATION, False),
]


@pytest.mark.parametrize(FIELDS, LIBRARIES)
def test_libraries(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


@pytest.mark.parametrize("op, kind", [("torchvision::roi_align", REDUCTION), ("torchvision::_roi_align_backward", REDUCTION),
                                      ("torchvision::ps_roi_pool", REDUCTION), ("torchvision::nms", ROUTING),
                                      ("torchvision::deform_conv2d", CONVOLUTION)])
def test_torchvisions_ops_are_their_kernels_kind(op, kind):
    assert kind_of_op(op) == kind  # the CPU op's row, and the kind of a kernel whose name says nothing


# --- demangling -------------------------------------------------------------------------------------------------
# Expected strings are c++filt's (GNU binutils), run once by hand; the tests do not call it. Where this demangler
# spells a construct differently from c++filt, the expectation says how, and why that is no error.

CUTLASS_SYMBOL = "_ZN7cutlass6KernelI50cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4EEvNT_6ParamsE"
NCCL_SYMBOL = "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE"
VLLM_SYMBOL = "_ZN4vllm15rms_norm_kernelIN3c108BFloat16ELi8ELi2EEEvPT_PKS3_lllllS6_fii"
FILL_SYMBOL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"


@pytest.mark.parametrize("symbol, expected", [
    (CUTLASS_SYMBOL, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
                     "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)"),
    (NCCL_SYMBOL, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    # the very name TraceLens' B200 trace carries for this kernel, demangled by CUPTI
    (VLLM_SYMBOL, VLLM_RMS_NORM),
])
def test_demangle_matches_cxxfilt(symbol, expected):
    assert demangle(symbol) == expected


def test_demangle_closes_nested_templates_without_a_space():
    # c++filt writes `std::array<char*, 1ul> >(int, ...)`, C++03's spelling; this demangler C++11's `>>`
    cxxfilt = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
               "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert demangle(FILL_SYMBOL) == cxxfilt.replace("> >", ">>")


def test_demangle_bf16():
    # `DF16b` is std::bfloat16_t to c++filt (C++23's name), __bf16 to this demangler (the compilers' type): the same
    cxxfilt = ("void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 64, 8, false, false, true, 1>"
               "(std::bfloat16_t*, std::bfloat16_t*, float*, std::bfloat16_t*, std::bfloat16_t*, std::bfloat16_t*, "
               "double, int, int, int, int, int, int, int, bool)")
    assert demangle(AITER_RMSNORM) == cxxfilt.replace("std::bfloat16_t", "__bf16")


def test_demangle_leaves_other_names_alone():
    assert demangle("attn_fwd") == "attn_fwd"
    assert demangle(CUTLASS_RELU) == CUTLASS_RELU  # demangled already
    assert demangle("_Z") == "_Z"  # not a symbol at all: unchanged, no exception
    assert demangle("_ZN3foo") == "foo(…)"  # a nested name cut before its end: what could be read of it


def test_demangle_a_truncated_symbol_quickly():
    # Traces cut long names (CUPTI, roctracer): the reader must stop at the end, not wait for a character that will
    # not come, and give back what it could read. 700 of Composable Kernel's 1,953 characters:
    cut = CK_BWD_WEIGHT[:700]
    start = time.perf_counter()
    found = demangle(cut)
    assert time.perf_counter() - start < 1.0
    assert found == "ck::tensor_operation::device::kernel_batched_gemm_xdlops_bwd_weight<…>(…)"
    assert decode(cut).short == "CK kernel_batched_gemm_xdlops_bwd_weight<…>"


def test_demangle_deep_nesting_returns():
    # thousands of nested template argument lists: the reader gives up (RecursionError caught), never raises
    symbol = "_ZN1a" + "1bI" * 3000 + "i" + "E" * 3000 + "Ev"
    start = time.perf_counter()
    assert isinstance(demangle(symbol), str)
    assert time.perf_counter() - start < 2.0


# --- naming the GPU ---------------------------------------------------------------------------------------------

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"


def test_gpu_nvidia_with_properties():
    properties = {"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "warpSize": 32}
    assert gpu_label(properties, [NVJET], ["cudaLaunchKernel"]) == "NVIDIA H100 80GB HBM3 (sm90)"
    blackwell = {"name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0}
    assert gpu_label(blackwell, [], []) == "NVIDIA B200 (sm100)"


def test_gpu_amd_mi300x_properties():
    # ROCm reports gfx942 as compute capability 9.4: not an sm
    properties = {"name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4, "warpSize": 64}
    assert gpu_label(properties, [HIPBLASLT_GEMM], ["hipLaunchKernel"]) == (
        "AMD Instinct MI300X (gfx942, CDNA3, MI300X/MI325X)")


def test_gpu_amd_with_empty_name():
    # TraceLens' vLLM graph traces: an empty name, 9.4 and 64-wide wavefronts are all there is
    properties = {"name": "", "computeMajor": 9, "computeMinor": 4, "warpSize": 64}
    assert gpu_label(properties, [], []) == "an AMD GPU (gfx942, CDNA3, MI300X/MI325X)"
    # without warpSize, the HIP runtime's calls say AMD
    properties = {"name": "", "computeMajor": 9, "computeMinor": 4}
    assert gpu_label(properties, ["attn_fwd"], ["hipLaunchKernel"]) == "an AMD GPU (gfx942, CDNA3, MI300X/MI325X)"


def test_gpu_amd_by_kernel_names_where_the_name_says_nothing():
    # HTA's MI250 trace: "AMD Radeon Graphics", 9.0 (gfx908 or gfx90a): Tensile's ISA tag decides
    properties = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "warpSize": 64}
    assert gpu_label(properties, [HIPBLASLT_GFX90A], []) == (
        "AMD Radeon Graphics (gfx90a, CDNA2, MI210/MI250, inferred from kernel names)")


def test_gpu_without_properties():
    assert gpu_label({}, [NVJET], ["cudaLaunchKernel"]) == "an NVIDIA GPU (sm90 Hopper, inferred from kernel names)"
    assert gpu_label({}, ["volta_sgemm_128x64_nt", CUDNN_WINOGRAD], []) == (
        "an NVIDIA GPU (sm70 Volta, inferred from kernel names)")
    assert gpu_label({}, [HIPBLASLT_GEMM, "Cijk_B_PostGSU2"], ["hipExtModuleLaunchKernel"]) == (
        "an AMD GPU (gfx942, CDNA3, MI300X/MI325X, inferred from kernel names)")
    # GPU work whose names say no architecture is still GPU work
    assert gpu_label({}, ["attn_fwd"], ["cudaLaunchKernel"]) == (
        "an NVIDIA GPU (no device properties; its kernels do not name an architecture)")


def test_gpu_none_without_gpu_work():
    assert gpu_label({}, [], []) is None
    assert gpu_label({}, [], ["cudaGetDeviceCount"]) is None


# --- names whose words mislead one by one, read by what the kernel does ---------------------------------------------

MISLEADING = [
    # (name, kind, family or None to leave it unchecked, is_gemm)
    ("void vllm::cross_device_reduce_1stage<c10::BFloat16, 4>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
     "c10::BFloat16*, int, int)", "communication", "vLLM", False),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(long "
     "const*, __nv_bfloat16*, int)", "copy and memset", "vLLM", False),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, int)",
     "elementwise", "vLLM", False),
    ("void fbgemm_gpu::_FP8rowwise_to_float_cuda_kernel<float>(unsigned char const*, int, int, float*)", "elementwise",
     "FBGEMM", False),
    ("void at::to_dense_representation_kernel<float>(long, long, long const*, float const*, long const*, float*)",
     "copy and memset", None, False),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>("
     "cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)", "convolution",
     "CUTLASS (in cuDNN)", False),
    ("void scal_kernel<float, float, 1, true, 6, 5, 5, 3>(cublasTransposeParams<float>, float const*, float*, float "
     "const*)", "elementwise", None, False),
    ("triton_poi_fused_addmm_gelu_view_15", "elementwise", "Inductor (Triton)", False),
    ("triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10", "copy and memset",
     "Inductor (Triton)", False),
    ("triton_red_fused_add_addmm_mul_native_layer_norm_split_unsqueeze_view_6", "normalization", "Inductor (Triton)",
     False),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "convolution", "cuDNN", False),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
     "communication", "PyTorch symmetric memory", False),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true>("
     "pytorch_flash::Flash_fwd_params)", "attention", "FlashAttention-2 (vendored in PyTorch)", False),
    ("void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)0, "
     "__nv_bfloat16, 16, false>(int, int, __nv_bfloat16 const*, float const*, flashinfer::QuantizationSFLayout)",
     "elementwise", "TensorRT-LLM", False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::logical_and_kernel_cuda(at::TensorIterator&)::"
     "{lambda()#1}::operator()() const::{lambda(bool, bool)#1}, std::array<char*, 3ul> >(int, ...)", "elementwise",
     "ATen", False),
    ("void cub::DeviceCompactInitKernel<cub::ReduceByKeyScanTileState<int, int, true>, int*>(cub::ReduceByKeyScanTile"
     "State<int, int, true>, int, int*)", "other", "CUB", False),  # its name says nothing (no `act`): the op decides
]


@pytest.mark.parametrize("name, kind, family, gemm", MISLEADING, ids=[n[:50] for n, *_ in MISLEADING])
def test_misleading_words_give_the_right_kind(name, kind, family, gemm):
    decoded = decode(name)
    assert kind_of_kernel(name) == kind, decoded
    if family is not None:
        assert decoded.family == family
    assert decoded.is_gemm is gemm


def test_blackwell_sm103_and_an_empty_device_name_are_named():
    assert dict(decode("nvjet_sm103_tst_512x8_64x3_2x1_v_bz_NNT").details)["arch"] == "sm103 (Blackwell)"
    assert gpu_label({"name": "", "computeMajor": 9, "computeMinor": 0}, [], ["cudaLaunchKernel"]) == "an NVIDIA GPU (sm90)"


# --- Inductor's templates and library helpers: the class of work, not a name's first words ------------------------
# Inductor writes a template kernel (`triton_tem_fused_<ops>_<n>`) for a matrix product or one like it; the first op it
# names that is one says which, the ops after it are its epilogue. A FlexAttention causal forward and backward under
# torch.compile (H200, torch 2.11) ran `triton_tem_fused_flex_attention_0` and `..._backward_1`, 65% of its step.


@pytest.mark.parametrize("name, kind", [
    ("triton_tem_fused_flex_attention_0", ATTENTION),
    ("triton_tem_fused_flex_attention_backward_1", ATTENTION),
    ("triton_tem_fused_flex_decoding_2", ATTENTION),
    ("triton_tem_fused_mm_3", GEMM),
    ("triton_tem_fused_addmm_gelu_4", GEMM),  # the GELU is the epilogue
    ("triton_tem_fused_bmm_5", GEMM),
    ("triton_tem_fused__scaled_mm_6", GEMM),
    ("triton_tem_fused_convolution_7", CONVOLUTION),
    ("triton_tem_fused_convolution_relu_8", CONVOLUTION),
    ("triton_tem_fused_9", GEMM),  # a template names no op: Inductor's templates are products
    ("triton_poi_fused_addmm_gelu_10", ELEMENTWISE),  # a pointwise kernel after an addmm stays pointwise
])
def test_inductor_templates_by_the_product_they_fuse(name, kind):
    decoded = decode(name)
    assert decoded.inductor_kind == ("pointwise" if name.startswith("triton_poi_") else "template")
    assert kind_of_kernel(name) == kind
    assert kind_of_kernel(name, launched_by="aten::add") == kind  # the name commits: no op overrides it
    assert decoded.is_gemm is (kind == GEMM)


# cuDNN's SDPA backward (T5 fp16 AMP training, H200): helpers whose names say no work cuDNN is known for.
CUDNN_SDPA_HELPERS = (
    "void cudnn::fusion::compute_dot_do_o_specialized<__half, 128, 8>(cudnn::fusion::ComputeDotDoOParams)",
    "void cudnn::fusion::convert_dq_to_16bits<__half, float>(float const*, __half*, long, long, long, long, long)",
)


@pytest.mark.parametrize("name", CUDNN_SDPA_HELPERS)
def test_a_library_helper_is_the_kind_of_the_op_that_launched_it(name):
    assert decode(name).family == "cuDNN" and not decode(name).work
    assert kind_of_kernel(name, launched_by="aten::_cudnn_attention_backward") == ATTENTION
    assert kind_of_kernel(name, launched_by="aten::cudnn_convolution") == CONVOLUTION
    assert kind_of_kernel(name) == (ELEMENTWISE if "convert" in name else CONVOLUTION)  # no op: the library's kind


@pytest.mark.parametrize("name, kind", [
    # a helper whose words say what it does to memory keeps it, whichever op launched it
    ("void cudnn::ops::nhwcAddPaddingKernel<__nv_bfloat16, float, 32, 8, false>(cudnn::ops::nhwcAddPaddingParams)",
     COPY),
    ("void cudnn::cnn::im2col4d_kernel<float, int>(cudnn::cnn::im2col4d_params, int, int, int, float const*)",
     CONVOLUTION),
    ("void cudnn::engines_precompiled::tensorTransformGeneric<float, float, float, true, false, false>(float const*)",
     COPY),
])
def test_a_library_helper_that_names_its_work_keeps_it(name, kind):
    assert kind_of_kernel(name, launched_by="aten::_cudnn_attention_backward") == kind
