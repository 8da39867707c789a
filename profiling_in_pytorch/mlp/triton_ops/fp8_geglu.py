"""The FP8 MLP's three kernels: x to e4m3 by token, the gate/up GEMM in e4m3 with the GeGLU and the next GEMM's
quantization in its epilogue, and the down GEMM on block-scaled e4m3 input.

    _quantize_rows_kernel        x [M, K] bf16  ->  xq [M, K] e4m3, sx [M] (one scale per token)
    _fp8_geglu_gemm_kernel       xq, Wq_gate/up [2N, K] e4m3 (interleaved, one scale per output channel)
                                 ->  mq [M, N] e4m3 and sm [N / G, M]: m = gelu_tanh(g) * u, one scale per token
                                 and per G = BLOCK_N columns, found in registers from the tile's own values
    _fp8_blockscaled_gemm_kernel mq (1 × G blocks), Wq_down [D, N] (per channel)  ->  y [M, D] bf16

Why blockwise for m: a per-token scale needs the amax of a whole row of m, which spans every column tile of the
gate/up GEMM; no tile can finish it, so it costs a second pass over m (an amax kernel, then a cast kernel: at the
post's shape 93 µs unfused, more than FP8 saves). A 1 × G group is what one tile holds: its scale is a row-max
over the tile's accumulator, in the epilogue, and the down GEMM, whose K tile is that same group, multiplies each
K step's partial sums by its group's scale before adding them up. The weights are quantized once (the module does
it when it loads them), per output channel, a scale the epilogues apply for free.

Hopper (sm_90) or newer: the GEMMs read through TMA descriptors, as `_geglu_gemm_tma_kernel` does; e4m3 `tl.dot`
compiles to wgmma (QGMMA in SASS). Under Triton's interpreter (TRITON_INTERPRET=1) they run on a CPU at tiny
sizes: the interpreter's cast to e4m3 rounds the mantissa without carrying into the exponent (31.2 becomes 16,
not 32), so under it values are first rounded to e4m3 in fp32 (`e4m3_rounded`) and the cast is exact.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import triton
import triton.language as tl

from profiling_in_pytorch.mlp.triton_ops.geglu import (
    INTERPRETING,
    TensorDescriptor,
    _num_sms,
    _config,
    _tile_coords,
    _tune,
    gelu_tanh_mul,
    keep_ready,
    stored,
)
from profiling_in_pytorch.mlp.triton_ops.launch import ReadyLaunch, interpreted

E4M3_MAX = tl.constexpr(448.0)
MIN_AMAX = tl.constexpr(1e-12)  # as profiling_in_pytorch/mlp/fp8_scaling.py: an all-zero group keeps a finite scale
GROUP = 128  # columns of m per scale: the gate/up kernel's BLOCK_N and the down kernel's BLOCK_K
_INTERPRETER_GROUP = 16


def group_size() -> int:
    """Columns per scale of the intermediate m: 128 on a GPU, 16 under the interpreter (tiny test sizes)."""
    return _INTERPRETER_GROUP if INTERPRETING else GROUP


@triton.jit
def e4m3_rounded(v, INTERPRETED: tl.constexpr):
    """v (fp32, within ±448) rounded to the nearest e4m3 value, in fp32, under the interpreter (whose cast does
    not carry a rounded-up mantissa into the exponent); on a GPU the cast itself rounds to nearest (cvt.rn)."""
    if INTERPRETED:
        bits = v.to(tl.uint32, bitcast=True)
        normal = (bits + 0x7FFFF + ((bits >> 20) & 1)) & 0xFFF00000  # keep 3 mantissa bits, nearest even
        subnormal = (v + 24576.0) - 24576.0  # below 2^-6 e4m3 steps by 2^-9: 1.5 * 2^14 has that ulp
        return tl.where(tl.abs(v) < 0.015625, subnormal, normal.to(tl.float32, bitcast=True))
    return v


@triton.jit
def _quantize_rows_kernel(x_ptr, q_ptr, s_ptr, M, K, stride_xm, stride_qm,
                          BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, INTERPRETED: tl.constexpr,
                          PDL: tl.constexpr = False):
    """Each program: BLOCK_M rows of x. A row that fits one block (K <= BLOCK_K) is read once and kept in
    registers; a longer one is read twice (amax, then scale and cast; the second read hits L2)."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = offs_m < M
    if K <= BLOCK_K:
        offs_k = tl.arange(0, BLOCK_K)
        mask = mask_m[:, None] & (offs_k[None, :] < K)
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(x), axis=1), MIN_AMAX)
        tl.store(s_ptr + offs_m, amax / E4M3_MAX, mask=mask_m)
        inverse = E4M3_MAX / amax
        q = tl.clamp(x * inverse[:, None], -E4M3_MAX, E4M3_MAX)
        tl.store(q_ptr + offs_m[:, None] * stride_qm + offs_k[None, :], e4m3_rounded(q, INTERPRETED).to(q_ptr.dtype.element_ty), mask=mask)
    else:
        amax = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mask = mask_m[:, None] & (offs_k[None, :] < K)
            x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.max(tl.abs(x), axis=1))
        amax = tl.maximum(amax, MIN_AMAX)
        tl.store(s_ptr + offs_m, amax / E4M3_MAX, mask=mask_m)
        inverse = E4M3_MAX / amax
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mask = mask_m[:, None] & (offs_k[None, :] < K)
            x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
            q = tl.clamp(x * inverse[:, None], -E4M3_MAX, E4M3_MAX)
            tl.store(q_ptr + offs_m[:, None] * stride_qm + offs_k[None, :], e4m3_rounded(q, INTERPRETED).to(q_ptr.dtype.element_ty), mask=mask)
    if PDL:  # the gate/up GEMM, launched as this kernel's dependent, may start once every program is here
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _fp8_geglu_gemm_kernel(
    x_desc, w_desc, m_desc,  # xq [M, K], interleaved Wq_gate/up [2N, K], mq [M, N]: e4m3
    sx_ptr, sw_ptr, sm_ptr,  # scales: x [M], weights [2N] (interleaved as the rows), m [cdiv(N, BLOCK_N), M]
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    FLATTEN: tl.constexpr, FAST_TANH: tl.constexpr, INTERPRETED: tl.constexpr, PDL: tl.constexpr = False,
):
    if PDL:  # launched before the quantizer ended: its prologue ran beside it, xq is read only after this
        tl.extra.cuda.gdc_wait()
    start_pid = tl.program_id(axis=0)
    num_programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    tile_id_c = start_pid - num_programs  # the epilogue's own counter (see _geglu_gemm_tma_kernel)
    for tile_id in tl.range(start_pid, num_tiles, num_programs, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            x = x_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            w = w_desc.load([pid_n * 2 * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(x, w.T, acc)

        tile_id_c += num_programs
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_w = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
        sx = tl.load(sx_ptr + offs_m, mask=offs_m < M, other=0.0)
        sw = tl.load(sw_ptr + offs_w, mask=offs_w < 2 * N, other=0.0)
        acc = acc * sx[:, None] * sw[None, :]  # back to real units: x's scale by row, the weight's by column
        gate, up = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        h = gelu_tanh_mul(gate, up, FAST_TANH)
        # The down GEMM's input, quantized here: one scale per row of this tile (1 x BLOCK_N). Columns past N
        # read zero weights, so they are 0 and leave the amax alone.
        # One division per row, then a multiply per element: an fp32 division is a dozen instructions, and 16K of
        # them per tile weigh in an epilogue that runs after only K / BLOCK_K = 6 MMA steps at the post's shape.
        amax = tl.maximum(tl.max(tl.abs(h), axis=1), MIN_AMAX)
        scale = amax / E4M3_MAX
        inverse = E4M3_MAX / amax
        q = tl.clamp(h * inverse[:, None], -E4M3_MAX, E4M3_MAX)
        m_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], e4m3_rounded(q, INTERPRETED).to(m_desc.dtype))
        tl.store(sm_ptr + pid_n * M + offs_m, scale, mask=offs_m < M)


@triton.jit
def _fp8_blockscaled_gemm_kernel(
    a_desc, b_desc, c_desc,  # A [M, K] e4m3 in 1 x BLOCK_K blocks, B [N, K] e4m3 per row, C [M, N] bf16/fp16
    sa_ptr, sb_ptr,  # scales: A [cdiv(K, BLOCK_K), M], B [N]
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    FLATTEN: tl.constexpr, INTERPRETED_BF16: tl.constexpr,
):
    start_pid = tl.program_id(axis=0)
    num_programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    tile_id_c = start_pid - num_programs
    for tile_id in tl.range(start_pid, num_tiles, num_programs, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            sa = tl.load(sa_ptr + ki * M + offs_m, mask=offs_m < M, other=0.0)
            # Each K block has its own scale per row: its partial sums are scaled before they join the others.
            acc += tl.dot(a, b.T) * sa[:, None]

        tile_id_c += num_programs
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        sb = tl.load(sb_ptr + offs_n, mask=offs_n < N, other=0.0)
        c = acc * sb[None, :]
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], stored(c, INTERPRETED_BF16).to(c_desc.dtype))


# --------------------------------------------------------------------------------------------------------------
# Launch configurations: few candidates, the fastest timed once per shape (as geglu.py's)
# --------------------------------------------------------------------------------------------------------------
# Gate/up: the bf16 kernel's 128 x (2 x 128) tile, with BLOCK_K 128 (128 bytes of e4m3, TMA's widest swizzle);
# a stage is 48 KB as in bf16, so 3-4 fit beside the 16 KB e4m3 staging buffer of the store.
GEGLU_CONFIGS = [
    _config(128, GROUP, 128, 3, 8, FLATTEN=True),
    _config(128, GROUP, 128, 4, 8, FLATTEN=True),  # of the first four tried, the fastest on an H100 at the post's shape
    _config(128, GROUP, 128, 4, 8, group_m=16, FLATTEN=True),
    _config(128, GROUP, 64, 6, 8, FLATTEN=True),
    _config(128, GROUP, 128, 3, 8, FLATTEN=False),
    _config(64, GROUP, 128, 4, 4, FLATTEN=True),
]
# Down: BLOCK_K is the group; two [BLOCK_M, BLOCK_N] fp32 tiles live in registers (the K step's partial sums and
# the total), so 128 x 128 with 8 warps, or 128 x 64 for more tiles when N is narrow (768 columns: 6 tiles).
DOWN_CONFIGS = [
    _config(128, 128, GROUP, 4, 8, FLATTEN=True),
    _config(128, 64, GROUP, 4, 4, FLATTEN=True),
    _config(128, 128, GROUP, 3, 8, FLATTEN=False),
    _config(64, 128, GROUP, 4, 4, FLATTEN=True),
]
_INTERPRETER_CONFIG = _config(16, _INTERPRETER_GROUP, _INTERPRETER_GROUP, 1, 4, group_m=2, FLATTEN=True)
_INTERPRETER_PROGRAMS = 2
_best_config: dict[tuple, triton.Config] = {}
# Programmatic dependent launch (Hopper+): the gate/up GEMM is launched as the quantizer's dependent, so its
# launch and prologue (barriers, descriptor prefetch) run while the quantizer's last programs finish, and it waits
# in `gdc_wait` for xq. On an H100 at the post's shape: the gap between the two kernels went from 1.0 µs to none
# (the GEMM starts 0.2 µs before the quantizer ends) and the forward from 127.3 to 125.6 µs (median of 3 runs).
_PDL = not INTERPRETING and hasattr(tl.extra.cuda, "gdc_wait")


def _quantize_block(k: int) -> tuple[int, int]:
    """(rows, columns) per program of the row quantizer: whole rows up to 4096 columns, 16 KB of bf16 or less."""
    block_k = min(triton.next_power_of_2(k), 4096)
    return max(1, 8192 // block_k), block_k


# After a key's first call each function below launches through a `ReadyLaunch` (launch.py), as geglu_gemm does.
# On the H200's host at 256 tokens the FP8 forward took 167.1 µs of CPU through kernel[grid], 83.7 through these
# (docs/launch-cost.md).
_ready: dict[tuple, ReadyLaunch] = {}


def _aligned(*tensors: torch.Tensor) -> tuple[bool, ...]:
    return tuple(t.data_ptr() % 16 == 0 for t in tensors)


def _quantize_key(x):
    return ("quantize_rows", x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0)


def _geglu_key(xq, sx, w_gate_up_q, sw_gate_up):
    return ("geglu", xq.shape, xq.stride(), xq.dtype, w_gate_up_q.shape, w_gate_up_q.stride(), w_gate_up_q.dtype,
            sx.dtype, sw_gate_up.dtype, xq.device, _aligned(xq, w_gate_up_q, sx, sw_gate_up))


def _down_key(aq, sa, bq, sb, out_dtype):
    return ("down", aq.shape, aq.stride(), aq.dtype, bq.shape, bq.stride(), bq.dtype, sa.shape, sa.stride(),
            sa.dtype, sb.dtype, out_dtype, aq.device, _aligned(aq, bq, sa, sb))


def kept_launches(x2d, xq, sx, w_gate_up_q, sw_gate_up, mq, sm, w_down_q=None, sw_down=None, out_dtype=None):
    """The ready launches a forward's first call kept for these tensors' keys: (quantizer, gate/up GEMM, down GEMM
    or None where cuBLAS runs it); None where one is missing (the interpreter keeps them too, but a caller that
    feeds addresses must not use them there)."""
    quantize, geglu = _ready.get(_quantize_key(x2d)), _ready.get(_geglu_key(xq, sx, w_gate_up_q, sw_gate_up))
    down = None if w_down_q is None else _ready.get(_down_key(mq, sm, w_down_q, sw_down, out_dtype))
    if quantize is None or geglu is None or (w_down_q is not None and down is None):
        return None
    return quantize, geglu, down


def _launch_ready(ready_key, kernel, grid, args: list, constants: dict, options: dict, fed) -> None:
    """Launch `kernel` now and keep it ready for `ready_key`'s next calls (None: launch only)."""
    if ready_key is None:
        with interpreted(kernel) if INTERPRETING else contextlib.nullcontext():
            kernel[grid](*args, **constants, **options)
        return
    args = args + [constants[name] for name in kernel.arg_names[len(args):]]
    keep_ready(_ready, ready_key, ReadyLaunch(kernel, grid, args, options, fed))


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(xq [M, K] e4m3, sx [M] fp32) with x ≈ xq * sx[:, None]: one scale per row (token) of a 2-D x."""
    ready_key = _quantize_key(x)
    ready = _ready.get(ready_key)
    if ready is not None:  # checked and compiled when the key was stored
        q = x.new_empty(ready_key[1], dtype=torch.float8_e4m3fn)
        s = x.new_empty(ready_key[1][:1], dtype=torch.float32)
        ready(x, q, s)
        return q, s
    if x.ndim != 2 or x.stride(1) != 1:
        raise ValueError(f"quantize_rows takes a 2-D tensor with contiguous rows, got {tuple(x.shape)}")
    M, K = x.shape
    q = torch.empty((M, K), device=x.device, dtype=torch.float8_e4m3fn)
    s = torch.empty((M,), device=x.device, dtype=torch.float32)
    if M == 0:
        return q, s
    block_m, block_k = (16, 16) if INTERPRETING else _quantize_block(K)
    _launch_ready(ready_key, _quantize_rows_kernel, (triton.cdiv(M, block_m),),
                  [x, q, s, M, K, x.stride(0), q.stride(0)],
                  dict(BLOCK_M=block_m, BLOCK_K=block_k, INTERPRETED=INTERPRETING, PDL=_PDL), {"num_warps": 4},
                  ("x_ptr", "q_ptr", "s_ptr"))
    return q, s


def _check_fp8(name: str, *tensors: torch.Tensor) -> None:
    for t in tensors:
        if t.dtype != torch.float8_e4m3fn or t.ndim != 2 or not t.is_contiguous():
            raise TypeError(f"{name} takes contiguous 2-D float8_e4m3fn operands, got {t.dtype} {tuple(t.shape)}")


def _programs(device: torch.device, tiles: int) -> int:
    return min(_INTERPRETER_PROGRAMS if INTERPRETING else _num_sms(device.index or 0), tiles)


def _tuned(key, configs, launch):
    """The configuration to launch: the interpreter's, or the fastest of `configs`, timed on `key`'s first call."""
    if INTERPRETING:
        return _INTERPRETER_CONFIG
    chosen = _best_config.get(key)
    if chosen is None:
        chosen = _tune(key, configs, launch)
        _best_config[key] = chosen
    return chosen


def fp8_geglu_gemm(xq: torch.Tensor, sx: torch.Tensor, w_gate_up_q: torch.Tensor, sw_gate_up: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(mq [M, N] e4m3, sm [cdiv(N, G), M] fp32): m = gelu_tanh(x @ W_gate.T) * (x @ W_up.T), quantized by 1 x G
    groups (G = `group_size()`), from xq [M, K] (scales sx [M]) and the interleaved w_gate_up_q [2N, K] (scales
    sw_gate_up [2N]). K and N multiples of 16 (TMA's 16-byte rows)."""
    ready_key = _geglu_key(xq, sx, w_gate_up_q, sw_gate_up)
    ready = _ready.get(ready_key)
    if ready is not None:  # checked, tuned and compiled when the key was stored
        M, N = ready_key[1][0], ready_key[4][0] // 2
        mq = xq.new_empty((M, N))
        sm = sx.new_empty((triton.cdiv(N, group_size()), M), dtype=torch.float32)
        ready(xq, w_gate_up_q, mq, sx, sw_gate_up, sm)
        return mq, sm
    _check_fp8("fp8_geglu_gemm", xq, w_gate_up_q)
    M, K = xq.shape
    N = w_gate_up_q.shape[0] // 2
    if w_gate_up_q.shape[1] != K or w_gate_up_q.shape[0] % 2 or K % 16 or N % 16:
        raise ValueError(f"fp8_geglu_gemm: xq [M, K] and w [2N, K] with K, N multiples of 16, got "
                         f"{tuple(xq.shape)}, {tuple(w_gate_up_q.shape)}")
    g = group_size()
    mq = torch.empty((M, N), device=xq.device, dtype=torch.float8_e4m3fn)
    sm = torch.empty((triton.cdiv(N, g), M), device=xq.device, dtype=torch.float32)
    if M == 0:
        return mq, sm

    def arguments(c):
        bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
        grid = (_programs(xq.device, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        args = [TensorDescriptor.from_tensor(xq, [bm, bk]), TensorDescriptor.from_tensor(w_gate_up_q, [2 * bn, bk]),
                TensorDescriptor.from_tensor(mq, [bm, bn]), sx, sw_gate_up, sm, M, N, K]
        constants = dict(**c.kwargs, FAST_TANH=not INTERPRETING, INTERPRETED=INTERPRETING, PDL=_PDL)
        options = {"num_warps": c.num_warps, "num_stages": c.num_stages, **({"launch_pdl": True} if _PDL else {})}
        return grid, args, constants, options

    def launch(c):
        grid, args, constants, options = arguments(c)
        _fp8_geglu_gemm_kernel[grid](*args, **constants, **options)

    chosen = _tuned(("geglu", min(triton.next_power_of_2(M), 8192), N, K, xq.device), GEGLU_CONFIGS, launch)
    _launch_ready(ready_key, _fp8_geglu_gemm_kernel, *arguments(chosen),
                  ("x_desc", "w_desc", "m_desc", "sx_ptr", "sw_ptr", "sm_ptr"))
    return mq, sm


def fp8_blockscaled_gemm(aq: torch.Tensor, sa: torch.Tensor, bq: torch.Tensor, sb: torch.Tensor,
                         out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """C [M, N] = (aq scaled by 1 x G blocks, sa [cdiv(K, G), M]) @ (bq [N, K] scaled per row, sb [N]).T."""
    ready_key = _down_key(aq, sa, bq, sb, out_dtype)
    ready = _ready.get(ready_key)
    if ready is not None:  # checked, tuned and compiled when the key was stored
        c = sb.new_empty((ready_key[1][0], ready_key[4][0]), dtype=out_dtype)
        ready(aq, bq, c, sa, sb)
        return c
    _check_fp8("fp8_blockscaled_gemm", aq, bq)
    M, K = aq.shape
    N = bq.shape[0]
    g = group_size()
    if bq.shape[1] != K or K % 16 or N % 8 or sa.shape != (triton.cdiv(K, g), M):
        raise ValueError(f"fp8_blockscaled_gemm: A [M, K], B [N, K], scales [K / {g}, M]; got {tuple(aq.shape)}, "
                         f"{tuple(bq.shape)}, {tuple(sa.shape)}")
    c = torch.empty((M, N), device=aq.device, dtype=out_dtype)
    if M == 0:
        return c

    def arguments(cfg):
        bm, bn, bk = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"]
        grid = (_programs(aq.device, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        args = [TensorDescriptor.from_tensor(aq, [bm, bk]), TensorDescriptor.from_tensor(bq, [bn, bk]),
                TensorDescriptor.from_tensor(c, [bm, bn]), sa, sb, M, N, K]
        constants = dict(**cfg.kwargs, INTERPRETED_BF16=INTERPRETING and out_dtype == torch.bfloat16)
        return grid, args, constants, {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}

    def launch(cfg):
        grid, args, constants, options = arguments(cfg)
        _fp8_blockscaled_gemm_kernel[grid](*args, **constants, **options)

    chosen = _tuned(("down", min(triton.next_power_of_2(M), 8192), N, K, out_dtype, aq.device), DOWN_CONFIGS, launch)
    _launch_ready(ready_key, _fp8_blockscaled_gemm_kernel, *arguments(chosen),
                  ("a_desc", "b_desc", "c_desc", "sa_ptr", "sb_ptr"))
    return c


@functools.lru_cache(maxsize=None)
def fp8_supported(device_index: int) -> bool:
    """e4m3 tensor cores: sm_89 (Ada) and newer; these kernels also need TMA, so Hopper (sm_90) or newer."""
    return torch.cuda.get_device_capability(device_index) >= (9, 0)
