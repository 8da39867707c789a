"""What the rules share: the trace as a rule reads it (`Reading`: steps, the replay, the step's period), words for
times and sizes, and where a pattern sits (the op path, the Python line)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from trace_report.advice.replay import PROFILER_SLOWDOWN, Replay, replay
from trace_report.model import CpuOp, Step, Trace
from trace_report.pace import Verdict, _us
from trace_report.observer import UNPROFILED_KEY, Unprofiled
from trace_report.profiler_costs import MEASURED
from trace_report.timeline import union

DATALOADER = "DataLoader"  # `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`: the batch being made
SINGLE_PROCESS_LOADER = "_SingleProcessDataLoaderIter"
MULTI_PROCESS_LOADER = "_MultiProcessingDataLoaderIter"  # workers make the batches; a thread of its own pins them
OPTIMIZER_STEP = "Optimizer.step#"  # `Optimizer.step#AdamW.step`: torch labels every optimizer's step
OPTIMIZER_ZERO_GRAD = "Optimizer.zero_grad#"
# A fitted slowdown this close to the measured range is the same speed: no second speed replayed (each doubles the
# replays: the grown Mamba trace's advice went from 0.33 to 0.68 s for 2.05x fitted against 2.09x measured)
FIT_AGREES = 0.05


@dataclass
class Reading:
    """One trace as the rules read it; `options`: what it was recorded with (observer.recording_options)."""

    trace: Trace
    verdict: Verdict
    options: frozenset[str]

    @property
    def steps(self) -> list[Step]:
        return self.trace.steps

    @property
    def n(self) -> int:
        return len(self.trace.steps)

    @property
    def slowdown(self) -> tuple[float, float]:
        """How much slower the CPU's side ran under the profiler, least and most: `measured_slowdown`, widened to the
        speed at which the replayed step takes as long as the step timed without the profiler, where the trace holds
        that timing (Replay.fitted_slowdown)."""
        return self.replay.slowdown if self.replay is not None else self.measured_slowdown

    @cached_property
    def measured_slowdown(self) -> tuple[float, float]:
        """How much slower the CPU's side ran under the profiler, least and most: measured, where the trace holds its
        step timed without the profiler (the lessons write it) and no step synchronizes (a held step's issue time is
        then the hold's); else by the rows measured with the trace's options or fewer (profiler_costs.MEASURED);
        PROFILER_SLOWDOWN where none fits."""
        unprofiled = self.unprofiled
        synced = any(c.is_sync for s in self.steps for c in s.runtime)
        if unprofiled is not None and not self.trace.has_gpu and unprofiled.wall_us_per_step > 0 and self.steps:
            # on a CPU the step is the CPU's: the profiled step against the same step timed without it
            measured = max(1.0, sum(s.dur for s in self.steps) / len(self.steps) / unprofiled.wall_us_per_step)
            return measured, measured
        if unprofiled is not None and unprofiled.cpu_issue_us_per_step > 0 and not synced:
            measured = max(1.0, self.verdict.cpu_us_per_step / unprofiled.cpu_issue_us_per_step)
            return measured, measured
        rows = [r for r in MEASURED if r.options <= self.options]
        if not rows:
            return PROFILER_SLOWDOWN
        most = max(len(r.options) for r in rows)
        slowdowns = [r.slowdown for r in rows if len(r.options) == most]
        return 1.0, max(slowdowns)

    @cached_property
    def op_names(self) -> frozenset[str]:
        """The names of the steps' ops, each once: a rule asks these before it walks 260k ops."""
        return frozenset(op.name for step in self.steps for op in step.ops)

    def names_starting(self, prefix: str) -> list[str]:
        """The steps' op names that start with `prefix` (`Optimizer.step#`): whether a rule has anything to walk."""
        return [name for name in self.op_names if name.startswith(prefix)]

    @cached_property
    def replay(self) -> Replay | None:
        target = self.unprofiled.wall_us_per_step if self.unprofiled is not None else None
        found = replay(self.trace, self.measured_slowdown, target if target and target > 0 else None)
        fitted = found.fitted_slowdown() if found is not None else None
        low, high = self.measured_slowdown
        if fitted is not None and not (1 - FIT_AGREES) * low <= fitted <= (1 + FIT_AGREES) * high:
            # The CPU's speed at which the replay takes the unprofiled step's time: the issue time measured without
            # the profiler undercounts its cost where the profiled step's period is not its issue time (lesson 12's
            # fixed step, a batch made on the GPU a sample at a time: 1.19x measured, 1.37x fitted)
            found.slowdown = (min(low, fitted), max(high, fitted))
        return found

    @cached_property
    def unprofiled(self) -> Unprofiled | None:
        """The step timed without the profiler, where the trace holds it (the lessons write it)."""
        return Unprofiled.from_dict(self.trace.meta.get(UNPROFILED_KEY))

    @cached_property
    def step_us(self) -> float:
        """The step the savings are shares of: timed without the profiler where the trace holds that timing (the
        savings are predicted for the code as it runs without the profiler); else its period as the replay measured
        it from the trace, else the verdict's per-step figures."""
        if self.unprofiled is not None and self.unprofiled.wall_us_per_step > 0:
            return self.unprofiled.wall_us_per_step
        if self.replay is not None and self.replay.measured_us > 0:
            return self.replay.measured_us
        per_step = [s.dur for s in self.steps]
        return max(sum(per_step) / len(per_step), self.verdict.gpu_busy_us_per_step or 0.0)

    @cached_property
    def has_stacks(self) -> bool:
        return "with_stack" in self.options

    @cached_property
    def has_shapes(self) -> bool:
        return "record_shapes" in self.options

    def per_step(self, count: int) -> float:
        return count / self.n if self.n else 0.0

    def basis(self, what: str) -> str:
        """The words every replayed saving ends with: how well the replay fits the trace, and the profiler's part."""
        r = self.replay
        fit = (f"the replay gives {_us(r.fitted_us)} for the trace's {_us(r.measured_us)} step" if r is not None
               else "no replay")
        if r is not None and len(r.steps) < len(self.steps):
            fit += f", {len(r.steps)} of its {len(self.steps)} steps replayed"
        if r is not None and not r.serial:
            fit += "; the trace's GPU streams overlap, which the replay runs one after the other"
        low, high = self.slowdown
        if low == high:
            cpu = f"the CPU {high:.1f}× faster, as the step timed without the profiler ran"
        elif low == 1.0:
            cpu = f"the CPU as recorded and {high:.1f}× faster (the profiler's cost on steps recorded like this one)"
        else:
            cpu = (f"the CPU {low:.1f}× to {high:.1f}× faster than recorded (the step timed without the profiler, its "
                   "issue time and its period)")
        return f"{what}; the step replayed with the change and without ({fit}), {cpu}"


def loader_next(step: Step, iterator: str) -> list[CpuOp]:
    """The step's `enumerate(DataLoader)#<iterator>.__next__` boxes: SINGLE_PROCESS_LOADER's make the batch on the
    loop's thread, MULTI_PROCESS_LOADER's wait for the workers' next one."""
    return [op for op in step.ops if DATALOADER in op.name and iterator in op.name]


def in_loader(op: CpuOp) -> bool:
    """An op inside a DataLoader's `__next__`: the batch being made, not the step's own work."""
    return DATALOADER in op.name or any(DATALOADER in box for box in op.path)


def where_of(ops) -> str | None:
    """Where most of `ops` come from, in a trace recorded with Python stacks (with_stack=True): the line of the
    reader's own code (`train.py:42`, CpuOp.source) and the modules they ran in (`Sequential > Block`); else None."""
    ops = [op for op in ops if op is not None]
    lines = Counter(op.source for op in ops if op.source)
    chains = Counter(tuple(op.modules) for op in ops if op.modules)
    parts = []
    if lines:
        parts.append(lines.most_common(1)[0][0])
    if chains:
        parts.append("in " + " > ".join(chains.most_common(1)[0][0]))
    return ", ".join(parts) or None


def megabytes(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    return f"{n / 1e3:,.1f} kB"


def times(n: float) -> str:
    """A count per step: `×3`, `×2.5`."""
    return f"×{n:g}" if n == int(n) else f"×{n:.1f}"


us = _us


def source_of(rule) -> str:
    """Where a rule's idea comes from: the paragraph of its docstring that starts with "Sources: ", in one line."""
    doc = rule.__doc__ or ""
    text = doc.split("Sources: ", 1)[1] if "Sources: " in doc else ""
    return " ".join(text.split())


def cpu_only_saving(r: Reading, spans_by_step, keep: tuple[float, float]) -> tuple[float, float]:
    """On a trace without a GPU lane the step is its CPU time: a change gives back the CPU time it removes from the
    spans, `keep` (least, most) of it staying, read without the profiler's share at the most (Reading.slowdown)."""
    removed = 0.0
    for step in r.steps:
        spans = union(spans_by_step(step))
        removed += sum(min(step.ts + step.dur, b) - max(step.ts, a) for a, b in spans if b > step.ts)
    removed /= max(1, r.n)
    return removed * (1 - keep[1]) / r.slowdown[1], removed * (1 - keep[0]) / r.slowdown[0]
