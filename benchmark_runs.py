"""One command timed as a user runs it, a whole process from the parent's clock, with the child's CPU time and peak
memory from wait4: what benchmark_trace_report.py and its --large traces (benchmark_large_traces.py) both measure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from trace_report.console import Console

ROOT = Path(__file__).resolve().parent
MB = 1e6  # sizes in decimal MB, as `ls -h --si` and file managers print them

# A terminal's own width; piped (a log, a test), wide enough for the table
console = Console(highlight=False, width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160)

# HTA's side: a script run by the HTA interpreter. It prints how many rows each breakdown has, so that a run that
# "succeeds" with nothing in it (a trace HTA cannot read kernels from) is told apart from one that did the work.
HTA_DRIVER = """\
import json, sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
kernel_types, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
temporal = analyzer.get_temporal_breakdown(visualize=False)
# every rank in the folder: without `ranks` HTA reads rank 0 only, and a rank-3 trace is a ValueError
idle, _ = analyzer.get_idle_time_breakdown(ranks=analyzer.t.get_ranks(), visualize=False)
print(json.dumps({"kernel_types": len(kernel_types), "kernels": len(kernels), "temporal": len(temporal),
                  "idle": len(idle)}))
"""


def hta_folder(folder: Path, traces: list[Path]) -> Path:
    """A folder of links to `traces`, for HTA: it reads every trace in a folder (one per rank), and a link copies
    nothing. HTA lists only names ending in .gz or .json; a trace's own name is one."""
    folder.mkdir()
    for trace in traces:
        (folder / trace.name).symlink_to(trace.resolve())
    return folder


def hta_words(meta: dict) -> str:
    """HTA's versions for a run's first line (meta from the HTA interpreter), or why it could not say."""
    v = meta.get("hta")
    if not v:
        return ""
    if "error" in v:
        return f" · HTA's interpreter: {v['error']}"
    return f" · HTA {v['holistictraceanalysis']} (Python {v['python']}, pandas {v['pandas']}, numpy {v['numpy']})"


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system, the child's own
    peak_mb: float  # the child's maximum resident set
    returncode: int
    error: str = ""  # the last line of stderr, when the process failed


@dataclass
class Command:
    label: str  # "trace-report", "trace-report --json", "HTA"
    argv: list[str]
    keep_stdout: bool = False  # HTA's driver prints its row counts; trace-report's output goes to /dev/null
    runs: list[Run] = field(default_factory=list)
    failed: str | None = None  # why the untimed first run failed: not timed then
    stdout: str = ""


def run_once(command: Command, env: dict[str, str]) -> Run:
    """Start the command, wait for it with wait4 (its own CPU time and peak memory, not the parent's), and time it
    from the parent's clock: what a user waits for, the interpreter's start included."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command.argv, stdin=subprocess.DEVNULL,
                                stdout=out if command.keep_stdout else subprocess.DEVNULL,
                                stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        error = ""
        if proc.returncode != 0:
            err.seek(0)
            lines = [line for line in err.read().decode(errors="replace").splitlines() if line.strip()]
            error = lines[-1].strip() if lines else f"exit code {proc.returncode}"
        if command.keep_stdout:
            out.seek(0)
            command.stdout = out.read().decode(errors="replace").strip()
    # ru_maxrss is in KiB on Linux
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024 / MB, proc.returncode, error)
