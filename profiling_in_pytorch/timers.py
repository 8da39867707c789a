"""How long a forward takes: timers for a GPU and a CPU, and forwards back to back. The lessons (the step without
the profiler, lesson/unprofiled.py), the benchmark and lesson 08's timing all time with these.

    gpu_timing        how long does one forward keep the GPU busy?   CUDA events around each call, L2 flushed
    cpu_timing        the same on a CPU                              time.perf_counter around each call
    back_to_back      how fast do forwards go when called in a loop? events around n calls, and the CPU's share
    busy_in_loop      and does the GPU wait for the CPU in it?       the same loop, events around each forward

The machine's ceilings, timed with them, are `ceilings.py`.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch


@dataclass(frozen=True)
class Timing:
    """Median and spread (20th and 80th percentiles) of per-call times, in µs, over `samples` calls."""

    median_us: float
    p20_us: float
    p80_us: float
    samples: int

    @classmethod
    def from_seconds(cls, samples: Sequence[float]) -> "Timing":
        return cls.from_us([s * 1e6 for s in samples])

    @classmethod
    def from_us(cls, samples: Sequence[float]) -> "Timing":
        return cls(percentile(samples, 50), percentile(samples, 20), percentile(samples, 80), len(samples))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


L2_FLUSH_BYTES = 256 << 20  # five times the 50-60 MB L2 of an H100 or H200, as triton's do_bench uses


def gpu_timing(fn: Callable[[], object], warmup_ms: int, rep_ms: int) -> Timing:
    """CUDA events around every call, the L2 cache flushed before each one and the CPU's issue time hidden.

    Like triton's `do_bench`, each timed call comes after a 256 MB memset, so weights and inputs come from HBM,
    as in a real model where the other layers have evicted them. Unlike it, when issuing a call takes the CPU
    longer than the memset takes the GPU (a decode step: tens of µs of Python and launches for a few µs of
    kernels), a spin kernel (`torch.cuda._sleep`) holds the GPU for the difference, so the start event and the
    call's kernels are all queued before the GPU reaches them and the events measure GPU time only. Without
    it, such calls are timed at the CPU's pace, and noisily. The hold is no longer than needed: idle time
    between calls lets a power-limited GPU (an H200 at the post's shapes) clock higher than it would under
    sustained load. `back_to_back` is the measurement that includes the CPU.
    """
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    fn()  # warm: lazy initialisation, allocator
    torch.cuda.synchronize()
    issue_us, flush_us, call_s = [], [], []
    for _ in range(5):
        before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        before.record()
        flush.zero_()
        after.record()
        start = time.perf_counter()
        fn()
        issue_us.append((time.perf_counter() - start) * 1e6)  # the CPU's side: the call returns once queued
        torch.cuda.synchronize()
        call_s.append(time.perf_counter() - start)
        flush_us.append(before.elapsed_time(after) * 1e3)
    hold_us = max(0.0, 1.5 * percentile(issue_us, 50) + 10 - percentile(flush_us, 50))
    hold_cycles = int(spin_cycles_per_us() * hold_us)
    # Counts of calls from the GPU time they take, as do_bench does: a loop bounded by the CPU's clock would
    # queue seconds of work for a large shape and time it on a GPU already throttled by its power limit.
    call = max(percentile(call_s, 50), 1e-6)
    calls = max(5, min(1000, int(rep_ms / 1e3 / call)))
    for _ in range(max(1, int(warmup_ms / 1e3 / call))):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for before, after in events:
        flush.zero_()
        if hold_cycles:
            torch.cuda._sleep(hold_cycles)
        before.record()
        fn()
        after.record()
    torch.cuda.synchronize()
    return Timing.from_us([before.elapsed_time(after) * 1e3 for before, after in events])


@functools.lru_cache(maxsize=None)
def spin_cycles_per_us() -> float:
    """How many `torch.cuda._sleep` cycles make a microsecond on this GPU (its clock, measured once)."""
    cycles = 2_000_000
    before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # first launch out of the way
    before.record()
    torch.cuda._sleep(cycles)
    after.record()
    torch.cuda.synchronize()
    return cycles / (before.elapsed_time(after) * 1e3)


def cpu_timing(fn: Callable[[], object], warmup_ms: int, rep_ms: int, min_samples: int = 5) -> Timing:
    """time.perf_counter around every call: warm up for `warmup_ms`, then time calls for about `rep_ms`."""
    fn()
    end = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < end:
        fn()
    samples: list[float] = []
    end = time.perf_counter() + rep_ms / 1e3
    while len(samples) < min_samples or (time.perf_counter() < end and len(samples) < 100_000):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing.from_seconds(samples)


@dataclass(frozen=True)
class BackToBack:
    """Per forward, with forwards issued in a loop and no synchronisation between them: medians over the loops."""

    per_forward_us: float  # GPU clock: first forward's start to last forward's end, over n
    cpu_us: float  # host clock: the time the CPU needed to issue one forward
    calls: int
    p20_us: float | None = None  # per_forward_us's spread over the loops
    p80_us: float | None = None
    loops: int = 1


# Loops run one after another for about half a second, and the median counts: where the CPU sets the pace, the host's
# own state does too. On an H100 machine here (a KVM guest, 16 vCPUs) the CPU's time to issue a captured decode
# forward flipped between about 11 and 17 µs in windows of 0.2 s to a few seconds (40 samples over 10 s, one process),
# and two runs of the benchmark that took five loops in a row (7 ms) read 22.8 and 14.1 µs per forward. Half a second
# steadies the figure within a state, not across states: the p20-p80 shows when it straddled two. Loops are not spaced
# by sleeping: after a 50 ms sleep the first forwards of a loop are slow (16-forward loops read 34.5 µs a forward).
LOOP_SECONDS = 0.5
MIN_LOOPS, MAX_LOOPS = 5, 1000


def back_to_back(forward: Callable, inputs: Sequence[torch.Tensor], calls: int, seconds: float = LOOP_SECONDS,
                 min_loops: int = MIN_LOOPS, warm: bool = False) -> BackToBack:
    """`calls` forwards in a row, as a decode loop issues them; loops of them for `seconds` (at least `min_loops`),
    the medians counting. With `warm`, each loop first issues one forward it does not time, so that the timed ones
    start as a loop's later steps do, behind the GPU's work of the one before (a step of tens of ms runs 2 to a
    loop: timed from an idle GPU, the first step's CPU work overlapped nothing, and lesson 12's fix of its `.item()`
    measured about half of what it saves a running loop).

    Events before the first and after the last call measure the whole loop on the GPU: if the CPU issues a
    forward faster than the GPU runs it, the GPU never waits and this is the GPU time (with a warm L2: nothing
    flushes it between calls); if not, the GPU idles between kernels and this is the CPU's pace. The host
    clock around the same loop says which: it is what issuing one forward costs the CPU.
    """
    args = [inputs[i % len(inputs)] for i in range(calls)]
    per_forward, cpu = [], []
    end_by = time.perf_counter() + seconds
    while len(per_forward) < min_loops or (time.perf_counter() < end_by and len(per_forward) < MAX_LOOPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        if warm:
            forward(args[-1])
        start.record()
        t0 = time.perf_counter()
        for x in args:
            forward(x)
        t1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize()
        per_forward.append(start.elapsed_time(end) * 1e3 / calls)
        cpu.append((t1 - t0) * 1e6 / calls)
    return BackToBack(percentile(per_forward, 50), percentile(cpu, 50), calls,
                      percentile(per_forward, 20), percentile(per_forward, 80), len(per_forward))


@dataclass(frozen=True)
class LoopBusy:
    """Forwards back to back with CUDA events around each one: medians over the loops."""

    per_forward_us: float  # the loop's period: first forward's start to last forward's end, over n
    busy_us: float  # of it, the GPU inside a forward: from its start event to its end event, summed, over n


def busy_in_loop(forward: Callable, inputs: Sequence[torch.Tensor], calls: int, loops: int = MIN_LOOPS) -> LoopBusy:
    """`back_to_back`'s loop with an event before and after every forward: does the GPU wait for the CPU?

    Where the CPU issues ahead of the GPU, a forward's start event is reached the moment the previous forward
    ends, and the forwards' times add up to the loop's; where the CPU is late, the GPU idles between a forward's
    end and the next one's start. Both figures come from the same loop, at the same clocks and with the same L2,
    which `gpu_timing` is not: it flushes the L2 and leaves the GPU idle between calls, and a GPU at its power
    limit clocks higher after idling (the H200's fused forward, post's shape: 167 µs there at 1,975 MHz, 184 µs a
    forward back to back at about 1,740 MHz with the CPU issuing each in 40-68 µs; docs/launch-cost.md). A wait
    inside a forward, between its own kernels, counts as busy here: the figure is a lower bound on the waiting.
    """
    args = [inputs[i % len(inputs)] for i in range(calls)]
    periods, busy = [], []
    for _ in range(loops):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in args]
        torch.cuda.synchronize()
        for (start, end), x in zip(events, args):
            start.record()
            forward(x)
            end.record()
        torch.cuda.synchronize()
        periods.append(events[0][0].elapsed_time(events[-1][1]) * 1e3 / calls)
        busy.append(sum(start.elapsed_time(end) for start, end in events) * 1e3 / calls)
    return LoopBusy(percentile(periods, 50), percentile(busy, 50))
