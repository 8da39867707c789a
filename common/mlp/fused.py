"""FusedGeGLUMLP: the post's GeGLU MLP in two kernels instead of five (forward only, for inference).

    eager:  gate GEMM, up GEMM, gelu, mul, down GEMM               5 kernels, [tokens, hidden] to HBM and back twice
    fused:  geglu_gemm (gate/up GEMM + gelu * up epilogue), down    2 kernels, h written once

The down projection stays a cuBLAS GEMM (F.linear): a plain GEMM with nothing left to fuse around it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from common.mlp.triton_ops.geglu import SUPPORTED_DTYPES, geglu_gemm, interleave_gate_up


# torch.compile cannot trace the Triton launcher (host-side TMA descriptors, the per-shape tuning cache), so a
# compiled graph sees the kernel as one opaque op with a known output shape. Eager calls launch it directly,
# without the dispatcher's overhead.
@torch.library.custom_op("profiling_mlp::geglu_gemm", mutates_args=())
def geglu_gemm_op(x: torch.Tensor, w_gate_up: torch.Tensor) -> torch.Tensor:
    return geglu_gemm(x, w_gate_up)


@geglu_gemm_op.register_fake
def _(x, w_gate_up):
    return x.new_empty((x.shape[0], w_gate_up.shape[0] // 2))


class FusedGeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)), the first two GEMMs and the activation in one kernel.

    Forward-only (inference): the Triton kernel has no backward, so the parameters are created frozen and a call
    that would need gradients raises. Train SimpleGeGLUMLP and load its weights here.

    Same parameters as SimpleGeGLUMLP (gate_proj, up_proj, down_proj: nn.Linear without bias), so
    `load_state_dict` takes its state dict and `from_module` copies one. The kernel reads gate and up weights
    interleaved row by row from one [2 * intermediate, hidden] buffer, `gate_up_weight` (not saved in the state
    dict; it costs as much memory as gate_proj and up_proj together). It is rebuilt whenever those weights
    change: after load_state_dict or any in-place edit (the tensors' version counters tell); .to() converts it
    along with them.

    Runs in bfloat16 or float16 on a CUDA GPU (or on the CPU under TRITON_INTERPRET=1); other dtypes raise
    TypeError.
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
        self.register_buffer("gate_up_weight", torch.empty(0, **factory), persistent=False)
        self._gate_up_source = None  # what gate_up_weight was built from
        self.refresh_gate_up_weight()
        # A compiled forward skips the staleness check below, so loading weights refreshes the buffer at once.
        self.register_load_state_dict_post_hook(lambda module, _: module.refresh_gate_up_weight())

    @classmethod
    def from_module(cls, mlp: nn.Module) -> "FusedGeGLUMLP":
        """A FusedGeGLUMLP holding a copy of `mlp`'s weights (a SimpleGeGLUMLP), on its device and in its dtype."""
        weight = mlp.gate_proj.weight
        fused = cls(weight.shape[1], weight.shape[0], device=weight.device, dtype=weight.dtype)
        fused.load_state_dict(mlp.state_dict())
        return fused

    def _gate_up_state(self) -> tuple:
        # In-place edits and load_state_dict bump a tensor's version; .to() converts the buffer along with the
        # weights (same function, same result), and load_state_dict(assign=True) triggers the post-hook.
        return self.gate_proj.weight._version, self.up_proj.weight._version

    @torch.no_grad()
    def refresh_gate_up_weight(self) -> None:
        """Rebuild `gate_up_weight` from gate_proj and up_proj (forward does this by itself when they change)."""
        self.gate_up_weight = interleave_gate_up(self.gate_proj.weight, self.up_proj.weight)
        self._gate_up_source = self._gate_up_state()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"FusedGeGLUMLP runs in bfloat16 or float16, got {x.dtype}")
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters())):
            raise RuntimeError("FusedGeGLUMLP is forward-only: call it under torch.inference_mode() or torch.no_grad()")
        x2d = x.reshape(-1, x.shape[-1])
        if torch.compiler.is_compiling():
            h = geglu_gemm_op(x2d, self.gate_up_weight)
        else:
            if self._gate_up_state() != self._gate_up_source:
                self.refresh_gate_up_weight()
            h = geglu_gemm(x2d, self.gate_up_weight)
        return F.linear(h, self.down_proj.weight).view(*x.shape[:-1], self.hidden_size)  # cuBLAS
