"""Training mode (`benchmark_mlp.py --train`): one variant at one shape, a forward and a backward per call.

A training call is what a training step does around its optimizer:

    zero the gradients (set to None)   the weights' and the input's
    y = forward(x)                     x requires grad, so the backward computes x's gradient too
    y.backward(dy)                     a fixed upstream gradient, made once: no loss kernels in the timing

In the order `measure()` follows for a forward: the first call on its own (compiling the forward and the
backward), warm-up calls and the peak memory of one call, the check against fp32 (the output, x's gradient and
each weight's, by `profiling_in_pytorch.mlp.accuracy.check_backward`), the timing (the same timers), then what the forward
saves for its backward (`profiling_in_pytorch.mlp.saved`), last, so that its hooks run after every timed call. A variant that
cannot train here is `skipped`, one whose output or a gradient disagrees with fp32 is `WRONG` and not timed, one
that raises `failed`. A variant trains as a module: its build returns the nn.Module whose weights get the
gradients (the eager module itself, a compiled module sharing its weights, Liger's layer or FusedGeGLUMLP holding
copies), named as the eager module names them.
"""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable

import torch
from torch import nn

from profiling_in_pytorch.bench.measure import (
    LOOP_CALLS,
    LOOP_TARGET_US,
    WARM_CALLS,
    Settings,
    failure_line,
    peak_memory_mib,
    rotating_inputs,
)
from profiling_in_pytorch.bench.rows import Row
from profiling_in_pytorch.bench.shapes import Shape
from profiling_in_pytorch.timers import back_to_back, cpu_timing, gpu_timing
from profiling_in_pytorch.bench.variants import Variant
from trace_report.errors import is_out_of_memory
from profiling_in_pytorch.lesson.profiling import synchronize
from profiling_in_pytorch.mlp.accuracy import Accuracy, check_backward
from profiling_in_pytorch.mlp.saved import saved_for_backward


def warm_autograd(device: torch.device) -> None:
    """One tiny backward from an explicit gradient before anything is timed: torch imports modules on the first
    such backward (sympy, through torch.fx.experimental.symbolic_shapes: about 2 s on a 2-core machine), a cost
    of the process that no variant's first call should carry."""
    w = torch.ones(2, device=device, requires_grad=True)
    y = w * 2
    y.backward(torch.ones_like(y))


def judge(judged: dict[str, Accuracy]) -> tuple[float, str | None]:
    """The largest error of all (`check_backward`'s "output", "x", each weight), and what is wrong, if anything."""
    worst = max(accuracy.error for accuracy in judged.values())
    wrong = [f"{'output' if name == 'output' else f'gradient of {name}'}: {accuracy.describe()}"
             for name, accuracy in judged.items() if not accuracy.ok]
    return worst, "; ".join(wrong) or None


def measure_training(
    variant: Variant,
    shape: Shape,
    mlp: nn.Module,
    settings: Settings,
    *,
    x: torch.Tensor,
    dy: torch.Tensor,
    status: Callable[[str], object],
) -> Row:
    """One variant built from `mlp` (its weights requiring grad), checked on `x` with the upstream gradient `dy`
    against `mlp` run forward and backward in fp32, then timed, forward and backward."""
    row = Row(shape.name, shape.batch, shape.seq, shape.dim, shape.hidden, variant.name)
    device, on_gpu = settings.device, settings.device.type == "cuda"
    why_not = variant.inference_only or variant.unavailable(device, settings.dtype)
    if why_not:
        row.status, row.reason = "skipped", why_not
        return row
    module = None
    weights: list[torch.Tensor] = []
    inputs: list[torch.Tensor] = []
    try:
        if variant.compiles:
            torch._dynamo.reset()  # a clean cache: this compile is timed from scratch, not reused
        module = variant.build(mlp)
        if not isinstance(module, nn.Module):
            raise TypeError("trains only as an nn.Module holding the weights it trains (its build returned "
                            f"{type(module).__name__})")
        module.requires_grad_(True)
        weights = list(module.parameters())
        inputs = [t.requires_grad_() for t in rotating_inputs(shape, device, settings.dtype)]
        cycle = itertools.count()

        def zero_grads(x_in: torch.Tensor) -> None:
            for w in weights:
                w.grad = None
            x_in.grad = None

        def train_call(x_in: torch.Tensor) -> None:
            zero_grads(x_in)
            module(x_in).backward(dy)

        def next_train_call() -> None:
            train_call(inputs[next(cycle) % len(inputs)])

        # 1. The first call, on its own: compiling the forward and the backward, autotuning, Triton's JIT.
        status(f"{shape.name} · {variant.name}: first training call" + (" (compiling)" if variant.compiles else ""))
        start = time.perf_counter()
        train_call(inputs[0])
        synchronize(device)
        row.first_call_s = time.perf_counter() - start

        # 2. Warm-up, then the peak memory of one call above what was allocated before it (gradients cleared).
        for i in range(1, 1 + WARM_CALLS):
            train_call(inputs[i % len(inputs)])
        if on_gpu:
            probe = inputs[0]
            zero_grads(probe)
            row.peak_mib = peak_memory_mib(lambda: module(probe).backward(dy))

        # 3. Correct first: the output and every gradient, on an input it has not seen, against fp32.
        status(f"{shape.name} · {variant.name}: checking output and gradients against fp32")
        judged = check_backward(module, mlp, x, dy)
        row.rel_error, problem = judge(judged)
        row.tolerance = judged["output"].tolerance
        row.grad_errors = {name: accuracy.error for name, accuracy in judged.items() if name != "output"}
        if problem:
            row.status, row.reason = "WRONG", problem
            return row

        # 4. Time per training call: CUDA events with L2 flushed on a GPU, perf_counter on a CPU.
        status(f"{shape.name} · {variant.name}: timing forward + backward")
        timer = gpu_timing if on_gpu else cpu_timing
        timing = timer(next_train_call, settings.warmup_ms, settings.rep_ms)
        row.time_us, row.time_p20_us, row.time_p80_us = timing.median_us, timing.p20_us, timing.p80_us
        row.samples = timing.samples or None
        row.tflops = shape.train_flops / (timing.median_us * 1e6)
        if on_gpu:  # and back to back, as a training loop issues them: what a call costs the CPU to issue
            status(f"{shape.name} · {variant.name}: timing forward + backward back to back")
            calls = max(10, min(LOOP_CALLS, int(LOOP_TARGET_US / max(timing.median_us, 1.0))))
            loop = back_to_back(train_call, inputs, calls)
            row.loop_us, row.cpu_us = loop.per_forward_us, loop.cpu_us
            row.loop_p20_us, row.loop_p80_us, row.loops = loop.p20_us, loop.p80_us, loop.loops

        # 5. What the forward keeps for the backward, counted by autograd's saved-tensor hooks.
        status(f"{shape.name} · {variant.name}: counting what the forward saves")
        zero_grads(inputs[0])
        out, saved = saved_for_backward(module, inputs[0], module)
        out.backward(dy)  # releases what was saved
        row.saved_bytes, row.saved = saved.activation_bytes, saved.describe()
    except Exception as err:  # noqa: BLE001 - one variant failing (a kernel without a backward) is a result
        if is_out_of_memory(err):
            raise  # not the variant's failure but the shape's: the run ends in one line (errors.exits_cleanly)
        row.status, row.reason = "failed", failure_line(err)
    finally:
        for tensor in (*weights, *inputs):
            tensor.grad = None  # the eager module's weights are every variant's: leave them without gradients
        module = None  # the variant's modules and compiled graphs go now, not with the next variant
        weights.clear()
        inputs.clear()
        gc.collect()
        if on_gpu:
            torch.cuda.empty_cache()
    return row
