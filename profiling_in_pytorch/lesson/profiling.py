"""The posts' profiling recipe: five steps, three recorded, and the export that writes their trace.

`schedule(wait=1, warmup=1, active=3, repeat=1)`: step 0 is skipped (it pays for lazy initialisation and, with
torch.compile, for compilation), step 1 warms the profiler up, and steps 2..4 are recorded as
`ProfilerStep#2..#4`. The lessons write this block out where the reader sees it; the benchmark's kernel
count and the tests call `profile_steps`, the same recipe as a function.

No step synchronizes the GPU, as in the posts' scripts: the CPU runs ahead and the trace shows it. The
trace reader gives each kernel to the step whose CPU window holds its launch, so per-step counts stay right.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from trace_report.files import temporary_sibling, write_atomically

# Kineto logs its own stages, its "USDT: profiler_start/stop" marks (level 5) and, on a machine without a GPU, a
# scary "gpuGetDeviceCount failed" ERROR (level 4); 6 is above them all, so stderr keeps what the user must read.
# It reads the variable when the first profile starts; a value the user set wins.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

# torch warns once per process, on some runs, that a profiler "clears events at the end of each cycle": with
# repeat=1 there is one cycle, so nothing is lost, and the line would be noise on a successful run's stderr.
warnings.filterwarnings("ignore", message="Warning: Profiler clears events at the end of each cycle")

WAIT, WARMUP, ACTIVE = 1, 1, 3
STEPS = WAIT + WARMUP + ACTIVE


def synchronize(device: torch.device) -> None:
    """Wait for the GPU: after a profile or around a timing, never inside a recorded step."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_steps(
    run_step: Callable[[int], Any],
    device: torch.device,
    *,
    label: str | None = None,
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
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        record_shapes=record_shapes,
    ) as prof:
        for step in range(STEPS):
            if label is None:
                run_step(step)
            else:
                with record_function(label):
                    run_step(step)
            prof.step()
    synchronize(device)
    return prof


KERNEL_FILE = "kernel_file"  # an Inductor kernel's source, an absolute path in the compile cache


def export_trace(prof: profile, path: Path, trace_name: str, first: dict[str, Any] | None = None) -> None:
    """Write the Chrome trace whole or not at all, with `trace_name` in place of the path Kineto puts there, and the
    top-level keys of `first` (the step timed without the profiler: trace_report/observer.py) before all of Kineto's, where
    a reader finds them in the file's first bytes without parsing its events.

    Kineto stores the absolute export path in `traceName`, and torch 2.11 gives each Inductor kernel's launch its
    source file's absolute path (`kernel_file`, under the compile cache: /tmp/torchinductor_<user>/...); a trace
    that is shared should carry neither, so the file keeps only its name.
    """
    raw = temporary_sibling(path)
    try:
        prof.export_chrome_trace(str(raw))
        with open(raw, encoding="utf-8") as f:
            trace = json.load(f)
        trace["traceName"] = trace_name
        for event in trace.get("traceEvents", ()):
            args = event.get("args") if isinstance(event, dict) else None
            if isinstance(args, dict) and isinstance(args.get(KERNEL_FILE), str):
                args[KERNEL_FILE] = Path(args[KERNEL_FILE]).name
        write_atomically(path, json.dumps({**(first or {}), **trace}))
    finally:
        raw.unlink(missing_ok=True)
