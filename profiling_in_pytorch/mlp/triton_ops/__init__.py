"""Triton kernels, apart from the nn.Modules that call them: `geglu` holds the gate/up GEMM with the GeGLU in its
epilogue and the host code that launches it, `geglu_backward` (`geglu_gemm_backward`) the down projection's data-gradient GEMM with the
GeGLU derivative in its epilogue, `fp8_geglu` the FP8 forward's kernels (x's cast, the e4m3 gate/up GEMM that writes
m in e4m3 with 1 x 128-block scales, a block-scaled down GEMM)."""

from profiling_in_pytorch.mlp.triton_ops.fp8_geglu import fp8_blockscaled_gemm, fp8_geglu_gemm, quantize_rows
from profiling_in_pytorch.mlp.triton_ops.geglu import geglu_gemm, interleave_gate_up, uses_tma
from profiling_in_pytorch.mlp.triton_ops.geglu_backward import backward_uses_tma, geglu_gemm_backward

__all__ = ["backward_uses_tma", "fp8_blockscaled_gemm", "fp8_geglu_gemm", "geglu_gemm", "geglu_gemm_backward",
           "interleave_gate_up", "quantize_rows", "uses_tma"]
