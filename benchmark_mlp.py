"""Benchmark: every GeGLU MLP variant side by side, against eager and against the hardware.

The lessons read single kernels in traces. This script answers the questions that come after: which variant is
faster end to end, at my shape, on my GPU, and how far from what the hardware allows?

    uv run benchmark_mlp.py                                    # every variant, the three default shapes
    uv run benchmark_mlp.py --shapes decode,8x1:4096:11008     # presets or BATCHxSEQ:DIM:HIDDEN
    uv run benchmark_mlp.py --variants eager,compile,reduce-overhead --dtype fp16

The variants (all compute the post's `SimpleGeGLUMLP` forward with the same weights):

    eager            SimpleGeGLUMLP as written: 3 cuBLAS GEMMs, a GELU kernel, a multiply kernel
    compile          torch.compile, default mode: the GELU and multiply fused into one Triton kernel
    max-autotune     torch.compile(mode="max-autotune-no-cudagraphs"): Inductor also tunes Triton GEMMs
    reduce-overhead  torch.compile(mode="reduce-overhead"): the same kernels, replayed from a CUDA graph
    liger            Liger's LigerGEGLUMLP (loaded as 03_kernels_mlp.py loads it): a hand-written GeGLU kernel
    fused            FusedGeGLUMLP (04_fused_mlp.py): gate and up GEMM with the GeGLU in its epilogue, then down

Once per run, the ceilings: a large GEMM and a large copy, measured in this run, on this machine. Then for each
shape and variant, in this order (`measure()` follows it step by step):

1. The first call, timed on its own: compilation, autotuning and JIT happen here, never in the timed runs.
2. Warm-up forwards, and the peak memory they take (torch.cuda.max_memory_allocated above what was allocated).
3. Correct first: the output is compared with the same MLP in fp32. A variant that disagrees is WRONG, not timed.
4. GPU time per forward with CUDA events, L2 flushed and the CPU's issue time hidden: median, p20-p80.
5. Back to back: forwards in a loop, as a decode loop runs them, and what each costs the CPU to issue.
6. Kernels and launches per forward, from a short torch.profiler run read with `common/traces.py`.

Then a table per shape, a few sentences on who sets the pace (the CPU or the GPU), and the files: a JSON and a CSV
of every number, and a PNG of the speedups, in `--out` (default bench_results/).

Without a GPU, eager and compile run at small shapes with a CPU timer; the others are named with the reason.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import importlib
import importlib.metadata
import itertools
import math
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from common import bench
from common.cli import ArgumentParser, positive_int
from common.errors import UsageError, exits_cleanly
from common.files import writable_dir
from common.lesson.device import DTYPES, describe_device, dtype_name, pick_device, pick_dtype
from common.lesson.profiling import synchronize
from common.mlp import SimpleGeGLUMLP

# Not a terminal (CI logs, a remote run): rich would assume 80 columns and fold the table; give it room.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


# --------------------------------------------------------------------------------------------------------------
# Shapes: tokens = batch x seq rows through a dim -> hidden -> dim MLP
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    seq: int
    dim: int
    hidden: int

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    @property
    def flops(self) -> int:
        """Three GEMMs of tokens x dim x hidden, two FLOPs per multiply-add; the GELU and product are noise."""
        return 2 * self.tokens * self.dim * self.hidden * 3

    def min_bytes(self, element_size: int) -> int:
        """The least traffic any implementation needs: the three weights and x read once, the output written once."""
        return (3 * self.dim * self.hidden + 2 * self.tokens * self.dim) * element_size

    @property
    def spec(self) -> str:
        return f"{self.batch}x{self.seq}:{self.dim}:{self.hidden}"

    @property
    def title(self) -> str:
        return f"{self.name} · {self.batch}×{self.seq} tokens · {self.dim}→{self.hidden}"


PRESETS = {
    "decode": Shape("decode", 8, 1, 768, 3072),  # one new token for each of 8 sequences: where the CPU sets the pace
    "post": Shape("post", 64, 128, 768, 3072),  # the post's shape
    "7b": Shape("7B layer", 16, 512, 4096, 11008),  # a Llama-2-7B-sized MLP
    # On a CPU the post's shape takes seconds per forward; these keep a run to a minute or so.
    "prefill": Shape("prefill", 1, 128, 768, 3072),
}
DEFAULT_SHAPES = {"cuda": ("decode", "post", "7b"), "cpu": ("decode", "prefill")}
SHAPE_PATTERN = re.compile(r"^(\d+)x(\d+):(\d+):(\d+)$")


def parse_shapes(text: str) -> list[Shape]:
    """`decode,64x128:768:3072`: preset names or BATCHxSEQ:DIM:HIDDEN, comma-separated (an argparse type)."""
    shapes = []
    for item in (part.strip() for part in text.split(",")):
        if item.lower() in PRESETS:
            shapes.append(PRESETS[item.lower()])
            continue
        match = SHAPE_PATTERN.match(item)
        if not match:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not BATCHxSEQ:DIM:HIDDEN (e.g. 8x1:768:3072) or one of {', '.join(PRESETS)}"
            )
        sizes = [int(g) for g in match.groups()]
        if min(sizes) <= 0:
            raise argparse.ArgumentTypeError(f"{item!r}: every size must be a positive whole number")
        preset = next((p for p in PRESETS.values() if (p.batch, p.seq, p.dim, p.hidden) == tuple(sizes)), None)
        shapes.append(preset or Shape(item, *sizes))
    if len({s.name for s in shapes}) != len(shapes):
        raise argparse.ArgumentTypeError(f"{text!r} names a shape twice")
    return shapes


# --------------------------------------------------------------------------------------------------------------
# The variants. Each builds a forward callable from the eager module, so that all of them hold its weights.
# The registry is a plain dict: add an entry (in code, or in a test) and it is measured like the others.
# --------------------------------------------------------------------------------------------------------------
Forward = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[torch.nn.Module], Forward]
    # Why it cannot run here (device, dtype), or None when it can.
    unavailable: Callable[[torch.device, torch.dtype], "str | None"] = lambda device, dtype: None
    compiles: bool = False  # through torch.compile: start from a clean Dynamo cache
    per_call: str = ""  # what runs on the CPU at every call, besides launching kernels


def needs_cuda(why: str):
    return lambda device, dtype: None if device.type == "cuda" else f"needs CUDA ({why})"


def build_compiled(mode: str | None) -> Callable[[torch.nn.Module], Forward]:
    # dynamic=False: one static graph per shape, as a served model's fixed decode and prefill shapes get.
    return lambda mlp: torch.compile(mlp, mode=mode, dynamic=False)


def build_cuda_graphed(mlp: torch.nn.Module) -> Forward:
    graphed = torch.compile(mlp, mode="reduce-overhead", dynamic=False)

    def forward(x):
        # A new step: the graph may now overwrite the previous call's outputs (it reuses their memory).
        # Without this, CUDA graph trees cannot tell a new inference step from a second call in the same one.
        torch.compiler.cudagraph_mark_step_begin()
        return graphed(x)

    return forward


_liger: dict = {}  # the resolved layer (or why none), looked up once per run: the Hub probe costs seconds


def build_liger(mlp: torch.nn.Module) -> Forward:
    from common.mlp.liger import build_liger_geglu_mlp, require_runnable

    hidden, dim = mlp.gate_proj.weight.shape
    if "error" in _liger:
        raise _liger["error"]
    if "resolved" not in _liger:
        try:
            layer, _liger["resolved"] = build_liger_geglu_mlp(dim, hidden)
        except UsageError as err:
            _liger["error"] = err
            raise
        console.print(f"[dim]{escape(_liger['resolved'].describe())}[/dim]", soft_wrap=True)
    else:
        layer = _liger["resolved"].build(dim, hidden)
    require_runnable(_liger["resolved"], mlp.gate_proj.weight.device)
    layer.load_state_dict(mlp.state_dict())  # strict: the same three weights, nothing else
    weight = mlp.gate_proj.weight
    return layer.to(weight.device, weight.dtype)


def build_fused(mlp: torch.nn.Module) -> Forward:
    from common.mlp.fused import FusedGeGLUMLP

    return FusedGeGLUMLP.from_module(mlp)


VARIANTS: dict[str, Variant] = {
    "eager": Variant("eager", build=lambda mlp: mlp, per_call="an nn.Module call and an ATen dispatch per op"),
    "compile": Variant("compile", build=build_compiled(None), compiles=True,
                       per_call="Dynamo's guards and Inductor's Python wrapper"),
    "max-autotune": Variant("max-autotune", build=build_compiled("max-autotune-no-cudagraphs"), compiles=True,
                            unavailable=needs_cuda("it autotunes Triton GPU GEMM templates"),
                            per_call="Dynamo's guards and Inductor's Python wrapper"),
    "reduce-overhead": Variant("reduce-overhead", build=build_cuda_graphed, compiles=True,
                               unavailable=needs_cuda("CUDA graphs"),
                               per_call="guards, then one CUDA graph launch for every kernel"),
    "liger": Variant("liger", build=build_liger, unavailable=needs_cuda("Liger's GeGLU is a Triton GPU kernel"),
                     per_call="a Python autograd.Function and Triton's launcher"),
    "fused": Variant("fused", build=build_fused,
                     unavailable=lambda device, dtype: (
                         "needs CUDA (a Triton GPU kernel)" if device.type != "cuda"
                         else None if dtype in (torch.bfloat16, torch.float16) else "runs in bf16 or fp16 only"),
                     per_call="Triton's launcher for the GeGLU GEMM"),
}


def parse_variants(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown variant {unknown[0] if unknown else text!r}: use 'all' or some of {', '.join(VARIANTS)}"
        )
    names = list(dict.fromkeys(names))
    return names if "eager" in names else ["eager", *names]  # eager is the baseline of every speedup


# --------------------------------------------------------------------------------------------------------------
# Correct first. The reference is the same module in fp32, on the same inputs (rounded to the run's dtype).
#    Compared as ||out - ref|| / ||ref||: bf16 keeps 8 significant bits, so eager bf16 itself lands near 4e-3;
#    1.6e-2 (torch.testing's bf16 rtol) leaves room for a different but valid order of rounding, and is far
#    below what a wrong activation, a swapped weight or a stale input gives (tens of percent).
# --------------------------------------------------------------------------------------------------------------
TOLERANCES = {"bf16": 1.6e-2, "fp16": 4e-3, "fp32": 1e-3}  # fp32: room for TF32 GEMMs where enabled


@dataclass
class Check:
    x: torch.Tensor
    want: torch.Tensor  # fp32
    tolerance: float


def reference(mlp: torch.nn.Module, shape: Shape, device, dtype) -> Check:
    generator = torch.Generator(device="cpu").manual_seed(1234)  # fresh values, not the timed inputs
    x = torch.randn(shape.batch, shape.seq, shape.dim, generator=generator).to(device, dtype)
    with torch.no_grad():
        want = copy.deepcopy(mlp).float()(x.float())
    return Check(x, want, TOLERANCES[dtype_name(dtype)])


def relative_error(got: torch.Tensor, check: Check) -> tuple[float, str | None]:
    """(error, why it is wrong or None)."""
    if tuple(got.shape) != tuple(check.want.shape):
        return math.inf, f"output shape {tuple(got.shape)}, expected {tuple(check.want.shape)}"
    got = got.float()
    if not torch.isfinite(got).all():
        return math.inf, "NaN or inf in the output"
    error = ((got - check.want).norm() / check.want.norm().clamp_min(1e-30)).item()
    if error > check.tolerance:
        return error, f"relative error {error:.2e} > tolerance {check.tolerance:g}"
    return error, None


# --------------------------------------------------------------------------------------------------------------
# One row of results: one variant at one shape.
# --------------------------------------------------------------------------------------------------------------
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
    rel_error: float | None = None
    tolerance: float | None = None
    time_us: float | None = None  # median per forward (GPU time with L2 flushed; CPU time on a CPU)
    time_p20_us: float | None = None
    time_p80_us: float | None = None
    samples: int | None = None
    speedup: float | None = None  # eager's time_us / this one's
    tflops: float | None = None
    matmul_share: float | None = None  # tflops / the measured GEMM rate
    roofline_share: float | None = None  # the shape's floor (compute or memory) / time_us
    loop_us: float | None = None  # per forward, back to back
    loop_speedup: float | None = None
    cpu_us: float | None = None  # CPU time to issue one forward, back to back
    gpu_busy_us: float | None = None  # per forward, from the profile
    gpu_busy_fraction: float | None = None  # gpu_busy_us / loop_us
    kernels: float | None = None
    launches: float | None = None
    paced_by: str | None = None  # "CPU" (launch-bound) or "GPU"
    peak_mib: float | None = None
    kernel_names: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


@dataclass
class Settings:
    device: torch.device
    dtype: torch.dtype
    warmup_ms: int
    rep_ms: int
    ceilings: bench.Ceilings | None = None


WARM_CALLS = 3  # after the first call: CUDA graph trees record on the second call and replay from the third
ROTATE_BYTES = 256 << 20  # enough distinct input buffers to exceed any L2 when a loop cycles through them
LOOP_TARGET_US = 10_000  # one back-to-back loop runs about this long, in at most LOOP_CALLS forwards:
LOOP_CALLS = 100  # a few hundred launches, well under the ~1000 a stream queues before the CPU has to wait


def rotating_inputs(shape: Shape, device, dtype) -> list[torch.Tensor]:
    size = shape.tokens * shape.dim * torch.tensor([], dtype=dtype).element_size()
    count = max(2, min(16, math.ceil(ROTATE_BYTES / size))) if device.type == "cuda" else 2
    return [torch.randn(shape.batch, shape.seq, shape.dim, device=device, dtype=dtype) for _ in range(count)]


def measure(variant: Variant, shape: Shape, mlp: torch.nn.Module, check: Check, settings: Settings, status) -> Row:
    """Everything we learn about one variant at one shape, in the order of the module docstring."""
    row = Row(shape.name, shape.batch, shape.seq, shape.dim, shape.hidden, variant.name)
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
                row.peak_mib = bench.peak_memory_mib(warm)
            else:
                warm()

            # 3. Correct first: on inputs it has not seen, and from the path we time (a graph replay, if any).
            status(f"{shape.name} · {variant.name}: checking against fp32")
            got = forward(check.x).clone()  # clone: a CUDA graph's output is overwritten by its next replay
            row.rel_error, wrong = relative_error(got, check)
            row.tolerance = check.tolerance
            del got
            if wrong:
                row.status, row.reason = "WRONG", wrong
                return row

            if on_gpu:
                # 4. GPU time, L2 flushed before each call.
                status(f"{shape.name} · {variant.name}: timing (CUDA events)")
                timing = bench.gpu_timing(next_forward, settings.warmup_ms, settings.rep_ms)

                # 5. Back to back, with a warm L2 and the CPU in the loop.
                status(f"{shape.name} · {variant.name}: timing back to back")
                calls = max(10, min(LOOP_CALLS, int(LOOP_TARGET_US / max(timing.median_us, 1.0))))
                loop = bench.back_to_back(forward, inputs, calls)
                row.loop_us, row.cpu_us = loop.per_forward_us, loop.cpu_us

                # 6. Kernels per forward, profiled last so that no timing runs after the profiler in this
                #    variant. A profile costs little; if the profiler fails, the timings still count.
                status(f"{shape.name} · {variant.name}: profiling")
                try:
                    counts = bench.count_kernels(forward, inputs)
                    row.kernels, row.launches = counts.kernels, counts.launches
                    row.gpu_busy_us, row.kernel_names = counts.gpu_busy_us, counts.names
                    row.gpu_busy_fraction = min(1.0, counts.gpu_busy_us / loop.per_forward_us)
                    # The rule trace-report's verdict uses: does issuing the work take longer than running it?
                    row.paced_by = "CPU" if loop.cpu_us > counts.gpu_busy_us else "GPU"
                except Exception as err:  # noqa: BLE001
                    row.notes.append(f"no kernel counts: {first_line(err)}")
            else:
                # On a CPU the forward runs on the thread that calls it: its time is the CPU's time.
                status(f"{shape.name} · {variant.name}: timing (perf_counter)")
                timing = bench.cpu_timing(next_forward, settings.warmup_ms, settings.rep_ms)

        row.time_us, row.time_p20_us, row.time_p80_us = timing.median_us, timing.p20_us, timing.p80_us
        row.samples = timing.samples or None
        tflops = shape.flops / (timing.median_us * 1e6)
        row.tflops = tflops
        ceilings = settings.ceilings
        row.matmul_share = tflops / ceilings.matmul_tflops
        row.roofline_share = ceilings.floor_us(shape.flops, shape.min_bytes(check.x.element_size())) / timing.median_us
    except Exception as err:  # noqa: BLE001 - one variant failing (Liger missing, a compile error) is a result
        row.status, row.reason = "failed", first_line(err)
    finally:
        del forward
        gc.collect()
        if on_gpu:
            torch.cuda.empty_cache()
    return row


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    line = text.splitlines()[0] if text else ""
    name = type(err).__name__
    return f"{name}: {line}" if line and not isinstance(err, UsageError) else (line or name)


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


# --------------------------------------------------------------------------------------------------------------
# The report: a table per shape, then who sets the pace, in words.
# --------------------------------------------------------------------------------------------------------------
def fmt(value, spec: str, none: str = "—") -> str:
    return none if value is None else format(value, spec)


def status_cell(row: Row) -> str:
    if row.status == "ok":
        return f"[green]✓[/green] {row.rel_error:.1e}"
    if row.status == "WRONG":
        return f"[bold red]WRONG[/bold red] {row.rel_error:.1e}" if math.isfinite(row.rel_error) else "[bold red]WRONG[/bold red]"
    return f"[red]{row.status}[/red]" if row.status == "failed" else f"[dim]{row.status}[/dim]"


def shape_table(shape: Shape, rows: list[Row], settings: Settings) -> Table:
    ceilings, on_gpu = settings.ceilings, settings.device.type == "cuda"
    element = torch.tensor([], dtype=settings.dtype).element_size()
    floor = ceilings.floor_us(shape.flops, shape.min_bytes(element))
    limit = ceilings.limited_by(shape.flops, shape.min_bytes(element))
    table = Table(
        title=f"[bold]{shape.title}[/bold] · {shape.flops / 1e9:,.2f} GFLOP and ≥{shape.min_bytes(element) / 1e6:,.1f} MB "
        f"per forward · floor {floor:,.1f} µs ({limit}-bound)",
        title_justify="left",
    )
    table.add_column("variant")
    table.add_column("check", no_wrap=True)
    table.add_column("1st call s", justify="right")
    table.add_column("GPU µs (p20–p80)" if on_gpu else "µs (p20–p80)", justify="right")
    table.add_column("× eager", justify="right")
    table.add_column("TFLOP/s", justify="right")
    table.add_column("% matmul", justify="right")
    table.add_column("% floor", justify="right")
    if on_gpu:
        table.add_column("loop µs", justify="right")
        table.add_column("× eager", justify="right")
        table.add_column("CPU µs", justify="right")
        table.add_column("GPU busy", justify="right")
        table.add_column("kernels/launches", justify="right")
        table.add_column("peak MiB", justify="right")
    for row in rows:
        timed = row.time_us is not None
        cells = [
            row.variant,
            status_cell(row),
            fmt(row.first_call_s, ".2f"),
            f"{row.time_us:,.1f} ({row.time_p20_us:,.1f}–{row.time_p80_us:,.1f})" if timed else "—",
            fmt(row.speedup, ".2f"),
            fmt(row.tflops, ".3g"),
            fmt(row.matmul_share and row.matmul_share * 100, ".1f"),
            fmt(row.roofline_share and row.roofline_share * 100, ".1f"),
        ]
        if on_gpu:
            counts = f"{row.kernels:g} / {row.launches:g}" if row.kernels is not None else "—"
            busy = fmt(row.gpu_busy_fraction and row.gpu_busy_fraction * 100, ".0f")
            cells += [
                fmt(row.loop_us, ",.1f"),
                fmt(row.loop_speedup, ".2f"),
                fmt(row.cpu_us, ",.1f"),
                busy if busy == "—" else f"{busy}%",
                counts,
                fmt(row.peak_mib, ",.1f"),
            ]
        table.add_row(*cells)
    return table


def pace_story(shape: Shape, rows: list[Row]) -> list[str]:
    """Who sets the pace at this shape, and what each variant changes about it, from the measured numbers."""
    ok = {r.variant: r for r in rows if r.status == "ok" and r.paced_by is not None}
    eager = ok.get("eager")
    if eager is None:
        return []
    lines = []
    if eager.paced_by == "CPU":
        lines.append(
            f"[bold]{shape.name}[/bold]: launch-bound. Eager's {eager.kernels:g} kernels keep the GPU busy "
            f"{eager.gpu_busy_us:,.1f} µs per forward, but issuing them costs the CPU {eager.cpu_us:,.1f} µs, so "
            f"forwards in a loop go at the CPU's pace (GPU busy {eager.gpu_busy_fraction:.0%}). Fewer kernels only "
            "help if they also cost the CPU less:"
        )
    else:
        best = max(ok.values(), key=lambda r: r.speedup or 0)
        lines.append(
            f"[bold]{shape.name}[/bold]: GPU-bound. The CPU issues a forward in {eager.cpu_us:,.1f} µs while the GPU "
            f"works {eager.gpu_busy_us:,.1f} µs, so launch costs hide and the kernels decide: fastest is "
            f"{best.variant} at {best.tflops:,.0f} TFLOP/s, {best.matmul_share:.0%} of this GPU's GEMM rate."
        )
    for name, row in ok.items():
        if name == "eager" or eager.paced_by != "CPU":
            continue
        per_call = VARIANTS[name].per_call if name in VARIANTS else ""
        lines.append(
            f"  {name}: {row.kernels:g} kernels from {row.launches:g} launches, {row.cpu_us:,.1f} µs of CPU per "
            f"forward ({per_call}) → {row.loop_speedup:.2f}× eager in a loop "
            f"(GPU time alone: {row.speedup:.2f}×)"
        )
    return lines


def print_skipped(rows: list[Row]) -> None:
    seen = {}
    for row in rows:
        if row.status == "skipped":
            seen.setdefault(row.variant, row.reason)
    for name, reason in seen.items():
        console.print(f"[dim]skipped {name}: {escape(reason)}[/dim]")


# --------------------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------------------
def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="benchmark_mlp.py",
        description="Time every GeGLU MLP variant (eager, torch.compile modes, Liger, fused) at several shapes; "
        "check each against fp32 first; write a table, JSON, CSV and a PNG.",
    )
    parser.add_argument(
        "--shapes",
        type=parse_shapes,
        default=None,
        help=f"comma-separated presets ({', '.join(PRESETS)}) or BATCHxSEQ:DIM:HIDDEN "
        "(default: decode,post,7b on a GPU; decode,prefill on a CPU)",
    )
    parser.add_argument(
        "--variants",
        type=parse_variants,
        default=None,
        help=f"comma-separated, or 'all' (default): {', '.join(VARIANTS)}; eager always runs, as the baseline",
    )
    parser.add_argument("--dtype", choices=tuple(DTYPES), default=None,
                        help="bf16 | fp16 | fp32 (default: bf16 on a GPU, fp32 on a CPU)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="default: cuda when a GPU is visible, else cpu")
    parser.add_argument("--out", default="bench_results", metavar="DIR",
                        help="folder for the JSON, CSV and PNG (default: bench_results)")
    parser.add_argument("--warmup-ms", type=positive_int, default=25,
                        help="warm-up before each timing, in ms (default: 25)")
    parser.add_argument("--rep-ms", type=positive_int, default=100,
                        help="time spent timing each variant at each shape, in ms (default: 100)")
    return parser


def main(argv: list[str] | None = None) -> list[Row]:
    return exits_cleanly(run)(argv)


def run(argv: list[str] | None) -> list[Row]:
    args = build_parser().parse_args(argv)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    shapes = args.shapes or [PRESETS[name] for name in DEFAULT_SHAPES[device.type]]
    names = args.variants or list(VARIANTS)
    out = writable_dir(Path(args.out), "results")
    stem = f"mlp_{device.type}_{dtype_name(dtype)}"
    settings = Settings(device, dtype, args.warmup_ms, args.rep_ms)
    on_gpu = device.type == "cuda"

    console.print(f"[bold]benchmark_mlp[/bold] · {describe_device(device)} · {dtype_name(dtype)} · "
                  f"{len(names)} variants × {len(shapes)} shapes")
    console.print(
        "[dim]" + (
            "GPU µs: CUDA events around each forward, after a 256 MB memset (L2 flushed) and a spin kernel that "
            "hides the CPU's issue time; loop µs: CUDA events around forwards issued back to back (L2 warm); CPU µs: host time to issue "
            "one forward in that loop. "
            if on_gpu else
            "µs: time.perf_counter around each forward (the CPU runs it). No GPU: no kernels, launches or GPU memory. "
        ) + "% matmul: TFLOP/s over a large GEMM's; % floor: the fastest possible forward (its FLOPs at that GEMM "
        "rate, or its weights and activations moved once at copy speed) over the measured time. "
        f"Checked against fp32: ‖out−ref‖/‖ref‖ ≤ {TOLERANCES[dtype_name(dtype)]:g} ({dtype_name(dtype)}).[/dim]"
    )

    rows: list[Row] = []
    meta = run_metadata(device, dtype, shapes, names, settings, sys.argv[1:] if argv is None else argv)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console)
    with progress:
        task = progress.add_task("measuring the ceilings", total=1 + len(shapes) * len(names))
        # The ceilings, in this run: what fraction of the hardware a variant reaches is a fraction of these.
        settings.ceilings = bench.measure_ceilings(device, dtype, args.warmup_ms, args.rep_ms)
        c = settings.ceilings
        meta["ceilings"] = asdict(c)
        progress.console.print(
            f"ceilings: {c.matmul_size}³ {dtype_name(dtype)} GEMM {c.matmul_tflops:,.3g} TFLOP/s (a short burst) · "
            f"copy {c.copy_gb_per_s:,.0f} GB/s (read + write)"
        )
        progress.advance(task)
        for shape in shapes:
            torch.manual_seed(0)
            mlp = SimpleGeGLUMLP(shape.dim, shape.hidden).to(device, dtype).requires_grad_(False)
            check = reference(mlp, shape, device, dtype)
            shape_rows = []
            for name in names:
                row = measure(VARIANTS[name], shape, mlp, check, settings,
                              status=lambda text: progress.update(task, description=text))
                shape_rows.append(row)
                progress.console.print(log_line(row), soft_wrap=True)
                progress.advance(task)
            add_speedups(shape_rows)
            rows += shape_rows
            del mlp, check
            # Written after every shape, so that an interrupted run keeps what it measured.
            bench.write_results([asdict(r) for r in rows], meta, out / f"{stem}.json", out / f"{stem}.csv")
        progress.update(task, description="done")

    for shape in shapes:
        console.print()
        console.print(shape_table(shape, [r for r in rows if r.shape == shape.name], settings))
        for row in rows:
            if row.shape == shape.name and row.status in ("WRONG", "failed"):
                console.print(f"  [red]{row.variant} {row.status}[/red]: {escape(row.reason)}", soft_wrap=True)
            for note in row.notes if row.shape == shape.name else ():
                console.print(f"  [yellow]{row.variant}[/yellow]: {escape(note)}", soft_wrap=True)
    console.print()
    print_skipped(rows)
    if not on_gpu:
        console.print("[dim]On a CPU the forward runs on the thread that calls it: there are no kernel launches to "
                      "hide, so who sets the pace (CPU or GPU) is a question for a GPU run.[/dim]")
    else:
        console.print("\n[bold]Who sets the pace[/bold] (CPU µs to issue a forward against GPU µs busy running it)")
        for shape in shapes:
            for line in pace_story(shape, [r for r in rows if r.shape == shape.name]):
                console.print(line, soft_wrap=True)

    png = out / f"{stem}.png"
    plot_variants = [n for n in names if any(r.variant == n and r.speedup is not None for r in rows)]
    panels = [("speedup", "GPU time per forward (L2 flushed)"), ("loop_speedup", "forwards back to back (CPU included)")]
    bench.plot_speedups(
        [asdict(r) for r in rows], [s.name for s in shapes], plot_variants or ["eager"],
        panels if on_gpu else [("speedup", "time per forward (CPU)")],
        f"GeGLU MLP forward, speedup vs eager · {meta['device']} · {dtype_name(dtype)}", png,
    )
    console.print(f"\nresults: [bold]{out / stem}.json[/bold], {out / stem}.csv, plot: {png}")
    return rows


def log_line(row: Row) -> str:
    head = f"{row.shape:>9} · {row.variant:<15} "
    if row.status == "skipped":
        return head + f"[dim]skipped: {escape(row.reason)}[/dim]"
    first = f"first call {row.first_call_s:.2f} s · " if row.first_call_s is not None else ""
    if row.status != "ok":
        return head + first + f"[red]{row.status}[/red]: {escape(row.reason)}"
    return head + first + f"✓ {row.rel_error:.1e} · {row.time_us:,.1f} µs"


def run_metadata(device, dtype, shapes, names, settings, argv) -> dict:
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    for package in ("triton", "liger-kernel"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    element = torch.tensor([], dtype=dtype).element_size()
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "versions": versions,
        "dtype": dtype_name(dtype),
        "command": " ".join(["benchmark_mlp.py", *argv]),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "variants": names,
        "shapes": [
            {"name": s.name, "spec": s.spec, "tokens": s.tokens, "flops": s.flops, "min_bytes": s.min_bytes(element)}
            for s in shapes
        ],
        "timer": (
            "time_us: CUDA events per forward, L2 flushed and the GPU held until the forward is queued; loop_us: CUDA "
            "events around back-to-back forwards; cpu_us: host time per forward in that loop"
            if device.type == "cuda" else "time_us: time.perf_counter per forward"
        ),
        "warmup_ms": settings.warmup_ms,
        "rep_ms": settings.rep_ms,
        "check": "relative L2 error against the same MLP in fp32 on the same (rounded) input",
        "tolerance": TOLERANCES[dtype_name(dtype)],
    }


if __name__ == "__main__":
    results = main()
    raise SystemExit(1 if any(r.status == "WRONG" for r in results) else 0)  # a wrong variant fails the run
