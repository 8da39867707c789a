"""What a change would give back: the step replayed as the CPU issued it, before and after the change.

A step's time is not the sum of its parts. The CPU issues work and the GPU runs it behind; a synchronisation makes the
CPU wait for the GPU to drain, after which the GPU waits for the CPU. So removing 2 ms of CPU work saves 2 ms on a
step whose GPU waits for the CPU, and nothing on one whose GPU is busy all along; removing a sync saves the time the
CPU could have spent issuing ahead. This is the method of Daydream (Zhu et al., "Daydream: Accurately Estimating the
Efficacy of Optimizations for DNN Training", USENIX ATC 2020): build the step's dependency graph from a trace, edit the
graph as the optimisation would, and simulate both.

Here the graph is the CPU's runtime calls in time order, each with the CPU time before it (the ops between two calls),
its own time, and the GPU work it launched; the GPU runs that work in launch order, one item after the other, no
sooner than its launch. A synchronize call (or a copy from pageable memory, which CUDA makes wait for the stream) holds
the CPU until the GPU has run everything launched before it. Steps repeat: the replay runs the step several times in a
row and takes the period of the last, so that a CPU which runs ahead of its GPU is seen doing so.

Two things make the saving a range. The profiler slows the CPU's side down (each recorded op costs more): the replay
runs once with the CPU as recorded and once with it faster by the largest slowdown measured for the trace's recording
options (profiler_costs.py), since the change will run without the profiler; where the trace holds its step timed
without the profiler, also as fast as makes the replayed step take that long (`Replay.fitted_slowdown`). And each
rule says how sure it is of the change's effect on the work it edits (a TF32 GEMM 3 to 8 times faster, say): each
edit comes as (low, high) variants.

The GPU is taken as one queue: work on several streams that overlaps (collectives beside compute, a side stream's
copies) is replayed one item after the other. Where a trace's GPU work overlaps itself by more than OVERLAP_SHARE
(`Replay.serial` False), each finding's basis says so: the replay's GPU is then busier than the trace's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Callable, Iterable

from trace_report.model import RuntimeCall, Step, Trace
from trace_report.timeline import busy_time, union

REPEATS = 3  # steps replayed in a row: the last one's period is the step's (the first fills the queue)
OVERLAP_SHARE = 0.15  # GPU work summed over its busy time above 1 + this: streams overlap, the replay does not hold
SYNC_OWN_US = 5.0  # a synchronize call's own CPU cost, the rest of its duration being the wait
MIN_LAUNCH_LATENCY_US = 1.0  # the soonest a launched kernel starts after its launch call begins
PROFILER_SLOWDOWN = (1.0, 2.0)  # the CPU side's slowdown under the profiler when no measured row fits the options
# Steps replayed at most, spread evenly over the trace's: a saving is a mean over steps of one run, and a trace of 111
# steps (a Mamba forward, 16,779 kernels a step) spent 1.2 s of its 4.4 s report replaying every one
MAX_REPLAYED_STEPS = 16


@dataclass(slots=True)
class Event:
    """One runtime call as the replay sees it."""

    call: RuntimeCall | None  # None for an event a change adds
    gap: float  # CPU time before it, since the previous call returned (the ops in between)
    own: float  # the call's own CPU time, its wait left out
    waits: bool  # the CPU waits here for the GPU to finish what was launched before
    work: float  # the GPU work it launched, µs in all (run back to back, as the GPU takes one launch's work)
    blocks_on_work: bool = False  # the CPU also waits for its own work (a synchronous copy)
    ts: float = 0.0  # where the gap starts and the call ends, on the trace's clock (edits by span read them)
    end: float = 0.0


@dataclass
class StepReplay:
    """One step's events, and what the trace measured of it."""

    step: Step
    events: list[Event]
    tail: float  # CPU time after the last call, to the step's end
    latency: float  # launch to start on an idle GPU, the least the trace shows
    measured_us: float  # the step's period as the trace shows it
    _periods: dict = field(default_factory=dict)  # cpu_scale -> the period as recorded

    def period(self, events: list[Event] | None = None, tail: float | None = None, cpu_scale: float = 1.0) -> float:
        """The step's period when it runs REPEATS times in a row with `events` (default: as recorded)."""
        if events is None and tail is None:
            known = self._periods.get(cpu_scale)
            if known is None:
                known = self._periods[cpu_scale] = self.period(self.events, self.tail, cpu_scale)
            return known
        tail = self.tail if tail is None else tail
        latency = self.latency
        # the events as plain tuples, the CPU's times scaled, once for the REPEATS passes
        rows = [(e.gap * cpu_scale, e.waits, e.own * cpu_scale, e.work, e.blocks_on_work) for e in events]
        cpu = gpu = 0.0
        ends = []
        for _ in range(REPEATS):
            for gap, waits, own, work, blocks in rows:
                cpu += gap
                start = cpu
                if waits and gpu > cpu:
                    cpu = gpu
                cpu += own
                if work:
                    gpu = (gpu if gpu > start + latency else start + latency) + work
                if blocks and gpu > cpu:
                    cpu = gpu
            cpu += tail * cpu_scale
            ends.append((cpu, gpu))
        (cpu_a, gpu_a), (cpu_b, gpu_b) = ends[-2], ends[-1]
        return max(cpu_b - cpu_a, gpu_b - gpu_a)


@dataclass
class Replay:
    """The trace's steps, replayable; `serial`: the GPU work does not overlap itself (see the module's docstring)."""

    steps: list[StepReplay]
    serial: bool
    slowdown: tuple[float, float]  # the CPU's slowdown under the profiler, least and most (profiler_costs.py)
    measured_us: float = 0.0  # the mean step period as the trace shows it
    fitted_us: float = 0.0  # the mean step period as the replay gives it, the CPU as recorded
    # The step timed without the profiler, where the trace holds it: a saving is then the replay's share of its step
    # applied to this one (the replay's absolute µs are the profiled step's, whatever the CPU's scale)
    target_us: float | None = None

    def fitted_slowdown(self) -> float | None:
        """The CPU's slowdown at which the replay takes the step timed without the profiler (`target_us`), or None."""
        return _fitted(self)

    def given_back(self, before: float, after: float) -> float:
        """What the steps replayed `before` and `after` a change (their periods summed) give back per step, in the
        step the saving is said of: with a target, the share of the steps' time saved, of the target's step. A share
        of the sums, not a mean of each step's share: a step that waited 205 ms among two of 10 weighs as its time
        does (lesson 12's fixed step on an H100; each step's share averaged gave 18 ms of a 60 ms step for waits that
        were 86% of the recorded steps)."""
        n = len(self.steps)
        if self.target_us is not None and before > 0:
            return (before - after) / before * self.target_us
        return (before - after) / n

    def saving(self, edit: Callable[[StepReplay], tuple[list[Event], float]],
               variants: Iterable[Callable[[StepReplay], tuple[list[Event], float]]] = ()) -> tuple[float, float]:
        """What `edit` (and its `variants`, other guesses at the same change) gives back per step: (least, most) over
        the edits and the CPU's speed with and without the profiler, over the steps together (given_back)."""
        scales = sorted({1.0 / self.slowdown[0], 1.0 / self.slowdown[1]})
        results = []
        for one in (edit, *variants):
            before, after = [0.0] * len(scales), [0.0] * len(scales)
            for s in self.steps:
                events, tail = one(s)  # once per step: the edit does not hang on the CPU's speed
                for i, scale in enumerate(scales):
                    before[i] += s.period(cpu_scale=scale)
                    after[i] += s.period(events, tail, cpu_scale=scale)
            results += [self.given_back(b, a) for b, a in zip(before, after)]
        return max(0.0, min(results)), max(0.0, max(results))


FIT_SCALES = (0.125, 1.0)  # the CPU speeds (of the recorded one) a fitted slowdown is searched between
FIT_STEPS = 4


def _fitted(r: Replay) -> float | None:
    """The CPU's slowdown under the profiler at which the replayed steps' mean period is the step timed without the
    profiler (`target_us`): 1.0 where the recorded CPU already gives it, None where no speed does (the GPU's own work
    outlasts it). Bisection: the period only shrinks as the CPU gets faster."""
    if r.target_us is None or not r.steps:
        return None
    # A few of the replayed steps, spread over them: each speed tried replays them all (16 of a Mamba trace's steps, 22
    # speeds: 0.35 s of its 0.7 s advice)
    steps = r.steps[::max(1, len(r.steps) // FIT_STEPS)][:FIT_STEPS]

    def period(scale: float) -> float:
        return sum(s.period(cpu_scale=scale) for s in steps) / len(steps)

    low, high = FIT_SCALES
    if period(high) <= r.target_us:
        return 1.0
    if period(low) > r.target_us:
        return None
    for _ in range(12):  # to a 4000th of the speeds' span
        mid = (low + high) / 2
        low, high = (mid, high) if period(mid) <= r.target_us else (low, mid)
    return 1.0 / low


def scaled_saving(r: Replay, keep: tuple[float, float]) -> tuple[float, float]:
    """What keeping `keep` (least, most) of all the step's CPU time gives back (CUDA graphs, a compiled step): the
    replay with the CPU that much faster, the waits kept."""
    results = []
    for scale in {1.0 / r.slowdown[0], 1.0 / r.slowdown[1]}:
        for k in keep:
            results.append(r.given_back(sum(s.period(cpu_scale=scale) for s in r.steps),
                                        sum(s.period(s.events, s.tail, scale * k) for s in r.steps)))
    return max(0.0, min(results)), max(0.0, max(results))


def replay(trace: Trace, slowdown: tuple[float, float] = PROFILER_SLOWDOWN,
           target_us: float | None = None) -> Replay | None:
    """The trace's steps as a Replay; None without a GPU lane or a CPU side to replay."""
    if not trace.has_gpu or not any(s.runtime for s in trace.steps):
        return None
    steps = [s for s in trace.steps if s.runtime]
    if len(steps) > MAX_REPLAYED_STEPS:
        steps = [steps[i * len(steps) // MAX_REPLAYED_STEPS] for i in range(MAX_REPLAYED_STEPS)]
    steps = [_step(s) for s in steps]
    lane = [w for s in trace.steps for w in s.gpu]
    busy = busy_time(lane)
    serial = busy > 0 and sum(w.dur for w in lane) <= (1 + OVERLAP_SHARE) * busy
    measured = sum(s.measured_us for s in steps) / len(steps)
    fitted = sum(s.period() for s in steps) / len(steps)
    return Replay(steps, serial, slowdown, measured, fitted, target_us)


def _step(step: Step) -> StepReplay:
    calls = sorted(step.runtime, key=lambda c: c.ts)
    works: dict[int, list] = {}
    lags = []
    for w in step.gpu:
        if w.launch is not None:
            works.setdefault(id(w.launch), []).append(w)
            lags.append(w.ts - w.launch.ts)
    events = []
    cpu_end = step.ts
    for call in calls:
        launched = sorted(works.get(id(call), ()), key=lambda w: w.ts)
        synchronous = is_blocking_copy(call, launched)
        waits = call.is_sync or synchronous
        own = min(call.dur, SYNC_OWN_US) if waits else call.dur
        gap = max(0.0, call.ts - cpu_end)
        events.append(Event(call, gap, own, waits, sum(w.dur for w in launched), synchronous, cpu_end, call.end))
        cpu_end = max(cpu_end, call.end)
    tail = max(0.0, step.ts + step.dur - cpu_end)
    latency = max(MIN_LAUNCH_LATENCY_US, min(lags, default=MIN_LAUNCH_LATENCY_US))
    gpu_span = (max(w.end for w in step.gpu) - min(w.ts for w in step.gpu)) if step.gpu else 0.0
    measured = max(step.dur, busy_time(step.gpu) if step.gpu else 0.0, 0.0 if gpu_span <= step.dur else step.dur)
    return StepReplay(step, events, tail, latency, measured)


def is_blocking_copy(call: RuntimeCall, launched: list) -> bool:
    """A copy the CPU waits for: CUDA's own synchronous copies (cudaMemcpy, not Async), and any copy to or from
    pageable memory, which CUDA stages through a pinned buffer of its own after waiting for the stream (CUDA Runtime
    API, "API synchronization behavior")."""
    if "Memcpy" not in call.name:
        return False
    if "Async" not in call.name and "Peer" not in call.name:
        return True
    return any(w.is_pageable_copy for w in launched)


# --- edits: what a change does to a step's events, for Replay.saving ------------------------------------------------


def spans_of(items: Iterable) -> list[tuple[float, float]]:
    """The merged spans of ops or calls (anything with ts and dur)."""
    return union((i.ts, i.ts + i.dur) for i in items)


def _overlap(a: float, b: float, spans: list[tuple[float, float]], ends: list[float], i: int | None = None) -> float:
    """How much of [a, b] the spans (sorted, disjoint; `ends`: their ends) cover; `i`: the first span ending at or
    after `a`, where the caller knows it."""
    total = 0.0
    if i is None:
        i = bisect.bisect_left(ends, a)
    while i < len(spans) and spans[i][0] < b:
        total += max(0.0, min(b, spans[i][1]) - max(a, spans[i][0]))
        i += 1
    return total


def cut_cpu(spans_by_step: Callable[[Step], list[tuple[float, float]]], keep: float,
            gpu_keep: float | None = None, drop_waits: bool = True) -> Callable[[StepReplay], tuple[list[Event], float]]:
    """An edit that keeps `keep` of the CPU time inside the spans (the ops a change makes cheaper), `gpu_keep` of the
    GPU work launched from calls inside them (None: as it was), and no wait of a call inside them (`drop_waits`)."""

    def edit(s: StepReplay) -> tuple[list[Event], float]:
        spans = union(spans_by_step(s.step))
        if not spans:
            return s.events, s.tail
        ends = [b for _, b in spans]
        out = []
        first_gap = first_call = 0  # the events' gaps start, and their calls, in time order: each search starts
        for e in s.events:          # where the last one ended
            first_gap = bisect.bisect_left(ends, e.ts, first_gap)
            cut = _overlap(e.ts, e.call.ts if e.call else e.end, spans, ends, first_gap) * (1 - keep)
            gap = max(0.0, e.gap - cut)
            if e.call is not None:
                first_call = bisect.bisect_left(ends, e.call.ts, first_call)
            if e.call is not None and first_call < len(spans) and spans[first_call][0] <= e.call.ts:
                work = e.work if gpu_keep is None else e.work * gpu_keep
                e = Event(e.call, gap, e.own * keep, e.waits and not drop_waits, work,
                          e.blocks_on_work and not drop_waits, e.ts, e.end)
            elif cut:
                e = Event(e.call, gap, e.own, e.waits, e.work, e.blocks_on_work, e.ts, e.end)
            out.append(e)
        last = s.events[-1].end if s.events else s.step.ts
        tail = max(0.0, s.tail - _overlap(last, s.step.ts + s.step.dur, spans, ends) * (1 - keep))
        return out, tail

    return edit


def edit_events(change: Callable[[Event], Event | None]) -> Callable[[StepReplay], tuple[list[Event], float]]:
    """An edit of each event alone: `change` returns the event as the change leaves it, or None to drop it (its gap
    goes with it: the ops before a dropped call were there to make it)."""

    def edit(s: StepReplay) -> tuple[list[Event], float]:
        out = []
        for e in s.events:
            changed = change(e)
            if changed is not None:
                out.append(changed)
        return out, s.tail

    return edit
