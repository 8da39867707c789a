"""Lesson 11's plumbing: the profiler's memory timeline by category, the allocator's snapshot, and the GPU's own
counters beside them.

`category_timeline(prof, device)` asks torch's memory profiler (`torch.profiler._memory_profiler`, a private module:
torch 2.11 and 2.15 have the same `MemoryProfileTimeline` and `Category`) for the bytes of each category (parameters,
optimizer state, inputs, temporaries, activations, gradients, autograd detail, unknown) at every allocation and free
of the recorded steps. It needs the profile recorded with record_shapes=True, profile_memory=True and
with_stack=True. A torch without it fails in one line (exit 1), not a traceback.

`record_snapshot(...)`: on a GPU, the caching allocator's history over the first optimizer step and the one after
(`torch.cuda.memory._record_memory_history`, `_dump_snapshot`): every block with the Python stack that allocated it,
for pytorch.org/memory_viz or `python -m torch.cuda._memory_viz trace_plot`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from rich.markup import escape

from trace_report.errors import CannotRunHere, first_line, readable_bytes
from trace_report.files import temporary_sibling
from profiling_in_pytorch.lesson.terminal import console
from profiling_in_pytorch.lesson.commands import shown_path
from profiling_in_pytorch.checks.memory import split_text
from trace_report.memory import UNTOUCHED, CategoryTimeline, memory_peaks

SNAPSHOT_ENTRIES = 200_000  # allocator events the snapshot keeps: two steps of the largest run need a few thousand


def device_name(device: torch.device) -> str:
    """The device as the memory profiler keys it: "cuda:0" (with its index), "cpu"."""
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    return device.type


def category_timeline(prof, device: torch.device, extras: dict | None = None) -> CategoryTimeline:
    """Bytes per category over the recorded steps, on `device`, from torch's memory profiler (private API)."""
    try:
        from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

        timeline = MemoryProfileTimeline(prof._memory_profile())
        times, sizes = timeline._coalesce_timeline(device_name(device))
        names = [c.name if c is not None else "UNKNOWN" for c in _CATEGORY_TO_INDEX]
    except (ImportError, AttributeError, TypeError, ValueError, AssertionError, KeyError) as err:
        raise CannotRunHere(f"this torch ({torch.__version__}) has no memory profiler timeline as lesson 11 reads it "
                            f"(torch.profiler._memory_profiler): {first_line(err)}") from None
    # Column 0 of each row is unused by torch (its categories start at 1). Times are µs on the profiler's clock: the
    # trace's `ts` is that minus its baseTimeNanoseconds, which CategoryTimeline.of subtracts when it reads it back.
    return CategoryTimeline(device_name(device), tuple(names), [float(t) for t in times], [row[1:] for row in sizes],
                            {"clock": "absolute", **(extras or {})})


@dataclass(frozen=True)
class FirstSteps:
    """torch.cuda.max_memory_allocated over the optimizer's first step (it creates AdamW's state) and the next."""

    first: int
    second: int
    snapshot: Path | None


def record_snapshot(step: Callable[[], None], device: torch.device, path: Path | None) -> FirstSteps | None:
    """On a GPU: run the optimizer's first step and the one after, each with its peak, the allocator's history
    recording (into `path`, written whole or not at all, when given). None on a CPU: no caching allocator there."""
    if device.type != "cuda":
        return None
    record = torch.cuda.memory._record_memory_history
    if path is not None:
        record(max_entries=SNAPSHOT_ENTRIES)
    try:
        peaks = []
        for _ in range(2):
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            step()
            torch.cuda.synchronize(device)
            peaks.append(torch.cuda.max_memory_allocated(device))
        if path is not None:
            raw = temporary_sibling(path)
            try:
                torch.cuda.memory._dump_snapshot(str(raw))
                raw.replace(path)
            finally:
                raw.unlink(missing_ok=True)
    finally:
        if path is not None:
            record(enabled=None)
    return FirstSteps(peaks[0], peaks[1], path)


def print_first_steps(found: FirstSteps | None, optimizer: bool = True) -> None:
    if found is None:
        console.print("[yellow]note:[/yellow] only a GPU shows the caching allocator: its allocated and reserved bytes, "
                      "torch.cuda.max_memory_allocated, and the snapshot for memory_viz (every block with the stack "
                      "that allocated it). A CPU profile still records each allocation and free, and the categories "
                      "below.", soft_wrap=True)
        return
    if not optimizer:
        console.print(f"torch.cuda.max_memory_allocated: {readable_bytes(found.first)} and "
                      f"{readable_bytes(found.second)} in two steps before the profile", soft_wrap=True)
        return
    console.print(f"torch.cuda.max_memory_allocated: {readable_bytes(found.first)} in the optimizer's first step (AdamW "
                  f"creates its state), {readable_bytes(found.second)} in the next: the profile's steps all hold "
                  "that state, as a training run's do", soft_wrap=True)


def print_saved(saved, predicted: int | None, checkpointed: bool, tolerance: float = 0.05) -> bool | None:
    """What autograd saved for the backward (saved-tensor hooks, profiling_in_pytorch/mlp/saved.py), against the
    shapes' count when there is one: ✓ within `tolerance`, or ✗. Returns whether it matched (None: no prediction)."""
    found = saved.activation_bytes
    console.print("\n[bold]What the forward saves for the backward[/bold] (saved-tensor hooks; weights left out)")
    line = escape(f"{readable_bytes(found)}: {saved.describe()}")
    if checkpointed:
        line += ("; a checkpointed layer saves nothing through these hooks (torch.utils.checkpoint keeps its input "
                 "and packs what the recompute saves with hooks of its own): the trace shows what it holds")
    ok = None
    if predicted:
        ok = abs(found / predicted - 1) <= tolerance
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        console.print(f"  {mark} the shapes predict {readable_bytes(predicted)}; saved {line} (ratio "
                      f"{found / predicted:.3f})", soft_wrap=True)
    else:
        console.print(f"  saved {line}", soft_wrap=True)
    return ok


def gpu_counters(device: torch.device) -> dict:
    """The caching allocator's counters now: allocated, reserved, and the peak since the last reset."""
    if device.type != "cuda":
        return {}
    return {"memory_allocated": torch.cuda.memory_allocated(device),
            "memory_reserved": torch.cuda.memory_reserved(device),
            "max_memory_allocated": torch.cuda.max_memory_allocated(device),
            "max_memory_reserved": torch.cuda.max_memory_reserved(device)}


def print_peak(timeline: CategoryTimeline, trace, counters: dict) -> None:
    """The first recorded step's peak split by category; on a GPU the allocator's own figures beside it."""
    step = trace.steps[0]
    i = timeline.peak_index(step.ts, step.ts + step.dur)
    if i is None:
        return
    split = timeline.split(i)
    untouched = max(0, int(timeline.extras.get("allocated_before", 0)) - timeline.total(0))
    if untouched:
        split[UNTOUCHED] = untouched
    total = sum(split.values())
    console.print(f"\n[bold]Where the memory goes[/bold] ({step.name}, torch's memory profiler by category)")
    console.print(f"  peak {readable_bytes(total)}: {split_text(split, total)}", soft_wrap=True, markup=False)
    most = counters.get("max_memory_allocated")
    if most:
        console.print(f"  torch.cuda.max_memory_allocated over the profile: {readable_bytes(most)}; the categories' "
                      f"peak / it = {total / most:.4f}; reserved by the caching allocator: "
                      f"{readable_bytes(counters['max_memory_reserved'])} at most (allocated blocks round up, freed "
                      "ones stay cached)", soft_wrap=True, markup=False)
    for peak in memory_peaks(trace):
        if peak.device == timeline.device or (peak.device == "cpu" and timeline.device == "cpu"):
            top = ", ".join(f"{a.op} {readable_bytes(a.nbytes)}" for a in peak.allocators[:3])
            console.print(f"  [memory] events: {peak.events:,}, the allocator's peak {readable_bytes(peak.peak_bytes)}"
                          f" in {' > '.join(peak.ranges) or 'no range'}; live then, allocated by: {top}",
                          soft_wrap=True, markup=False)


def print_snapshot_commands(found: FirstSteps | None) -> None:
    """How to look at the allocator's snapshot on this machine: nothing is uploaded."""
    if found is None or found.snapshot is None:
        return
    shown = shown_path(found.snapshot)
    html = shown.removesuffix(".pickle") + ".html"
    console.print(f"  snapshot:  {shown}   the allocator's blocks over the first optimizer step and the next, each "
                  "with the Python stack that allocated it", soft_wrap=True, markup=False)
    console.print(f"             python -m torch.cuda._memory_viz trace_plot {shown} -o {html}   an HTML page that "
                  "holds the snapshot; opening it loads torch's viewer script (MemoryViz.js) from cdn.jsdelivr.net, "
                  "your data stays in the page", soft_wrap=True, markup=False)
    console.print(f"             or drop {shown} on https://pytorch.org/memory_viz: the page reads it in your "
                  f"browser, it is not uploaded; python -m torch.cuda._memory_viz stats {shown} prints a summary",
                  soft_wrap=True, markup=False)
