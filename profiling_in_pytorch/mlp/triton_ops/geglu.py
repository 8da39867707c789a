"""The GeGLU gate/up GEMM in one Triton kernel: h = gelu_tanh(x @ W_gate.T) * (x @ W_up.T).

Eagerly this is three kernels (two GEMMs, then gelu and mul, which torch.compile fuses into one) and two
[tokens, intermediate] tensors that go to HBM and come back. Here one program owns one [BLOCK_M, BLOCK_N] tile of
h and computes the gate and up values for those columns together, in registers, then applies the tanh GELU and
the product before its single store.

The trick that makes it one GEMM: the two weights are stored interleaved, row by row, in one [2N, K] matrix
(`interleave_gate_up`): row 2j is W_gate[j], row 2j+1 is W_up[j]. A tile of 2*BLOCK_N weight rows then holds the
gate and the up rows of the same BLOCK_N output columns, one `tl.dot` of x against it yields both, and in the
accumulator every thread already holds each (gate, up) pair side by side, so splitting them costs nothing:

    acc = x_tile @ w_tile.T                        # [BLOCK_M, 2 * BLOCK_N]: g0 u0 g1 u1 ...
    gate, up = tl.split(acc.reshape(BLOCK_M, BLOCK_N, 2))
    h = gelu_tanh(gate) * up                       # [BLOCK_M, BLOCK_N], stored once

Two kernels compute it:

* `_geglu_gemm_tma_kernel`, the fast path on Hopper (sm_90+): tiles move through the Tensor Memory Accelerator
  (host-built tensor descriptors), the grid is persistent (one program per SM, walking tiles in grouped order so
  that programs running together share x rows and weight tiles in L2), and Triton pipelines the flattened
  tile/K loop so the next tile's loads overlap this tile's epilogue. TMA zero-fills reads past the edges and
  clips stores, so ragged M, N and K need no masks; it needs 16-byte aligned rows (K, N multiples of 8).
* `_geglu_gemm_kernel`, plain pointers and masks: any strides, GPUs before Hopper, and decode-sized batches,
  where its lower launch cost matters more than TMA.

Both run under Triton's interpreter (TRITON_INTERPRET=1) on a CPU, which is how the tests check them.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

from profiling_in_pytorch.mlp.triton_ops.launch import INTERPRETING, ReadyLaunch, interpreted

try:  # Triton >= 3.4: host-side tensor descriptors (TMA) for NVIDIA GPUs and the interpreter
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton: the pointer kernel does all the work
    TensorDescriptor = None

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)


def interleave_gate_up(w_gate: torch.Tensor, w_up: torch.Tensor) -> torch.Tensor:
    """One [2N, K] weight whose row 2j is w_gate[j] and row 2j+1 is w_up[j] (both [N, K])."""
    if w_gate.shape != w_up.shape or w_gate.ndim != 2:
        raise ValueError(f"w_gate and w_up must be two [N, K] matrices, got {tuple(w_gate.shape)}, {tuple(w_up.shape)}")
    n, k = w_gate.shape
    return torch.stack([w_gate, w_up], dim=1).reshape(2 * n, k)


# --------------------------------------------------------------------------------------------------------------
# The epilogue, shared by both kernels
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def _tanh_approx(z):
    # One special-function-unit instruction (max relative error ~2^-11, far below bf16's 2^-8).
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [z], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def gelu_tanh_mul(gate, up, FAST_TANH: tl.constexpr):
    """gelu_tanh(gate) * up on fp32 values; gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).

    FAST_TANH: the GPU's tanh.approx.f32. The portable form instead writes 0.5 (1 + tanh(z)) as sigmoid(2z): an
    exp and a division, two special-function instructions instead of one, which is measurable in the epilogue
    (about 10 us of 128 at the post's shape). The interpreter runs the portable form.
    """
    if FAST_TANH:
        z = 0.7978845608028654 * gate * (1.0 + 0.044715 * gate * gate)  # sqrt(2/pi) = 0.7978...
        half_gate = 0.5 * gate
        return (half_gate + half_gate * _tanh_approx(z)) * up
    else:
        two_z = 1.5957691216057308 * gate * (1.0 + 0.044715 * gate * gate)
        return gate / (1.0 + tl.exp(-two_z)) * up  # exp overflows to inf for very negative g: g / inf = 0, no NaN


@triton.jit
def stored(v, INTERPRETED_BF16: tl.constexpr):
    """v (fp32) as it should reach a bfloat16/float16 store. A GPU rounds fp32 to bfloat16 to nearest even, the
    interpreter truncates, which doubles the rounding error: under it, v is first rounded to the nearest
    bfloat16 in fp32, so that the truncation is exact and the tests see what the GPU computes."""
    if INTERPRETED_BF16:
        bits = v.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)
    return v


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: walk GROUP_M row-blocks down one column-block before moving right, so programs running at
    the same time read a few weight tiles and GROUP_M row-blocks of x, which stay in L2."""
    tiles_per_group = GROUP_M * num_pid_n
    first_pid_m = (tile_id // tiles_per_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % tiles_per_group) // group_size_m
    return pid_m, pid_n


# --------------------------------------------------------------------------------------------------------------
# Hopper: TMA + persistent grid
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def _geglu_gemm_tma_kernel(
    x_desc, w_desc, h_desc,  # tensor descriptors: x [M, K], interleaved W_gate/W_up [2N, K], h [M, N]
    gu_desc, gu_ptr,  # [M, 2N]: the pre-activations, interleaved as the weight is, kept for a backward (STORE_GATE_UP)
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    FLATTEN: tl.constexpr,  # one software pipeline over all (tile, k) steps: next tile's loads overlap this epilogue
    STORE_GATE_UP: tl.constexpr,
    GATE_UP_TMA: tl.constexpr,  # store them through TMA (shared-memory staging) or straight from registers
    FAST_TANH: tl.constexpr,
    INTERPRETED_BF16: tl.constexpr,  # the interpreter has no bfloat16 arithmetic and truncates to bfloat16
):
    start_pid = tl.program_id(axis=0)
    num_programs = tl.num_programs(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    # The epilogue recomputes its tile's coordinates from its own counter: with FLATTEN the pipeliner may already
    # have advanced tile_id to the next tile when this tile's epilogue runs.
    tile_id_c = start_pid - num_programs
    for tile_id in tl.range(start_pid, num_tiles, num_programs, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            x = x_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            w = w_desc.load([pid_n * 2 * BLOCK_N, ki * BLOCK_K])  # gate and up rows of the same columns
            if INTERPRETED_BF16:
                x, w = x.to(tl.float32), w.to(tl.float32)
            acc = tl.dot(x, w.T, acc)

        tile_id_c += num_programs
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        if STORE_GATE_UP:  # rounded as eager's GEMMs round g and u; the backward reads them back
            if GATE_UP_TMA:
                gu_desc.store([pid_m * BLOCK_M, pid_n * 2 * BLOCK_N], stored(acc, INTERPRETED_BF16).to(gu_desc.dtype))
            else:
                offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
                offs_gu = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
                tl.store(gu_ptr + offs_m[:, None] * 2 * N + offs_gu[None, :],
                         stored(acc, INTERPRETED_BF16).to(gu_ptr.dtype.element_ty),
                         mask=(offs_m[:, None] < M) & (offs_gu[None, :] < 2 * N))
        gate, up = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
        h = gelu_tanh_mul(gate, up, FAST_TANH)
        h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], stored(h, INTERPRETED_BF16).to(h_desc.dtype))


# --------------------------------------------------------------------------------------------------------------
# Any layout, any GPU, small batches: pointers and masks
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def _geglu_gemm_kernel(
    x_ptr, w_ptr, h_ptr,  # x [M, K], interleaved W_gate/W_up [2N, K], h [M, N]
    gu_ptr,  # [M, 2N], contiguous: the pre-activations, interleaved, kept for a backward (STORE_GATE_UP)
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_hm, stride_hn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    STORE_GATE_UP: tl.constexpr,
    FAST_TANH: tl.constexpr,
    INTERPRETED_BF16: tl.constexpr,  # the interpreter has no bfloat16 arithmetic and truncates to bfloat16
):
    pid_m, pid_n = _tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_w = pid_n * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)  # weight rows: gate and up of BLOCK_N columns
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_w = offs_w < 2 * N

    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_w[None, :] * stride_wn  # [BLOCK_K, 2 * BLOCK_N]: W.T
    acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        mask_k = offs_k < K - ki * BLOCK_K  # the last K tile may be partial: zeros add nothing to the dot
        x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=mask_k[:, None] & mask_w[None, :], other=0.0)
        if INTERPRETED_BF16:
            x, w = x.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(x, w, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    if STORE_GATE_UP:
        gu_ptrs = gu_ptr + offs_m[:, None] * 2 * N + offs_w[None, :]
        tl.store(gu_ptrs, stored(acc, INTERPRETED_BF16).to(gu_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_w[None, :])
    gate, up = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
    h = stored(gelu_tanh_mul(gate, up, FAST_TANH), INTERPRETED_BF16).to(h_ptr.dtype.element_ty)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h, mask=mask_m[:, None] & (offs_n[None, :] < N))


# --------------------------------------------------------------------------------------------------------------
# Launch configurations, tuned on an H200 (see README): few candidates per case, timed once per shape
# --------------------------------------------------------------------------------------------------------------
def _config(bm, bn, bk, stages, warps, group_m=8, **flags):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, **flags},
                         num_stages=stages, num_warps=warps)


# Measured on an H200 (bf16, README): at 8192 tokens x 768 -> 3072 the first two configurations run in
# 116-117 us, cuBLAS's two GEMMs without any activation in 118-120 us. The tile is 128 x (2 x 128), the largest whose fp32 accumulator
# fits the registers of 8 warps; BLOCK_K 64 with 3-4 stages of 48 KB fills shared memory. The unflattened loop
# wins when each program gets about one tile (a few hundred tokens); the 64 x (2 x 64) tile when there are fewer.
TMA_CONFIGS = [
    _config(128, 128, 64, 3, 8, FLATTEN=True),
    _config(128, 128, 64, 4, 8, group_m=16, FLATTEN=True),
    _config(128, 128, 64, 3, 8, FLATTEN=False),
    _config(64, 64, 128, 4, 4, FLATTEN=True),
]
# Storing the pre-activations too (training): a TMA store needs a [BLOCK_M, 2 * BLOCK_N] staging buffer, which
# with 128 x (2 x 128) tiles no longer fits next to three pipeline stages, so those store from registers. On an
# H200 at the post's shape: 136-143 us (119-121 without the store), 128 x (2 x 64) tiles through TMA 156-159 us.
TMA_CONFIGS_STORING_GATE_UP = [
    _config(128, 128, 64, 3, 8, FLATTEN=True, GATE_UP_TMA=False),
    _config(128, 128, 64, 3, 8, FLATTEN=False, GATE_UP_TMA=False),
    _config(128, 64, 64, 4, 8, FLATTEN=True, GATE_UP_TMA=True),
    _config(128, 64, 64, 4, 8, FLATTEN=False, GATE_UP_TMA=True),
]
# Up to SMALL_M tokens (decode) the GEMM streams the weights: narrow tiles for many programs, and the pointer
# kernel, whose launch costs less host time than building TMA descriptors.
SMALL_M = 64
POINTER_CONFIGS_SMALL_M = [  # (BLOCK_N, BLOCK_K, stages, warps); BLOCK_M follows M
    (16, 128, 4, 2),
    (16, 256, 3, 2),
    (64, 64, 4, 4),
]
POINTER_CONFIGS = [  # more tokens, without TMA (odd sizes, strided inputs, GPUs before Hopper)
    _config(128, 64, 64, 3, 8),
    _config(64, 64, 64, 3, 4),
]
# Under the interpreter there is nothing to time: small tiles that still give several K steps, several tiles
# per persistent program and partial tiles at every edge.
_INTERPRETER_TMA_CONFIG = _config(16, 16, 16, 1, 4, group_m=2, FLATTEN=True, GATE_UP_TMA=True)
_INTERPRETER_POINTER_CONFIG = _config(16, 16, 16, 1, 4, group_m=2)
_INTERPRETER_PROGRAMS = 2

# (kernel, M bucket, N, K, dtype, device) -> the fastest candidate, timed once. Looking it up is one dict access
# per call; triton.autotune does the same search but adds ~20-30 us of Python to every launch on the H200's host,
# longer than a decode-sized GEMM runs.
_best_config: dict[tuple, triton.Config] = {}


# Every call after a key's first launches through a `ReadyLaunch` (launch.py): the tuned configuration, the grid,
# the compiled kernel and its integer arguments are fixed for the key, the weights' CUtensorMaps encoded once.
# The key holds everything Triton specializes the kernel on (shapes, strides, dtypes, device, 16-byte alignment)
# and every check below depends on, so a call that finds its key skips them. On the H200's host at the post's
# shape, with the module's own kept launch (fused.py), the forward's CPU time went from 139.2 to 32.0 µs
# (docs/launch-cost.md).
_ready_launches: dict[tuple, "_ReadyGeGLU"] = {}
# Distinct keys kept (varying sequence lengths make new ones); past it the cache starts again.
MAX_READY_LAUNCHES = 256


def _ready_key(x: torch.Tensor, w_gate_up: torch.Tensor, gate_up_out: torch.Tensor | None = None) -> tuple:
    key = (x.shape, x.stride(), w_gate_up.shape, w_gate_up.stride(), x.dtype, w_gate_up.dtype, x.device,
           x.data_ptr() % 16 == 0, w_gate_up.data_ptr() % 16 == 0)
    if gate_up_out is None:
        return key
    return key + (gate_up_out.shape, gate_up_out.stride(), gate_up_out.dtype, gate_up_out.data_ptr() % 16 == 0)


def keep_ready(cache: dict, key: tuple, ready) -> None:
    if len(cache) >= MAX_READY_LAUNCHES:
        cache.clear()
    cache[key] = ready


@functools.lru_cache(maxsize=None)
def _small_m_configs(block_m: int) -> list:
    return [_config(block_m, bn, bk, stages, warps) for bn, bk, stages, warps in POINTER_CONFIGS_SMALL_M]


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=None)
def _is_hopper_or_newer(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def _tma_compatible(*tensors: torch.Tensor) -> bool:
    """TMA reads 2-D tiles whose last dimension is contiguous and whose rows start on 16-byte boundaries."""
    for t in tensors:
        if t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
    return True


def uses_tma(x: torch.Tensor, w_gate_up: torch.Tensor, out: torch.Tensor | None = None) -> bool:
    """Whether `geglu_gemm` takes the TMA kernel: Hopper or newer (or the interpreter), more than SMALL_M tokens,
    rows aligned to 16 bytes (K and N multiples of 8 in bf16/fp16)."""
    if TensorDescriptor is None:
        return False
    if not INTERPRETING:  # the interpreter runs TMA at any size, so that tests reach it with tiny shapes
        if x.shape[0] <= SMALL_M or not (x.is_cuda and _is_hopper_or_newer(x.get_device())):
            return False
    n = w_gate_up.shape[0] // 2
    if out is not None and not _tma_compatible(out):
        return False
    return (n * x.element_size()) % 16 == 0 and _tma_compatible(x, w_gate_up)


def _time_candidate(launch, c) -> float:
    try:
        return triton.testing.do_bench(lambda: launch(c), warmup=5, rep=20, return_mode="median")
    except OutOfResources:  # a tile whose buffers do not fit this GPU's shared memory or registers
        return float("inf")


def _refuse_under_capture(key) -> None:
    """A shape's first call compiles the kernel and times launch configurations (do_bench synchronizes): host work
    a CUDA graph cannot record. Inside a capture that would fail with CUDA's "operation not permitted when stream
    is capturing" and invalidate the capture; say what to do instead."""
    if not INTERPRETING and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        _, _, m_bucket, n, k, dtype, _ = key
        raise RuntimeError(
            f"geglu_gemm meets this shape (up to {m_bucket} tokens, N={n}, K={k}, {dtype}) for the first time inside a "
            "CUDA graph capture: its first call per shape compiles and tunes the kernel, which synchronizes. Call the "
            "module once with this shape before capturing (profiling_in_pytorch.mlp.graphs.CapturedForward warms up first)"
        )


def _tune(key, candidates, launch):
    """Time each candidate (CUDA events, median) on the first call with `key`; remember the fastest."""
    if len(candidates) == 1:
        config = candidates[0]
    else:
        times = [_time_candidate(launch, c) for c in candidates]
        if min(times) == float("inf"):
            raise RuntimeError(f"no launch configuration of this kernel fits this GPU (shape key {key})")
        config = candidates[times.index(min(times))]
    _best_config[key] = config
    return config


def geglu_gemm(
    x: torch.Tensor,
    w_gate_up: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    gate_up_out: torch.Tensor | None = None,
    config: triton.Config | None = None,
    use_tma: bool | None = None,
) -> torch.Tensor:
    """h = gelu_tanh(x @ W_gate.T) * (x @ W_up.T) in one kernel (no autograd: `geglu_mlp_train` trains it).

    x: [M, K]; w_gate_up: [2N, K] from `interleave_gate_up(W_gate, W_up)`; both bfloat16 or both float16, on a
    CUDA GPU (or on the CPU under TRITON_INTERPRET=1). Returns h: [M, N] in x's dtype (written into `out` when
    given). Products accumulate in fp32 and the activation is applied to the fp32 values: h is rounded once.

    use_tma: None follows `uses_tma`; True/False forces a kernel. config: pin a launch configuration (tuning
    scripts, tests); None takes the fastest candidate for this shape, timed on the shape's first call.
    gate_up_out: a contiguous [M, 2N] tensor that also receives the pre-activations x @ W_gate_up.T, interleaved
    (column 2j the gate, 2j + 1 the up projection of column j), what a backward needs (`geglu_gemm_backward`).
    """
    ready_key = None
    if out is None and config is None and use_tma is None:
        ready_key = _ready_key(x, w_gate_up, gate_up_out)
        ready = _ready_launches.get(ready_key)
        if ready is not None:  # checked, tuned and compiled when the key was stored
            return ready(x, w_gate_up, gate_up_out)
    if x.dtype not in SUPPORTED_DTYPES or w_gate_up.dtype != x.dtype:
        raise TypeError(f"geglu_gemm runs in bfloat16 or float16 (x and weight alike), got {x.dtype}, {w_gate_up.dtype}")
    if x.ndim != 2 or w_gate_up.ndim != 2 or w_gate_up.shape[1] != x.shape[1] or w_gate_up.shape[0] % 2:
        raise ValueError(f"geglu_gemm expects x [M, K] and w_gate_up [2N, K], got {tuple(x.shape)}, {tuple(w_gate_up.shape)}")
    M, K = x.shape
    N = w_gate_up.shape[0] // 2
    if out is None:
        h = torch.empty((M, N), device=x.device, dtype=x.dtype)
    elif out.shape != (M, N) or out.dtype != x.dtype:
        raise ValueError(f"out must be [{M}, {N}] in {x.dtype}, got {tuple(out.shape)} in {out.dtype}")
    else:
        h = out
    if gate_up_out is not None and (gate_up_out.shape != (M, 2 * N) or gate_up_out.dtype != x.dtype
                                    or not gate_up_out.is_contiguous()):
        raise ValueError(f"gate_up_out must be a contiguous [{M}, {2 * N}] tensor in {x.dtype}, got "
                         f"{tuple(gate_up_out.shape)} in {gate_up_out.dtype}")
    if M == 0 or N == 0:
        return h
    if K == 0:  # empty sums: gelu(0) * 0
        if gate_up_out is not None:
            gate_up_out.zero_()
        return h.zero_()
    if use_tma is None:
        use_tma = uses_tma(x, w_gate_up, out) and (gate_up_out is None or _tma_compatible(gate_up_out))
    store_gate_up = gate_up_out is not None
    # The interpreter has no PTX (so no tanh.approx) and stores bfloat16 as raw integers, which its tl.dot would
    # multiply as integers: it gets the portable tanh and fp32 dot operands.
    flags = dict(STORE_GATE_UP=store_gate_up, FAST_TANH=not INTERPRETING,
                 INTERPRETED_BF16=INTERPRETING and x.dtype == torch.bfloat16)
    key = (use_tma, store_gate_up, min(triton.next_power_of_2(M), 8192), N, K, x.dtype, x.get_device())

    if use_tma:
        kernel = _geglu_gemm_tma_kernel
        num_programs_max = _INTERPRETER_PROGRAMS if INTERPRETING else _num_sms(x.get_device())
        fed = ("x_desc", "w_desc", "h_desc") + (("gu_desc", "gu_ptr") if store_gate_up else ())

        def arguments(c):
            bm, bn, bk = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["BLOCK_K"]
            grid = (min(num_programs_max, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
            args = [
                TensorDescriptor.from_tensor(x, [bm, bk]),
                TensorDescriptor.from_tensor(w_gate_up, [2 * bn, bk]),
                TensorDescriptor.from_tensor(h, [bm, bn]),
                TensorDescriptor.from_tensor(gate_up_out, [bm, 2 * bn]) if store_gate_up else None, gate_up_out,
                M, N, K,
            ]
            return grid, args, {"GATE_UP_TMA": True, **c.kwargs, **flags}

        def candidates():
            if INTERPRETING:
                return [_INTERPRETER_TMA_CONFIG]
            return TMA_CONFIGS_STORING_GATE_UP if store_gate_up else TMA_CONFIGS

    else:
        kernel = _geglu_gemm_kernel
        fed = ("x_ptr", "w_ptr", "h_ptr") + (("gu_ptr",) if store_gate_up else ())

        def arguments(c):
            grid = (triton.cdiv(M, c.kwargs["BLOCK_M"]) * triton.cdiv(N, c.kwargs["BLOCK_N"]),)
            args = [x, w_gate_up, h, gate_up_out, M, N, K, x.stride(0), x.stride(1), w_gate_up.stride(0),
                    w_gate_up.stride(1), h.stride(0), h.stride(1)]
            return grid, args, {**c.kwargs, **flags}

        def candidates():
            if INTERPRETING:
                return [_INTERPRETER_POINTER_CONFIG]
            if M <= SMALL_M:
                return _small_m_configs(max(16, triton.next_power_of_2(M)))
            return POINTER_CONFIGS

    def launch(c):
        grid, args, constants = arguments(c)
        with interpreted(kernel) if INTERPRETING else contextlib.nullcontext():
            kernel[grid](*args, **constants, num_warps=c.num_warps, num_stages=c.num_stages)

    chosen = config or _best_config.get(key)
    if chosen is None:
        _refuse_under_capture(key)
        chosen = _tune(key, candidates(), launch)
    if ready_key is None:
        launch(chosen)
        return h
    # Kept for the next call with this key: launching it now is this call's launch.
    grid, args, constants = arguments(chosen)
    args += [constants[name] for name in kernel.arg_names[len(args):]]
    ready = ReadyLaunch(kernel, grid, args, {"num_warps": chosen.num_warps, "num_stages": chosen.num_stages}, fed)
    keep_ready(_ready_launches, ready_key, _ReadyGeGLU(ready, (M, N), store_gate_up))
    return h


class _ReadyGeGLU:
    """geglu_gemm for one key: allocate h, launch."""

    def __init__(self, launch: ReadyLaunch, out_shape: tuple[int, int], store_gate_up: bool):
        self.launch, self.out_shape, self.store_gate_up = launch, out_shape, store_gate_up

    def __call__(self, x: torch.Tensor, w_gate_up: torch.Tensor, gate_up_out: torch.Tensor | None) -> torch.Tensor:
        h = x.new_empty(self.out_shape)
        if self.store_gate_up:
            self.launch(x, w_gate_up, h, gate_up_out, gate_up_out)
        else:
            self.launch(x, w_gate_up, h)
        return h
