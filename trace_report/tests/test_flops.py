"""FLOPs and bytes per call by op family (trace_report/flops/), against counts made by hand from the shapes."""

from __future__ import annotations

import pytest

from trace_report.flops import op_cost
from trace_report.flops.attention import NOT_RECORDED, causal_pairs
from trace_report.flops.gemm import OUT_DTYPE_NOT_RECORDED
from trace_report.model import CpuOp

BF16, FP32, I64, FP8 = "c10::BFloat16", "float", "long int", "c10::Float8_e4m3fn"


def op(name: str, *inputs, concrete: tuple = ()) -> CpuOp:
    """An op as the reader makes it: (shape, type) per argument; a scalar argument is ((), "Scalar")."""
    return CpuOp(name, 0.0, 1.0, 0, 0, input_dims=tuple(shape for shape, _ in inputs),
                 input_types=tuple(kind for _, kind in inputs), concrete_inputs=concrete)


# --- GEMMs --------------------------------------------------------------------------------------------------------


def test_the_posts_gate_gemm():
    """[8192, 768] x [768, 3072] bf16: 2·8192·768·3072 FLOPs; A, B read and C written once, 2 bytes each."""
    cost = op_cost(op("aten::mm", ((8192, 768), BF16), ((768, 3072), BF16)))
    assert cost.family == "GEMM" and cost.dtype == "bf16"
    assert cost.flops == 38_654_705_664
    assert cost.bytes == (8192 * 768 + 768 * 3072 + 8192 * 3072) * 2 == 67_633_152


def test_addmm_reads_its_bias_and_does_not_count_its_add():
    cost = op_cost(op("aten::addmm", ((3072,), BF16), ((8192, 768), BF16), ((768, 3072), BF16), ((), "Scalar"),
                      ((), "Scalar")))
    assert cost.flops == 38_654_705_664
    assert cost.bytes == 67_633_152 + 3072 * 2


def test_linear_and_matmul_flatten_the_leading_dimensions():
    """linear(x [64, 128, 768], W [3072, 768]) and matmul(x, Wᵀ [768, 3072]) are the gate GEMM: 64·128 = 8192 rows."""
    linear = op_cost(op("aten::linear", ((64, 128, 768), BF16), ((3072, 768), BF16), ((), "")))
    matmul = op_cost(op("aten::matmul", ((64, 128, 768), BF16), ((768, 3072), BF16)))
    assert linear.flops == matmul.flops == 38_654_705_664
    assert linear.bytes == matmul.bytes == 67_633_152


def test_matmul_of_a_vector_and_a_batch_that_broadcasts():
    assert op_cost(op("aten::matmul", ((768,), BF16), ((768, 3072), BF16))).flops == 2 * 768 * 3072
    # [8, 1, 32, 64] x [16, 64, 32]: batch 8×16, M=32, K=64, N=32
    assert op_cost(op("aten::matmul", ((8, 1, 32, 64), FP32), ((16, 64, 32), FP32))).flops == 2 * 128 * 32 * 64 * 32


def test_bmm_of_the_naive_attention():
    """Q·Kᵀ of 8 sequences × 16 heads of 1024 × 64: 128 products of [1024, 64] x [64, 1024]."""
    cost = op_cost(op("aten::bmm", ((128, 1024, 64), BF16), ((128, 64, 1024), BF16)))
    assert cost.flops == 2 * 128 * 1024 * 1024 * 64 == 17_179_869_184
    assert cost.bytes == 2 * (128 * 1024 * 64 * 2) + 128 * 1024 * 1024 * 2


def test_scaled_mm_says_its_output_type_is_assumed():
    cost = op_cost(op("aten::_scaled_mm", ((4096, 4096), FP8), ((4096, 4096), FP8), ((), FP32), ((), FP32),
                      ((), ""), ((), ""), ((), "Scalar"), ((), "Scalar")))
    assert cost.dtype == "fp8" and cost.flops == 2 * 4096**3
    # fp8 in, bf16 out; the 0-dim scales weigh nothing in op_bytes' model (a 0-dim tensor is 0 bytes)
    assert cost.bytes == 2 * 4096 * 4096 * 1 + 4096 * 4096 * 2
    assert cost.note == OUT_DTYPE_NOT_RECORDED


def test_grouped_mm_counts_each_row_in_one_group():
    """[ΣM=1024, K=2048] x [8 experts, 2048, 4096], offsets [8]: 1024 rows, each through one expert's weight."""
    cost = op_cost(op("aten::_grouped_mm", ((1024, 2048), BF16), ((8, 2048, 4096), BF16), ((8,), "int")))
    assert cost.flops == 2 * 1024 * 2048 * 4096
    assert cost.bytes == (1024 * 2048 + 8 * 2048 * 4096 + 1024 * 4096) * 2 + 8 * 4


# --- attention ----------------------------------------------------------------------------------------------------


def test_causal_pairs_top_left_and_bottom_right():
    assert causal_pairs(256, 256) == 256 * 257 // 2 == 32_896
    assert causal_pairs(4, 6) == 1 + 2 + 3 + 4  # query i sees keys 0..i
    assert causal_pairs(4, 6, bottom_right=True) == 3 + 4 + 5 + 6  # query i sees keys 0..i+2


GQA = (((4, 32, 256, 64), BF16), ((4, 8, 256, 64), BF16), ((4, 8, 256, 64), BF16))  # Llama-1B's 32 query, 8 kv heads


def test_cudnn_attention_causal_as_recorded():
    """_cudnn_attention_forward(q, k, v, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k, compute_log_sumexp,
    dropout_p, is_causal, ...): is_causal at 10. 4·32 query heads, 256·257/2 pairs, 2·(64+64) FLOPs a pair."""
    scalars = (((), ""),) * 3 + (((), "Scalar"),) * 7
    concrete = ("", "", "", "", "", "", "256", "256", "True", "0.", "True", "False", "0.125")
    cost = op_cost(op("aten::_cudnn_attention_forward", *GQA, *scalars, concrete=concrete))
    assert cost.family == "attention" and cost.note == "causal"
    assert cost.flops == 2 * 128 * 32_896 * 128 == 1_077_936_128
    q, kv = 4 * 32 * 256 * 64 * 2, 4 * 8 * 256 * 64 * 2
    assert cost.bytes == q + 2 * kv + q  # q, k, v read, O (q's size: Dv = D) written


def test_attention_without_its_mask_recorded_counts_every_pair_and_says_so():
    cost = op_cost(op("aten::_scaled_dot_product_cudnn_attention", *GQA, *(((), "Scalar"),) * 6))
    assert cost.flops == 2 * 128 * 256 * 256 * 128
    assert cost.note == NOT_RECORDED


def test_attention_backward_counts_its_four_products():
    """_scaled_dot_product_flash_attention_backward(dO, q, k, v, out, logsumexp, ..., is_causal at 11): twice the
    forward; dQ, dK, dV written."""
    shape = ((2, 16, 1024, 64), BF16)
    lse = ((2, 16, 1024), FP32)
    concrete = ("",) * 11 + ("False",)
    cost = op_cost(op("aten::_scaled_dot_product_flash_attention_backward", shape, shape, shape, shape, shape, lse,
                      *(((), "Scalar"),) * 9, concrete=concrete))
    forward = 2 * 32 * 1024 * 1024 * 128
    assert cost.flops == 2 * forward
    tensor = 2 * 16 * 1024 * 64 * 2
    assert cost.bytes == 5 * tensor + 2 * 16 * 1024 * 4 + 3 * tensor


def test_flash_kernels_own_op_is_batch_sequence_heads():
    """_flash_attention_forward takes [B, S, H, D]: 2 × 1024 tokens × 16 heads."""
    shape = ((2, 1024, 16, 64), BF16)
    concrete = ("",) * 8 + ("True",)
    cost = op_cost(op("aten::_flash_attention_forward", shape, shape, shape, *(((), "Scalar"),) * 8,
                      concrete=concrete))
    assert cost.flops == 2 * 32 * (1024 * 1025 // 2) * 128


# --- convolutions -------------------------------------------------------------------------------------------------


def test_resnet_stem_convolution():
    """miopen_convolution(x [10, 3, 224, 224], w [64, 3, 7, 7], bias, padding 3, stride 2, dilation 1): 112×112
    outputs per channel, 3·7·7 multiply-adds each."""
    concrete = ("", "", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "True")
    cost = op_cost(op("aten::miopen_convolution", ((10, 3, 224, 224), BF16), ((64, 3, 7, 7), BF16), ((), ""),
                      *(((), "ScalarList"),) * 3, *(((), "Scalar"),) * 3, concrete=concrete))
    assert cost.flops == 2 * 10 * 64 * 112 * 112 * 3 * 7 * 7 == 2_360_279_040
    assert cost.bytes == (10 * 3 * 224 * 224 + 64 * 3 * 49 + 10 * 64 * 112 * 112) * 2


def test_convolution_without_its_stride_counts_nothing():
    cost = op_cost(op("aten::cudnn_convolution", ((32, 3, 224, 224), FP32), ((64, 3, 7, 7), FP32)))
    assert cost.family == "convolution" and cost.flops is None and "not recorded" in cost.note


def test_convolution_backward_counts_the_gradients_asked_for():
    """dO [10, 64, 112, 112], w [64, 3, 7, 7]: the forward's 2,360,279,040 FLOPs per gradient."""
    grad, x, w = ((10, 64, 112, 112), BF16), ((10, 3, 224, 224), BF16), ((64, 3, 7, 7), BF16)
    both = ("",) * 10 + ("[True, True, False]",)
    weight_only = ("",) * 10 + ("[False, True, False]",)
    args = (grad, x, w, *(((), "ScalarList"),) * 4, ((), "Scalar"), ((), "ScalarList"), ((), "Scalar"),
            ((), "ScalarList"))
    assert op_cost(op("aten::convolution_backward", *args, concrete=both)).flops == 2 * 2_360_279_040
    assert op_cost(op("aten::convolution_backward", *args, concrete=weight_only)).flops == 2_360_279_040


# --- norms, softmax, lookups, pointwise, reductions -----------------------------------------------------------------


def test_layer_norm_and_rms_norm():
    x, w = ((8192, 768), BF16), ((768,), BF16)
    elements = 8192 * 768
    layer = op_cost(op("aten::native_layer_norm", x, ((), "ScalarList"), w, w, ((), "Scalar")))
    assert layer.flops == 8 * elements  # mean 1, variance 3, normalize 2, affine 2
    assert layer.bytes == 2 * elements * 2 + 2 * 768 * 2  # x read, y written, γ and β read
    rms = op_cost(op("aten::_fused_rms_norm", x, ((), "ScalarList"), w, ((), "Scalar")))
    assert rms.flops == 4 * elements and rms.bytes == 2 * elements * 2 + 768 * 2


def test_softmax_of_the_naive_attention():
    cost = op_cost(op("aten::_softmax", ((8, 16, 1024, 1024), BF16), ((), "Scalar"), ((), "Scalar")))
    elements = 8 * 16 * 1024 * 1024
    assert cost.flops == 5 * elements and cost.bytes == 2 * elements * 2


def test_embedding_reads_the_rows_it_picks():
    """Llama's 128,256 × 2048 table, 4 × 256 tokens: 1024 rows read, as many written, the indices read."""
    cost = op_cost(op("aten::embedding", ((128256, 2048), BF16), ((4, 256), I64), ((), "Scalar"), ((), "Scalar"),
                      ((), "Scalar")))
    assert cost.flops == 0
    assert cost.bytes == 2 * 1024 * 2048 * 2 + 1024 * 8


def test_pointwise_ops_of_the_posts_mlp():
    x = ((64, 128, 3072), BF16)
    elements = 64 * 128 * 3072
    mul = op_cost(op("aten::mul", x, x))
    assert mul.family == "elementwise" and mul.flops == elements and mul.bytes == 3 * elements * 2
    gelu = op_cost(op("aten::gelu", x, ((), "")))
    assert gelu.flops == 8 * elements and gelu.bytes == 2 * elements * 2


def test_a_sum_over_the_last_dimension():
    cost = op_cost(op("aten::sum", ((4, 256, 256), BF16), ((), "ScalarList"), ((), "Scalar"), ((), "")))
    assert cost.flops == 4 * 256 * 256 and cost.bytes == 4 * 256 * 256 * 2 + 4 * 256 * 2


def test_foreach_counts_flops_not_bytes():
    cost = op_cost(op("aten::_foreach_mul_", (([3072, 768], [768, 3072]), "TensorList"), ((), "Scalar")))
    assert cost.flops == 2 * 3072 * 768 and cost.bytes is None and "element type is not recorded" in cost.note


def test_an_op_no_table_knows_has_no_cost():
    assert op_cost(op("vllm::moe_forward", ((888, 3072), BF16), ((888, 128), BF16))) is None
    assert op_cost(op("aten::some_new_op", ((8, 8), BF16))) is None


@pytest.mark.parametrize("name", ["aten::mm", "aten::_softmax", "aten::native_layer_norm", "aten::mul"])
def test_an_op_recorded_without_shapes_is_of_its_family_with_no_numbers(name):
    cost = op_cost(CpuOp(name, 0.0, 1.0, 0, 0))
    assert cost is not None and cost.flops is None and cost.bytes is None


def test_vllms_cache_write_and_fp8_quantization():
    """reshape_and_cache_flash: 888 tokens' key and value [888, 1, 64] bf16 into fp8 caches (1 byte), int64 slots."""
    kv = ((888, 1, 64), BF16)
    cache = ((4213816, 16, 1, 64), "unsigned char")
    cost = op_cost(op("_C_cache_ops::reshape_and_cache_flash", kv, kv, cache, cache, ((888,), I64), ((), ""),
                      ((), FP32), ((), FP32)))
    assert cost.flops == 0 and cost.bytes == 2 * 888 * 64 * 2 + 888 * 8 + 2 * 888 * 64 * 1
    quant = op_cost(op("_C::static_scaled_fp8_quant", ((888, 512), FP8), ((888, 512), BF16), ((), FP32)))
    assert quant.flops == 2 * 888 * 512 and quant.bytes == 888 * 512 * (2 + 1)


def test_an_out_buffer_is_written_not_read():
    """Inductor calls `mm(a, b, out=buf)`: the trace records buf as a third tensor; the product is written once."""
    plain = op_cost(op("aten::mm", ((1024, 2048), BF16), ((2048, 8192), BF16)))
    into = op_cost(op("aten::mm", ((1024, 2048), BF16), ((2048, 8192), BF16), ((1024, 8192), BF16)))
    assert into.flops == plain.flops == 2 * 1024 * 2048 * 8192
    assert into.bytes == plain.bytes == (1024 * 2048 + 2048 * 8192 + 1024 * 8192) * 2
