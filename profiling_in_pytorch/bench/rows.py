"""One row of results, one variant at one shape: the JSON's `results`, the CSV's lines, the table's rows.

A field stays None where the run did not measure it: a skipped, failed or WRONG variant is not timed, and on a
CPU there are no kernels, launches, loop or GPU memory to count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profiling_in_pytorch.bench.shapes import Shape


@dataclass
class Row:
    shape: str
    batch: int
    seq: int
    dim: int
    hidden: int
    variant: str
    status: str = "ok"  # ok | WRONG | failed | skipped
    reason: str | None = None
    first_call_s: float | None = None  # compile, autotune, JIT: whatever the first call pays for
    # Correct first: ‖out − ref‖ / ‖ref‖ against fp32, and the dtype's tolerance (profiling_in_pytorch/mlp/accuracy.py); in
    # training mode the largest of the output's and the gradients' errors.
    rel_error: float | None = None
    tolerance: float | None = None
    # Time per forward: the median and spread (GPU time with L2 flushed; CPU time on a CPU).
    time_us: float | None = None
    time_p20_us: float | None = None
    time_p80_us: float | None = None
    samples: int | None = None
    speedup: float | None = None  # eager's time_us / this one's
    # Against the hardware: the ceilings measured in the same run (above 1 when a ceiling was measured low).
    tflops: float | None = None
    matmul_share: float | None = None  # tflops / the measured GEMM rate (an FP8 variant's: the FP8 GEMM's)
    fp8: bool = False  # its GEMMs run in FP8
    roofline_share: float | None = None  # the shape's floor (compute or memory) / time_us; forward only
    # Back to back, as a decode loop issues forwards (GPU only).
    loop_us: float | None = None  # per forward, the median of `loops` loops run for about half a second
    loop_p20_us: float | None = None
    loop_p80_us: float | None = None
    loops: int | None = None
    loop_speedup: float | None = None
    cpu_us: float | None = None  # CPU time to issue one forward
    # The same loop with events around each forward (timers.busy_in_loop): its period, and of it the GPU's time
    # inside forwards; the rest the GPU waited for the CPU.
    busy_loop_us: float | None = None
    busy_in_loop_us: float | None = None
    # From a short profile (GPU only).
    gpu_busy_us: float | None = None  # per forward
    gpu_busy_fraction: float | None = None  # gpu_busy_us / loop_us
    kernels: float | None = None
    launches: float | None = None
    paced_by: str | None = None  # "CPU" (launch-bound) or "GPU": profiling_in_pytorch/bench/pace.py
    peak_mib: float | None = None
    # Training mode (--train): time_us is a forward and a backward; what the forward keeps for the backward
    # (profiling_in_pytorch/mlp/saved.py: x and the activations, weights left out) and the error of each gradient.
    saved_bytes: int | None = None
    saved: str | None = None  # SavedForBackward.describe(): 'x [8192, 768] + 4 × [8192, 3072]'
    grad_errors: dict = field(default_factory=dict)  # "x", "gate_proj.weight", ... -> relative error
    kernel_names: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def add_speedups(rows: list[Row]) -> None:
    """Against eager at the same shape: >1 is faster."""
    eager = {r.shape: r for r in rows if r.variant == "eager" and r.status == "ok"}
    for row in rows:
        base = eager.get(row.shape)
        if base is None or row.status != "ok":
            continue
        row.speedup = base.time_us / row.time_us
        if base.loop_us and row.loop_us:
            row.loop_speedup = base.loop_us / row.loop_us


def add_hardware_shares(rows: list[Row], shapes: list[Shape], ceilings, element_size: int, train: bool) -> None:
    """Each timed row against the ceilings (`ceilings.Ceilings`): its TFLOP/s over the GEMM's rate, and (forward
    only) the shape's floor over its time. Computed again whenever a GEMM burst raises the ceiling."""
    by_name = {shape.name: shape for shape in shapes}
    for row in rows:
        if row.tflops is None:
            continue
        fp8 = row.fp8 and bool(ceilings.fp8_matmul_tflops)  # an FP8 variant, and the FP8 rate measured
        row.matmul_share = row.tflops / (ceilings.fp8_matmul_tflops if fp8 else ceilings.matmul_tflops)
        if not train:
            shape = by_name[row.shape]
            min_bytes = shape.min_bytes(element_size, weight_size=1 if fp8 else None)
            row.roofline_share = ceilings.floor_us(shape.flops, min_bytes, fp8=fp8) / row.time_us
