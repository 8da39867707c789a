"""What one run of a lesson is (`Run`), and how it is made: the flags (`parser`), the device, dtype and file names
(`setup`), what must hold before anything is allocated (`require_memory`, `require_cpp_compiler`), and where another
lesson writes its trace (`trace_of`)."""

from __future__ import annotations

import argparse
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch.profiler import ProfilerActivity

from trace_report.cli import DTYPE_NAMES, ArgumentParser, add_common_flags, positive_int
from trace_report.errors import UsageError
from trace_report.files import writable_dir, writable_file
from profiling_in_pytorch.device import describe_device, dtype_name, pick_device, pick_dtype, require_fit
from profiling_in_pytorch.lesson.terminal import console
from trace_report.picture import picture_path

CPU_NOTE = (
    "No GPU here, so this is a CPU profile: the trace has no GPU lane, the 'kernels' are the CPU ops "
    "themselves (aten::mm, aten::gelu, ...), and times are not the post's"
)
CPU_FP32_NOTE = "; fp32 is the default because bf16 matmuls on a CPU are slow"

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


def trace_of(run: Run, script: str, tag: Sequence[Any], *, compiled: bool) -> Path:
    """Where another lesson writes its trace for `tag` on this device and dtype (to compare with, if it exists)."""
    name = trace_tag(tag, compiled=compiled, dtype=run.dtype_name, device=run.device)
    return run.trace_path.parent.parent / script / f"{name}.json"


def memory_allocated(device: torch.device) -> int | None:
    """The caching allocator's bytes in use on a GPU (torch.cuda.memory_allocated); None on a CPU."""
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None
