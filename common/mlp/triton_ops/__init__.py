"""Triton kernels, apart from the nn.Modules that call them: `geglu` holds the gate/up GEMM with the GeGLU in its
epilogue and the host code that launches it."""

from common.mlp.triton_ops.geglu import geglu_gemm, interleave_gate_up, uses_tma

__all__ = ["geglu_gemm", "interleave_gate_up", "uses_tma"]
