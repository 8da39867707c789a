"""The lesson's step timed without the profiler, before it is profiled: what the profiler's figures are read against.

The profiler adds CPU time to every op it records, so the profiled step is not the step the code runs. Measured on an
H100 (torch 2.11): the llama-1b preset at batch 4 × 256, eager, 9.8 ms a forward unprofiled and 22.7 ms under the
lessons' profiler with record_shapes. `time_unprofiled(step, run)` gives the three figures a verdict weighs
(trace_report/observer.py says what each is), medians, within a time budget:

    on a GPU   1. one step, unseen: compiles, allocates, tunes (none of it timed)
               2. held steps: the GPU spins (`torch.cuda._sleep`) while the CPU issues one step, so that the step's
                  work is all queued before the GPU reaches it: the host's time for step() to return is the CPU's
                  issue time, CUDA events around the step the GPU's time alone (as timers.gpu_timing holds the
                  GPU, without its L2 flush: the profiled steps run with a warm L2)
                  A step of more launches than the launch queue holds (about a thousand) fills it while the GPU
                  spins, and step() returns only once the GPU has drained it: the llama-1b preset's forward, 34.5
                  ms "to issue" a 13.2 ms step on an H100. Where a held step's return outlasts 90% of the hold, the
                  issue time is taken from the step issued to an idle GPU instead (step 1's two calls): it returns
                  when its last launch is queued, the GPU still working, so no later than the GPU's time, and the
                  line printed says the launch queue filled.
               3. steps back to back, no synchronize inside, as the profile runs them (timers.back_to_back),
                  after one untimed step, so that the first timed one starts behind the GPU's work as the profile's
                  steps do: the loop's period, the wall time per step
    on a CPU   the step runs on the calling thread: its time is all three (there is no GPU time)

Budgets: HELD_S and LOOP_S on a GPU (at most MAX_REPEATS held steps, at least MIN_REPEATS), CPU_S on a CPU (at least
one step, three when they fit; an eager step longer than CPU_S is timed by its second call alone, warm). With `barrier` (a distributed lesson), every rank runs the same fixed counts, each
held step after a barrier: a budget read off each rank's own clock would give the ranks different counts, and a step
holding a collective would then wait forever for the rank that stopped.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from profiling_in_pytorch.timers import back_to_back, percentile, spin_cycles_per_us
from profiling_in_pytorch.lesson.runs import Run
from profiling_in_pytorch.lesson.terminal import console
from trace_report.observer import Unprofiled
from trace_report.pace import _us

HELD_S, LOOP_S, CPU_S = 0.4, 0.3, 0.5
MIN_REPEATS, MAX_REPEATS = 3, 50
RANKED_REPEATS = {"cuda": 10, "cpu": 3}  # with a barrier: fixed counts, the same on every rank
RANKED_LOOP_CALLS = 4
LOOP_TARGET_US = 10_000  # a back-to-back loop runs about this long: 2 to LOOP_CALLS steps
LOOP_CALLS = 20
HOLD_MARGIN, HOLD_EXTRA_US = 1.5, 20.0  # the GPU spins this much longer than the CPU takes to issue a step
QUEUE_FULL_SHARE = 0.9  # a held step that returns this late into the hold waited on a full launch queue


def time_unprofiled(step: Callable[[], object], run: Run, *, barrier: Callable[[], object] | None = None) -> Unprofiled:
    """Time `step()` without the profiler (medians); print one line; return the figures for `lesson.save`."""
    with console.status("timing the step without the profiler"):
        result = measure_step(step, run.device, barrier=barrier, compiled=run.compiled)
    gpu_text = f", the GPU working {_us(result.gpu_us_per_step)}" if result.gpu_us_per_step is not None else ""
    console.print(f"without the profiler: {_us(result.wall_us_per_step)} a step, the CPU issuing it in "
                  f"{_us(result.cpu_issue_us_per_step)}{gpu_text} (medians of {result.repeats}, timed in "
                  f"{result.timing_s:.1f} s)", soft_wrap=True)
    if result.launch_queue_full:
        console.print("  the step's launches outnumber what the launch queue holds: the CPU's time is when the step "
                      "returned to an idle GPU, its last launch queued, the GPU still at work (at most the GPU's time)",
                      soft_wrap=True)
    return result


def measure_step(step: Callable[[], object], device: torch.device, *, barrier: Callable[[], object] | None = None,
                 compiled: bool = False) -> Unprofiled:
    """The three figures of `step()` on `device`, as the module's docstring takes them; nothing printed. Under a
    profiler (benchmark_profiler_options.py) the same figures are the profiled step's."""
    start = time.perf_counter()
    queue_full = False
    if device.type == "cuda":
        wall, issue, gpu, repeats, queue_full = _on_gpu(step, barrier)
    else:
        wall, issue, gpu, repeats = _on_cpu(step, barrier, compiled=compiled)
    return Unprofiled(device.type, repeats, wall, issue, gpu, time.perf_counter() - start, queue_full)


def _on_gpu(step: Callable[[], object], barrier) -> tuple[float, float, float, int]:
    fixed = RANKED_REPEATS["cuda"] if barrier is not None else None
    step()  # compiles, allocates, tunes: not timed
    torch.cuda.synchronize()
    first = []
    for _ in range(2):  # the issue time the GPU's hold must outlast
        start = time.perf_counter()
        step()
        first.append(time.perf_counter() - start)
        torch.cuda.synchronize()
    hold_us = HOLD_MARGIN * percentile(first, 50) * 1e6 + HOLD_EXTRA_US
    cycles = int(spin_cycles_per_us() * hold_us)
    issue, events = [], []
    end_by = time.perf_counter() + HELD_S
    while _more(len(issue), fixed, end_by):
        if barrier is not None:
            barrier()
        torch.cuda.synchronize()
        before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        before.record()
        start = time.perf_counter()
        step()
        issue.append((time.perf_counter() - start) * 1e6)
        after.record()
        torch.cuda.synchronize()
        events.append((before, after))
    gpu = [before.elapsed_time(after) * 1e3 for before, after in events]
    issue_us, gpu_us = percentile(issue, 50), percentile(gpu, 50)
    queue_full = issue_us >= QUEUE_FULL_SHARE * hold_us
    if queue_full:  # the CPU waited for the spinning GPU to take launches off a full queue: not its own time
        issue_us = min(issue_us, min(first) * 1e6)
    calls = max(2, min(LOOP_CALLS, int(LOOP_TARGET_US / max(issue_us, gpu_us, 1.0))))
    if barrier is not None:
        calls = RANKED_LOOP_CALLS  # not from this rank's own medians: every rank must call the step as often
        barrier()
    loop = back_to_back(lambda _: step(), [None], calls, seconds=0.0 if fixed else LOOP_S,
                        min_loops=fixed or MIN_REPEATS, warm=True)
    return loop.per_forward_us, issue_us, gpu_us, len(issue), queue_full


def _on_cpu(step: Callable[[], object], barrier, *, compiled: bool) -> tuple[float, float, None, int]:
    fixed = RANKED_REPEATS["cpu"] if barrier is not None else None
    start = time.perf_counter()
    step()  # compiles, allocates
    first_us = (time.perf_counter() - start) * 1e6
    if fixed is None and not compiled and first_us > CPU_S * 1e6:
        # An eager step of seconds (the post's MLP on a CPU: 0.5-1.6 s here) is timed once, by its second call: the
        # first also pays the first touch of its tensors' pages (lesson 03 on 2 cores: 881 ms, against 649 ms a
        # step under the profiler), and a third would add as much again to the lesson's run.
        start = time.perf_counter()
        step()
        second_us = (time.perf_counter() - start) * 1e6
        return second_us, second_us, None, 1
    samples = []
    end_by = time.perf_counter() + CPU_S
    while not samples or _more(len(samples), fixed, end_by, at_least=MIN_REPEATS if _fits(samples) else 1):
        if barrier is not None:
            barrier()
        start = time.perf_counter()
        step()
        samples.append((time.perf_counter() - start) * 1e6)
    median = percentile(samples, 50)
    return median, median, None, len(samples)


def _more(done: int, fixed: int | None, end_by: float, at_least: int = MIN_REPEATS) -> bool:
    """Another repeat? The fixed count when there is one, else at least `at_least`, then while the budget lasts."""
    if fixed is not None:
        return done < fixed
    return done < at_least or (time.perf_counter() < end_by and done < MAX_REPEATS)


def _fits(samples: list[float]) -> bool:
    """Do MIN_REPEATS steps of the first one's length fit the CPU budget? (A step of seconds is timed once.)"""
    return samples[0] * MIN_REPEATS <= CPU_S * 1e6
