"""FP8 scaling, in plain torch: what each FP8 recipe computes before its GEMMs, and an fp32 model of the whole MLP.

An e4m3 number has 3 mantissa bits and a range of ±448: a bf16 tensor goes to FP8 by a scale s = amax / 448,
q = round(x / s) (to e4m3, saturating), and the GEMM multiplies q's and puts the scales back on its fp32 sums.
Where the amax is taken decides what an outlier costs:

    tensorwise   one scale for the whole tensor: one large value shrinks every other value towards e4m3's
                 subnormals (2^-9 · s apart), where its 3 bits of precision are lost
    rowwise      one scale per row (per token for activations, per output channel for weights)
    blockwise    one scale per row and per 128 consecutive columns (1 × 128 groups, DeepSeek-V3's activations):
                 an outlier costs precision in its own group only, and a GEMM tile can compute the amax of the
                 groups it holds, so the scale can be found in the epilogue of the GEMM that produces the tensor

These functions run anywhere torch runs (CPU included): the lesson shows on a CPU what the FP8 kernels of a GPU
trace compute, the tests check the Triton kernels against them, and `emulated_fp8_mlp` is the whole forward of
the fused FP8 module (`profiling_in_pytorch/mlp/fp8.py`) in fp32, rounding where the GPU rounds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max  # 448.0
BLOCK = 128  # columns per scale in blockwise scaling: one GEMM K tile of the GEMM that reads the tensor
# A scale never below this: an all-zero row or group gets a finite scale (its values stay 0) instead of 0 / 0.
MIN_AMAX = 1e-12


def scale_for(amax: torch.Tensor) -> torch.Tensor:
    """The fp32 scale that maps `amax` onto e4m3's largest value (448)."""
    return amax.float().clamp_min(MIN_AMAX) / E4M3_MAX


def to_e4m3(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x / scale rounded to e4m3, saturating at ±448 (scale broadcasts against x)."""
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def quantize_tensorwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale): one fp32 scale (a 0-d tensor) for all of x. On a GPU: an amax reduction, then a cast kernel."""
    scale = scale_for(x.abs().amax())
    return to_e4m3(x, scale), scale


def quantize_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale [rows, 1]): one scale per row of a 2-D x (a token's features, or a weight's output channel)."""
    scale = scale_for(x.abs().amax(dim=-1, keepdim=True))
    return to_e4m3(x, scale), scale


def quantize_blockwise(x: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale [rows, cdiv(cols, block)]): one scale per row and per `block` consecutive columns of a 2-D x."""
    rows, cols = x.shape
    groups = -(-cols // block)
    padded = F.pad(x.float(), (0, groups * block - cols)).view(rows, groups, block)
    scale = scale_for(padded.abs().amax(dim=-1))
    q = to_e4m3(padded, scale[..., None]).view(rows, groups * block)[:, :cols]
    return q, scale


def quantize_tiles(w: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale [cdiv(rows, block), cdiv(cols, block)]): one scale per `block` x `block` tile of a 2-D weight
    (DeepSeek-V3's weights), the layout cuBLASLt's 128 x 128 block scaling reads."""
    rows, cols = w.shape
    r, c = -(-rows // block), -(-cols // block)
    padded = F.pad(w.float(), (0, c * block - cols, 0, r * block - rows)).view(r, block, c, block)
    scale = scale_for(padded.abs().amax(dim=(1, 3)))
    q = to_e4m3(padded, scale[:, None, :, None]).view(r * block, c * block)[:rows, :cols]
    return q, scale


def dequantize_blockwise(q: torch.Tensor, scale: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """q * scale in fp32, each group of `block` columns by its own scale."""
    return q.float() * scale.repeat_interleave(block, dim=1)[:, : q.shape[1]]


def gelu_tanh_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.gelu(gate, approximate="tanh") * up


def dequantized_rowwise(w: torch.Tensor) -> torch.Tensor:
    """w as the FP8 GEMMs see it: rounded to e4m3 per row (output channel), back in fp32."""
    q, scale = quantize_rowwise(w)
    return q.float() * scale


def emulated_forward(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor,
                     block: int = BLOCK) -> torch.Tensor:
    """The fused FP8 module's forward in fp32 from weights already rounded (`dequantized_rowwise`): x per token to
    e4m3; gate and up in fp32; m = gelu(g) * u to e4m3 by 1 x `block` groups; the down projection; the result in
    x's dtype. Two amax reductions per forward, as on the GPU (where the second is in the gate/up GEMM's epilogue)."""
    x2d = x.reshape(-1, x.shape[-1])
    xq, sx = quantize_rowwise(x2d)
    x_deq = xq.float() * sx
    m = gelu_tanh_mul(x_deq @ w_gate.T, x_deq @ w_up.T)
    mq, sm = quantize_blockwise(m, block)
    y = dequantize_blockwise(mq, sm, block) @ w_down.T
    return y.to(x.dtype).view(*x.shape[:-1], w_down.shape[0])


def emulated_fp8_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor,
                     block: int = BLOCK) -> torch.Tensor:
    """`emulated_forward` from unrounded weights: each to e4m3 per output channel first, as the module does once."""
    return emulated_forward(x, *(dequantized_rowwise(w) for w in (w_gate, w_up, w_down)), block=block)


BUDGET_TOKENS = 1024  # enough rows for the error's statistics, few enough for a CPU


def rounding_budget(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor,
                    block: int = BLOCK) -> dict[str, float]:
    """Where the fused recipe's error comes from: its forward in fp32 with one tensor at a time rounded to e4m3 as
    the module rounds it (x per token, each weight per channel, m per 1 x `block`), then x with both gate/up
    weights (the gate/up GEMM's two operands), then all four; each as relative error against the exact forward, on
    the first BUDGET_TOKENS tokens. Rounding to 3 mantissa bits is what is measured: no kernel is involved."""
    x2d = x.reshape(-1, x.shape[-1])[:BUDGET_TOKENS].float()
    exact = [w.float() for w in (w_gate, w_up, w_down)]
    rounded = [dequantized_rowwise(w) for w in exact]

    def forward(round_x: bool, round_gate_up: bool, round_m: bool, round_down: bool) -> torch.Tensor:
        xs = dequantized_rowwise(x2d) if round_x else x2d  # per token: x's rows
        g, u = rounded[:2] if round_gate_up else exact[:2]
        m = gelu_tanh_mul(xs @ g.T, xs @ u.T)
        if round_m:
            m = dequantize_blockwise(*quantize_blockwise(m, block), block)
        return m @ (rounded[2] if round_down else exact[2]).T

    want = forward(False, False, False, False)
    cases = {"x": (1, 0, 0, 0), "W_gate, W_up": (0, 1, 0, 0), "m": (0, 0, 1, 0), "W_down": (0, 0, 0, 1),
             "x and W_gate, W_up": (1, 1, 0, 0), "all four": (1, 1, 1, 1)}
    return {name: ((forward(*map(bool, c)) - want).norm() / want.norm().clamp_min(1e-30)).item()
            for name, c in cases.items()}


OUTLIER_TOKENS = 4  # tokens made large by `with_outliers`: the first rows of the flattened input
OUTLIER_SIZE = 100.0  # how much larger: LLMs' "massive activations" (attention-sink tokens) are 100-1000x the rest


def with_outliers(x: torch.Tensor, tokens: int = OUTLIER_TOKENS, size: float = OUTLIER_SIZE) -> torch.Tensor:
    """x with its first `tokens` tokens `size` times larger. A tensorwise scale is set by them: every other token
    is divided by it too and lands among e4m3's subnormals (at 100x) or on zero (at 1000x), while a per-token
    or per-block scale leaves the other tokens as they were. Judge the result with `error_on_other_tokens`."""
    out = x.clone()
    out.view(-1, x.shape[-1])[:tokens] *= size
    return out


def error_on_other_tokens(got: torch.Tensor, want: torch.Tensor, tokens: int = OUTLIER_TOKENS) -> float:
    """The relative error over the tokens `with_outliers` left alone (the outliers' own outputs would dominate
    a norm over all of them)."""
    g = got.reshape(-1, got.shape[-1])[tokens:].float()
    w = want.reshape(-1, want.shape[-1])[tokens:].float()
    return ((g - w).norm() / w.norm().clamp_min(1e-30)).item()


def scaled_matmul(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                  out_dtype: torch.dtype) -> torch.Tensor:
    """torch._scaled_mm(a, b, scale_a, scale_b) (a [M, K], b [K, N] e4m3; scales 0-d, or [M, 1] and [1, N]) on a
    GPU with FP8 tensor cores; elsewhere the same product in fp32 from the dequantized operands, so that a trace
    without FP8 shows the scaling ops around an fp32 GEMM where an FP8 GPU's shows them around the FP8 one."""
    if a.is_cuda and torch.cuda.get_device_capability(a.device) >= (8, 9):  # FP8 tensor cores
        return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
    return ((a.float() * scale_a) @ (b.float() * scale_b)).to(out_dtype)
