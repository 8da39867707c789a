"""FusedGeGLUMLP: the post's GeGLU MLP in two kernels instead of five, and a backward without elementwise kernels.

    eager:  gate GEMM, up GEMM, gelu, mul, down GEMM               5 kernels, [tokens, hidden] to HBM and back twice
    fused:  geglu_gemm (gate/up GEMM + gelu * up epilogue), down    2 kernels, h written once

Training (`GeGLUMLPFunction`): the forward also writes the pre-activations g and u (interleaved, [tokens,
2 * hidden]) and saves them with x and h: three [tokens, hidden] tensors, as many as Liger's layer keeps and one
fewer than eager's. The backward is five kernels:

    geglu_gemm_backward  dh = dy @ W_down with the GeGLU derivative in its epilogue: dgate_up = [dg | du]
    cuBLAS x 2           dx = dg @ W_gate + du @ W_up   (the second GEMM accumulates into the first's output)
    cuBLAS               dW_down = dy.T @ h
    cuBLAS               dW_gate_up = dgate_up.T @ x    (rows :N gate_proj's gradient, N: up_proj's)

where eager runs six GEMMs, two multiplies, a gelu_backward and the add that sums the two input gradients.
`recompute_h=True` keeps one [tokens, hidden] tensor less: the backward kernel then recomputes h from g and u
and writes it, which on an H200 at the post's shape costs 34 us more (148 instead of 114 us).
The down projection stays a cuBLAS GEMM (F.linear): a plain GEMM with nothing left to fuse around it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trace_report.errors import UsageError
from profiling_in_pytorch.mlp.triton_ops.geglu import (
    INTERPRETING,
    SUPPORTED_DTYPES,
    _ready_key,
    _ready_launches,
    geglu_gemm,
    interleave_gate_up,
)
from profiling_in_pytorch.mlp.triton_ops.geglu_backward import geglu_gemm_backward

# Triton's interpreter runs every program of the grid in Python: fine for a few tiles, hours for the post's shape.
INTERPRETER_MAX_MACS = 2**26


def require_runnable(batch: int, seq: int, dim: int, hidden: int, device: torch.device) -> None:
    """Raise UsageError (one line) if the fused kernels cannot run on `device` at these sizes: they need a CUDA
    GPU, or Triton's interpreter (TRITON_INTERPRET=1) and sizes small enough for it."""
    if device.type != "cuda" and not INTERPRETING:
        raise UsageError(
            "the fused MLP is a Triton kernel: it needs a CUDA GPU, or TRITON_INTERPRET=1 to run it in Triton's "
            "interpreter on the CPU (tiny sizes, e.g. --batch 2 --seq 4 --dim 64 --hidden 128)"
        )
    macs = batch * seq * dim * hidden * 3
    if device.type != "cuda" and macs > INTERPRETER_MAX_MACS:
        raise UsageError(
            f"{macs:.1e} multiply-adds per forward is too much for Triton's interpreter: "
            "try --batch 2 --seq 4 --dim 64 --hidden 128"
        )


# torch.compile cannot trace the Triton launcher (host-side TMA descriptors, the per-shape tuning cache), so a
# compiled graph sees the kernel as one opaque op with a known output shape. Eager calls launch it directly,
# without the dispatcher's overhead.
@torch.library.custom_op("profiling_in_pytorch::geglu_gemm", mutates_args=())
def geglu_gemm_op(x: torch.Tensor, w_gate_up: torch.Tensor) -> torch.Tensor:
    return geglu_gemm(x, w_gate_up)


@geglu_gemm_op.register_fake
def _(x, w_gate_up):
    return x.new_empty((x.shape[0], w_gate_up.shape[0] // 2))


class GeGLUMLPFunction(torch.autograd.Function):
    """y = down(gelu_tanh(x @ W_gate.T) * (x @ W_up.T)) with the fused kernels, forward and backward.

    Takes the three weights as autograd sees them (gate_proj, up_proj and down_proj's parameters, so that their
    gradients land there) and the interleaved copy of gate and up the forward's kernel reads (not differentiated).
    Saves x, the [M, 2N] pre-activations and h (or recomputes h: `recompute_h`); the weights it saves are the
    module's own parameters.
    """

    @staticmethod
    def forward(ctx, x2d, w_gate, w_up, w_down, w_gate_up, recompute_h=False):
        gate_up = x2d.new_empty((x2d.shape[0], w_gate_up.shape[0]))
        h = geglu_gemm(x2d, w_gate_up, gate_up_out=gate_up)
        ctx.recompute_h = recompute_h
        ctx.save_for_backward(x2d, gate_up, w_gate, w_up, w_down, *(() if recompute_h else (h,)))
        return F.linear(h, w_down)  # cuBLAS

    @staticmethod
    def backward(ctx, dy):
        x2d, gate_up, w_gate, w_up, w_down, *kept_h = ctx.saved_tensors
        need_x, need_gate, need_up, need_down, _, _ = ctx.needs_input_grad
        dy = dy.contiguous()
        dgate_up, h = geglu_gemm_backward(dy, w_down, gate_up, recompute_h=ctx.recompute_h)
        if not ctx.recompute_h:
            h = kept_h[0]
        n = w_down.shape[1]
        dgate, dup = dgate_up[:, :n], dgate_up[:, n:]  # row stride 2N: cuBLAS reads them in place
        dx = None
        # torch.mm, not @: Tensor.__matmul__ goes through a Python wrapper first, host time in every backward.
        if need_x:
            dx = torch.mm(dgate, w_gate)
            dx.addmm_(dup, w_up)
        dw_down = torch.mm(dy.t(), h) if need_down else None
        dw_gate = dw_up = None
        if need_gate or need_up:
            # Two contiguous halves, laid out as the parameters are: autograd keeps them as .grad, no copy.
            dw_gate_up = torch.mm(dgate_up.t(), x2d)
            dw_gate, dw_up = dw_gate_up[:n], dw_gate_up[n:]
        return dx, dw_gate, dw_up, dw_down, None, None


class FusedGeGLUMLP(nn.Module):
    """down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)), the first two GEMMs and the activation in one kernel.

    Trains: when autograd needs gradients (of x or of the weights) the forward goes through `GeGLUMLPFunction`,
    which keeps the pre-activations for the fused backward; under torch.no_grad() / inference_mode() it writes
    nothing more than h, as an inference forward should.

    Same parameters as SimpleGeGLUMLP (gate_proj, up_proj, down_proj: nn.Linear without bias), so
    `load_state_dict` takes its state dict and `from_module` copies one. The kernel reads gate and up weights
    interleaved row by row from one [2 * intermediate, hidden] buffer, `gate_up_weight` (not saved in the state
    dict; it costs as much memory as gate_proj and up_proj together). It is rebuilt whenever those weights
    change: after load_state_dict or any in-place edit (the tensors' version counters tell); .to() converts it
    along with them.

    Runs in bfloat16 or float16 on a CUDA GPU (or on the CPU under TRITON_INTERPRET=1); other dtypes raise
    TypeError.

    CUDA graphs (profiling_in_pytorch/mlp/graphs.py): the inference forward can be captured once it has run for the
    shape. Its first call per shape compiles the Triton kernel and times its launch configurations (do_bench, which
    synchronizes): that must happen before the capture, and inside one geglu_gemm raises a RuntimeError saying so.
    After it, a forward makes host decisions only (dtype and grad mode, the weights' version counters, a dict
    lookup of the ready launch) and launches the same two or three kernels: no .item(), no synchronize. It allocates
    h (new_empty) and cuBLAS its output: under capture both come from the graph's private pool, fixed addresses
    every replay reuses. A replay runs what was recorded: weights edited after the capture are not re-interleaved
    (CapturedForward refuses to replay then).
    """

    def __init__(self, hidden_size: int, intermediate_size: int, device=None, dtype=None, recompute_h: bool = False):
        super().__init__()
        self.recompute_h = recompute_h  # training: recompute h in the backward instead of keeping it
        factory = {"device": device, "dtype": dtype}
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False, **factory)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False, **factory)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False, **factory)
        self._kept_forwards: dict[tuple, tuple] = {}  # x's layout -> (launch, h's shape, y's shape): `_keep_forward`
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
            return self._forward_for_backward(x)
        if torch.compiler.is_compiling():
            h = geglu_gemm_op(x.reshape(-1, x.shape[-1]), self.gate_up_weight)
            return F.linear(h, self.down_proj.weight).view(*x.shape[:-1], self.hidden_size)  # cuBLAS
        if self._gate_up_state() != self._gate_up_source:
            self.refresh_gate_up_weight()
        kept = self._kept_forwards.get((x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0))
        if kept is not None:  # this layout of x ran before: its launch is kept
            launch, h_shape, y_shape = kept
            h = x.new_empty(h_shape)
            launch(x, self.gate_up_weight, h)
            return F.linear(h, self.down_proj.weight).view(y_shape)
        x2d = x.reshape(-1, x.shape[-1])
        h = geglu_gemm(x2d, self.gate_up_weight)
        self._keep_forward(x, x2d)
        return F.linear(h, self.down_proj.weight).view(*x.shape[:-1], self.hidden_size)  # cuBLAS

    def _keep_forward(self, x: torch.Tensor, x2d: torch.Tensor) -> None:
        """After a first inference call with x's layout: keep geglu_gemm's ready launch for it, fed with x itself
        (x2d a view of it), so that later calls skip the reshape, geglu_gemm's key and its checks."""
        ready = _ready_launches.get(_ready_key(x2d, self.gate_up_weight))
        if ready is None or ready.store_gate_up or x2d.data_ptr() != x.data_ptr() or INTERPRETING:
            return
        key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0)
        self._kept_forwards[key] = (ready.launch, ready.out_shape, (*x.shape[:-1], self.hidden_size))

    def _apply(self, fn, recurse=True):
        self._kept_forwards.clear()  # .to(), .half(), .cuda(): the weights' dtype or device may change
        return super()._apply(fn, recurse)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_kept_forwards"] = {}  # compiled kernels' launchers: a copy keeps its own after its first call
        return state

    @torch.compiler.disable  # the launchers are host code Dynamo cannot trace: a compiled caller runs this eagerly
    def _forward_for_backward(self, x: torch.Tensor) -> torch.Tensor:
        if self._gate_up_state() != self._gate_up_source:  # an optimizer step edited the weights in place
            self.refresh_gate_up_weight()
        y = GeGLUMLPFunction.apply(x.reshape(-1, x.shape[-1]), self.gate_proj.weight, self.up_proj.weight,
                                   self.down_proj.weight, self.gate_up_weight, self.recompute_h)
        return y.view(*x.shape[:-1], self.hidden_size)
