"""The profiling harness every lesson calls.

A lesson gives us a module and its inputs; we do what the post does by hand, the same way every time:

    flags -> device and dtype -> build -> (torch.compile) -> profile 5 steps -> trace + op table -> checks

The profile is `common.profiling`'s: the post's `schedule(wait=1, warmup=1, active=3)`. Every forward sits
under one `record_function` label, so it shows up in the trace as a named box with its ops and kernels
beneath it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from rich.console import Console
from rich.table import Table
from torch.profiler import profile

from common.cli import DTYPE_NAMES, ArgumentParser, add_common_flags, positive_int
from common.device import describe_device, dtype_name, pick_device, pick_dtype
from common.errors import exits_cleanly
from common.expect import announce, check_trace
from common.files import writable_dir, write_atomically
from common.profiling import ACTIVE, STEPS, export_trace, profile_steps, synchronize

TABLE_ROWS = 15

CPU_NOTE = (
    "No GPU here, so this is a CPU profile: the trace has no GPU lane, the 'kernels' are the CPU ops "
    "themselves (aten::mm, aten::gelu, ...), and times are not the post's"
)
CPU_FP32_NOTE = "; fp32 is the default because bf16 matmuls on a CPU are slow"

console = Console(highlight=False)
output_checks_failed = 0  # see report_output_check

Build = Callable[[argparse.Namespace, torch.device, torch.dtype], "tuple[Callable[..., Any], tuple]"]


@exits_cleanly
def run_lesson(
    *,
    script: str,
    label: str,
    sizes: dict[str, int],
    build: Build,
    expect: Callable[[argparse.Namespace, str], list] | None = None,
    tag: Callable[[argparse.Namespace], Sequence[Any]] | None = None,
    extra_flags: Callable[[argparse.ArgumentParser], None] | None = None,
    warm_calls: Callable[[argparse.Namespace], int] | None = None,
    preflight: Callable[[argparse.Namespace, torch.device], None] | None = None,
    dtypes: tuple[str, ...] = DTYPE_NAMES,
    description: str | None = None,
    argv: Sequence[str] | None = None,
) -> Path:
    """Parse the flags, profile `build(...)`'s forward, write the trace and table, check the expectations.

    Returns the trace's path.

    script:      the lesson's `__file__`; its stem names the trace folder (`traces/<stem>/`).
    label:       the record_function label around each forward (`mlp_fwd`, ...).
    sizes:       one positive-int flag per entry, with the post's value as default.
    build:       (args, device, dtype) -> (forward callable, inputs); called once, under a fixed seed.
    expect:      (args, device_type) -> expectations (common.expect), said before and checked after.
    tag:         args -> the parts of the file name before `_eager|_compile` (default: the sizes).
    extra_flags: adds lesson-only flags to the parser.
    warm_calls:  args -> how many forwards to run before the profiler starts (01's --warmup).
    preflight:   (args, device) -> raises UsageError when the lesson cannot run here (GPU-only kernels).
    dtypes:      the dtypes the lesson's code runs in (a bf16/fp16 kernel narrows --dtype and its default).
    """
    name = Path(script).stem
    parser = ArgumentParser(prog=f"{name}.py", description=description)
    for size, default in sizes.items():
        parser.add_argument(f"--{size}", type=positive_int, default=default, help=f"(default: {default})")
    add_common_flags(parser, dtypes)
    if extra_flags is not None:
        extra_flags(parser)
    args = parser.parse_args(argv)

    device = pick_device(args.device)
    dtype_defaulted = args.dtype is None
    dtype = pick_dtype(args.dtype, device, dtypes)
    args.dtype = dtype_name(dtype)
    if preflight is not None:
        preflight(args, device)
    out_dir = writable_dir(Path(args.trace_dir) / name, "traces")

    mode = "compile" if args.compile else "eager"
    console.print(f"[bold]{name}[/bold] · {label} · {describe_device(device)} · {args.dtype} · {mode}")
    if device.type == "cpu":
        fp32_note = CPU_FP32_NOTE if dtype_defaulted and args.dtype == "fp32" else ""
        console.print(f"[yellow]note:[/yellow] {CPU_NOTE}{fp32_note}.")

    torch.manual_seed(0)
    with console.status("building the module and its inputs"):
        forward, inputs = build(args, device, dtype)
    if args.compile:
        forward = torch.compile(forward)

    file_tag = trace_tag(tag(args) if tag else list(vars(args)[s] for s in sizes), args, device)
    expectations = expect(args, device.type) if expect is not None else []
    if expectations:
        announce(expectations, console=console)

    with torch.no_grad():
        for _ in range(warm_calls(args) if warm_calls else 0):
            forward(*inputs)
        synchronize(device)
        # No spinner while profiling: its refresh thread would take the GIL inside the recorded steps and
        # show up as CPU time the forward never spent.
        compiling = "the first compiles the forward, " if args.compile else ""
        console.print(
            f"profiling {STEPS} forwards: {compiling}the last {ACTIVE} are recorded "
            f"(ProfilerStep#{STEPS - ACTIVE}..#{STEPS - 1})"
        )
        prof = profile_steps(lambda step: forward(*inputs), device, label=label,
                             metadata={"lesson": name, "tag": file_tag})

    trace_path = out_dir / f"{file_tag}.json"
    table_path = out_dir / f"{file_tag}.txt"
    export_trace(prof, trace_path, trace_name=shown_path(trace_path))
    write_atomically(table_path, op_table_text(prof, device))
    print_op_table(prof, device)

    console.print(f"\ntrace: [bold]{trace_path}[/bold]   op table: {table_path}")
    console.print(
        "open it: drag the .json into https://ui.perfetto.dev, "
        f"or `uvx trace-util traces -b {args.trace_dir}` for a shareable link"
    )

    if expectations:
        check_trace(expectations, trace_path, device.type)  # a ✗ is a lesson, not an error: the exit code stays 0
    if output_checks_failed:
        raise SystemExit(1)  # the trace is written, but the module under study computes the wrong thing
    return trace_path


def report_output_check(agrees: bool, line: str) -> None:
    """Print a lesson's own correctness check, one line; if it failed, the lesson exits 1 once its trace is out.

    A fast kernel that computes something else is the first thing to rule out before reading its trace.
    """
    global output_checks_failed
    output_checks_failed += not agrees
    console.print(f"{line} {'[green]✓[/green]' if agrees else '[red]✗[/red]'}", soft_wrap=True)


def trace_tag(parts: Sequence[Any], args: argparse.Namespace, device: torch.device) -> str:
    """The post's file name, plus whatever differs from the post, so that no two runs share a file.

    The post ran bf16 on a GPU: another dtype is appended unless the lesson's own parts name it,
    and a CPU run is marked `_cpu` so it never overwrites a GPU trace.
    """
    parts = [str(p) for p in parts]
    named_dtype = args.dtype in parts
    parts.append("compile" if args.compile else "eager")
    if not named_dtype and args.dtype != "bf16":
        parts.append(args.dtype)
    if device.type != "cuda":
        parts.append(device.type)
    return "_".join(parts)


def shown_path(path: Path) -> str:
    """The path relative to where the user stands, or just the file name: never an absolute local path."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path.name


def sort_key(device: torch.device) -> str:
    return "device_time_total" if device.type == "cuda" else "cpu_time_total"


def op_table_text(prof: profile, device: torch.device) -> str:
    """torch's own table, as the post prints it: kept whole in the .txt beside the trace."""
    return prof.key_averages().table(sort_by=sort_key(device), row_limit=TABLE_ROWS) + "\n"


def print_op_table(prof: profile, device: torch.device) -> None:
    """The same rows in a table that fits a terminal: the ops that cost the most, per 3 active steps."""
    on_gpu = device.type == "cuda"
    rows = sorted(prof.key_averages(), key=lambda e: getattr(e, sort_key(device)), reverse=True)
    table = Table(title=f"ops over {ACTIVE} active steps, by {'GPU' if on_gpu else 'CPU'} time (µs)")
    table.add_column("op", overflow="fold", max_width=60)
    table.add_column("calls", justify="right")
    table.add_column("CPU total", justify="right")
    table.add_column("self CPU", justify="right")
    if on_gpu:
        table.add_column("GPU total", justify="right")
        table.add_column("self GPU", justify="right")
    for row in rows[:TABLE_ROWS]:
        cells = [row.key, str(row.count), f"{row.cpu_time_total:.1f}", f"{row.self_cpu_time_total:.1f}"]
        if on_gpu:
            cells += [f"{row.device_time_total:.1f}", f"{row.self_device_time_total:.1f}"]
        table.add_row(*cells)
    console.print(table)
