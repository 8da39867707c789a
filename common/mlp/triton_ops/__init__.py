"""Triton kernels used by the lessons, kept apart from the nn.Modules that call them."""

from common.mlp.triton_ops.geglu_gemm import geglu_gemm, gelu_tanh_mul, interleave_gate_up, uses_tma

__all__ = ["geglu_gemm", "gelu_tanh_mul", "interleave_gate_up", "uses_tma"]
