"""Traces the tests make themselves: a tiny GeGLU MLP profiled on the CPU, as the lessons do without a GPU."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

from profiling_in_pytorch.lesson.profiling import profile_steps


def profile_cpu_mlp(path: Path, *, with_steps: bool = True, label: str = "mlp_fwd") -> Path:
    """Profile forwards of a 16 -> 32 -> 16 GeGLU MLP on the CPU and export the Chrome trace.

    with_steps: the lessons' profile (profiling_in_pytorch.lesson.profiling: ProfilerStep#2..#4, each under `label`); without,
    one plain profile of 3 forwards and no ProfilerStep events.
    """
    torch.manual_seed(0)
    x = torch.randn(2, 4, 16)
    gate, up, down = torch.randn(32, 16), torch.randn(32, 16), torch.randn(16, 32)

    def forward():  # the post's order: gate, up, gelu, mul, down
        g, u = F.linear(x, gate), F.linear(x, up)
        return F.linear(F.gelu(g, approximate="tanh") * u, down)

    if with_steps:
        prof = profile_steps(lambda step: forward(), torch.device("cpu"), label=label)
    else:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                with record_function(label):
                    forward()
    prof.export_chrome_trace(str(path))
    return path
