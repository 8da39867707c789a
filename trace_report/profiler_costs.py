"""What the profiler's recording options cost a step, as measured, and what a trace that was not timed without the
profiler can still say from them: whether its "overhead-bound" would likely survive without the profiler.

torch.profiler adds CPU time to every op it records, more with each option: `record_shapes` (each op's input shapes
and types), `with_stack` (the Python frames around every op), `profile_memory` (every allocation and free),
`with_modules` (TorchScript's module hierarchy; in eager mode torch 2.15 ignores it and says so). The GPU's kernels
run as fast as ever; the host issues them later. So an overhead-bound verdict read from a trace overstates the CPU's
side by the profiler's own cost, and the GPU's idle share with it.

`MEASURED` is every measurement this project has of those costs, one row per workload and set of options, with where
it was measured. docs/observer-effect.md mirrors it; `benchmark_profiler_options.py` measures new rows (its JSON holds
them in this form). `estimate(...)` divides a trace's CPU issue time by the measured slowdowns of the rows recorded
with the same options (or, failing those, with fewest fewer: a lower bound on the cost), and weighs the result against
the trace's GPU busy time.

No torch here (like the rest of trace_report).
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_report.pace import _us  # µs as the verdict prints them: ms from 1 ms on

OPTIONS = ("record_shapes", "with_stack", "profile_memory", "with_modules")


@dataclass(frozen=True)
class Measured:
    """One step, timed unprofiled and under the profiler with `options` (medians, ms)."""

    workload: str
    where: str
    options: frozenset[str]
    unprofiled_ms: float
    profiled_ms: float
    gpu_ms: float | None = None  # the step's GPU work, where it was measured

    @property
    def slowdown(self) -> float:
        return self.profiled_ms / self.unprofiled_ms


# Each row as measured (issue #33): steps back to back, warm, medians; "profiled" is the same loop inside
# torch.profiler.profile with the options named (the lessons' activities: CPU and CUDA).
MEASURED = (
    Measured("ResNet-50 AMP training step, batch 64, channels_last", "H100, torch 2.11",
             frozenset({"record_shapes"}), 26.5, 33.2, 17.5),
    Measured("ResNet-50 AMP training step, batch 64, channels_last", "H100, torch 2.11",
             frozenset({"record_shapes", "with_stack"}), 26.5, 35.4, 17.5),
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11",
             frozenset({"record_shapes"}), 9.8, 22.7, 6.35),
    Measured("llama-1b preset forward, 1 token, eager", "H100, torch 2.11", frozenset({"record_shapes"}), 12.3, 19.6),
    Measured("the post's MLP decoding, 8 tokens a forward, eager (lesson 07)", "H200, torch 2.11", frozenset(),
             0.123, 0.234),
    # One run of benchmark_profiler_options.py (docs/observer-effect.md); a second run the same day gave the
    # profiled steps 1.5-2.2x instead of 1.7-3.2x: the profiler's cost on a many-op step varies run to run.
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11, benchmark_profiler_options.py",
             frozenset(), 11.81, 35.02, 11.97),
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11, benchmark_profiler_options.py",
             frozenset({"record_shapes"}), 11.81, 30.00, 11.97),
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11, benchmark_profiler_options.py",
             frozenset({"with_stack"}), 11.81, 36.63, 11.97),
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11, benchmark_profiler_options.py",
             frozenset({"profile_memory"}), 11.81, 19.51, 11.97),
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11, benchmark_profiler_options.py",
             frozenset({"with_modules"}), 11.81, 20.56, 11.97),
    Measured("llama-1b preset forward, batch 4 × 256, eager", "H100, torch 2.11, benchmark_profiler_options.py",
             frozenset({"record_shapes", "with_stack", "profile_memory", "with_modules"}), 11.81, 37.53, 11.97),
)


@dataclass(frozen=True)
class Estimate:
    """What a trace's step would likely be without the profiler, from the rows measured with its options."""

    options: frozenset[str]  # what the trace was recorded with
    rows: tuple[Measured, ...]  # the measurements it leans on
    exact: bool  # the rows were recorded with exactly the trace's options (else with fewer: a lower bound on the cost)
    issue_us: tuple[float, float]  # the CPU's issue time per step without the profiler: (lowest, highest) estimate
    gpu_us: float
    profiled_idle: float  # the GPU's idle share in the trace
    idle: tuple[float, float]  # and without the profiler, at the lowest and highest estimate of the issue time
    survives: str  # "likely" | "perhaps" | "unlikely": the overhead-bound verdict without the profiler

    def to_dict(self) -> dict:
        return {
            "recorded_with": sorted(self.options),
            "measured_rows": [{"workload": r.workload, "where": r.where, "options": sorted(r.options),
                               "unprofiled_ms": r.unprofiled_ms, "profiled_ms": r.profiled_ms,
                               "slowdown": round(r.slowdown, 3)} for r in self.rows],
            "same_options": self.exact,
            "cpu_issue_us_per_step_without_profiler": [round(v, 3) for v in self.issue_us],
            "gpu_busy_us_per_step": round(self.gpu_us, 3),
            "gpu_idle_fraction_profiled": round(self.profiled_idle, 4),
            "gpu_idle_fraction_without_profiler": [round(v, 4) for v in self.idle],
            "overhead_bound_survives": self.survives,
        }

    def sentences(self) -> list[str]:
        slowdowns = sorted(r.slowdown for r in self.rows)
        spread = f"{slowdowns[0]:.2f}×" if slowdowns[0] == slowdowns[-1] else f"{slowdowns[0]:.2f}-{slowdowns[-1]:.2f}×"
        measured = "; ".join(f"{r.workload} ({r.where}, {_options(r.options)}): {r.unprofiled_ms:g} → "
                             f"{r.profiled_ms:g} ms" for r in self.rows)
        bound = "" if self.exact else ", a lower bound: no step was measured with all of its options"
        low, high = self.issue_us
        issue = _us(low) if abs(high - low) < 0.05 * high else f"{_us(low)}-{_us(high)}"
        idle_low, idle_high = sorted(self.idle)
        idle = f"{idle_low:.0%}" if round(idle_low, 2) == round(idle_high, 2) else f"{idle_low:.0%}-{idle_high:.0%}"
        survives = {
            "likely": "the verdict likely survives without the profiler: even so the CPU issues slower than the GPU runs",
            "perhaps": "the verdict may not survive without the profiler: the estimates fall on both sides of the GPU's",
            "unlikely": "the verdict likely does not survive without the profiler: the CPU would issue faster than the GPU "
                        "runs; time the code without it",
        }[self.survives]
        return [
            f"the profiler with {_options(self.options)} made measured steps {spread} slower{bound} ({measured})",
            f"without it the CPU would issue a step in about {issue} against {_us(self.gpu_us)} of GPU work: "
            f"{survives}; the GPU's idle share, {self.profiled_idle:.0%} in the trace, would be about {idle}",
        ]


def estimate(options: frozenset[str], cpu_issue_us: float, gpu_busy_us: float, profiled_idle: float,
             measured: tuple[Measured, ...] = MEASURED) -> Estimate | None:
    """The trace's step without the profiler, by the measured slowdowns of `options`; None without any row to lean on
    (no row's options are among the trace's)."""
    same = [r for r in measured if r.options == options]
    rows = same
    if not rows:
        fewer = [r for r in measured if r.options < options]
        most = max((len(r.options) for r in fewer), default=-1)
        rows = [r for r in fewer if len(r.options) == most]
    if not rows:
        return None
    issue = sorted(cpu_issue_us / r.slowdown for r in rows)  # the largest slowdown gives the lowest issue time
    low, high = issue[0], issue[-1]
    if low > gpu_busy_us:
        survives = "likely"
    elif high > gpu_busy_us:
        survives = "perhaps"
    else:
        survives = "unlikely"
    idle = tuple(1.0 - min(1.0, gpu_busy_us / max(value, gpu_busy_us)) if value > 0 else 0.0 for value in (low, high))
    return Estimate(options, tuple(rows), bool(same), (low, high), gpu_busy_us, profiled_idle, idle, survives)


def _options(options: frozenset[str]) -> str:
    return " + ".join(o for o in OPTIONS if o in options) or "no option"
