"""Shared test helpers: run a script as a user does, and the GPU marker."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _cache_bytecode_for_child_processes() -> None:
    """Most tests start Python processes (a lesson, trace-report, torchrun), ~150 in a run, and each imports torch
    (and, once it profiles, torch._inductor and sympy). Where bytecode may not be written (PYTHONDONTWRITEBYTECODE, as
    some sandboxes and CI images set) and the venv holds none, every one of them compiles those modules from source
    again (~3,900 in all): a lesson took 9.0 s on a 2-core machine, 3.9 s with the bytecode kept. The children keep it
    in a folder of their own under the temporary directory (PYTHONPYCACHEPREFIX: nothing is written beside the
    sources, in the venv or in a test's folders), unless the environment already names one. Not in pyproject (uv's
    compile-bytecode): uv then compiles at every `uv run`, a line on the lesson's stderr and half a second or more."""
    if not (sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")) or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    if os.path.exists(importlib.util.cache_from_source(importlib.util.find_spec("torch").origin)):
        return  # the venv has its bytecode: a folder of their own would be compiled again, once
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), f"profiling-in-pytorch-tests-pycache-{user}")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


_cache_bytecode_for_child_processes()


def _threads_per_worker() -> None:
    """In pytest-xdist's workers (pyproject's addopts), each worker and every lesson or torchrun it starts gets its
    share of the cores for its intra-op threads (OMP_NUM_THREADS, inherited by the children): two workers on 2 cores
    at one thread each, instead of two threads each racing the other worker's two. Set before this file imports torch,
    which reads it then. An OMP_NUM_THREADS already set is kept; a run without workers (`-n 0`) keeps torch's
    default."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 1 or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    os.environ["OMP_NUM_THREADS"] = str(max(1, cores // workers))


_threads_per_worker()


if str(ROOT) not in sys.path:  # lessons are importable by name: importlib.import_module("03_simple_mlp")
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402  (after OMP_NUM_THREADS is set, above)
from profiled_traces import profile_cpu_mlp  # noqa: E402

from trace_report import read_trace  # noqa: E402  (after the sys.path line above)
from trace_report.tests.support import (  # noqa: E402, F401  (the traces the suite's tests read too)
    FIXTURES, H200_COMPILED, H200_EAGER, H200_FUSED_DECODE, H200_LINEAR, H200_SDPA_MATH, load_trace, run_report,
    stderr_lines,
)

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def pytest_xdist_auto_num_workers(config) -> int:
    """How many workers `-n auto` (pyproject's addopts) starts: one per core without a GPU, whole test files each
    (--dist loadfile, so that a file's module fixtures run once). Most tests start Python processes (lessons,
    torchrun, trace-report): from a fresh clone on 2 cores the suite took 13:56 in one process, 6:06 in two workers. With a GPU visible, none: the GPU tests time kernels and
    read the GPU's clocks, and two workers on one GPU would time each other's work. PYTEST_XDIST_AUTO_NUM_WORKERS,
    where set, decides, as it does in xdist's own rule."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    if torch.cuda.is_available():
        return 0
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_script(script: str, *args: str, env: dict | None = None, timeout: float = 600, cwd: Path = ROOT):
    """Run `python <script> <args>` from the repo root, as `uv run <script>` would."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160", **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / script) if script.endswith(".py") else script, *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def interpreter_results_of(test_module: str) -> dict:
    """Run `test_module._interpreter_worker()` in a child process under TRITON_INTERPRET=1 (Triton picks its
    interpreter at import) and return the one JSON object it prints."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    result = subprocess.run(
        [sys.executable, "-c", f"import {test_module}; {test_module}._interpreter_worker()"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def closed_port() -> int:
    """A port on 127.0.0.1 with nobody listening: connecting to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hub_unreachable_envs() -> dict[str, dict[str, str]]:
    return {
        # An empty cache, so that a copy fetched earlier on this machine cannot answer instead.
        "offline": {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "/nonexistent/hub", "KERNELS_CACHE": "/nonexistent/kernels"},
        "refused": {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"},
    }


def lesson_marks(stdout: str) -> dict[str, str]:
    """Expectation title -> the mark the lesson printed for it after profiling (✓, ✗, –)."""
    after = stdout.split("What we saw", 1)[1]
    return {title: mark for mark, title in re.findall(r"^  ([✓✗–]) (.+)$", after, flags=re.MULTILINE)}


@pytest.fixture(scope="session")
def eager():
    return read_trace(H200_EAGER)


@pytest.fixture(scope="session")
def compiled():
    return read_trace(H200_COMPILED)


@pytest.fixture(scope="session")
def linear():
    return read_trace(H200_LINEAR)


@pytest.fixture(scope="session")
def cpu_trace(tmp_path_factory):
    """A CPU trace of a tiny GeGLU MLP, profiled as the lessons profile (the path)."""
    return profile_cpu_mlp(tmp_path_factory.mktemp("cpu") / "64_eager_cpu.json")


# Parts 1 and 2's lessons at sizes a CPU runs in seconds, each run at most once a session, into one trace folder:
# tests/test_claims.py checks every claim each run prints, tests/test_lessons.py what 01 and 02 write. In this order
# (a compiled run after its eager twin, which it compares with); "01" and "02" from the repository's root, the trace
# folder elsewhere (the paths they print are absolute), the others from inside the trace folder (relative).
CPU_LESSON_RUNS = {
    "01": ("01_matmul_add.py", "--size 16", ROOT),
    "01 warm": ("01_matmul_add.py", "--size 16 --warmup", None),
    "02": ("02_linear.py", "--batch 8 --in_dim 4 --out_dim 6", ROOT),
    "01 batched": ("01_matmul_add.py", "--size 16 --batched", None),
    "01 compile": ("01_matmul_add.py", "--size 16 --compile", None),
    "03": ("03_simple_mlp.py", "--batch 2 --seq 3 --dim 8 --hidden 16", None),
    "03 shapes": ("03_simple_mlp.py", "--batch 2 --seq 3 --dim 8 --hidden 16 --record_shapes", None),
    "03 compile": ("03_simple_mlp.py", "--batch 2 --seq 3 --dim 8 --hidden 16 --compile", None),
}


class LessonRuns:
    """The runs of CPU_LESSON_RUNS, each made when first asked for, after every run listed before it."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._results: dict[str, subprocess.CompletedProcess] = {}

    def __getitem__(self, name: str) -> subprocess.CompletedProcess:
        if name not in CPU_LESSON_RUNS:
            raise KeyError(name)
        for earlier, (script, args, cwd) in CPU_LESSON_RUNS.items():
            if earlier not in self._results:
                self._results[earlier] = run_script(script, *shlex.split(args), "--trace_dir", str(self.folder),
                                                    cwd=cwd or self.folder)
            if earlier == name:
                return self._results[name]


@pytest.fixture(scope="session")
def cpu_lesson_runs(tmp_path_factory) -> LessonRuns:
    return LessonRuns(tmp_path_factory.mktemp("cpu_traces"))
