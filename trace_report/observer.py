"""The observer effect: what the profiler changed in the steps it recorded, and whether the verdict holds without it.

The profiler adds CPU time to every op it records (more with each recording option: profiler_costs.py), so a verdict
read from a trace ("overhead-bound, the GPU idle 72% of its window") is the profiled run's. A lesson therefore times
its step without the profiler first (`lesson.time_unprofiled`) and writes the figures into the trace, under the
top-level key "unprofiled" (units in the key names), before `traceEvents`:

    "unprofiled": {"device": "cuda", "repeats": 20, "wall_us_per_step": 9812.4, "cpu_issue_us_per_step": 9640.1,
                   "gpu_us_per_step": 6350.2, "timing_s": 0.41}

    wall_us_per_step       steps back to back, no synchronize inside (as the profile runs them): the loop's period
    cpu_issue_us_per_step  the host's time for one step() to return: what issuing the step costs the CPU
    gpu_us_per_step        CUDA events around one step whose work was all queued before the GPU reached it: the GPU's
                           time alone (null on a CPU, where the step's time is the CPU's)

`observe(trace, verdict)` sets them beside the same figures read from the trace (`Profiled`) and judges both by the
verdict's rule (`pace.paced_by_timing`): the gap and what made it, both verdicts, and which one to believe where they
disagree (`ObserverEffect`). A trace without them (anyone's) still says what it was recorded with
(`recording_options`: the profiler's own metadata keys, else what its events show), and where its verdict is
overhead-bound, what those options typically cost and whether the verdict would likely survive without them
(`profiler_costs.estimate`).

No torch here (like the rest of trace_report).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass


from trace_report.console import Console
from trace_report.model import MODULES_FROM_STACKS, Trace
from trace_report.pace import Verdict, _us, paced_by_timing
from trace_report.profiler_costs import OPTIONS, Estimate, estimate

UNPROFILED_KEY = "unprofiled"
SMALL_GAP = 0.10  # a profiled step within 10% of the unprofiled one: the profiler changed it little
IDLE_POINTS = 0.10  # idle shares this far apart (10 points) are said to differ


@dataclass(frozen=True)
class Unprofiled:
    """The step timed without the profiler (medians over `repeats`), as written into the trace."""

    device: str  # "cuda" or "cpu"
    repeats: int
    wall_us_per_step: float
    cpu_issue_us_per_step: float
    gpu_us_per_step: float | None
    timing_s: float  # how long the timing took
    launch_queue_full: bool = False  # the issue time is the step's return to an idle GPU (lesson/unprofiled.py)

    @property
    def kind(self) -> str | None:
        """The verdict's rule on these figures; None without a GPU."""
        if self.gpu_us_per_step is None:
            return None
        return paced_by_timing(self.cpu_issue_us_per_step, self.gpu_us_per_step, self.wall_us_per_step)

    @property
    def gpu_idle_fraction(self) -> float | None:
        if self.gpu_us_per_step is None or self.wall_us_per_step <= 0:
            return None
        return max(0.0, 1.0 - self.gpu_us_per_step / self.wall_us_per_step)

    def to_dict(self) -> dict:
        return {
            "device": self.device,
            "repeats": self.repeats,
            "wall_us_per_step": round(self.wall_us_per_step, 3),
            "cpu_issue_us_per_step": round(self.cpu_issue_us_per_step, 3),
            "gpu_us_per_step": None if self.gpu_us_per_step is None else round(self.gpu_us_per_step, 3),
            "timing_s": round(self.timing_s, 3),
            **({"launch_queue_full": True} if self.launch_queue_full else {}),
        }

    @classmethod
    def from_dict(cls, data) -> Unprofiled | None:
        """The figures as a trace holds them; None when they are missing or not numbers (a trace edited by hand)."""
        if not isinstance(data, dict):
            return None
        wall, issue, gpu = (data.get(k) for k in ("wall_us_per_step", "cpu_issue_us_per_step", "gpu_us_per_step"))
        if not all(_positive(v) for v in (wall, issue)) or not (gpu is None or _positive(gpu)):
            return None
        repeats, took = data.get("repeats"), data.get("timing_s")
        return cls(str(data.get("device", "")), repeats if type(repeats) is int else 0, float(wall), float(issue),
                   None if gpu is None else float(gpu), float(took) if _positive(took) else 0.0,
                   data.get("launch_queue_full") is True)


@dataclass(frozen=True)
class Profiled:
    """The same figures, read from the trace: its recorded steps' period, the verdict's issue and busy times."""

    step_us: float  # the steps back to back: the longer of the CPU's step and the span of the steps' GPU work
    cpu_issue_us_per_step: float
    gpu_us_per_step: float | None
    kind: str
    gpu_idle_fraction: float | None


def profiled(trace: Trace, v: Verdict) -> Profiled:
    n = len(trace.steps)
    cpu_step = sum(s.dur for s in trace.steps) / n
    work = [w for s in trace.steps for w in s.gpu]
    gpu_span = (max(w.end for w in work) - min(w.ts for w in work)) / n if work else 0.0
    on_gpu = v.gpu_busy_us_per_step is not None
    return Profiled(max(cpu_step, gpu_span), v.cpu_us_per_step, v.gpu_busy_us_per_step, v.kind,
                    v.gpu_idle_fraction if on_gpu else None)


@dataclass(frozen=True)
class ObserverEffect:
    """A step timed without the profiler beside the same step in the trace."""

    unprofiled: Unprofiled
    profiled: Profiled

    @property
    def gap(self) -> float:
        """How much longer the profiled step is, as a share of the unprofiled one (0.5: 50% longer)."""
        return self.profiled.step_us / self.unprofiled.wall_us_per_step - 1.0

    @property
    def flipped(self) -> bool:
        """The two runs disagree on who sets the pace."""
        judged = self.unprofiled.kind
        return judged is not None and self.profiled.kind in ("overhead-bound", "compute-bound") and judged != self.profiled.kind

    def cause(self) -> str:
        u, p = self.unprofiled, self.profiled
        step_gap = p.step_us - u.wall_us_per_step
        if abs(self.gap) < SMALL_GAP:
            return "the profiler changed the step little"
        if step_gap < 0 and u.repeats == 1:  # a step of seconds on a CPU (lesson/unprofiled.py)
            return ("the profiled steps ran faster than the one timed: one step of seconds, timed on its second call, "
                    "is no median, and later calls can run faster (the profiled ones are its 3rd to 5th)")
        if step_gap < 0:
            return "the profiled steps ran faster than the timed ones: a machine this noisy needs more repeats"
        if u.gpu_us_per_step is None or p.gpu_us_per_step is None:
            return "on a CPU the profiler's cost lands in the ops' own time, the only side there is"
        if p.cpu_issue_us_per_step - u.cpu_issue_us_per_step >= 0.5 * step_gap:
            return "the profiler's CPU cost is most of the gap"
        if p.gpu_us_per_step - u.gpu_us_per_step >= 0.5 * step_gap:
            return "the GPU's work took longer under the profiler: most of the gap is on the GPU's side"
        return "neither side's time alone makes the gap"

    def sentences(self) -> list[str]:
        u, p = self.unprofiled, self.profiled
        lines = [f"unprofiled {_us(u.wall_us_per_step)} a step, profiled {_us(p.step_us)} ({self.gap:+.0%}): "
                 f"{self.cause()}"]
        issue = f"the CPU issues a step in {_us(u.cpu_issue_us_per_step)} without the profiler, {_us(p.cpu_issue_us_per_step)} under it"
        if u.gpu_us_per_step is None or p.gpu_us_per_step is None:
            lines.append(f"{issue}; no GPU, so no verdict to flip: what a CPU shows is the profiler's cost in the "
                         "step's own time")
            return lines
        lines.append(f"{issue}; the GPU works {_us(u.gpu_us_per_step)} and {_us(p.gpu_us_per_step)}")
        idle = (f"the GPU idles about {u.gpu_idle_fraction:.0%} of a step without it, {p.gpu_idle_fraction:.0%} of "
                "the trace's window")
        if self.flipped:
            lines.append(
                f"the profiler flips the verdict: the trace reads {p.kind}, the step timed without it {u.kind} "
                f"({idle}): believe the unprofiled timing on who sets the pace; the trace still shows what runs, "
                "in what order, and why"
            )
        elif p.kind in ("overhead-bound", "compute-bound"):
            differs = abs(u.gpu_idle_fraction - p.gpu_idle_fraction) >= IDLE_POINTS
            lines.append(f"both read {p.kind}: the verdict holds without the profiler; {idle}"
                         + (": that share is the profiler's, not the code's" if differs else ""))
        return lines

    def to_dict(self) -> dict:
        u, p = self.unprofiled, self.profiled
        return {
            "unprofiled": u.to_dict(),
            "profiled_step_us": round(p.step_us, 3),
            "profiled_cpu_issue_us_per_step": round(p.cpu_issue_us_per_step, 3),
            "profiled_gpu_us_per_step": None if p.gpu_us_per_step is None else round(p.gpu_us_per_step, 3),
            "gap": round(self.gap, 4),
            "cause": self.cause(),
            "profiled_kind": p.kind,
            "unprofiled_kind": u.kind,
            "flipped": self.flipped,
            "summary": ". ".join(self.sentences()) + ".",
        }


@dataclass(frozen=True)
class Observed:
    """What trace-report says of the profiler's part in a trace: the options it was recorded with (option -> how
    that is known), and the measured comparison where the trace holds one, else the estimate where it is
    overhead-bound."""

    options: dict[str, str]
    effect: ObserverEffect | None = None
    estimate: Estimate | None = None

    def sentences(self) -> list[str]:
        if self.effect is not None:
            return self.effect.sentences()
        if self.estimate is not None:
            return self.estimate.sentences()
        return [f"recorded with {_recorded(self.options)}; no timing without the profiler in the trace"]

    def to_dict(self) -> dict:
        return {
            "recorded_with": self.options,
            "measured": self.effect.to_dict() if self.effect is not None else None,
            "estimate": self.estimate.to_dict() if self.estimate is not None else None,
        }


def observe(trace: Trace, v: Verdict, meta: dict | None = None) -> Observed:
    """The profiler's part in `trace` judged by `v`; `meta`: the trace's top-level keys (the reader's when not
    given)."""
    meta = trace.meta if meta is None else meta
    options = recording_options(trace, meta)
    unprofiled = Unprofiled.from_dict(meta.get(UNPROFILED_KEY))
    if unprofiled is not None:
        return Observed(options, effect=ObserverEffect(unprofiled, profiled(trace, v)))
    if v.kind == "overhead-bound" and v.gpu_busy_us_per_step is not None:
        found = estimate(frozenset(options), v.cpu_us_per_step, v.gpu_busy_us_per_step, v.gpu_idle_fraction or 0.0)
        return Observed(options, estimate=found)
    return Observed(options)


def recording_options(trace: Trace, meta: dict) -> dict[str, str]:
    """What the trace was recorded with, option -> how that is known: the profiler writes each option it was given
    into the trace's metadata (`"record_shapes": 1`, torch 2.x); a trace without them still shows two in its events:
    input shapes on its ops (record_shapes) and module frames from Python stacks (with_stack). profile_memory's
    `[memory]` events and with_modules leave nothing the reader keeps: only the metadata says those."""
    found = {option: "the trace's metadata" for option in OPTIONS if _truthy(meta.get(option))}
    if "record_shapes" not in found and any(op.input_dims for step in trace.steps for op in step.ops):
        found["record_shapes"] = "input shapes on its ops"
    # an op's modules come from the stacks' module frames alone (reader._place_in_modules)
    if "with_stack" not in found and trace.module_source == MODULES_FROM_STACKS:
        found["with_stack"] = "Python frames around its ops"
    return {option: found[option] for option in OPTIONS if option in found}


def print_observed(observed: Observed, console: Console) -> None:
    """trace-report's section: the options, then the measured comparison or the estimate, one sentence a line."""
    console.print("[bold]What the profiler changed[/bold]")
    lines = observed.sentences()
    if observed.options and (observed.effect is not None or observed.estimate is not None):
        lines = [f"recorded with {_recorded(observed.options)}", *lines]
    for sentence in lines:  # wrapped to the terminal, each line indented under the heading
        for line in textwrap.wrap(sentence, width=max(40, console.width - 2)):
            console.print(f"  {line}", markup=False, highlight=False)
    console.print()


def _recorded(options: dict[str, str]) -> str:
    """`record_shapes, with_stack (the trace's metadata)`: the options, grouped by how each is known."""
    if not options:
        return "no recording option (the profiler's own cost only)"
    by_how: dict[str, list[str]] = {}
    for option, how in options.items():
        by_how.setdefault(how, []).append(option)
    return "; ".join(f"{', '.join(names)} ({how})" for how, names in by_how.items())


def _truthy(value) -> bool:
    return value is True or value == 1 or value == "1" or value == "true"


def _positive(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value > 0
