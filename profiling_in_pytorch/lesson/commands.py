"""The commands a lesson prints at its end, with its real file names: read, diff, see, open and share its trace."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Sequence

from trace_report.files import twin_trace
from profiling_in_pytorch.lesson.runs import Run
from profiling_in_pytorch.lesson.terminal import console


def next_steps(run: Run, *, compare_with: Sequence[Path] = (), ranks: Sequence[Path] = ()) -> None:
    """The commands to go on with, naming the files this run wrote and the traces it can be compared with.

    ranks: in a distributed run, every rank's trace (this one among them): read together, they show the skew."""
    report = _command("trace-report", "trace_report.report")
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
