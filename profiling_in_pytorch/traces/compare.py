"""Two traces side by side (eager against --compile, say): which kernels only one of them runs, which both run
under byte-identical names, and each one's time per step. `trace-report A B` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling_in_pytorch.traces.kernels import decode
from profiling_in_pytorch.traces.model import Trace, rounded


@dataclass
class TraceDiff:
    """Two traces' kernels side by side: only in the first, only in the second, in both (byte-identical)."""

    first: Trace
    second: Trace
    only_in_first: list[str]
    only_in_second: list[str]
    in_both: list[str]

    def to_dict(self) -> dict:
        a, b = self.first.kernel_names(), self.second.kernel_names()

        def row(name: str) -> dict:
            return {"name": name, "short_name": decode(name).short, "per_step": [rounded(a.get(name, 0.0)), rounded(b.get(name, 0.0))]}

        return {
            "only_in_first": [row(n) for n in self.only_in_first],
            "only_in_second": [row(n) for n in self.only_in_second],
            "in_both": [row(n) for n in self.in_both],
            "step_time_us": [_step_times(self.first), _step_times(self.second)],
        }


def diff(first: Trace, second: Trace) -> TraceDiff:
    a, b = first.kernel_names(), second.kernel_names()
    return TraceDiff(
        first,
        second,
        [n for n in a if n not in b],
        [n for n in b if n not in a],
        [n for n in a if n in b],
    )


def _step_times(trace: Trace) -> dict:
    cpu, busy = trace.cpu_us_per_step(), trace.gpu_busy_us_per_step()
    return {"trace": trace.name, "cpu_us_per_step": round(cpu, 3), "gpu_busy_us_per_step": rounded(busy)}
