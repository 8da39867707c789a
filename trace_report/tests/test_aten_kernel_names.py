"""ATen's templated kernel names, decoded to what they compute (kernels.aten): the foreach ops behind
torch.optim's foreach AdamW, the fused optimizers, elementwise functors and lambdas, kernels in anonymous namespaces.
The names are as torch 2.11's CUDA kernels are named in H200 traces."""

from __future__ import annotations

import pytest

from trace_report.kernels import decode

ANON = "at::native::(anonymous namespace)::"
CASES = [
    (f"void {ANON}multi_tensor_apply_kernel<{ANON}TensorListMetadata<2>, {ANON}TernaryOpScalarFunctor<c10::BFloat16, 2, 2, 0>, at::native::LerpFunctor<float>, float>({ANON}TensorListMetadata<2>, {ANON}TernaryOpScalarFunctor<c10::BFloat16, 2, 2, 0>, at::native::LerpFunctor<float>, float)",
     "multi_tensor_apply_kernel<_foreach_lerp_>", "the first moment"),
    (f"void {ANON}multi_tensor_apply_kernel<{ANON}TensorListMetadata<2>, {ANON}UnaryOpFunctor<c10::BFloat16, 2, 1, 1>, at::native::Sqrt<float> >({ANON}TensorListMetadata<2>, {ANON}UnaryOpFunctor<c10::BFloat16, 2, 1, 1>, at::native::Sqrt<float>)",
     "multi_tensor_apply_kernel<_foreach_sqrt>", "√exp_avg_sq"),  # out of place: the result is a new list
    (f"void {ANON}multi_tensor_apply_kernel<{ANON}TensorListMetadata<1>, {ANON}BinaryOpScalarFunctor<c10::BFloat16, 1, 1, 0>, std::multiplies<float>, float>({ANON}TensorListMetadata<1>, {ANON}BinaryOpScalarFunctor<c10::BFloat16, 1, 1, 0>, std::multiplies<float>, float)",
     "multi_tensor_apply_kernel<_foreach_mul_>", "weight decay"),
    (f"void {ANON}multi_tensor_apply_kernel<{ANON}TensorListScalarListMetadata<float, 3>, {ANON}PointwiseOpScalarListFunctor<c10::BFloat16, 3, 3, 0>, std::divides<float> >({ANON}TensorListScalarListMetadata<float, 3>, {ANON}PointwiseOpScalarListFunctor<c10::BFloat16, 3, 3, 0>, std::divides<float>)",
     "multi_tensor_apply_kernel<_foreach_addcdiv_>", "the update"),
    (f"void {ANON}multi_tensor_apply_kernel<{ANON}FusedOptimizerTensorListMetadata<4>, {ANON}FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*>({ANON}FusedOptimizerTensorListMetadata<4>, {ANON}FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*)",
     "multi_tensor_apply_kernel<_fused_adamw_>", "fused AdamW"),
    (f"void {ANON}multi_tensor_apply_kernel<{ANON}TensorListMetadata<1>, {ANON}LpNormFunctor<float, ({ANON}NormType)1, float, float>, float*, int>({ANON}TensorListMetadata<1>, {ANON}LpNormFunctor<float, ({ANON}NormType)1, float, float>, float*, int)",
     "multi_tensor_apply_kernel<_foreach_norm>", ""),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel<mse>", ""),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16, c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16, c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, ...)",
     "elementwise_kernel<mse_backward>", ""),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, ...)",
     "vectorized_elementwise_kernel<silu>", ""),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, ...)",
     "elementwise_kernel<mul>", ""),
    (f"void {ANON}indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, long)",
     "indexSelectLargeIndex<index_select>", ""),
    (f"void {ANON}cunn_SoftMaxForward<4, float, float, float, {ANON}LogSoftMaxForwardEpilogue>(float*, float const*, int)",
     "cunn_SoftMaxForward<log_softmax>", ""),
    (f"void {ANON}nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
     "nll_loss_forward_reduce_cuda_kernel_2d<nll_loss_forward>", ""),
    (f"void {ANON}embedding_backward_feature_kernel<c10::BFloat16, float, long>(long const*, c10::BFloat16 const*, c10::BFloat16*, int, long, int, int)",
     "embedding_backward_feature_kernel<embedding_backward>", ""),
    (f"void {ANON}CatArrayBatchedCopy_aligned16_contig<{ANON}OpaqueType<2u>, unsigned int, 4, 64, 64>({ANON}OpaqueType<2u>*, int, unsigned int)",
     "CatArrayBatchedCopy_aligned16_contig<cat>", ""),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4, 4>)",
     "reduce_kernel<norm>", ""),
]


@pytest.mark.parametrize("name, short, role", CASES, ids=[short for _, short, _ in CASES])
def test_an_aten_template_reads_as_what_it_computes(name, short, role):
    decoded = decode(name)
    assert decoded.short == short
    assert decoded.family == "ATen"
    assert not decoded.short.startswith("at::")
    assert role in decoded.describe()


def test_the_kernels_whose_op_was_read_already_keep_their_reading():
    gelu = ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
            "at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
            "std::array<char*, 2ul> >(int, ...)")
    assert decode(gelu).short == "vectorized_elementwise_kernel<gelu>"
