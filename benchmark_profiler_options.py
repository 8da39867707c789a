"""Benchmark: what torch.profiler and each of its recording options cost a step, against the same step unprofiled.

A lesson's verdict is read from the profiled run, and the profiler changes what it measures: it adds CPU time to every
op it records, more with each option. This script times two steps, unprofiled and under the profiler with each option
alone and with all of them together, and prints how much slower each made the step:

    mlp     lesson 03's step: the post's GeGLU MLP forward (SimpleGeGLUMLP), --mlp_sizes (default 64,128,768,3072)
    llama   profile_model.py's step: a forward of the --model preset (default llama-1b, built from its config: no
            download) at --batch × --seq tokens (default 4 × 256)

    configurations  unprofiled (the baseline, always timed), no_option (the profiler alone, as the lessons run
                    it), record_shapes, with_stack, profile_memory, with_modules (torch 2.15 ignores it in eager mode
                    and warns so), all (the four together)

Each step is timed as the lessons time it (profiling_in_pytorch/lesson/unprofiled.py, `measure_step`): the wall time
per step with steps back to back, the CPU's time to issue one, the GPU's time alone (CUDA events, the step's work
queued before the GPU reaches it); medians. Under the profiler, the same timing runs inside
`torch.profiler.profile(activities=CPU and CUDA, <option>=True)`, recording every step.

Each (workload, configuration) runs in a process of its own: a profiler session leaves the process slower to issue
ops afterwards (bench/measure.py: an H100 measured 11.2 -> 15.6 µs of CPU per captured forward after one), so no
timing may follow one in the same process.

    python3 benchmark_profiler_options.py                          # on a GPU: both workloads, every configuration
    python3 benchmark_profiler_options.py --workloads mlp --device cpu --mlp_sizes 2,8,64,128 --configs no_option,record_shapes

It prints a table (step ms: the wall time per step; ×: against unprofiled; CPU ms: the CPU's time to issue a step;
GPU ms: the GPU's time alone; verdict: pace.paced_by_timing on those) and writes the rows as JSON (--out, default bench_results/profiler_options[_cpu].json), each also in
the form of trace_report/profiler_costs.py's MEASURED, from which trace-report estimates what the
profiler added to a trace it did not time. docs/observer-effect.md holds the figures measured so far.
"""

from __future__ import annotations

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.table import Table

from trace_report.cli import ArgumentParser, positive_int
from trace_report.console import Console
from trace_report.errors import UsageError
from trace_report.files import writable_file, write_atomically
from trace_report.pace import paced_by_timing
from trace_report.profiler_costs import OPTIONS

BASELINE = "unprofiled"
CONFIGS = {BASELINE: None, "no_option": (), **{option: (option,) for option in OPTIONS}, "all": OPTIONS}
WORKLOADS = ("mlp", "llama")
console = Console(highlight=False)


def _names(text: str, allowed, what: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [name for name in names if name not in allowed]
    if bad or not names:
        raise UsageError(f"--{what}: unknown {bad[0] if bad else '(none given)'}: use {', '.join(allowed)}")
    return names


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--mlp_sizes {text}: four positive integers BATCH,SEQ,DIM,HIDDEN") from None
    if len(sizes) != 4 or min(sizes) < 1:
        raise UsageError(f"--mlp_sizes {text}: four positive integers BATCH,SEQ,DIM,HIDDEN")
    return sizes


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="benchmark_profiler_options.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="mlp,llama", metavar="NAME[,NAME]", help="mlp, llama (default: both)")
    parser.add_argument("--configs", default=",".join(CONFIGS), metavar="NAME[,NAME...]",
                        help=f"{', '.join(CONFIGS)} (default: all of them; {BASELINE} is always timed, the baseline)")
    parser.add_argument("--mlp_sizes", default="64,128,768,3072", metavar="B,S,D,H",
                        help="the MLP's batch, seq, dim and hidden (default: the post's, 64,128,768,3072)")
    parser.add_argument("--model", default="llama-1b", help="the llama workload's preset (default: llama-1b)")
    parser.add_argument("--batch", type=positive_int, default=4, metavar="N", help="the llama workload's sequences (default: 4)")
    parser.add_argument("--seq", type=positive_int, default=256, metavar="N", help="its tokens per sequence (default: 256)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when a GPU is visible")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default=None,
                        help="default: bf16 on a GPU, fp32 on a CPU (as the lessons)")
    parser.add_argument("--threads", type=positive_int, default=None, metavar="N",
                        help="torch's CPU threads (default: torch's own; 1 steadies a CPU shared with other work)")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="the JSON (default: bench_results/profiler_options.json, _cpu before .json on a CPU)")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "CONFIG"), help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> int:
    return exits_cleanly(_main)(argv)


def _main(argv) -> int:
    args = build_parser().parse_args(argv)
    workloads = _names(args.workloads, WORKLOADS, "workloads")
    configs = _names(args.configs, CONFIGS, "configs")
    _sizes(args.mlp_sizes)
    if args.child:
        print(json.dumps(_child(args, *args.child)))
        return 0
    configs = (BASELINE, *[c for c in configs if c != BASELINE])
    rows = []
    with console.status("timing") as status:
        for workload in workloads:
            for config in configs:
                status.update(f"{workload} · {config} (a process of its own)")
                rows.append(_in_child(argv or sys.argv[1:], workload, config))
    device = rows[0]["device"]
    out = Path(args.out) if args.out else Path("bench_results") / (
        "profiler_options.json" if device == "cuda" else "profiler_options_cpu.json")
    writable_file(out, "the results")
    for row in rows:
        base = _baseline(rows, row)
        row["slowdown"] = round(row["wall_us_per_step"] / base["wall_us_per_step"], 3)
        row["verdict"] = _kind(row)
    console.print(_table(rows))
    measured = [_measured(row, _baseline(rows, row)) for row in rows if row["profiled"]]
    write_atomically(out, json.dumps({"rows": rows, "measured": measured}, indent=1) + "\n")
    console.print(f"results: {out}")
    return 0


def _baseline(rows: list[dict], row: dict) -> dict:
    return next(r for r in rows if r["workload"] == row["workload"] and r["config"] == BASELINE)


def _kind(row: dict) -> str:
    if row["gpu_us_per_step"] is None:
        return "-"
    return paced_by_timing(row["cpu_issue_us_per_step"], row["gpu_us_per_step"], row["wall_us_per_step"])


def _measured(row: dict, base: dict) -> dict:
    """The row in profiler_costs.Measured's form (ms), against the unprofiled step of its workload."""
    return {"workload": row["what"], "where": row["where"], "options": list(CONFIGS[row["config"]]),
            "unprofiled_ms": round(base["wall_us_per_step"] / 1e3, 4), "profiled_ms": round(row["wall_us_per_step"] / 1e3, 4),
            "gpu_ms": None if base["gpu_us_per_step"] is None else round(base["gpu_us_per_step"] / 1e3, 4)}


def _table(rows: list[dict]) -> Table:
    table = Table(title=f"a step unprofiled and under the profiler · {rows[0]['where']} · medians")
    for name in ("workload", "profiler", "step ms", "×", "CPU ms", "GPU ms", "verdict"):
        table.add_column(name, justify="left" if name in ("workload", "profiler", "verdict") else "right",
                         no_wrap=name != "verdict", overflow="fold")
    for row in rows:
        gpu = row["gpu_us_per_step"]
        table.add_row(row["workload"], row["config"],
                      f"{row['wall_us_per_step'] / 1e3:,.3f}", f"{row['slowdown']:.2f}",
                      f"{row['cpu_issue_us_per_step'] / 1e3:,.3f}", "-" if gpu is None else f"{gpu / 1e3:,.3f}",
                      row["verdict"])
    return table


def _in_child(argv: list[str], workload: str, config: str) -> dict:
    """One (workload, configuration) in a fresh process: its one line of JSON."""
    result = subprocess.run([sys.executable, __file__, *argv, "--child", workload, config], capture_output=True,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise UsageError(f"{workload} · {config}: {lines[-1] if lines else f'exit {result.returncode}'}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- one process: one workload under one configuration --------------------------------------------------------


def _child(args, workload: str, config: str) -> dict:
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from profiling_in_pytorch.device import describe_device, dtype_name, pick_device, pick_dtype
    from profiling_in_pytorch.lesson.unprofiled import measure_step

    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if workload == "mlp":
        from profiling_in_pytorch.mlp import SimpleGeGLUMLP

        batch, seq, dim, hidden = _sizes(args.mlp_sizes)
        model = SimpleGeGLUMLP(dim, hidden).to(device, dtype).eval()
        x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
        what = f"lesson 03's MLP forward, {batch}×{seq} tokens, {dim}→{hidden}, eager"

        def forward():
            return model(x)
    else:
        from profiling_in_pytorch.model import load

        model_config, name, _ = load.transformers_config(args.model)
        model = load.build_transformers(args.model, model_config, device, dtype, pretrained=False).eval()
        inputs = load.token_inputs(model_config, args.batch, args.seq, device, False)
        what = f"{name} forward, batch {args.batch} × {args.seq}, eager"

        def forward():
            return model(**inputs)

    def step():
        with torch.no_grad(), record_function("step"):
            return forward()

    profiled = CONFIGS[config] is not None
    options = {option: True for option in CONFIGS[config] or ()}
    if profiled:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        warnings.filterwarnings("ignore", message=".*with_modules is deprecated.*")
        with profile(activities=activities, **options):
            figures = measure_step(step, device)
    else:
        figures = measure_step(step, device)
    where = f"{describe_device(device)}, {dtype_name(dtype)}" + (f", {args.threads} thread(s)" if args.threads else "")
    return {"workload": workload, "what": what, "config": config, "profiled": profiled, "where": where,
            **figures.to_dict()}


if __name__ == "__main__":
    raise SystemExit(main())
