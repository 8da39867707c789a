"""Triton kernels, apart from the nn.Modules that call them: `geglu` holds the gate/up GEMM with the GeGLU in its
epilogue and the host code that launches it, `geglu_backward` (`geglu_gemm_backward`) the down projection's data-gradient GEMM with the
GeGLU derivative in its epilogue."""

from profiling_in_pytorch.mlp.triton_ops.geglu import geglu_gemm, interleave_gate_up, uses_tma
from profiling_in_pytorch.mlp.triton_ops.geglu_backward import backward_uses_tma, geglu_gemm_backward

__all__ = ["backward_uses_tma", "geglu_gemm", "geglu_gemm_backward", "interleave_gate_up", "uses_tma"]
