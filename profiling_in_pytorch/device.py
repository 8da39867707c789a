"""Device and dtype choice: the post ran bf16 on an A100; without a GPU we fall back to fp32 on the CPU."""

from __future__ import annotations

import torch

from trace_report.errors import UsageError, allocating, readable_bytes

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def pick_device(name: str | None = None) -> torch.device:
    """`cuda` when a GPU is visible (or asked for), else `cpu`."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but PyTorch sees no CUDA GPU on this machine")
    if name not in ("cpu", "cuda"):
        raise UsageError(f"unknown device {name!r}: use cpu or cuda")
    return torch.device(name)


def pick_dtype(name: str | None, device: torch.device, allowed: tuple[str, ...] = tuple(DTYPES)) -> torch.dtype:
    """bf16 on a GPU (the post's choice), fp32 on CPU (bf16 matmuls there are slow and unrepresentative).

    Code that runs only in some dtypes (a bf16/fp16 Triton kernel) names them in `allowed`; the default is
    then the first of them that fits the device.
    """
    if name is None:
        preferred = "bf16" if device.type == "cuda" else "fp32"
        name = preferred if preferred in allowed else allowed[0]
    try:
        return DTYPES[name]
    except KeyError:
        raise UsageError(f"unknown dtype {name!r}: use one of {', '.join(DTYPES)}") from None


def dtype_name(dtype: torch.dtype) -> str:
    return {v: k for k, v in DTYPES.items()}[dtype]


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return f"CPU (torch {torch.__version__})"


def require_fit(device: torch.device, nbytes: int, what: str) -> None:
    """Raise UsageError (one line) when `nbytes` exceed the free GPU memory, or the host's available memory.

    What fits is then named as what the command allocates (`errors.allocating`): the process may still be held
    to less than the machine has, and a failed allocation after this check then says what it was allocating."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        where = f"{torch.cuda.get_device_name(device)} has {readable_bytes(free)} free"
    else:
        free = available_host_memory()
        where = f"this machine has {readable_bytes(free)} available" if free is not None else ""
    if free is not None and nbytes > free:
        raise UsageError(f"{what} need {readable_bytes(nbytes)}, and {where}: try smaller sizes")
    allocating(f"{what} ({readable_bytes(nbytes)} in all)")


def available_host_memory() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None

