"""Traces the tests make themselves: a tiny GeGLU MLP profiled on the CPU, as the lessons do without a GPU."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # keep Kineto's start/stop chatter out of the test log


def profile_cpu_mlp(path: Path, *, with_steps: bool = True, label: str = "mlp_fwd") -> Path:
    """Profile 5 forwards of a 16 -> 32 -> 16 GeGLU MLP on the CPU and export the Chrome trace.

    with_steps: use the lessons' schedule (wait=1, warmup=1, active=3) and `prof.step()`, so the trace
    has ProfilerStep#2..#4; without, one plain profile of 3 forwards and no ProfilerStep events.
    """
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    x = torch.randn(2, 4, 16)
    gate, up, down = torch.randn(32, 16), torch.randn(32, 16), torch.randn(16, 32)

    def forward():
        with record_function(label):
            return F.linear(F.gelu(F.linear(x, gate), approximate="tanh") * F.linear(x, up), down)

    if with_steps:
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3)) as prof:
            for _ in range(5):
                forward()
                prof.step()
    else:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                forward()
    prof.export_chrome_trace(str(path))
    return path
