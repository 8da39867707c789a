"""The GeGLU gate/up GEMM in one Triton kernel: h = gelu_tanh(x @ W_gate.T) * (x @ W_up.T).

The eager MLP runs this as three kernels (two GEMMs, then the fused gelu*mul) and round-trips two
[tokens, intermediate] tensors through HBM. Here one program owns one [BLOCK_M, BLOCK_N] tile of h: it streams
the same rows of x against the same BLOCK_N rows of W_gate and of W_up, keeps the two fp32 accumulators in
registers, applies the tanh GELU and the product in the epilogue and stores h once.

Two kernels compute the same thing:

* `_geglu_gemm_tma_kernel`, the fast path on Hopper (sm_90+): tiles move through the Tensor Memory Accelerator
  (host-built tensor descriptors), the grid is persistent (one program per SM walking tiles in grouped order, so
  neighbouring programs share rows of x and weight tiles in L2), and Triton software-pipelines the flattened
  tile/K loop. TMA zero-fills reads past the edges and clips stores, so ragged M, N and K need no masks. TMA needs
  16-byte aligned row strides (K and N multiples of 8 in bf16/fp16).
* `_geglu_gemm_kernel`, a plain pointer kernel with masks, for every other layout (odd sizes, strided views) and
  for GPUs before Hopper.

Both run under Triton's interpreter (TRITON_INTERPRET=1) on the CPU, which is how the tests check them.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

try:  # Triton >= 3.4 ships host-side tensor descriptors (TMA) for NVIDIA GPUs and the interpreter
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton: the pointer kernel does all the work
    TensorDescriptor = None

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)


# --------------------------------------------------------------------------------------------------------------
# The epilogue, shared by both kernels
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def gelu_tanh_mul(gate, up):
    """gelu_tanh(gate) * up on fp32 accumulators.

    gelu_tanh(g) = 0.5 * g * (1 + tanh(z)) with z = sqrt(2/pi) * (g + 0.044715 * g^3), and 0.5 * (1 + tanh(z))
    is sigmoid(2z): one exp and one division per element, and no NaN at large |g| (exp overflows to inf, g/inf
    is 0).
    """
    two_z = 1.5957691216057308 * gate * (1.0 + 0.044715 * gate * gate)  # 2 * sqrt(2/pi) = 1.5957...
    return gate / (1.0 + tl.exp(-two_z)) * up


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: walk GROUP_M row-blocks down one column-block before moving right.

    Programs running at the same time then read GROUP_M row-blocks of x and a few weight tiles, which stay in
    L2, instead of sweeping all of W for every row-block.
    """
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
    x_desc, wg_desc, wu_desc, h_desc,  # tensor descriptors: x [M, K], W_gate/W_up [N, K], h [M, N]
    M, N, K,
    M_BUCKET,  # the autotuner's key for M (a power of two); unused in the body
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
    FLATTEN: tl.constexpr,  # fuse the tile and K loops so the next tile's loads overlap this tile's epilogue
    WARP_SPECIALIZE: tl.constexpr,  # producer/consumer warps (Triton >= 3.5 on Hopper needs FLATTEN=False)
    EPILOGUE_SPLIT: tl.constexpr,  # store h in two [BLOCK_M, BLOCK_N/2] halves: half the staging shared memory
    DOT_IN_FP32: tl.constexpr = False,  # only under the interpreter, which has no bfloat16 arithmetic
):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n

    # The epilogue recomputes its tile's coordinates from its own counter: with FLATTEN, the pipeliner may
    # already have advanced tile_id to the next tile when the epilogue of this one runs.
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N

        # Gate and up for the same output columns, accumulated side by side from one load of x.
        acc_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            x = x_desc.load([offs_m, offs_k])
            wg = wg_desc.load([offs_n, offs_k])
            wu = wu_desc.load([offs_n, offs_k])
            if DOT_IN_FP32:
                x, wg, wu = x.to(tl.float32), wg.to(tl.float32), wu.to(tl.float32)
            acc_gate = tl.dot(x, wg.T, acc_gate)
            acc_up = tl.dot(x, wu.T, acc_up)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        h = gelu_tanh_mul(acc_gate, acc_up).to(h_desc.dtype)
        if EPILOGUE_SPLIT:
            h0, h1 = tl.split(tl.permute(tl.reshape(h, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], h0)
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], h1)
        else:
            h_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], h)


# --------------------------------------------------------------------------------------------------------------
# Any layout: pointers and masks
# --------------------------------------------------------------------------------------------------------------
@triton.jit
def _geglu_gemm_kernel(
    x_ptr, wg_ptr, wu_ptr, h_ptr,
    M, N, K,
    M_BUCKET,  # the autotuner's key for M (a power of two); unused in the body
    stride_xm, stride_xk, stride_wgn, stride_wgk, stride_wun, stride_wuk, stride_hm, stride_hn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    DOT_IN_FP32: tl.constexpr = False,  # only under the interpreter, which has no bfloat16 arithmetic
):
    pid_m, pid_n = _tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N

    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    # The weights are [N, K]; read them as [BLOCK_K, BLOCK_N] tiles, i.e. W.T, the B operand of the dot.
    wg_ptrs = wg_ptr + offs_k[:, None] * stride_wgk + offs_n[None, :] * stride_wgn
    wu_ptrs = wu_ptr + offs_k[:, None] * stride_wuk + offs_n[None, :] * stride_wun

    acc_gate = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        mask_k = offs_k < K - ki * BLOCK_K  # the last K tile may be partial: zeros add nothing to the dot
        x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        wg = tl.load(wg_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        wu = tl.load(wu_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if DOT_IN_FP32:
            x, wg, wu = x.to(tl.float32), wg.to(tl.float32), wu.to(tl.float32)
        acc_gate = tl.dot(x, wg, acc_gate)
        acc_up = tl.dot(x, wu, acc_up)
        x_ptrs += BLOCK_K * stride_xk
        wg_ptrs += BLOCK_K * stride_wgk
        wu_ptrs += BLOCK_K * stride_wuk

    h = gelu_tanh_mul(acc_gate, acc_up).to(h_ptr.dtype.element_ty)
    h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :] * stride_hn
    tl.store(h_ptrs, h, mask=mask_m[:, None] & mask_n[None, :])


# --------------------------------------------------------------------------------------------------------------
# Launch configurations
# --------------------------------------------------------------------------------------------------------------
def _tma_config(bm, bn, bk, stages, warps, group_m=8, flatten=True, ws=False, split=False):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m,
         "FLATTEN": flatten, "WARP_SPECIALIZE": ws, "EPILOGUE_SPLIT": split},
        num_stages=stages, num_warps=warps,
    )


# Candidates for the autotuner, by token count. Few on purpose: each one compiles and is timed the first time a
# new (token bucket, N, K) shows up.
TMA_CONFIGS_LARGE_M = [
    _tma_config(128, 128, 64, 4, 8),
    _tma_config(128, 128, 64, 3, 8),
    _tma_config(128, 64, 64, 4, 4),
    _tma_config(128, 128, 64, 3, 8, split=True),
]
TMA_CONFIGS_SMALL_M = [
    _tma_config(64, 64, 128, 4, 4),
    _tma_config(64, 32, 128, 4, 4),
    _tma_config(64, 64, 64, 4, 4),
]
POINTER_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=4),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8}, num_stages=3, num_warps=4),
]
SMALL_M = 256  # at or below this many tokens the GEMM is bound by reading the weights: small tiles, many programs

# Under the interpreter there is nothing to time: one small configuration that still exercises several K tiles,
# several tiles per persistent program and partial tiles at every edge.
_INTERPRETER_TMA = _tma_config(16, 16, 16, 1, 4, group_m=2)
_INTERPRETER_POINTER = triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}, num_warps=4)
_INTERPRETER_NUM_SMS = 3


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _m_bucket(m: int) -> int:
    """Autotuning key for the token count: powers of two, so a new batch size rarely triggers a new search."""
    return min(triton.next_power_of_2(m), 8192)


def _prune_by_m(configs, named_args, **kwargs):
    small = named_args["M"] <= SMALL_M
    wanted = [c for c in configs if (c.kwargs["BLOCK_M"] <= 64) == small]
    return wanted or configs


def _set_tma_block_shapes(nargs):
    """Autotuner pre-hook: the descriptors' block shapes follow the configuration being run."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["wg_desc"].block_shape = [bn, bk]
    nargs["wu_desc"].block_shape = [bn, bk]
    nargs["h_desc"].block_shape = [bm, bn // 2 if nargs["EPILOGUE_SPLIT"] else bn]


def _with_pre_hook(configs, hook):
    return [triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=hook) for c in configs]




_geglu_gemm_tma_tuned = triton.autotune(
    configs=_with_pre_hook(TMA_CONFIGS_LARGE_M + TMA_CONFIGS_SMALL_M, _set_tma_block_shapes),
    key=["M_BUCKET", "N", "K"],
    prune_configs_by={"early_config_prune": _prune_by_m},
)(_geglu_gemm_tma_kernel)

_geglu_gemm_tuned = triton.autotune(
    configs=POINTER_CONFIGS,
    key=["M_BUCKET", "N", "K"],
    prune_configs_by={"early_config_prune": _prune_by_m},
)(_geglu_gemm_kernel)


# --------------------------------------------------------------------------------------------------------------
# The launcher
# --------------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


@functools.lru_cache(maxsize=None)
def _is_hopper_or_newer(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def _tma_compatible(*tensors: torch.Tensor) -> bool:
    """TMA reads 2-D tiles whose last dimension is contiguous and whose rows start on 16-byte boundaries."""
    if TensorDescriptor is None:
        return False
    for t in tensors:
        if t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
    return True


def tma_path_available(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor) -> bool:
    """Whether `geglu_gemm` would take the TMA kernel for these inputs (Hopper GPU or interpreter, aligned rows)."""
    if _interpreting():
        on_tma_device = True
    else:
        on_tma_device = x.is_cuda and _is_hopper_or_newer(x.device.index if x.device.index is not None else 0)
    n = w_gate.shape[0]
    return on_tma_device and (n * x.element_size()) % 16 == 0 and _tma_compatible(x, w_gate, w_up)


def _check_inputs(x, w_gate, w_up):
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"geglu_gemm runs in bfloat16 or float16, got {x.dtype}")
    if x.ndim != 2 or w_gate.ndim != 2 or w_gate.shape != w_up.shape or w_gate.shape[1] != x.shape[1]:
        raise ValueError(
            "geglu_gemm expects x [tokens, hidden] and w_gate, w_up [intermediate, hidden], got "
            f"{tuple(x.shape)}, {tuple(w_gate.shape)}, {tuple(w_up.shape)}"
        )
    if w_gate.dtype != x.dtype or w_up.dtype != x.dtype:
        raise TypeError(f"geglu_gemm needs x and the weights in one dtype, got {x.dtype}, {w_gate.dtype}, {w_up.dtype}")
    if w_gate.device != x.device or w_up.device != x.device:
        raise ValueError(f"geglu_gemm needs x and the weights on one device, got {x.device}, {w_gate.device}, {w_up.device}")


def geglu_gemm(
    x: torch.Tensor,
    w_gate: torch.Tensor,
    w_up: torch.Tensor,
    *,
    config: triton.Config | None = None,
    use_tma: bool | None = None,
) -> torch.Tensor:
    """h = gelu_tanh(x @ w_gate.T) * (x @ w_up.T) in one kernel; forward only (no autograd).

    x: [M, K]; w_gate, w_up: [N, K] (nn.Linear weights), all bfloat16 or all float16, on a CUDA GPU (or on the
    CPU under TRITON_INTERPRET=1). Returns h: [M, N] in x's dtype. Accumulation is fp32 and the activation is
    applied to the fp32 accumulators, so h is rounded once.

    use_tma: None picks the TMA kernel when `tma_path_available`, else the pointer kernel; True/False forces one.
    config: pin one launch configuration (tuning scripts, tests); None autotunes, keyed on (M bucket, N, K).
    """
    _check_inputs(x, w_gate, w_up)
    M, K = x.shape
    N = w_gate.shape[0]
    h = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return h
    if K == 0:  # empty sums: gelu(0) * 0
        return h.zero_()
    if use_tma is None:
        use_tma = tma_path_available(x, w_gate, w_up)
    m_bucket = _m_bucket(M)
    interpreting = _interpreting()
    # Triton's interpreter stores bfloat16 as raw 16-bit integers and its tl.dot multiplies those: upcast there.
    extra = {"DOT_IN_FP32": True} if interpreting and x.dtype == torch.bfloat16 else {}

    if use_tma:
        num_sms = _INTERPRETER_NUM_SMS if interpreting else _num_sms(x.device.index)
        if config is None and interpreting:
            config = _INTERPRETER_TMA
        # Placeholder block shapes when autotuning: the pre-hook sets the real ones per configuration.
        bm, bn, bk = (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.kwargs["BLOCK_K"]) if config else (16, 16, 16)
        h_bn = bn // 2 if config is not None and config.kwargs["EPILOGUE_SPLIT"] else bn
        descs = (
            TensorDescriptor.from_tensor(x, [bm, bk]),
            TensorDescriptor.from_tensor(w_gate, [bn, bk]),
            TensorDescriptor.from_tensor(w_up, [bn, bk]),
            TensorDescriptor.from_tensor(h, [bm, h_bn]),
        )

        def grid(meta):
            tiles = triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
            return (min(num_sms, tiles),)

        if config is None:
            _geglu_gemm_tma_tuned[grid](*descs, M, N, K, m_bucket, NUM_SMS=num_sms, **extra)
        else:
            _geglu_gemm_tma_kernel[grid](
                *descs, M, N, K, m_bucket, NUM_SMS=num_sms,
                num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs, **extra,
            )
        return h

    args = (
        x, w_gate, w_up, h, M, N, K, m_bucket,
        x.stride(0), x.stride(1), w_gate.stride(0), w_gate.stride(1), w_up.stride(0), w_up.stride(1),
        h.stride(0), h.stride(1),
    )

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    if config is None and interpreting:
        config = _INTERPRETER_POINTER
    if config is None:
        _geglu_gemm_tuned[grid](*args, **extra)
    else:
        _geglu_gemm_kernel[grid](*args, num_warps=config.num_warps, num_stages=config.num_stages, **config.kwargs, **extra)
    return h
