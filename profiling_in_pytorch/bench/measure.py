"""Everything a run learns about one variant at one shape, in the order `benchmark_mlp.py`'s docstring lists:

the first call, warm-up and peak memory, the check against fp32, GPU time with L2 flushed, forwards back to back
and the same loop timed forward by forward (on a CPU: the first call, the check and a CPU timer); then, once
every variant of every shape is timed, kernels per forward (`count_per_forward`): after a profiler session the
process issues ops more slowly, so no timing may follow one. Measured on an H100 (torch 2.11): one profile of 20
forwards took the fused module's CPU time per forward in a loop from 39.3 to 51.4 µs and a captured graph's (a copy,
then a replay) from 11.2 to 15.6 µs; a bare replay, no ATen op, stayed at 5.6 µs. A variant that cannot run here is
`skipped`, one that disagrees with fp32 is `WRONG` and not timed, one that raises is `failed`: each is a row.
"""

from __future__ import annotations

import gc
import itertools
import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from profiling_in_pytorch.bench.kernels import count_kernels
from profiling_in_pytorch.bench.pace import paced_by
from profiling_in_pytorch.bench.rows import Row
from profiling_in_pytorch.bench.shapes import Shape
from profiling_in_pytorch.ceilings import Ceilings
from profiling_in_pytorch.timers import back_to_back, busy_in_loop, cpu_timing, gpu_timing
from profiling_in_pytorch.bench.variants import Variant
from trace_report.errors import UsageError, first_line, is_out_of_memory
from profiling_in_pytorch.lesson.profiling import synchronize
from profiling_in_pytorch.mlp.accuracy import check_output


@dataclass
class Settings:
    device: torch.device
    dtype: torch.dtype
    warmup_ms: int
    rep_ms: int
    ceilings: Ceilings | None = None
    train: bool = False  # --train: forward and backward per call (profiling_in_pytorch/bench/training.py)


WARM_CALLS = 3  # after the first call: CUDA graph trees record on the second call and replay from the third
ROTATE_BYTES = 256 << 20  # enough distinct input buffers to exceed any L2 when a loop cycles through them
LOOP_TARGET_US = 10_000  # one back-to-back loop runs about this long, in at most LOOP_CALLS forwards:
LOOP_CALLS = 100  # a few hundred launches, well under the ~1000 a stream queues before the CPU has to wait


def rotating_inputs(shape: Shape, device, dtype) -> list[torch.Tensor]:
    size = shape.tokens * shape.dim * torch.tensor([], dtype=dtype).element_size()
    count = max(2, min(16, math.ceil(ROTATE_BYTES / size))) if device.type == "cuda" else 2
    return [torch.randn(shape.batch, shape.seq, shape.dim, device=device, dtype=dtype) for _ in range(count)]


def measure(
    variant: Variant,
    shape: Shape,
    mlp: torch.nn.Module,
    settings: Settings,
    *,
    x: torch.Tensor,
    want: torch.Tensor,
    status: Callable[[str], object],
) -> Row:
    """One variant built from `mlp`, checked on `x` against `want` (fp32), then timed; `status` shows each step."""
    row = Row(shape.name, shape.batch, shape.seq, shape.dim, shape.hidden, variant.name, fp8=variant.fp8)
    device, on_gpu = settings.device, settings.device.type == "cuda"
    why_not = variant.unavailable(device, settings.dtype)
    if why_not:
        row.status, row.reason = "skipped", why_not
        return row
    forward = None
    try:
        if variant.compiles:
            torch._dynamo.reset()  # a clean cache: this compile is timed from scratch, not reused
        forward = variant.build(mlp)
        inputs = rotating_inputs(shape, device, settings.dtype)
        cycle = itertools.count()

        def next_forward():
            return forward(inputs[next(cycle) % len(inputs)])

        with torch.no_grad():
            # 1. The first call, on its own: compilation, autotuning, Triton's JIT.
            status(f"{shape.name} · {variant.name}: first call" + (" (compiling)" if variant.compiles else ""))
            start = time.perf_counter()
            forward(inputs[0])
            synchronize(device)
            row.first_call_s = time.perf_counter() - start

            # 2. Warm-up and peak memory (reduce-overhead records its CUDA graph during these calls).
            def warm():
                for i in range(1, 1 + WARM_CALLS):
                    forward(inputs[i % len(inputs)])

            if on_gpu:
                row.peak_mib = peak_memory_mib(warm)
            else:
                warm()

            # 3. Correct first: on inputs it has not seen, and from the path we time (a graph replay, if any).
            status(f"{shape.name} · {variant.name}: checking against fp32")
            got = forward(x).clone()  # clone: a CUDA graph's output is overwritten by its next replay
            accuracy = check_output(got, want, settings.dtype, variant.tolerance)
            row.rel_error, row.tolerance = accuracy.error, accuracy.tolerance
            del got
            if not accuracy.ok:
                row.status, row.reason = "WRONG", accuracy.describe()
                return row

            if on_gpu:
                # 4. GPU time, L2 flushed before each call.
                status(f"{shape.name} · {variant.name}: timing (CUDA events)")
                timing = gpu_timing(next_forward, settings.warmup_ms, settings.rep_ms)

                # 5. Back to back, with a warm L2 and the CPU in the loop.
                status(f"{shape.name} · {variant.name}: timing back to back")
                calls = max(10, min(LOOP_CALLS, int(LOOP_TARGET_US / max(timing.median_us, 1.0))))
                loop = back_to_back(forward, inputs, calls)
                row.loop_us, row.cpu_us = loop.per_forward_us, loop.cpu_us
                row.loop_p20_us, row.loop_p80_us, row.loops = loop.p20_us, loop.p80_us, loop.loops
                # The same loop with an event around each forward: whether the GPU waited for the CPU in it.
                busy = busy_in_loop(forward, inputs, calls)
                row.busy_loop_us, row.busy_in_loop_us = busy.per_forward_us, busy.busy_us
            else:
                # On a CPU the forward runs on the thread that calls it: its time is the CPU's time.
                status(f"{shape.name} · {variant.name}: timing (perf_counter)")
                timing = cpu_timing(next_forward, settings.warmup_ms, settings.rep_ms)

        row.time_us, row.time_p20_us, row.time_p80_us = timing.median_us, timing.p20_us, timing.p80_us
        row.samples = timing.samples or None
        row.tflops = shape.flops / (timing.median_us * 1e6)  # its shares of the ceilings: rows.add_hardware_shares
    except Exception as err:  # noqa: BLE001 - one variant failing (Liger missing, a compile error) is a result
        if is_out_of_memory(err):
            raise  # not the variant's failure but the shape's: the run ends in one line (errors.exits_cleanly)
        row.status, row.reason = "failed", failure_line(err)
    finally:
        forward = None  # the module (a compiled graph, its CUDA graphs) goes before the collection below
        gc.collect()
        if on_gpu:
            torch.cuda.empty_cache()
    return row


def count_per_forward(variant: Variant, shape: Shape, mlp: torch.nn.Module, settings: Settings, row: Row) -> None:
    """Kernels and launches per forward of a timed variant, from a short torch.profiler run, into `row`.

    Called after every timing of the run: the variant is built again (a compile hits Inductor's caches), called
    as `measure` calls it before timing (first call, warm-up: CUDA graph trees record on the second call), then
    profiled. If this fails the timings still count: the row gets a note.
    """
    forward = None
    try:
        if variant.compiles:
            torch._dynamo.reset()  # as measure() built it: one compile of this variant, not a recompile of another's
        forward = variant.build(mlp)
        inputs = rotating_inputs(shape, settings.device, settings.dtype)
        with torch.no_grad():
            for i in range(1 + WARM_CALLS):
                forward(inputs[i % len(inputs)])
            counts = count_kernels(forward, inputs)
        row.kernels, row.launches = counts.kernels, counts.launches
        row.gpu_busy_us, row.kernel_names = counts.gpu_busy_us, counts.names
        row.gpu_busy_fraction = min(1.0, counts.gpu_busy_us / row.loop_us)
        row.paced_by = paced_by(row.cpu_us, counts.gpu_busy_us, row.loop_us)
    except Exception as err:  # noqa: BLE001
        if is_out_of_memory(err):
            raise
        row.notes.append(f"no kernel counts: {failure_line(err)}")
    finally:
        forward = None
        gc.collect()
        torch.cuda.empty_cache()


def peak_memory_mib(run: Callable[[], object]) -> float:
    """The most memory allocated during `run()` beyond what was allocated before it (weights, inputs)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    run()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def failure_line(err: BaseException) -> str:
    """A failure as one line: the exception's type and first line (a UsageError's line is already for people)."""
    line = first_line(err)
    return line if isinstance(err, UsageError) or line == type(err).__name__ else f"{type(err).__name__}: {line}"
