"""How long a forward takes: timers for a GPU and a CPU, forwards back to back, and the machine's two ceilings.

    gpu_timing        how long does one forward keep the GPU busy?   CUDA events around each call, L2 flushed
    cpu_timing        the same on a CPU                              time.perf_counter around each call
    back_to_back      how fast do forwards go when called in a loop? events around n calls, and the CPU's share
    busy_in_loop      and does the GPU wait for the CPU in it?       the same loop, events around each forward
    measure_ceilings  how fast can this machine multiply and copy?   a large GEMM and a large copy, same run
    matmul_burst      and at the clocks a variant ran at?            the GEMM again; the best burst counts
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import torch

from profiling_in_pytorch.lesson.device import require_fit


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
                 min_loops: int = MIN_LOOPS) -> BackToBack:
    """`calls` forwards in a row, as a decode loop issues them; loops of them for `seconds` (at least `min_loops`),
    the medians counting.

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


# --- the machine's ceilings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ceilings:
    """What this machine reaches, measured in this run: the rate of a large GEMM and of a large copy.

    The GEMM's rate is the best of its bursts (`matmul_bursts`, TFLOP/s each, in the order measured): one before
    the variants, then one right after each variant timed, at the clocks that variant ran at.
    """

    matmul_tflops: float
    matmul_size: int
    copy_gb_per_s: float
    copy_bytes: int  # bytes read plus bytes written per copy
    matmul_bursts: tuple[float, ...] = ()
    # The same in FP8 (e4m3 in, bf16 out, torch._scaled_mm), where the run has FP8 variants and the GPU FP8 units.
    fp8_matmul_tflops: float | None = None
    fp8_bursts: tuple[float, ...] = ()

    def floor_us(self, flops: float, min_bytes: float, fp8: bool = False) -> float:
        """The fastest a forward can be: its arithmetic at the GEMM rate (the FP8 one for an FP8 forward, where
        measured), or its traffic at copy speed."""
        rate = self.fp8_matmul_tflops if fp8 and self.fp8_matmul_tflops else self.matmul_tflops
        return max(flops / (rate * 1e6), min_bytes / (self.copy_gb_per_s * 1e3))

    def limited_by(self, flops: float, min_bytes: float) -> str:
        return "compute" if flops / (self.matmul_tflops * 1e6) >= min_bytes / (self.copy_gb_per_s * 1e3) else "memory"

    def with_matmul_burst(self, tflops: float) -> "Ceilings":
        """One burst more: the GEMM ceiling is the best of them all."""
        return replace(self, matmul_tflops=max(self.matmul_tflops, tflops), matmul_bursts=(*self.matmul_bursts, tflops))

    def with_fp8_burst(self, tflops: float) -> "Ceilings":
        return replace(self, fp8_matmul_tflops=max(self.fp8_matmul_tflops or 0.0, tflops),
                       fp8_bursts=(*self.fp8_bursts, tflops))


CEILING_BURST_MS = 40


def matmul_size(device: torch.device, dtype: torch.dtype) -> int:
    """The ceiling's square GEMM: 8192³ on a GPU, 1024³ on a CPU (512³ in half precision, slow there)."""
    return 8192 if device.type == "cuda" else (1024 if dtype == torch.float32 else 512)


def matmul_burst(device: torch.device, dtype: torch.dtype, warmup_ms: int, rep_ms: int) -> float:
    """The GEMM's rate in one short burst, TFLOP/s, at the fast end of its timings (the 20th percentile).

    Random data, never zeros: a GEMM on zeros runs measurably faster than on real values. Short, because under
    sustained load a GPU at its power limit clocks down (an H200 at 700 W: about 800 TFLOP/s for the first tens of
    ms of 8192³ GEMMs, about 680 after a second). One burst can still read low (clocks caught on their way up, a
    busy moment): the ceiling is the best of several, one right after each variant, at the clocks it ran at.
    """
    n = matmul_size(device, dtype)
    timing = gpu_timing if device.type == "cuda" else cpu_timing
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    matmul_us = timing(functools.partial(torch.mm, a, b), warmup_ms, min(rep_ms, CEILING_BURST_MS)).p20_us
    del a, b
    return 2 * n**3 / (matmul_us * 1e6)


def fp8_matmul_burst(device: torch.device, warmup_ms: int, rep_ms: int) -> float:
    """`matmul_burst` in FP8: e4m3 operands, one scale each, bf16 out (torch._scaled_mm, cuBLAS's nvjet `qq`
    kernel), 8192³. Measured on an H100 (torch 2.11): 1,250 TFLOP/s through triton's do_bench, bf16's 752."""
    n = matmul_size(device, torch.bfloat16)
    a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants it
    one = torch.ones((), device=device)
    call = functools.partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    matmul_us = gpu_timing(call, warmup_ms, min(rep_ms, CEILING_BURST_MS)).p20_us
    del a, b
    return 2 * n**3 / (matmul_us * 1e6)


def measure_ceilings(device: torch.device, dtype: torch.dtype, warmup_ms: int, rep_ms: int) -> Ceilings:
    """A first GEMM burst (matmul_burst) in the run's dtype, and a copy (1 GiB on a GPU, 64 MiB on a CPU).

    A ceiling is what the machine reaches, so the copy too is taken at the fast end of its timings (the 20th
    percentile), not the median.
    """
    on_gpu = device.type == "cuda"
    n = matmul_size(device, dtype)
    nbytes = (1 << 30) if on_gpu else (64 << 20)
    require_fit(device, max(3 * n * n * dtype.itemsize, 2 * nbytes), "the ceilings' GEMM and copy")
    matmul_tflops = matmul_burst(device, dtype, warmup_ms, rep_ms)
    src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    copy_us = (gpu_timing if on_gpu else cpu_timing)(functools.partial(dst.copy_, src), warmup_ms, rep_ms).p20_us
    del src, dst
    if on_gpu:
        torch.cuda.empty_cache()
    return Ceilings(
        matmul_tflops=matmul_tflops,
        matmul_size=n,
        copy_gb_per_s=2 * nbytes / (copy_us * 1e3),
        copy_bytes=2 * nbytes,
        matmul_bursts=(matmul_tflops,),
    )
