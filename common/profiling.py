"""The post's profiling recipe, in one place: five steps, three recorded, each step's GPU work inside it.

`schedule(wait=1, warmup=1, active=3)`: step 1 is skipped (it pays for lazy initialisation and, with
torch.compile, for compilation), step 2 warms the profiler up, and steps 2..4 of `ProfilerStep#` are
recorded. The lessons and the benchmark's kernel count both profile this way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from common.files import temporary_sibling, write_atomically

# Kineto logs its own stages and, on a machine without a GPU, a scary "gpuGetDeviceCount failed" ERROR;
# keep stderr for what the user must read. It reads the variable when the first profile starts.
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

WAIT, WARMUP, ACTIVE = 1, 1, 3
STEPS = WAIT + WARMUP + ACTIVE


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_steps(
    run_step: Callable[[int], Any],
    device: torch.device,
    *,
    label: str | None = None,
    metadata: dict[str, str] | None = None,
    record_shapes: bool = False,
) -> profile:
    """Call `run_step(step)` for each of the five steps under the profiler, each under `label` if given.

    `record_shapes` stays off by default, as in the post: collecting every op's input shapes costs CPU time
    per op, enough to turn a GPU-bound step into one that looks overhead-bound in the trace.
    """
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        record_shapes=record_shapes,
    ) as prof:
        for step in range(STEPS):
            if step == WAIT + WARMUP:  # Kineto keeps metadata only while it records
                for key, value in (metadata or {}).items():
                    prof.add_metadata(key, value)
            if label is None:
                run_step(step)
            else:
                with record_function(label):
                    run_step(step)
            # Kernels run asynchronously: without this the step would close before its GPU work ends,
            # and the trace's GPU lane would spill into the next step (or past the last one).
            synchronize(device)
            prof.step()
    return prof


def export_trace(prof: profile, path: Path, trace_name: str) -> None:
    """Write the Chrome trace whole or not at all, with `trace_name` in place of the path Kineto puts there.

    Kineto stores the absolute export path in `traceName`; a trace that is shared should not carry it.
    """
    raw = temporary_sibling(path)
    try:
        prof.export_chrome_trace(str(raw))
        with open(raw, encoding="utf-8") as f:
            trace = json.load(f)
        trace["traceName"] = trace_name
        write_atomically(path, json.dumps(trace))
    finally:
        raw.unlink(missing_ok=True)
