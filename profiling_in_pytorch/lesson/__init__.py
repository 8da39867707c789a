"""The plumbing every lesson calls, as plain functions, in the order the lesson reads:

    parser(...)       the flags: the lesson's sizes with the post's defaults, --compile, --dtype, --device, --trace_dir
    setup(...)        device and dtype, the trace's file name, a folder proved writable; one line of what runs
    check_training(...), check_saved(...)   a training step's output, gradients and saved tensors, before profiling
    announce(...)     the guesses, before anything is profiled
    save(...)         the Chrome trace (whole or not at all, no local path in it), the op table and a picture of a
                      step beside it
    check(...)        each guess against the trace: ✓, or ✗ with the reason when the hardware explains it
    next_steps(...)   the commands to read, diff, see, open and share this trace, with its real file names

The recipe itself (the module, `step()` under `record_function`, `torch.profiler.profile(...)` with the posts'
schedule, the five `prof.step()`s) stays in the lesson, where the reader sees it. This package imports torch,
rich, `profiling_in_pytorch.traces` (the checks), `profiling_in_pytorch.mlp.accuracy` (the output and gradient checks) and the standard
modules (`profiling_in_pytorch.cli`, `errors`, `files`); it never imports a lesson.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from rich.markup import escape
from rich.table import Table
from torch.profiler import ProfilerActivity, profile

from profiling_in_pytorch.cli import DTYPE_NAMES, ArgumentParser, add_common_flags, positive_int
from profiling_in_pytorch.console import Console
from profiling_in_pytorch.errors import UsageError, readable_bytes
from profiling_in_pytorch.files import twin_trace, writable_dir, writable_file, write_atomically
from profiling_in_pytorch.lesson.device import describe_device, dtype_name, pick_device, pick_dtype, require_fit
from profiling_in_pytorch.lesson.profiling import ACTIVE, STEPS, WAIT, WARMUP, export_trace, synchronize  # noqa: F401 (lessons call lesson.synchronize)
from profiling_in_pytorch.mlp.accuracy import check_backward, fp32_reference
from profiling_in_pytorch.mlp.accuracy import check_output as check_output_against
from profiling_in_pytorch.traces import fusion, read_trace
from profiling_in_pytorch.traces.checks import Expectation, check_trace
from profiling_in_pytorch.traces.checks import announce as print_expectations
from profiling_in_pytorch.traces.picture import picture_path, write_picture
from profiling_in_pytorch.traces.kernels import short_name

TABLE_ROWS = 15
OP_NAME_MIN, OP_NAME_MAX = 12, 60  # the op table's name column, in characters

CPU_NOTE = (
    "No GPU here, so this is a CPU profile: the trace has no GPU lane, the 'kernels' are the CPU ops "
    "themselves (aten::mm, aten::gelu, ...), and times are not the post's"
)
CPU_FP32_NOTE = "; fp32 is the default because bf16 matmuls on a CPU are slow"

console = Console(highlight=False)

SIZE_HELP = {
    "size": "x, w and b are (size, size) matrices",
    "batch": "rows of the input (sequences for the MLP)",
    "seq": "tokens per sequence",
    "dim": "the model width: the MLP's input and output features",
    "hidden": "the MLP's hidden width: gate and up projections' output features",
    "heads": "attention heads",
    "head_dim": "each head's width: q, k and v are [batch, heads, seq, head_dim]",
    "in_dim": "nn.Linear's input features",
    "out_dim": "nn.Linear's output features",
}


@dataclass(frozen=True)
class Run:
    """What one run of a lesson is: where, in what dtype, compiled or not, into which files."""

    device: torch.device
    dtype: torch.dtype
    compiled: bool
    trace_path: Path
    table_path: Path

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)

    @property
    def picture_path(self) -> Path:
        """The picture of the trace's first recorded step, beside it: `<tag>.png`."""
        return picture_path(self.trace_path)

    @property
    def activities(self) -> list[ProfilerActivity]:
        """CPU always; CUDA when the run is on a GPU (asking for CUDA activity without one only adds warnings)."""
        return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])


def parser(script: str, description: str | None, *, dtypes: tuple[str, ...] = DTYPE_NAMES, **sizes: int) -> ArgumentParser:
    """The lesson's flags: one positive size per keyword (the post's value as default) and the common four.

    The lesson adds its own flags to what this returns (`--warmup`, `--record_shapes`, ...), then parses.
    """
    name = Path(script).stem
    parser = ArgumentParser(
        prog=f"{name}.py", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for size, default in sizes.items():
        what = SIZE_HELP.get(size, "a size")
        parser.add_argument(f"--{size}", type=positive_int, default=default, metavar="N", help=f"{what} (default: {default}, the post's)")
    add_common_flags(parser, dtypes)
    return parser


def setup(
    script: str,
    args: argparse.Namespace,
    *,
    label: str,
    tag: Sequence[Any],
    dtypes: tuple[str, ...] = DTYPE_NAMES,
) -> Run:
    """Device and dtype, the trace's file name, its folder; print one line of what runs (and how a CPU differs).

    tag: the parts of the post's file name before `_eager|_compile` (`[64, 128, 768, 3072]`), where the part
         "{dtype}" stands for the dtype's name (`[64, "{dtype}", "cold"]` -> `64_bf16_cold_eager`); see trace_tag.
    """
    name = Path(script).stem
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device, dtypes)
    out_dir = writable_dir(Path(args.trace_dir) / name, "traces")
    parts = [dtype_name(dtype) if part == "{dtype}" else part for part in tag]
    file_tag = trace_tag(parts, compiled=args.compile, dtype=dtype_name(dtype), device=device)
    run = Run(device, dtype, args.compile, out_dir / f"{file_tag}.json", out_dir / f"{file_tag}.txt")
    writable_file(run.trace_path, "the trace")  # now, not after minutes of profiling
    writable_file(run.table_path, "the op table")
    writable_file(run.picture_path, "the picture")

    if args.compile:
        # Inductor's CPU kernels are plain C++ functions, invisible to the profiler unless Inductor wraps each
        # in a record_function: then `cpp_fused_gelu_mul_0` shows in a CPU trace as a kernel does in a GPU one.
        import torch._inductor.config

        torch._inductor.config.cpp.enable_kernel_profile = True
        if device.type == "cpu":
            require_cpp_compiler()
            # A CUDA build of torch on a machine without a GPU says so once per compile ("No CUDA runtime is
            # found"); the lesson has said it already, in its CPU note.
            logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)

    mode = "compile" if args.compile else "eager"
    console.print(f"[bold]{name}[/bold] · {label} · {describe_device(device)} · {run.dtype_name} · {mode}")
    if device.type == "cpu":
        fp32_note = CPU_FP32_NOTE if args.dtype is None and run.dtype_name == "fp32" else ""
        console.print(f"[yellow]note:[/yellow] {CPU_NOTE}{fp32_note}.")
    return run


def require_cpp_compiler() -> None:
    """torch.compile on a CPU builds its kernels with a C++ compiler: without one, say so in one line, up front."""
    import torch._inductor.config

    names = [c for c in torch._inductor.config.cpp.cxx if c]
    if not any(shutil.which(c) for c in names):
        raise UsageError(
            f"--compile on a CPU builds C++ kernels, and no C++ compiler ({', '.join(names) or 'g++'}) is on PATH: "
            "install one (e.g. apt install g++) or drop --compile"
        )


def require_memory(run: Run, nbytes: int, what: str) -> None:
    """Before allocating: do `nbytes` fit where the run will put them? One line and exit 2 if not."""
    require_fit(run.device, nbytes, f"{what} in {run.dtype_name}")


def trace_tag(parts: Sequence[Any], *, compiled: bool, dtype: str, device: torch.device) -> str:
    """The post's file name, plus whatever differs from the post, so that no two runs share a file.

    The post ran bf16 on a GPU: another dtype is appended unless the lesson's own parts name it,
    and a CPU run is marked `_cpu` so it never overwrites a GPU trace.
    """
    parts = [str(p) for p in parts]
    named_dtype = dtype in parts
    parts.append("compile" if compiled else "eager")
    if not named_dtype and dtype != "bf16":
        parts.append(dtype)
    if device.type != "cuda":
        parts.append(device.type)
    return "_".join(parts)


def announce(expectations: Sequence[Expectation], run: Run, compiled_already: bool = False) -> None:
    """The guesses first; then one line on what the profile is about to do (outside the recorded steps).

    compiled_already: the lesson ran its step once before the profile, so the profile's first step compiles
    nothing."""
    print_expectations(expectations, console=console)
    compiling = "the first compiles the forward, " if run.compiled and not compiled_already else ""
    console.print(
        f"profiling {STEPS} steps: {compiling}the last {ACTIVE} are recorded "
        f"(ProfilerStep#{WAIT + WARMUP}..#{STEPS - 1})"
    )


def save(prof: profile, run: Run) -> None:
    """Write the Chrome trace, torch's op table and a picture of the first recorded step beside it (the posts'
    Perfetto view, without a browser), then print the table to fit this terminal."""
    export_trace(prof, run.trace_path, trace_name=shown_path(run.trace_path))
    write_atomically(run.table_path, op_table_text(prof, run.device))
    trace = read_trace(run.trace_path)
    write_picture(trace, trace.steps[0], run.picture_path)
    print_op_table(prof, run.device)
    console.print(f"\ntrace: [bold]{run.trace_path}[/bold]   op table: {run.table_path}   picture: {run.picture_path}")


def check(expectations: Sequence[Expectation], run: Run) -> int:
    """Each guess against the written trace; a ✗ is a lesson, not an error. Returns the number of ✗."""
    return check_trace(expectations, run.trace_path, run.device.type, console=console)


def fusion_candidates(run: Run, rows: int = 3) -> None:
    """The first rows of trace-report's "Where fusion would pay" for this run's trace (recorded with shapes):
    memory-bound kernels back to back, what one fused kernel would move and take (profiling_in_pytorch.traces.fusion).
    """
    trace = read_trace(run.trace_path)
    console.print("\n[bold]Where fusion would pay[/bold] (trace-report prints the whole table)")
    if not trace.has_gpu:
        console.print("  a CPU trace has no kernels whose round trips through memory one kernel could save: run it on "
                      "a GPU", soft_wrap=True)
        return
    lines = fusion.first_rows(trace, n=rows)
    for line in lines or ["no memory-bound kernels back to back, nor beside a GEMM that reads their output"]:
        console.print(f"  {line}", soft_wrap=True, markup=False)


def check_output(name: str, module, reference, x) -> bool:
    """Before profiling: does `module` compute what the post's module does? One line; the lesson exits 1 if not.

    Both are judged by the project's one rule (profiling_in_pytorch.mlp.accuracy): relative error against `reference` run in
    fp32 on the same input. The post's module in the run's dtype is printed beside it: neither is the truth, and
    a fast kernel that computes something else is the first thing to rule out before reading its trace.
    """
    want = fp32_reference(reference, x)
    with torch.no_grad():
        ours, eager = check_output_against(module(x), want, x.dtype), check_output_against(reference(x), want, x.dtype)
    console.print(
        f"output check against fp32: {name} {ours.describe()}; {type(reference).__name__} ({dtype_name(x.dtype)}) "
        f"relative error {eager.error:.1e} {'[green]✓[/green]' if ours.ok else '[red]✗[/red]'}",
        soft_wrap=True,
    )
    return ours.ok


def check_training(name: str, module, reference, x, dy) -> bool:
    """Before profiling a training step: do `module`'s output and gradients match the post's module's? One line
    (the worst error among them, then each); the lesson exits 1 if not.

    The project's one rule (profiling_in_pytorch.mlp.accuracy.check_backward), on the output, the input's gradient and each
    weight's gradient, all from one backward of `dy`; the post's module in the run's dtype is printed beside it.
    """
    ours, eager = check_backward(module, reference, x, dy), check_backward(reference, reference, x, dy)
    ok = all(a.ok for a in ours.values())
    errors = " · ".join(f"{_grad_name(key)} {_error(a.error)}" for key, a in ours.items())
    tolerance = next(iter(ours.values())).tolerance
    console.print(
        f"output and gradient check against fp32: {name} worst {_error(max(a.error for a in ours.values()))} "
        f"(tolerance {tolerance:g}; {errors}); {type(reference).__name__} ({dtype_name(x.dtype)}) worst "
        f"{_error(max(a.error for a in eager.values()))} {'[green]✓[/green]' if ok else '[red]✗[/red]'}",
        soft_wrap=True,
    )
    for key, a in ours.items():
        if not a.ok:
            console.print(f"  {_grad_name(key)}: {a.describe()}", soft_wrap=True, markup=False)
    return ok


def _grad_name(key: str) -> str:
    return key if key == "output" else f"d{key}" if key == "x" else f"d {key}"


def _error(value: float) -> str:
    return f"{value:.1e}" if math.isfinite(value) else "inf"


def check_saved(name: str, saved, expected: str, why: str, allocated: int | None = None) -> bool:
    """What a forward keeps for its backward (profiling_in_pytorch.mlp.saved.SavedForBackward), against what the module's code
    says it keeps: ✓ or ✗ in the style of the trace's checks, then what was counted. Returns whether it matched.

    expected: `saved.describe()`'s form, `x [8192, 768] + 4 × [8192, 3072]`; why: which tensors those are.
    allocated: on a GPU, what the caching allocator gained over the forward, its output left out; it should be
    the saved tensors other than x (which existed before), give or take the allocator's rounding.
    """
    seen = saved.describe()
    ok = seen == expected
    console.print("\n[bold]What the forward keeps for the backward[/bold] (saved-tensor hooks; weights left out)")
    console.print(f"  {'[green]✓[/green]' if ok else '[red]✗[/red]'} {escape(name)}: {escape(expected)} ({escape(why)})", soft_wrap=True)
    console.print(f"      saved: {escape(seen)} = {readable_bytes(saved.activation_bytes)}", soft_wrap=True)
    if allocated is not None:
        besides_x = sum(t.nbytes for t in saved.of_kind("activation"))
        console.print(
            f"      allocator: {readable_bytes(allocated)} more allocated after the forward, its output left out "
            f"(torch.cuda.memory_allocated); the saved tensors besides x: {readable_bytes(besides_x)}",
            soft_wrap=True,
        )
    return ok


def memory_allocated(device: torch.device) -> int | None:
    """The caching allocator's bytes in use on a GPU (torch.cuda.memory_allocated); None on a CPU."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def trace_of(run: Run, script: str, tag: Sequence[Any], *, compiled: bool) -> Path:
    """Where another lesson writes its trace for `tag` on this device and dtype (to compare with, if it exists)."""
    name = trace_tag(tag, compiled=compiled, dtype=run.dtype_name, device=run.device)
    return run.trace_path.parent.parent / script / f"{name}.json"


def next_steps(run: Run, *, compare_with: Sequence[Path] = (), ranks: Sequence[Path] = ()) -> None:
    """The commands to go on with, naming the files this run wrote and the traces it can be compared with.

    ranks: in a distributed run, every rank's trace (this one among them): read together, they show the skew."""
    report = _command("trace-report", "profiling_in_pytorch.traces.report")
    trace = shlex.quote(_shown(run.trace_path))
    console.print("\n[bold]Next[/bold]")
    console.print(f"  read it:   {report} {trace}", soft_wrap=True, markup=False)
    if len(ranks) > 1:
        shown = " ".join(_shown(path) for path in ranks)
        console.print(f"  all ranks: {report} {shown}", soft_wrap=True, markup=False)
    twin = twin_trace(run.trace_path, "eager" if run.compiled else "compile")
    for other in [twin, *compare_with]:
        if other.is_file() and other != run.trace_path:
            console.print(f"  diff it:   {report} {shlex.quote(_shown(other))} {trace}", soft_wrap=True, markup=False)
    on_gpu = run.device.type == "cuda"
    drawn = "the CPU's boxes over the GPU's kernels, an arrow from each launch" if on_gpu else "the CPU thread's nested boxes"
    console.print(
        f"  see it:    {shlex.quote(_shown(run.picture_path))}   its first recorded step as Perfetto draws it: {drawn}",
        soft_wrap=True,
        markup=False,
    )
    console.print(
        f"  open it:   {report} {trace} --open   Perfetto in your browser reads it from this machine, no upload "
        "(on a remote machine it prints the ssh -L line that forwards the port)",
        soft_wrap=True,
        markup=False,
    )
    folder = run.trace_path.parent.parent
    shown, bucket = shlex.quote(_shown(folder)), bucket_name(folder)
    console.print(f"  share it:  {share_command(folder)}", soft_wrap=True, markup=False)
    console.print(
        f"             needs `hf auth login`; asks before creating the bucket {bucket} under your Hugging Face "
        f"account, uploads the folder {shown} to it (deleting nothing there) and prints a Perfetto link per trace, "
        "which opens for others once the bucket is public",
        soft_wrap=True,
        markup=False,
    )


# trace-util's command line changed after 0.1.0 (`-b BUCKET -f FOLDER`, and a sync that by default deletes the
# bucket's files missing from the folder): the command names the version whose arguments it was written for.
TRACE_UTIL = "trace-util@0.1.0"


def share_command(folder: Path) -> str:
    """trace-util 0.1.0's command that uploads `folder` (a positional FOLDER, `-b BUCKET`): it syncs the folder into
    the bucket under the logged-in account without deleting anything there, and prints a Perfetto link per .json."""
    return f"uvx {TRACE_UTIL} {shlex.quote(_shown(folder))} -b {bucket_name(folder)}"


def bucket_name(folder: Path) -> str:
    """A bucket's name for `folder`, from the folder's own name, as the Hub takes names: ASCII letters, digits,
    "-", "_" and ".", 96 at most, no "--" or "..", a letter or digit at each end ("traces" when nothing is left)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.resolve().name)
    name = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", ".", name)).removesuffix(".git")
    name = name[:96].strip("-._")
    return name or "traces"


def _command(script: str, module: str) -> str:
    """How to run one of our console scripts from here: through uv when this run came through uv."""
    if os.environ.get("UV_RUN_RECURSION_DEPTH") or os.environ.get("UV"):
        return f"uv run {script}"
    return f"{Path(sys.executable).name} -m {module}"


def _shown(path: Path) -> str:
    """A path as the user can type it from here: relative when it lies below the current folder."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def shown_path(path: Path) -> str:
    """The path relative to where the user stands, or just the file name: never an absolute local path."""
    shown = _shown(path)
    return shown if not os.path.isabs(shown) else path.name


def sort_key(device: torch.device) -> str:
    return "device_time_total" if device.type == "cuda" else "cpu_time_total"


def op_table_text(prof: profile, device: torch.device) -> str:
    """torch's own table, as the post prints it: kept whole in the .txt beside the trace."""
    return prof.key_averages().table(sort_by=sort_key(device), row_limit=TABLE_ROWS) + "\n"


def print_op_table(prof: profile, device: torch.device) -> None:
    """The same rows in a table that fits a terminal: the ops that cost the most, per 3 active steps.

    A kernel's name is shown as trace-report shows it (`vectorized_elementwise_kernel<gelu>` for ATen's 450
    characters of C++ template), on one line: the numbers keep their width, and a name longer than what is left
    loses its middle to a "…" (its end tells `<gelu>` from `<mul>`, `coopA_TNT` from `coopB_TNT`). The .txt beside
    the trace keeps every name whole.
    """
    on_gpu = device.type == "cuda"
    averages = prof.key_averages()
    rows = sorted(averages, key=lambda e: getattr(e, sort_key(device)), reverse=True)[:TABLE_ROWS]
    names = [short_name(row.key) for row in rows]
    numbers = []
    for row in rows:
        cells = [str(row.count), f"{row.cpu_time_total:.1f}", f"{row.self_cpu_time_total:.1f}"]
        if on_gpu:
            cells += [f"{row.device_time_total:.1f}", f"{row.self_device_time_total:.1f}"]
        numbers.append(cells)
    headers = ["calls", "CPU total", "self CPU"] + (["GPU total", "self GPU"] if on_gpu else [])
    longest = max((len(name) for name in names), default=2)
    if _name_room(headers, numbers) < longest:
        headers = [header.replace(" ", "\n") for header in headers]  # two-line headers leave the names more room
    name_width = max(OP_NAME_MIN, min(OP_NAME_MAX, _name_room(headers, numbers), longest))
    table = Table(title=f"ops over {ACTIVE} active steps, by {'GPU' if on_gpu else 'CPU'} time (µs)")
    table.add_column("op", no_wrap=True, overflow="ellipsis", width=name_width)
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for name, cells in zip(names, numbers):
        table.add_row(escape(_fit(name, name_width)), *cells)
    console.print(table)
    totals = f"Self CPU time total: {sum(e.self_cpu_time_total for e in averages) / 1e3:.3f} ms"
    if on_gpu:
        totals += f"   Self CUDA time total: {sum(e.self_device_time_total for e in averages) / 1e3:.3f} ms"
    console.print(totals)


def _name_room(headers: list[str], numbers: list[list[str]]) -> int:
    """What a line leaves the op's name beside the numbers: each column takes its widest cell or header line, a
    space either side and a border; the name's column its spaces and two borders."""
    widths = [max([len(cells[i]) for cells in numbers] + [len(line) for line in header.split("\n")])
              for i, header in enumerate(headers)]
    return console.width - sum(width + 3 for width in widths) - 4


def _fit(name: str, width: int) -> str:
    """`name` in `width` characters: whole, or its start and its end around a "…"."""
    if len(name) <= width:
        return name
    head = (width - 1) * 2 // 5
    return f"{name[:head]}…{name[len(name) - (width - 1 - head):]}"
