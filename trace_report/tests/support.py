"""What trace-report's tests share, and the suite's tests too: the fixture traces and running the command."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Real traces from an H200 (torch 2.11, CUDA 13, bf16), none synchronized inside a step: the post's MLP eager and
# compiled and nn.Linear(32, 64), in the post's order; and under h200/traces/, every post command as the lessons
# wrote it (their own file names), with 05_fused_mlp.py at 8 tokens (cuBLAS splits the down projection's K there:
# a GEMM and a splitKreduce_kernel).
H200_EAGER = FIXTURES / "h200" / "mlp_eager.json.gz"
H200_COMPILED = FIXTURES / "h200" / "mlp_compile.json.gz"
H200_LINEAR = FIXTURES / "h200" / "linear_eager.json.gz"
H200_FUSED_DECODE = FIXTURES / "h200" / "traces" / "05_fused_mlp" / "8_1_768_3072_eager.json.gz"
# Part 3's probes on the H200, not the lessons' traces: SDPA's math backend, eager, `attn_fwd` (20 kernels per
# forward, the GPU ~5x slower than the CPU issues them, so the warmup step's kernels still run in the first
# recorded steps, their launch calls unrecorded).
H200_SDPA_MATH = FIXTURES / "h200" / "part3" / "sdpa_math_probe.json.gz"
# Where `python -m trace_report.report` finds this package: the folder above it (a checkout's root).
PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent


def as_from_a_terminal() -> None:
    """`preexec_fn` for a child a test presses Ctrl-C at: SIGINT's default disposition, as a terminal's foreground
    process has it. A child inherits an ignored SIGINT (a shell starts a background job so, `cmd &`), and Python then
    installs no KeyboardInterrupt handler: the child would never see the Ctrl-C the test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def load_trace(path: Path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def stderr_lines(result) -> list[str]:
    """The lines a user reads on stderr."""
    return [line for line in result.stderr.splitlines() if line.strip()]


def run_report(*args, env: dict | None = None, timeout: float = 120, cwd: Path = PACKAGE_PARENT):
    """`trace-report ARGS` as a user runs it, in a process of its own (as `python -m trace_report.report`)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "trace_report.report", *map(str, args)],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
    )
