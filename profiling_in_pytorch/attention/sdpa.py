"""`F.scaled_dot_product_attention`, and the post's table of the backends `sdpa_kernel` can pin it to.

SDPA is one call with several implementations behind it. Unpinned, it tries them in a priority order and runs
the first whose conditions the inputs meet (device, dtype, head dim, mask, ...). `sdpa_kernel(backend)` allows
only the one named: the post pins each in turn to profile it. A backend that cannot run these inputs here (no
CPU kernel, a GPU too old, a dtype it lacks) makes SDPA raise "No viable backend"; `require_backend` finds that
out on a tiny problem first and says it in one line.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from trace_report.errors import UsageError, first_line

# The post's table: the names its command lines take, and the backends they pin.
backends = {
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}

AUTO = "auto"  # no sdpa_kernel: SDPA chooses, as in a model that never pins one
CHOICES = (*backends, AUTO)
NAMES = {backend: name for name, backend in backends.items()}


def attention(q, k, v):
    # is_causal=True: SDPA applies the causal mask itself; we never build a [seq, seq] mask
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def runnable_backends(q: torch.Tensor) -> list[str]:
    """The post's backends that run causal attention on inputs like `q` here (its device, dtype and head dim)."""
    return [name for name in backends if _why_not(name, q) is None]


def require_backend(name: str, q: torch.Tensor) -> None:
    """UsageError (one line) when SDPA cannot run `backend` for inputs like `q` on this device: tried on a tiny
    problem of the same device, dtype and head dim, with torch's own reason when it gives one."""
    if name == AUTO:
        return
    why = _why_not(name, q)
    if why is None:
        return
    where = "this CPU" if q.device.type == "cpu" else torch.cuda.get_device_name(q.device)
    others = [n for n in runnable_backends(q) if n != name]
    raise UsageError(
        f"--backend {name} cannot run here ({where}, {str(q.dtype).removeprefix('torch.')}, head_dim {q.shape[-1]}): "
        f"{why}; the backends that can: {', '.join(others) or 'none'}"
    )


def chosen_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str:
    """The backend SDPA picks when nothing is pinned, as torch itself answers for these inputs."""
    try:
        choice = SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=True))
    except (AttributeError, RuntimeError, ValueError, TypeError):  # a private call: it may change
        return "unknown"
    return NAMES.get(choice, choice.name.lower())


def _why_not(name: str, q: torch.Tensor) -> str | None:
    """None if `backend` runs causal attention on a tiny problem like `q`'s here; else torch's reason, one line."""
    tiny = torch.zeros(1, 1, 16, q.shape[-1], device=q.device, dtype=q.dtype)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(backends[name]):
                F.scaled_dot_product_attention(tiny, tiny, tiny, is_causal=True)
            return None
        except RuntimeError as err:
            # With debug on, torch warns a heading per backend ("Flash attention kernel not used because:"), then
            # each reason; a backend the pin switched off only says it was "runtime disabled".
            reasons = [_reason(w.message) for w in caught]
            reasons = [r for r in reasons if r and not r.endswith("because:") and "runtime disabled" not in r]
            return reasons[0] if reasons else f"torch found no kernel for it ({_first_sentence(err)})"


def _reason(message) -> str:
    return first_line(message).split(" (Triggered internally")[0].strip()


def _first_sentence(err: BaseException) -> str:
    return first_line(err).split(". ")[0].rstrip(".")


def why_chosen(choice: str, device: torch.device) -> str:
    """Why SDPA picks `choice` here, in a sentence: its priority order, as torch's sdp_utils sets it."""
    if device.type == "cpu":
        return "on a CPU SDPA has two backends, flash (torch's CPU kernel) and math, and tries flash first"
    if choice == "cudnn":
        return (
            "SDPA runs the first backend whose conditions the inputs meet; on sm90 and sm100 GPUs (H100, H200, B200) "
            "with a recent cuDNN, torch tries cuDNN's attention first, then flash, efficient and math"
        )
    return (
        "SDPA runs the first backend whose conditions the inputs meet, in the order flash, efficient, math "
        "(torch tries cuDNN first only on sm90 and sm100 GPUs with a recent cuDNN)"
    )
