"""Where lesson 04_d's FlashAttention-2 comes from: the Hub, a local kernel repository, or torch itself.

The post loads the kernel from the Hugging Face Hub and calls it on [batch, seq, heads, head_dim] inputs (seq and
heads swapped against SDPA's layout):

    flash = get_kernel("kernels-community/flash-attn2", version=3)
    out = flash.flash_attn_func(q, k, v, causal=True)

The sources are tried as `profiling_in_pytorch.hub_kernels` tries them for any Hub kernel: `--kernel_repo PATH`,
then `LOCAL_KERNELS` (`kernels-community/flash-attn2=PATH`), then the Hub (its cache when offline). When the Hub
cannot give it (no network, nothing cached, no build for this machine), the same algorithm is in torch:
FlashAttention-2 is SDPA's flash backend (`pytorch_flash::flash_fwd_kernel` on a GPU;
`_scaled_dot_product_flash_attention_for_cpu`, a tiled CPU kernel, on a CPU), reached here through
`torch_flash_attn_func`, which takes flash_attn_func's layout. One line says which source ran and why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from profiling_in_pytorch import hub_kernels
from profiling_in_pytorch.attention import sdpa
from trace_report.errors import UsageError, first_line

FLASH_ATTN = hub_kernels.HubKernel(
    repo_id="kernels-community/flash-attn2", version=3, what="flash_attn_func", fallback="torch"
)
SOURCES = FLASH_ATTN.sources


@dataclass(frozen=True)
class ResolvedFlashAttention:
    """The `flash_attn_func` we found, and where from."""

    flash_attn_func: Callable
    found: hub_kernels.KernelSource

    @property
    def source(self) -> str:
        return self.found.source

    @property
    def tag(self) -> str:
        return self.found.tag

    def describe(self) -> str:
        return self.found.describe()


def torch_flash_attn_func(q, k, v, causal=False):
    """flash_attn_func's call, [batch, seq, heads, head_dim] in and out, on torch's FlashAttention-2: SDPA pinned to
    its flash backend, which takes [batch, heads, seq, head_dim] (the transposes are views, no copy)."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2)


def resolve_flash_attn(*, source: str | None = None, kernel_repo: str | os.PathLike | None = None) -> ResolvedFlashAttention:
    """Find `flash_attn_func`: `--kernel_repo`, then `LOCAL_KERNELS`, then the Hub, then torch's (or `source`)."""
    return hub_kernels.resolve(FLASH_ATTN, source=source, kernel_repo=kernel_repo, adopt=_adopt, fallback=_from_torch)


def require_runnable(resolved: ResolvedFlashAttention, q: torch.Tensor) -> None:
    """UsageError (one line) when `flash_attn_func` cannot run inputs like `q` here: tried on a tiny problem of the
    same device, dtype and head dim (the Hub's build is CUDA code; torch's needs its flash backend here)."""
    if resolved.source == "torch":
        try:
            sdpa.require_backend("flash", q.transpose(1, 2))
        except UsageError as err:
            raise UsageError(f"torch's FlashAttention-2 (SDPA's flash backend) cannot run here: {str(err).split(': ', 1)[1]}") from None
        return
    tiny = torch.zeros(1, 16, 1, q.shape[-1], device=q.device, dtype=q.dtype)
    try:
        with torch.no_grad():
            resolved.flash_attn_func(tiny, tiny, tiny, causal=True)
    except Exception as err:  # noqa: BLE001 - any failure means: cannot run here, and we say why
        where = "this CPU" if q.device.type == "cpu" else torch.cuda.get_device_name(q.device)
        raise UsageError(
            f"{resolved.found.origin}: its flash_attn_func does not run on {where} in {str(q.dtype).removeprefix('torch.')} "
            f"({first_line(err)}); --kernel_source torch runs torch's own FlashAttention-2"
        ) from None


def output_of(result) -> torch.Tensor:
    """flash_attn_func's output: the tensor itself, or the first of what it returns (some builds return the
    softmax's log-sum-exp beside it)."""
    return result[0] if isinstance(result, (tuple, list)) else result


def _adopt(module, found: hub_kernels.KernelSource) -> ResolvedFlashAttention:
    func = getattr(module, "flash_attn_func", None)
    if func is None:
        where = str(found.path) if found.path is not None else FLASH_ATTN.name
        raise UsageError(f"the kernel at {where} has no flash_attn_func")
    return ResolvedFlashAttention(func, found)


def _from_torch(reason: str) -> ResolvedFlashAttention:
    origin = f"torch {torch.__version__}'s flash attention, SDPA pinned to its flash backend (FlashAttention-2 on a GPU)"
    return ResolvedFlashAttention(torch_flash_attn_func, hub_kernels.KernelSource("torch", origin, reason))
