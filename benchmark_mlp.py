"""Benchmark: every GeGLU MLP variant side by side, against eager and against the hardware.

The lessons read single kernels in traces. This script answers the questions that come after: which variant is
faster end to end, at my shape, on my GPU, and how far from what the hardware allows?

    uv run benchmark_mlp.py                                    # every variant, the three default shapes
    uv run benchmark_mlp.py --shapes decode,8x1:4096:11008     # presets or BATCHxSEQ:DIM:HIDDEN
    uv run benchmark_mlp.py --variants eager,compile,reduce-overhead --dtype fp16
    uv run benchmark_mlp.py --train                            # forward + backward: a training step's MLP

The variants (all compute the post's `SimpleGeGLUMLP` forward with the same weights):

    eager            SimpleGeGLUMLP as written: 3 cuBLAS GEMMs, a GELU kernel, a multiply kernel
    compile          torch.compile, default mode: the GELU and multiply fused into one Triton kernel
    max-autotune     torch.compile(mode="max-autotune-no-cudagraphs"): Inductor also tunes Triton GEMMs
    reduce-overhead  torch.compile(mode="reduce-overhead"): the same kernels, replayed from a CUDA graph
    liger            Liger's LigerGEGLUMLP (loaded as 03_kernels_mlp.py loads it): a hand-written GeGLU kernel
    fused            FusedGeGLUMLP (05_fused_mlp.py): gate and up GEMM with the GeGLU in its epilogue, then down
    cuda-graph       the eager module captured in a CUDA graph by hand (torch.cuda.CUDAGraph), replayed per call
    fused-graph      FusedGeGLUMLP captured the same way (07_decode_mlp.py shows both in a trace)

and in FP8 (10_fp8_mlp.py; e4m3 GEMMs, bf16 in and out, checked against fp32 within 0.08, not bf16's bound):

    fp8-rowwise      torch._scaled_mm, x and m scaled per token, weights per channel, the scaling in torch ops
    fp8-rowwise-compile, fp8-tensorwise-compile   the same under torch.compile (one scale per tensor for the latter)
    torchao-fp8-compile  torchao's Float8DynamicActivationFloat8WeightConfig (rowwise), compiled, as torchao advises
    fused-fp8        FusedFP8GeGLUMLP: x's cast, the gate/up GEMM with the GeGLU and m's 1 x 128-block cast in
                     its epilogue, the down GEMM on those blocks (cuBLAS on Hopper)

FP8 variants' "% matmul" is of an FP8 GEMM's rate (e4m3, 8192³), measured in the same run as the bf16 one.

Once per run, the ceilings: a large GEMM and a large copy, measured in this run, on this machine; the GEMM in short
bursts, one first and one right after each variant (at the clocks it ran at), the best of them counting. Then for
each shape and variant, in this order (`measure()` in profiling_in_pytorch/bench/measure.py follows it step by step):

1. The first call, timed on its own: compilation, autotuning and JIT happen here, never in the timed runs.
2. Warm-up forwards, and the peak memory they take (torch.cuda.max_memory_allocated above what was allocated).
3. Correct first: the output is compared with the same MLP in fp32 (profiling_in_pytorch/mlp/accuracy.py, the rule the lessons
   and tests use). A variant that disagrees is WRONG, not timed.
4. GPU time per forward with CUDA events, L2 flushed and the CPU's issue time hidden: median, p20-p80.
5. Back to back: forwards in a loop, as a decode loop runs them, and what each costs the CPU to issue; then the
   same loop with events around each forward: whether the GPU waits for the CPU between forwards.
6. Once every variant of every shape is timed: kernels and launches per forward, from a short torch.profiler run
   read with `trace_report`. Last, because a profiler session leaves the process slower to issue
   ops (an H100 measured 11.2 -> 15.6 µs of CPU per captured forward after one): no timing may follow one.

Before the variants, on a GPU, the launch floor of this host: the CPU's time to issue an ATen op and an empty Triton
kernel (profiling_in_pytorch/bench/floor.py); after the tables each variant's CPU time per forward reads against it.

Then a table per shape, a few sentences on who sets the pace (the CPU or the GPU, by trace-report's verdict rule),
and the files: a JSON and a CSV of every number, and a PNG of the speedups, in `--out` (default bench_results/).

With --train, each call is a training step's work instead (profiling_in_pytorch/bench/training.py): gradients set to None, the
forward on an x that requires grad, y.backward(dy) with a fixed dy. Per variant: the first call, the peak memory of
one call, the check of the output and of every gradient against fp32, the time per call with the same timers (on a
GPU also back to back, with the CPU's time to issue a call), and what the forward saves for the backward. reduce-overhead is forward only here and says so.

Without a GPU, eager and compile run at small shapes with a CPU timer; the others are named with the reason.
How each number is taken lives in profiling_in_pytorch/bench/ (timers, rows, words, files); this file is the run itself.
"""

from __future__ import annotations

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)

import sys
from dataclasses import asdict
from pathlib import Path

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from profiling_in_pytorch.bench import output, prose
from profiling_in_pytorch.bench.floor import floor_line, host_cost_lines, measure_launch_floor
from profiling_in_pytorch.bench.goals import fp8_goal_lines, goal_lines, launch_goal_lines
from profiling_in_pytorch.bench.measure import Settings, count_per_forward, measure
from profiling_in_pytorch.bench.output import console
from profiling_in_pytorch.bench.pace import pace_story
from profiling_in_pytorch.bench.rows import Row, add_hardware_shares, add_speedups
from profiling_in_pytorch.bench.shapes import Shape, parse_shapes
from profiling_in_pytorch.bench.table import shape_table, train_table
from profiling_in_pytorch.ceilings import fp8_matmul_burst, matmul_burst, measure_ceilings
from profiling_in_pytorch.bench.training import measure_training, warm_autograd
from profiling_in_pytorch.bench.variants import (
    CAPTURED_INFERENCE_ONLY,
    Variant,
    build_captured,
    build_compiled,
    build_cuda_graphed,
    build_fused,
    build_fused_captured,
    build_fp8,
    build_liger,
    needs_cuda,
    needs_cuda_in_half,
    needs_fp8,
    parse_variants,
)
from trace_report.cli import DTYPE_NAMES, ArgumentParser, positive_int
from trace_report.files import writable_dir, writable_file
from profiling_in_pytorch.device import describe_device, dtype_name, pick_device, pick_dtype, require_fit
from profiling_in_pytorch.lesson.fp8 import FP8_TOLERANCE
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.accuracy import TOLERANCES, fp32_reference
from profiling_in_pytorch.mlp.simple import forward_elements

# --------------------------------------------------------------------------------------------------------------
# The shapes: tokens = batch x seq rows through a dim -> hidden -> dim MLP.
# --------------------------------------------------------------------------------------------------------------
PRESETS = {
    "decode": Shape("decode", 8, 1, 768, 3072),  # one new token for each of 8 sequences: where the CPU sets the pace
    "post": Shape("post", 64, 128, 768, 3072),  # the post's shape
    "7b": Shape("7B layer", 16, 512, 4096, 11008),  # a Llama-2-7B-sized MLP
    # On a CPU the post's shape takes seconds per forward; these keep a run to a minute or so.
    "prefill": Shape("prefill", 1, 128, 768, 3072),
}
DEFAULT_SHAPES = {"cuda": ("decode", "post", "7b"), "cpu": ("decode", "prefill")}

# --------------------------------------------------------------------------------------------------------------
# The variants. Each builds a forward callable from the eager module, so that all of them hold its weights.
# The registry is a plain dict: add an entry (in code, or in a test) and it is measured like the others.
# --------------------------------------------------------------------------------------------------------------
COMPILED_CALL = "Dynamo's guards and Inductor's Python wrapper"
VARIANTS: dict[str, Variant] = {
    "eager": Variant("eager", build=lambda mlp: mlp, per_call="an nn.Module call and an ATen dispatch per op"),
    "compile": Variant("compile", build=build_compiled(None), compiles=True, per_call=COMPILED_CALL),
    "max-autotune": Variant("max-autotune", build=build_compiled("max-autotune-no-cudagraphs"), compiles=True,
                            unavailable=needs_cuda("it autotunes Triton GPU GEMM templates"), per_call=COMPILED_CALL),
    "reduce-overhead": Variant("reduce-overhead", build=build_cuda_graphed, compiles=True,
                               unavailable=needs_cuda("CUDA graphs"),
                               per_call="guards, then one CUDA graph launch for every kernel",
                               inference_only="forward only here (training through CUDA graphs is not measured)"),
    "liger": Variant("liger", build=build_liger, unavailable=needs_cuda("Liger's GeGLU is a Triton GPU kernel"),
                     per_call="a Python autograd.Function and Triton's launcher"),
    "fused": Variant("fused", build=build_fused, unavailable=needs_cuda_in_half,
                     per_call="the GeGLU GEMM's kept launch (its compiled launcher), a cuBLAS call"),
    "cuda-graph": Variant("cuda-graph", build=build_captured, unavailable=needs_cuda("CUDA graphs"),
                          per_call="a copy into the graph's input, then one CUDA graph launch for every kernel",
                          inference_only=CAPTURED_INFERENCE_ONLY),
    "fused-graph": Variant("fused-graph", build=build_fused_captured, unavailable=needs_cuda_in_half,
                           per_call="a copy into the graph's input, then one CUDA graph launch for every kernel",
                           inference_only=CAPTURED_INFERENCE_ONLY),
}
FP8_ONLY_FORWARD = "forward only (FP8 training is a later rung)"
_FP8 = {"tolerance": FP8_TOLERANCE, "fp8": True, "inference_only": FP8_ONLY_FORWARD}
VARIANTS.update({
    "fp8-rowwise": Variant("fp8-rowwise", build=build_fp8("rowwise"), unavailable=needs_fp8(),
                           per_call="an nn.Module call and an ATen dispatch per op", **_FP8),
    "fp8-rowwise-compile": Variant("fp8-rowwise-compile", build=build_fp8("rowwise", compiled=True), compiles=True,
                                   unavailable=needs_fp8(), per_call=COMPILED_CALL, **_FP8),
    "fp8-tensorwise-compile": Variant("fp8-tensorwise-compile", build=build_fp8("tensorwise", compiled=True),
                                      compiles=True, unavailable=needs_fp8(), per_call=COMPILED_CALL, **_FP8),
    "torchao-fp8-compile": Variant("torchao-fp8-compile", build=build_fp8("torchao", compiled=True), compiles=True,
                                   unavailable=needs_fp8(), per_call=COMPILED_CALL, **_FP8),
    "fused-fp8": Variant("fused-fp8", build=build_fp8("fused"), unavailable=needs_fp8(fused=True),
                         per_call="two kept Triton launches and a torch._scaled_mm", **_FP8),
})


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="benchmark_mlp.py",
        description="Time every GeGLU MLP variant (eager, torch.compile modes, Liger, fused) at several shapes; "
        "check each against fp32 first; write a table, JSON, CSV and a PNG.",
    )
    parser.add_argument("--shapes", type=lambda text: parse_shapes(text, PRESETS), default=None,
                        help=f"comma-separated presets ({', '.join(PRESETS)}) or BATCHxSEQ:DIM:HIDDEN "
                        "(default: decode,post,7b on a GPU; decode,prefill on a CPU)")
    parser.add_argument("--variants", type=lambda text: parse_variants(text, VARIANTS), default=None,
                        help=f"comma-separated, or 'all' (default): {', '.join(VARIANTS)}; eager always runs, "
                        "as the baseline")
    # The lessons' --dtype and --device (trace_report.cli.add_common_flags), checked by the same pick_* functions.
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default=None,
                        help="default: bf16 on a GPU, fp32 on a CPU")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="default: cuda when a GPU is visible, else cpu")
    parser.add_argument("--out", default="bench_results", metavar="DIR",
                        help="folder for the JSON, CSV and PNG (default: bench_results)")
    parser.add_argument("--warmup_ms", type=positive_int, default=25,
                        help="warm-up before each timing, in ms (default: 25)")
    parser.add_argument("--rep_ms", type=positive_int, default=100,
                        help="time spent timing each variant at each shape, in ms (default: 100)")
    parser.add_argument("--train", action="store_true",
                        help="time a training call instead of a forward: gradients set to None, forward, "
                        "y.backward(dy); check the gradients too; report peak memory and what the backward keeps")
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
    train = args.train
    stem = f"mlp_{'train_' if train else ''}{device.type}_{dtype_name(dtype)}"
    for suffix in ("json", "csv", "png"):  # now, not after minutes of measuring
        writable_file(out / f"{stem}.{suffix}", "the results")
    settings = Settings(device, dtype, args.warmup_ms, args.rep_ms, train=train)
    on_gpu = device.type == "cuda"

    def require_shape_fits(shape: Shape) -> None:
        """Each shape's eager run, a variant's and the fp32 check: one line (exit 2) if they cannot fit."""
        elements = shape.train_elements if train else forward_elements(shape.batch, shape.seq, shape.dim, shape.hidden)
        what = f"the {shape.name} shape's modules and tensors in {dtype_name(dtype)}"
        require_fit(device, elements * (2 * dtype.itemsize + 4), what)

    for shape in shapes:  # before minutes of measuring
        require_shape_fits(shape)

    console.print(f"[bold]benchmark_mlp[/bold] · {describe_device(device)} · {dtype_name(dtype)} · "
                  f"{'forward + backward · ' if train else ''}{len(names)} variants × {len(shapes)} shapes")
    legend = prose.train_legend if train else prose.legend
    console.print(legend(on_gpu, dtype_name(dtype), TOLERANCES[dtype]))

    rows: list[Row] = []
    meta = output.run_metadata(settings, dtype_name(dtype), shapes, names, sys.argv[1:] if argv is None else argv)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console)
    with progress:
        profiled = on_gpu and not train  # a second pass over every variant, to count its kernels (step 6)
        task = progress.add_task("measuring the ceilings", total=1 + len(shapes) * len(names) * (2 if profiled else 1))

        def status(text: str) -> None:
            progress.update(task, description=text)

        if train:
            warm_autograd(device)  # torch's imports on the first backward are not the first variant's cost
        # The ceilings, in this run: what fraction of the hardware a variant reaches is a fraction of these.
        settings.ceilings = c = measure_ceilings(device, dtype, args.warmup_ms, args.rep_ms)
        # The FP8 ceiling too, where FP8 variants will run: their share of the GEMM rate is of that one.
        fp8_ceiling = not train and any(VARIANTS[n].fp8 and not VARIANTS[n].unavailable(device, dtype) for n in names)
        if fp8_ceiling:
            settings.ceilings = c = c.with_fp8_burst(fp8_matmul_burst(device, args.warmup_ms, args.rep_ms))
        meta["ceilings"] = asdict(c)
        fp8_text = (f" · e4m3 GEMM {c.fp8_matmul_tflops:,.4g} TFLOP/s (the FP8 variants' % matmul and % floor; they are "
                    f"checked within {FP8_TOLERANCE:g})" if fp8_ceiling else "")
        progress.console.print(
            f"ceilings: {c.matmul_size}³ {dtype_name(dtype)} GEMM {c.matmul_tflops:,.4g} TFLOP/s{fp8_text} (a first "
            f"short burst; one more after each variant, the best counts) · copy {c.copy_gb_per_s:,.0f} GB/s (read + "
            "write)"
        )
        # The launch floor, on this host in this run: what each variant's CPU µs per forward reads against.
        floor = None
        if on_gpu:
            status("measuring what a launch costs the CPU")
            floor = measure_launch_floor()
            meta["launch_floor"] = asdict(floor)
            progress.console.print(floor_line(floor))
        progress.advance(task)
        for shape in shapes:
            require_shape_fits(shape)  # again: what the shapes before it left, and what this one allocates
            torch.manual_seed(0)
            mlp = SimpleGeGLUMLP(shape.dim, shape.hidden).to(device, dtype).requires_grad_(train)
            # Correct first: every variant's output on x is judged against this same MLP in fp32 (in training
            # mode its gradients too, backward from the same dy: the upstream gradient of every timed call).
            generator = torch.Generator(device="cpu").manual_seed(1234)  # fresh values, not the timed inputs
            x = torch.randn(shape.batch, shape.seq, shape.dim, generator=generator).to(device, dtype)
            dy = torch.randn(shape.batch, shape.seq, shape.dim, generator=generator).to(device, dtype)
            want = None if train else fp32_reference(mlp, x)  # training mode runs its fp32 reference per variant
            shape_rows = []
            for name in names:
                if train:
                    row = measure_training(VARIANTS[name], shape, mlp, settings, x=x, dy=dy, status=status)
                else:
                    row = measure(VARIANTS[name], shape, mlp, settings, x=x, want=want, status=status)
                shape_rows.append(row)
                progress.console.print(prose.log_line(row), soft_wrap=True)
                if row.time_us is not None:  # the GEMM again, at the clocks this variant ran at
                    status(f"{shape.name} · {name}: the GEMM ceiling again")
                    burst = matmul_burst(device, dtype, args.warmup_ms, args.rep_ms)
                    settings.ceilings = settings.ceilings.with_matmul_burst(burst)
                    if VARIANTS[name].fp8 and on_gpu:  # and the FP8 GEMM, after an FP8 variant
                        fp8_burst = fp8_matmul_burst(device, args.warmup_ms, args.rep_ms)
                        settings.ceilings = settings.ceilings.with_fp8_burst(fp8_burst)
                progress.advance(task)
            add_speedups(shape_rows)
            rows += shape_rows
            del mlp, x, dy, want
            add_hardware_shares(rows, shapes, settings.ceilings, dtype.itemsize, train)  # against every burst so far
            meta["ceilings"] = asdict(settings.ceilings)
            # Written after every shape, so that an interrupted run keeps what it measured.
            output.write_results([asdict(r) for r in rows], meta, out / f"{stem}.json", out / f"{stem}.csv")
        # 6. Kernels per forward, once everything is timed: a profiler session slows what the process issues after
        #    it (measure.py's docstring has the figures), so every profile comes after the last timing.
        if profiled:
            for shape in shapes:
                torch.manual_seed(0)  # the same weights as when it was timed
                mlp = SimpleGeGLUMLP(shape.dim, shape.hidden).to(device, dtype)
                for row in [r for r in rows if r.shape == shape.name]:
                    if row.loop_us:
                        status(f"{shape.name} · {row.variant}: profiling")
                        count_per_forward(VARIANTS[row.variant], shape, mlp, settings, row)
                    progress.advance(task)
                del mlp
            output.write_results([asdict(r) for r in rows], meta, out / f"{stem}.json", out / f"{stem}.csv")
        progress.update(task, description="done")
    c = settings.ceilings
    console.print(f"GEMM ceiling: {c.matmul_tflops:,.4g} TFLOP/s, the best of {len(c.matmul_bursts)} short bursts "
                  f"({min(c.matmul_bursts):,.4g} to {max(c.matmul_bursts):,.4g})")
    if c.fp8_bursts:
        console.print(f"FP8 GEMM ceiling (e4m3): {c.fp8_matmul_tflops:,.4g} TFLOP/s, the best of {len(c.fp8_bursts)} "
                      f"short bursts ({min(c.fp8_bursts):,.4g} to {max(c.fp8_bursts):,.4g})")

    # The table per shape, what went wrong under it, then who sets the pace.
    for shape in shapes:
        at_shape = [r for r in rows if r.shape == shape.name]
        console.print()
        console.print((train_table if train else shape_table)(shape, at_shape, settings))
        for line in prose.under_table(at_shape) + ([] if train else prose.above_ceiling(at_shape, settings.ceilings)):
            console.print(line, soft_wrap=True)
    console.print()
    for line in prose.skipped(rows):
        console.print(line)
    # Who sets the pace is read from forwards issued in a loop, which training mode does not time.
    if not train and not on_gpu:
        console.print(prose.NO_PACE_ON_CPU)
    elif not train:
        console.print("\n[bold]Who sets the pace[/bold] (CPU µs to issue a forward against GPU µs busy running it)")
        per_call = {name: variant.per_call for name, variant in VARIANTS.items()}
        for shape in shapes:
            for line in pace_story(shape, [r for r in rows if r.shape == shape.name], per_call):
                console.print(line, soft_wrap=True)
        if floor is not None:
            console.print(f"\n[bold]Host cost per forward[/bold] against the {floor_line(floor)}")
            for shape in shapes:
                console.print(f"[bold]{shape.name}[/bold]")
                for line in host_cost_lines([r for r in rows if r.shape == shape.name], floor):
                    console.print(line, soft_wrap=True)
        for line in goal_lines(rows, meta["device"], dtype_name(dtype)):  # the captured variants' decode goals
            console.print(line, soft_wrap=True)
        for line in fp8_goal_lines(rows, meta["device"]):  # the fused FP8 module's goals (lesson 10)
            console.print(line, soft_wrap=True)
    for line in launch_goal_lines(rows, train) if on_gpu else []:  # what the fused modules cost the CPU
        console.print(line, soft_wrap=True)

    # The plot: speedup against eager, by shape and variant.
    png = out / f"{stem}.png"
    plot_variants = [n for n in names if any(r.variant == n and r.speedup is not None for r in rows)]
    if train:
        panels = [("speedup", "GPU time per forward + backward (L2 flushed)" if on_gpu else
                   "time per forward + backward (CPU)")]
    elif on_gpu:
        panels = [("speedup", "GPU time per forward (L2 flushed)"), ("loop_speedup", "forwards back to back (CPU included)")]
    else:
        panels = [("speedup", "time per forward (CPU)")]
    output.plot_speedups(
        [asdict(r) for r in rows], [s.name for s in shapes], plot_variants or ["eager"], panels,
        f"GeGLU MLP {'forward + backward' if train else 'forward'}, speedup vs eager · {meta['device']} · "
        f"{dtype_name(dtype)}", png,
    )
    console.print(f"\nresults: [bold]{out / stem}.json[/bold], {out / stem}.csv, plot: {png}")
    return rows


if __name__ == "__main__":
    results = main()
    raise SystemExit(1 if any(r.status == "WRONG" for r in results) else 0)  # a wrong variant fails the run
