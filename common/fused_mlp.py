"""FusedGeGLUMLP: the post's GeGLU MLP in two kernels instead of five (forward only, for inference).

    eager:  gate GEMM -> up GEMM -> gelu -> mul -> down GEMM          (5 kernels, 2 [tokens, hidden] round trips)
    fused:  geglu_gemm (gate and up GEMM + gelu * up epilogue) -> down GEMM   (2 kernels)

The down projection stays a cuBLAS GEMM (F.linear): it is a plain GEMM with nothing to fuse around it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from common.triton_ops.geglu_gemm import SUPPORTED_DTYPES, geglu_gemm


# torch.compile cannot look inside the Triton launcher (host-side TMA descriptors, autotuning), so compiled graphs
# see the kernel as one opaque op with a known output shape. Eager calls skip the dispatcher and launch directly.
@torch.library.custom_op("profiling_mlp::geglu_gemm", mutates_args=())
def geglu_gemm_op(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    return geglu_gemm(x, w_gate, w_up)


@geglu_gemm_op.register_fake
def _(x, w_gate, w_up):
    return x.new_empty((x.shape[0], w_gate.shape[0]))


class FusedGeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)) with the first two GEMMs and the activation in one kernel.

    Forward-only (inference): the Triton kernel has no backward, so the parameters are created frozen and calling
    the module with gradients required raises; train with SimpleGeGLUMLP and load its weights here.
    Same parameters as SimpleGeGLUMLP (gate_proj, up_proj, down_proj: nn.Linear without bias), so
    `load_state_dict` accepts its state dict, and `from_module` copies one.
    Runs in bfloat16 or float16 on a CUDA GPU (or on the CPU under TRITON_INTERPRET=1); other dtypes raise TypeError.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False, **factory)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False, **factory)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False, **factory)
        self.requires_grad_(False)

    @classmethod
    def from_module(cls, mlp: nn.Module) -> "FusedGeGLUMLP":
        """A FusedGeGLUMLP holding a copy of `mlp`'s weights, on its device and in its dtype."""
        weight = mlp.gate_proj.weight
        fused = cls(weight.shape[1], weight.shape[0], device=weight.device, dtype=weight.dtype)
        fused.load_state_dict(mlp.state_dict())
        return fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"FusedGeGLUMLP runs in bfloat16 or float16, got {x.dtype}")
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters())):
            raise RuntimeError(
                "FusedGeGLUMLP is forward-only: call it under torch.inference_mode() or torch.no_grad()"
            )
        x2d = x.reshape(-1, x.shape[-1])
        gemm = geglu_gemm_op if torch.compiler.is_compiling() else geglu_gemm
        h = gemm(x2d, self.gate_proj.weight, self.up_proj.weight)
        return F.linear(h, self.down_proj.weight).view(*x.shape[:-1], self.hidden_size)
