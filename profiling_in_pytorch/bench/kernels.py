"""Kernels and launches per forward, from a short torch.profiler run read back with `trace_report`."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from profiling_in_pytorch.lesson.profiling import profile_steps
from trace_report import read_trace


@dataclass(frozen=True)
class KernelCounts:
    """Per forward, averaged over the profiled steps."""

    kernels: float  # GPU kernels that ran
    launches: float  # runtime calls that put them there: one per kernel, or one per CUDA graph
    gpu_busy_us: float  # time with at least one kernel running (warm L2, as in back_to_back)
    names: dict[str, float]  # short kernel name -> launches per forward


def is_launch(runtime_call: str) -> bool:
    """cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex) (Triton), cudaGraphLaunch (a CUDA graph)."""
    return "Launch" in runtime_call


def count_kernels(forward: Callable, inputs: Sequence[torch.Tensor]) -> KernelCounts:
    """Profile forwards with the lessons' schedule and read the trace back with `trace_report`.

    `trace_report` assigns each kernel to the step whose CPU side launched it, so a kernel that runs after its
    step ends still counts for that step.
    """
    prof = profile_steps(lambda step: forward(inputs[step % len(inputs)]), torch.device("cuda"))
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        return kernel_counts(read_trace(path))


def kernel_counts(trace) -> KernelCounts:
    """Kernels, launches and GPU busy time per profiled step of a `trace_report.Trace`."""
    profiled = trace.steps
    if not profiled or not trace.has_gpu:
        raise RuntimeError("the profile recorded no GPU work")
    n = len(profiled)
    names: dict[str, float] = {}
    for step in profiled:
        for kernel in step.kernels:
            names[kernel.short_name] = names.get(kernel.short_name, 0.0) + 1 / n
    return KernelCounts(
        kernels=sum(len(s.kernels) for s in profiled) / n,
        launches=sum(sum(1 for call in s.runtime if is_launch(call.name)) for s in profiled) / n,
        gpu_busy_us=sum(s.gpu_busy_us for s in profiled) / n,
        names={name: round(count, 3) for name, count in names.items()},
    )

