"""The profiling harness every lesson calls.

A lesson gives us a module and its inputs; we do what the post does by hand, the same way every time:

    flags -> device and dtype -> build -> (torch.compile) -> profile 5 steps -> trace + op table -> checks

The profile follows the post: `schedule(wait=1, warmup=1, active=3)`, so step 1 is skipped (it pays for
lazy initialisation and, with --compile, for compilation), step 2 warms the profiler up, and steps 2..4 of
`ProfilerStep#` are recorded. Every forward sits under one `record_function` label, so it shows up in the
trace as a named box with its ops and kernels beneath it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from rich.console import Console
from rich.table import Table
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from common.cli import ArgumentParser, add_common_flags, positive_int
from common.device import describe_device, dtype_name, pick_device, pick_dtype
from common.errors import UsageError, exits_cleanly

# Kineto logs its own stages and, on a machine without a GPU, a scary "gpuGetDeviceCount failed" ERROR;
# keep stderr for what the user must read. It reads the variable when the first profile starts.
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

WAIT, WARMUP, ACTIVE = 1, 1, 3
STEPS = WAIT + WARMUP + ACTIVE
TABLE_ROWS = 15

CPU_NOTE = (
    "No GPU here, so this is a CPU profile: the trace has no GPU lane, the 'kernels' are the CPU ops "
    "themselves (aten::mm, aten::gelu, ...), times are not the post's, and fp32 is the default because "
    "bf16 matmuls on a CPU are slow."
)

console = Console(highlight=False)

Build = Callable[[argparse.Namespace, torch.device, torch.dtype], "tuple[Callable[..., Any], tuple]"]


@dataclass
class LessonRun:
    trace: Path
    table: Path
    tag: str
    failed_expectations: int


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
    description: str | None = None,
    argv: Sequence[str] | None = None,
) -> LessonRun:
    """Parse the flags, profile `build(...)`'s forward, write the trace and table, check the expectations.

    script:      the lesson's `__file__`; its stem names the trace folder (`traces/<stem>/`).
    label:       the record_function label around each forward (`mlp_fwd`, ...).
    sizes:       one positive-int flag per entry, with the post's value as default.
    build:       (args, device, dtype) -> (forward callable, inputs); called once, under a fixed seed.
    expect:      (args, device_type) -> expectations (common.expect), said before and checked after.
    tag:         args -> the parts of the file name before `_eager|_compile` (default: the sizes).
    extra_flags: adds lesson-only flags to the parser.
    warm_calls:  args -> how many forwards to run before the profiler starts (01's --warmup).
    preflight:   (args, device) -> raises UsageError when the lesson cannot run here (GPU-only kernels).
    """
    return exits_cleanly(_run)(
        script=script,
        label=label,
        sizes=sizes,
        build=build,
        expect=expect,
        tag=tag,
        extra_flags=extra_flags,
        warm_calls=warm_calls,
        preflight=preflight,
        description=description,
        argv=argv,
    )


def _run(*, script, label, sizes, build, expect, tag, extra_flags, warm_calls, preflight, description, argv):
    name = Path(script).stem
    parser = ArgumentParser(prog=f"{name}.py", description=description)
    for size, default in sizes.items():
        parser.add_argument(f"--{size}", type=positive_int, default=default, help=f"(default: {default})")
    add_common_flags(parser)
    if extra_flags is not None:
        extra_flags(parser)
    args = parser.parse_args(argv)

    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    args.dtype = dtype_name(dtype)
    if preflight is not None:
        preflight(args, device)
    out_dir = writable_dir(Path(args.trace_dir) / name)

    mode = "compile" if args.compile else "eager"
    console.print(f"[bold]{name}[/bold] · {label} · {describe_device(device)} · {args.dtype} · {mode}")
    if device.type == "cpu":
        console.print(f"[yellow]note:[/yellow] {CPU_NOTE}")

    torch.manual_seed(0)
    with console.status("building the module and its inputs"):
        forward, inputs = build(args, device, dtype)
    if args.compile:
        forward = torch.compile(forward)

    file_tag = trace_tag(tag(args) if tag else list(vars(args)[s] for s in sizes), args, device)
    expectations = expect(args, device.type) if expect is not None else []
    if expectations:
        from common.expect import announce

        announce(expectations, console=console)

    with torch.no_grad():
        for _ in range(warm_calls(args) if warm_calls else 0):
            forward(*inputs)
        synchronize(device)
        prof = profile_forward(forward, inputs, label, device, metadata={"lesson": name, "tag": file_tag})

    trace_path = out_dir / f"{file_tag}.json"
    table_path = out_dir / f"{file_tag}.txt"
    export_trace(prof, trace_path)
    write_atomically(table_path, op_table_text(prof, device))
    print_op_table(prof, device)

    console.print(f"\ntrace: [bold]{trace_path}[/bold]   op table: {table_path}")
    console.print(
        "open it: drag the .json into https://ui.perfetto.dev, "
        f"or `uvx trace-util traces -b {args.trace_dir}` for a shareable link"
    )

    failed = 0
    if expectations:
        from common.expect import check_trace

        failed = check_trace(expectations, trace_path, device.type)
    return LessonRun(trace=trace_path, table=table_path, tag=file_tag, failed_expectations=failed)


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


def writable_dir(path: Path) -> Path:
    """Create the trace folder and prove we can write there before spending minutes profiling."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as err:
        raise UsageError(f"cannot write traces to {path}: {err.strerror or err}") from None
    return path


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_forward(forward, inputs, label: str, device: torch.device, metadata: dict[str, str]) -> profile:
    """Five forwards under the post's schedule; only the last three are recorded."""
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        record_shapes=True,
    ) as prof:
        with console.status("") as status:
            for step in range(STEPS):
                phase = "wait" if step < WAIT else "warmup" if step < WAIT + WARMUP else "active"
                status.update(f"profiling: step {step + 1}/{STEPS} ({phase})")
                if step == WAIT + WARMUP:  # Kineto keeps metadata only while it records
                    for key, value in metadata.items():
                        prof.add_metadata(key, value)
                with record_function(label):
                    forward(*inputs)
                # Kernels run asynchronously: without this the step would close before its GPU work ends,
                # and the trace's GPU lane would spill into the next step (or past the last one).
                synchronize(device)
                prof.step()
    return prof


def export_trace(prof: profile, path: Path) -> None:
    """Write the Chrome trace whole or not at all, with no absolute local path inside.

    Kineto stores the export path in `traceName`; we replace it by the path as the user sees it.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        with open(tmp, encoding="utf-8") as f:
            trace = json.load(f)
        trace["traceName"] = shown_path(path)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(trace, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600 files; a table is no secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
