"""What a lesson writes after its profile: the trace (with the step's unprofiled timing in it), the op table and a
picture beside it; then what the profile shows beyond the guesses (`fusion_candidates`)."""

from __future__ import annotations

import torch
from torch.profiler import profile

from profiling_in_pytorch.ceilings import measure_ceilings
from profiling_in_pytorch.device import dtype_name
from trace_report.errors import UsageError
from trace_report.files import write_atomically
from trace_report.peaks import MEASURED_KEY
from profiling_in_pytorch.lesson.commands import shown_path
from profiling_in_pytorch.lesson.op_table import op_table_text, print_op_table
from profiling_in_pytorch.lesson.profiling import export_trace
from profiling_in_pytorch.lesson.runs import Run
from profiling_in_pytorch.lesson.terminal import console
from trace_report import fusion, read_trace, verdict
from trace_report.observer import UNPROFILED_KEY, Unprofiled, observe, print_observed
from trace_report.picture import write_picture


def save(prof: profile, run: Run, unprofiled: Unprofiled | None = None, extra: dict | None = None) -> None:
    """Write the Chrome trace (with `unprofiled`, the step timed without the profiler, in it), torch's op table and a
    picture of the first recorded step beside it (the posts' Perfetto view, without a browser), then print the table
    to fit this terminal, and the profiled step against the unprofiled one: what the profiler changed, and whether
    the verdict holds without it. `extra`: more top-level keys for the trace (lesson 11's memory timeline)."""
    first = {UNPROFILED_KEY: unprofiled.to_dict()} if unprofiled is not None else {}
    measured = measured_peak(run)
    if measured is not None:
        first[MEASURED_KEY] = measured
    first.update(extra or {})
    export_trace(prof, run.trace_path, trace_name=shown_path(run.trace_path), first=first)
    write_atomically(run.table_path, op_table_text(prof, run.device))
    trace = read_trace(run.trace_path)
    write_picture(trace, trace.steps[0], run.picture_path)
    print_op_table(prof, run.device)
    console.print(f"\ntrace: [bold]{run.trace_path}[/bold]   op table: {run.table_path}   picture: {run.picture_path}")
    if unprofiled is not None:
        console.print()
        print_observed(observe(trace, verdict(trace)), console)


def measured_peak(run: Run) -> dict | None:
    """On a GPU, what it reaches now, outside the profile, with the benchmark's own ceilings (an 8192³ GEMM's best
    burst in the run's dtype, a 1 GiB copy: ceilings.measure_ceilings, about 0.3 s): the peaks the trace's op
    table and the lessons' GEMM rates are read against (trace_report.peaks, MEASURED_KEY). None on a CPU, or where
    the GEMM and the copy do not fit beside the lesson's tensors."""
    if run.device.type != "cuda":
        return None
    try:
        with console.status("measuring this GPU's GEMM and copy rates"):
            found = measure_ceilings(run.device, run.dtype, warmup_ms=25, rep_ms=100)
    except (UsageError, torch.OutOfMemoryError):
        console.print("this GPU's ceilings not measured: the GEMM and the copy do not fit beside the lesson's tensors; "
                      "the datasheet's peaks stand in", soft_wrap=True)
        return None
    n, tbps = found.matmul_size, found.copy_gb_per_s / 1e3
    console.print(f"this GPU, measured: {found.matmul_tflops:,.0f} TFLOP/s on an {n}³ {dtype_name(run.dtype)} GEMM, "
                  f"{tbps:.2f} TB/s on a copy: the ceilings its GEMMs are read against", soft_wrap=True)
    return {"dtype": dtype_name(run.dtype), "gemm_tflops": round(found.matmul_tflops, 1), "copy_tbps": round(tbps, 3),
            "how": f"an {n}³ GEMM's best burst, a {found.copy_bytes // 2 >> 30} GiB copy"}


def fusion_candidates(run: Run, rows: int = 3) -> None:
    """The first rows of trace-report's "Where fusion would pay" for this run's trace (recorded with shapes):
    memory-bound kernels back to back, what one fused kernel would move and take (trace_report.fusion).
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
