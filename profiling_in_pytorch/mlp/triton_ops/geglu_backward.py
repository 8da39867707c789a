"""The GeGLU MLP's backward through the activation in one Triton kernel: the down projection's data-gradient GEMM
with the GeGLU derivative in its epilogue.

With y = h @ W_down.T and h = gelu_tanh(g) * u, the backward needs dh = dy @ W_down, then

    dg = dh * u * gelu_tanh'(g)        du = dh * gelu_tanh(g)

Eagerly that is a GEMM writing dh, two multiplies and a gelu_backward, each reading and writing [tokens,
intermediate] tensors. Here one program computes one [BLOCK_M, BLOCK_N] tile of dh in registers, reads the same
tile of the pre-activations (g and u, saved by the forward interleaved as the weight is: `geglu_gemm`'s
`gate_up_out`), and writes, for those columns:

* dgate_up [M, 2N], the gate's gradient in its first N columns and the up projection's in the last N: the weight
  gradient of both is then one GEMM, dgate_up.T @ x, whose first N rows are gate_proj's gradient and last N
  up_proj's (two contiguous halves, which autograd takes as they are), and the input gradient two GEMMs
  accumulating into one output, dg @ W_gate + du @ W_up. Written interleaved, as g and u are read, the two weight
  gradients were every other row of that GEMM's output, and autograd copied each into `.grad` (2 x 6 us at the
  post's shape, 2 x 118 us at a 7B-sized layer on an H200). The kernel itself takes as long either way (two
  [BLOCK_M, BLOCK_N] stores or one interleaved [BLOCK_M, 2 x BLOCK_N]: 128.5 against 128.7 us there);
* h = gelu_tanh(g) * u [M, N], recomputed rather than saved (the down projection's weight gradient, dy.T @ h,
  needs it): one more [M, N] write here instead of one more [M, N] tensor held from forward to backward.

Two kernels, as for the forward: `_geglu_backward_tma_kernel` (Hopper, TMA, persistent grid) and
`_geglu_backward_kernel` (pointers and masks: any strides, older GPUs). Both run under TRITON_INTERPRET=1.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from profiling_in_pytorch.mlp.triton_ops.geglu import (
    _INTERPRETER_PROGRAMS,
    INTERPRETING,
    SUPPORTED_DTYPES,
    TensorDescriptor,
    _best_config,
    _config,
    _is_hopper_or_newer,
    _num_sms,
    _tanh_approx,
    _tile_coords,
    _tma_compatible,
    _tune,
    keep_ready,
    stored,
)
from profiling_in_pytorch.mlp.triton_ops.launch import ReadyLaunch, interpreted


@triton.jit
def gelu_tanh_backward(dh, gate, up, FAST_TANH: tl.constexpr):
    """(dgate, dup, h) from dh and the pre-activations, all fp32.

    gelu_tanh(g) = 0.5 g (1 + t), t = tanh(z), z = sqrt(2/pi) (g + 0.044715 g^3), so
    gelu_tanh'(g) = 0.5 (1 + t) + 0.5 g (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 g^2).
    """
    z = 0.7978845608028654 * gate * (1.0 + 0.044715 * gate * gate)
    if FAST_TANH:
        t = _tanh_approx(z)
    else:
        t = 2.0 / (1.0 + tl.exp(-2.0 * z)) - 1.0  # exp overflows to inf for very negative z: t = -1, no NaN
    half_one_plus_t = 0.5 + 0.5 * t
    gelu = gate * half_one_plus_t
    dgelu = half_one_plus_t + 0.5 * gate * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * gate * gate)
    return dh * up * dgelu, dh * gelu, gelu * up


@triton.jit
def _store_backward_tile(dgu_ptr, h_ptr, dgate, dup, h, offs_m, offs_n, M, N, WRITE_H: tl.constexpr,
                         INTERPRETED_BF16: tl.constexpr):
    """Plain stores of one tile: dgate to dgate_up[:, :N], dup to dgate_up[:, N:], and h if recomputed."""
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    dgate_offsets = offs_m[:, None] * 2 * N + offs_n[None, :]
    tl.store(dgu_ptr + dgate_offsets, stored(dgate, INTERPRETED_BF16).to(dgu_ptr.dtype.element_ty), mask=mask)
    tl.store(dgu_ptr + N + dgate_offsets, stored(dup, INTERPRETED_BF16).to(dgu_ptr.dtype.element_ty), mask=mask)
    if WRITE_H:
        tl.store(h_ptr + offs_m[:, None] * N + offs_n[None, :], stored(h, INTERPRETED_BF16).to(h_ptr.dtype.element_ty),
                 mask=mask)


# --------------------------------------------------------------------------------------------------------------
# Hopper: TMA, a program per tile or a persistent grid
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def _geglu_backward_tma_kernel(
    dy_desc, w_desc, gu_desc,  # dy [M, K], W_down [K, N] (nn.Linear's [out, in]), gate_up [M, 2N]
    dgate_desc, dup_desc, h_desc,  # outputs: dgate_up's halves dgate_up[:, :N] and dgate_up[:, N:], h [M, N]
    gu_ptr, dgu_ptr, h_ptr,  # the same three, contiguous, for an epilogue through plain loads and stores
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ONE_TILE_EACH: tl.constexpr,  # a program per tile (several share an SM), else a persistent loop over tiles
    EPILOGUE_TMA: tl.constexpr,  # the epilogue's tiles through TMA (shared-memory staging) or straight from registers
    PREFETCH_GATE_UP: tl.constexpr,  # (plain loads) read the tile's pre-activations before its K loop
    WRITE_H: tl.constexpr,  # recompute h for the down projection's weight gradient (else the forward saved it)
    FAST_TANH: tl.constexpr,
    INTERPRETED_BF16: tl.constexpr,  # the interpreter has no bfloat16 arithmetic and truncates to bfloat16
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if ONE_TILE_EACH:
        # No loop around the tile: with one, the same code took 129 instead of 114 us at the post's shape (H200),
        # holding more shared memory per program (88 KB instead of 72), so fewer programs shared an SM.
        pid_m, pid_n = _tile_coords(tl.program_id(axis=0), num_pid_m, num_pid_n, GROUP_M)
        _backward_tma_tile(dy_desc, w_desc, gu_desc, dgate_desc, dup_desc, h_desc, gu_ptr, dgu_ptr, h_ptr,
                           pid_m, pid_n, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_TMA, PREFETCH_GATE_UP,
                           WRITE_H, FAST_TANH, INTERPRETED_BF16)
    else:
        for tile_id in tl.range(tl.program_id(axis=0), num_pid_m * num_pid_n, tl.num_programs(axis=0)):
            pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            _backward_tma_tile(dy_desc, w_desc, gu_desc, dgate_desc, dup_desc, h_desc, gu_ptr, dgu_ptr, h_ptr,
                               pid_m, pid_n, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_TMA, PREFETCH_GATE_UP,
                               WRITE_H, FAST_TANH, INTERPRETED_BF16)


@triton.jit
def _backward_tma_tile(
    dy_desc, w_desc, gu_desc, dgate_desc, dup_desc, h_desc, gu_ptr, dgu_ptr, h_ptr, pid_m, pid_n, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EPILOGUE_TMA: tl.constexpr,
    PREFETCH_GATE_UP: tl.constexpr, WRITE_H: tl.constexpr, FAST_TANH: tl.constexpr, INTERPRETED_BF16: tl.constexpr,
):
    """One [BLOCK_M, BLOCK_N] tile of dh, then its epilogue: dgate and dup (and h) for those columns."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_gu = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
    mask_gu = (offs_m[:, None] < M) & (offs_gu[None, :] < 2 * N)
    gu_offsets = offs_m[:, None] * 2 * N + offs_gu[None, :]
    if PREFETCH_GATE_UP:
        gate_up_early = tl.load(gu_ptr + gu_offsets, mask=mask_gu, other=0.0)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        dy = dy_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
        w = w_desc.load([ki * BLOCK_K, pid_n * BLOCK_N])
        if INTERPRETED_BF16:
            dy, w = dy.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(dy, w, acc)

    if EPILOGUE_TMA:
        gate_up = gu_desc.load([pid_m * BLOCK_M, pid_n * 2 * BLOCK_N]).to(tl.float32)
        gate, up = tl.split(tl.reshape(gate_up, (BLOCK_M, BLOCK_N, 2)))
        dgate, dup, h = gelu_tanh_backward(acc, gate, up, FAST_TANH)
        if WRITE_H:
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], stored(h, INTERPRETED_BF16).to(h_desc.dtype))
        dgate_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], stored(dgate, INTERPRETED_BF16).to(dgate_desc.dtype))
        dup_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], stored(dup, INTERPRETED_BF16).to(dup_desc.dtype))
    else:
        if PREFETCH_GATE_UP:
            gate_up = gate_up_early.to(tl.float32)
        else:
            gate_up = tl.load(gu_ptr + gu_offsets, mask=mask_gu, other=0.0).to(tl.float32)
        gate, up = tl.split(tl.reshape(gate_up, (BLOCK_M, BLOCK_N, 2)))
        dgate, dup, h = gelu_tanh_backward(acc, gate, up, FAST_TANH)
        _store_backward_tile(dgu_ptr, h_ptr, dgate, dup, h, offs_m, offs_n, M, N, WRITE_H, INTERPRETED_BF16)


# --------------------------------------------------------------------------------------------------------------
# Any layout, any GPU: pointers and masks
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def _geglu_backward_kernel(
    dy_ptr, w_ptr, gu_ptr, dgu_ptr, h_ptr,  # as above; gate_up, dgate_up and h contiguous
    M, N, K,
    stride_dym, stride_dyk, stride_wk, stride_wn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    WRITE_H: tl.constexpr,
    FAST_TANH: tl.constexpr,
    INTERPRETED_BF16: tl.constexpr,
):
    pid_m, pid_n = _tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N

    dy_ptrs = dy_ptr + offs_m[:, None] * stride_dym + offs_k[None, :] * stride_dyk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        mask_k = offs_k < K - ki * BLOCK_K
        dy = tl.load(dy_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if INTERPRETED_BF16:
            dy, w = dy.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(dy, w, acc)
        dy_ptrs += BLOCK_K * stride_dyk
        w_ptrs += BLOCK_K * stride_wk

    offs_gu = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
    mask_gu = mask_m[:, None] & (offs_gu[None, :] < 2 * N)
    gu_offsets = offs_m[:, None] * 2 * N + offs_gu[None, :]
    gate_up = tl.load(gu_ptr + gu_offsets, mask=mask_gu, other=0.0).to(tl.float32)
    gate, up = tl.split(tl.reshape(gate_up, (BLOCK_M, BLOCK_N, 2)))
    dgate, dup, h = gelu_tanh_backward(acc, gate, up, FAST_TANH)
    _store_backward_tile(dgu_ptr, h_ptr, dgate, dup, h, offs_m, offs_n, M, N, WRITE_H, INTERPRETED_BF16)


# --------------------------------------------------------------------------------------------------------------
# Launch configurations: few candidates, timed once per shape
# --------------------------------------------------------------------------------------------------------------
# Measured on an H200 (bf16, docs/fused-mlp.md), at 8192 tokens x 768 -> 3072 and 16 x 512 tokens x 4096 ->
# 11008. Without h to write: 64 x 128 tiles, a program per tile so that several share an SM and one's epilogue may
# overlap another's GEMM (114 us at the post's shape, where cuBLAS's plain dh GEMM takes 60 us), or 128 x 128 tiles
# (about 146 us there; 1581 us at the larger shape, against 1111 us for cuBLAS's GEMM alone). Writing h costs 34
# us more at the post's shape. The epilogue's tiles go through TMA (shared memory staging); stores straight from
# registers were slower, and reading the pre-activations before the K loop only helped without TMA, with it the
# registers spill.
TMA_CONFIGS = [
    _config(64, 128, 64, 3, 4, EPILOGUE_TMA=True, PREFETCH_GATE_UP=False, ONE_TILE_EACH=True),
    _config(128, 128, 64, 3, 8, group_m=16, EPILOGUE_TMA=True, PREFETCH_GATE_UP=False),
    _config(128, 128, 64, 3, 8, EPILOGUE_TMA=True, PREFETCH_GATE_UP=False),
    _config(128, 64, 64, 3, 4, EPILOGUE_TMA=True, PREFETCH_GATE_UP=False, ONE_TILE_EACH=True),
    _config(128, 128, 64, 3, 8, EPILOGUE_TMA=False, PREFETCH_GATE_UP=True),
]
POINTER_CONFIGS = [
    _config(128, 64, 64, 3, 8),
    _config(64, 64, 64, 3, 4),
    _config(32, 64, 64, 4, 4),
]
# Under the interpreter: each path once (the persistent loop with TMA tiles, with plain loads read early; a
# program per tile).
INTERPRETER_TMA_CONFIGS = [
    _config(16, 16, 16, 1, 4, group_m=2, EPILOGUE_TMA=True, PREFETCH_GATE_UP=False),
    _config(16, 16, 16, 1, 4, group_m=2, EPILOGUE_TMA=False, PREFETCH_GATE_UP=True),
    _config(16, 16, 16, 1, 4, group_m=2, EPILOGUE_TMA=True, PREFETCH_GATE_UP=False, ONE_TILE_EACH=True),
]
_INTERPRETER_POINTER_CONFIG = _config(16, 16, 16, 1, 4, group_m=2)


def backward_uses_tma(dy: torch.Tensor, w_down: torch.Tensor) -> bool:
    """Whether `geglu_gemm_backward` takes the TMA kernel: Hopper or newer (or the interpreter), 16-byte aligned rows."""
    if TensorDescriptor is None:
        return False
    if not INTERPRETING and not (dy.is_cuda and _is_hopper_or_newer(dy.get_device())):
        return False
    return _tma_compatible(dy, w_down)


# After a key's first call, a `ReadyLaunch` (launch.py), as geglu_gemm's: six descriptors a call otherwise builds.
_ready_backward: dict[tuple, "_ReadyBackward"] = {}


def _ready_backward_key(dy: torch.Tensor, w_down: torch.Tensor, gate_up: torch.Tensor, recompute_h: bool) -> tuple:
    return (dy.shape, dy.stride(), w_down.shape, w_down.stride(), gate_up.shape, gate_up.stride(), dy.dtype,
            w_down.dtype, gate_up.dtype, dy.device, recompute_h, dy.data_ptr() % 16 == 0,
            w_down.data_ptr() % 16 == 0, gate_up.data_ptr() % 16 == 0)


def geglu_gemm_backward(
    dy: torch.Tensor,
    w_down: torch.Tensor,
    gate_up: torch.Tensor,
    *,
    recompute_h: bool = True,
    config: triton.Config | None = None,
    use_tma: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dgate_up, h) for y = (gelu_tanh(g) * u) @ W_down.T, from the output gradient dy, in one kernel.

    dy: [M, K]; w_down: [K, N] (down_proj.weight); gate_up: contiguous [M, 2N], the forward's pre-activations
    interleaved (`geglu_gemm(..., gate_up_out=...)`). All bfloat16 or all float16. Returns dgate_up [M, 2N]
    (the gradients of g and u, side by side: dg = dgate_up[:, :N], du = dgate_up[:, N:]) and h [M, N],
    recomputed (None with recompute_h=False, when the forward kept its own h). Products accumulate in fp32 and
    the derivative is taken on fp32 values: each output is rounded once.
    """
    ready_key = None
    if config is None and use_tma is None:
        ready_key = _ready_backward_key(dy, w_down, gate_up, recompute_h)
        ready = _ready_backward.get(ready_key)
        if ready is not None:  # checked, tuned and compiled when the key was stored
            return ready(dy, w_down, gate_up)
    if dy.dtype not in SUPPORTED_DTYPES or w_down.dtype != dy.dtype or gate_up.dtype != dy.dtype:
        raise TypeError(f"geglu_gemm_backward runs in bfloat16 or float16, got {dy.dtype}, {w_down.dtype}, {gate_up.dtype}")
    if dy.ndim != 2 or w_down.ndim != 2 or w_down.shape[0] != dy.shape[1] or gate_up.shape != (dy.shape[0], 2 * w_down.shape[1]):
        raise ValueError(f"geglu_gemm_backward expects dy [M, K], w_down [K, N] and gate_up [M, 2N], got "
                         f"{tuple(dy.shape)}, {tuple(w_down.shape)}, {tuple(gate_up.shape)}")
    if not gate_up.is_contiguous():
        raise ValueError("geglu_gemm_backward expects a contiguous gate_up")
    M, K = dy.shape
    N = w_down.shape[1]
    dgate_up = torch.empty_like(gate_up)
    # Without recompute_h the kernel writes no h: dgate_up stands in for its pointer (same dtype and alignment).
    h = torch.empty((M, N), device=dy.device, dtype=dy.dtype) if recompute_h else dgate_up
    if M == 0 or N == 0:
        return dgate_up, h if recompute_h else None
    if K == 0:  # dh = 0: no gradient reaches g and u; h still needs computing
        dy, w_down, K, ready_key = dy.new_zeros((M, 1)), w_down.new_zeros((1, N)), 1, None
    if use_tma is None:
        use_tma = backward_uses_tma(dy, w_down)
    flags = dict(WRITE_H=recompute_h, FAST_TANH=not INTERPRETING,
                 INTERPRETED_BF16=INTERPRETING and dy.dtype == torch.bfloat16)
    key = ("backward", recompute_h, use_tma, min(triton.next_power_of_2(M), 8192), N, K, dy.dtype, dy.get_device())

    if use_tma:
        kernel = _geglu_backward_tma_kernel
        num_programs_max = _INTERPRETER_PROGRAMS if INTERPRETING else _num_sms(dy.get_device())
        # Fed at each call: dy, w_down, gate_up, dgate_up (both halves' descriptors: the second N elements in),
        # h, then the three pointers.
        fed = ("dy_desc", "w_desc", "gu_desc", "dgate_desc", ("dup_desc", N)) + (("h_desc",) if recompute_h else ())
        fed += ("gu_ptr", "dgu_ptr", "h_ptr")

        def arguments(c):
            constants = dict(c.kwargs)
            one_tile_each = constants.setdefault("ONE_TILE_EACH", False)
            bm, bn, bk = constants["BLOCK_M"], constants["BLOCK_N"], constants["BLOCK_K"]
            tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
            args = [
                TensorDescriptor.from_tensor(dy, [bm, bk]),
                TensorDescriptor.from_tensor(w_down, [bk, bn]),
                TensorDescriptor.from_tensor(gate_up, [bm, 2 * bn]),
                TensorDescriptor.from_tensor(dgate_up[:, :N], [bm, bn]),
                TensorDescriptor.from_tensor(dgate_up[:, N:], [bm, bn]),
                TensorDescriptor.from_tensor(h, [bm, bn]) if recompute_h else None,
                gate_up, dgate_up, h, M, N, K,
            ]
            return (tiles if one_tile_each else min(num_programs_max, tiles),), args, {**constants, **flags}

        candidates = INTERPRETER_TMA_CONFIGS[:1] if INTERPRETING else TMA_CONFIGS
    else:
        kernel = _geglu_backward_kernel
        fed = ("dy_ptr", "w_ptr", "gu_ptr", "dgu_ptr", "h_ptr")

        def arguments(c):
            grid = (triton.cdiv(M, c.kwargs["BLOCK_M"]) * triton.cdiv(N, c.kwargs["BLOCK_N"]),)
            args = [dy, w_down, gate_up, dgate_up, h, M, N, K, dy.stride(0), dy.stride(1), w_down.stride(0),
                    w_down.stride(1)]
            return grid, args, {**c.kwargs, **flags}

        candidates = [_INTERPRETER_POINTER_CONFIG] if INTERPRETING else POINTER_CONFIGS

    def launch(c):
        grid, args, constants = arguments(c)
        with interpreted(kernel) if INTERPRETING else contextlib.nullcontext():
            kernel[grid](*args, **constants, num_warps=c.num_warps, num_stages=c.num_stages)

    chosen = config or _best_config.get(key) or _tune(key, candidates, launch)
    if ready_key is None:
        launch(chosen)
    else:  # kept for the next call with this key: launching it now is this call's launch
        grid, args, constants = arguments(chosen)
        args += [constants[name] for name in kernel.arg_names[len(args):]]
        ready = ReadyLaunch(kernel, grid, args, {"num_warps": chosen.num_warps, "num_stages": chosen.num_stages},
                            fed)
        keep_ready(_ready_backward, ready_key, _ReadyBackward(ready, (M, N), recompute_h, use_tma))
    return dgate_up, h if recompute_h else None


class _ReadyBackward:
    """geglu_gemm_backward for one key: allocate dgate_up (and h), launch."""

    def __init__(self, launch: ReadyLaunch, h_shape: tuple[int, int], recompute_h: bool, use_tma: bool):
        self.launch, self.h_shape, self.recompute_h, self.use_tma = launch, h_shape, recompute_h, use_tma

    def __call__(self, dy: torch.Tensor, w_down: torch.Tensor, gate_up: torch.Tensor):
        dgate_up = torch.empty_like(gate_up)
        h = dy.new_empty(self.h_shape) if self.recompute_h else dgate_up
        if not self.use_tma:
            self.launch(dy, w_down, gate_up, dgate_up, h)
        elif self.recompute_h:
            self.launch(dy, w_down, gate_up, dgate_up, dgate_up, h, gate_up, dgate_up, h)
        else:
            self.launch(dy, w_down, gate_up, dgate_up, dgate_up, gate_up, dgate_up, h)
        return dgate_up, h if self.recompute_h else None
