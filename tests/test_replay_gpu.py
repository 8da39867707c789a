"""trace-report --replay runs the op with torch: on a machine without a GPU it says so in one line; on a GPU, the
post's gate GEMM replayed alone takes what its kernel took in the H200 trace (the GPU tests run on an H200)."""

from __future__ import annotations

import re

import torch
from conftest import FIXTURES, requires_cuda, run_report
import pytest

SHAPES = FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the line a machine without a GPU prints")
def test_without_a_gpu_the_replay_is_one_line():
    run = run_report(SHAPES, "--replay", "1", timeout=300)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1 and "runs on a GPU" in lines[0], run.stderr


@pytest.mark.gpu
@requires_cuda
def test_the_gate_gemm_replayed_alone_takes_its_trace_time():
    run = run_report(SHAPES, "--replay", "1", timeout=300)
    assert run.returncode == 0, run.stderr
    flushed = float(re.search(r"([\d.]+) µs with L2 flushed", run.stdout).group(1))
    print(run.stdout)
    if "H200" in torch.cuda.get_device_name():
        assert abs(flushed / 57.41 - 1) <= 0.10, run.stdout
