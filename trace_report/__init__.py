"""Reading torch.profiler traces: what ran on the CPU and the GPU, per step, and what the kernels' names say.

Each module holds one concern; imports go down this list, never up:

    report.py        the `trace-report` command: prints a trace, or the diff of two (terminal or --json)
    api.py           `read(path)` -> Report: the trace and its analyses as plain objects, `to_json()` what --json prints
    text_report.py   one trace's report as the terminal prints it (and a Report in a notebook shows it)
    serve.py         --open: the one trace served from 127.0.0.1 to ui.perfetto.dev
    drawable.py      a copy of a trace Perfetto draws whole (--open), made as a stream whatever its size
    replay.py        --replay: one op of the trace rebuilt from its recorded shapes and re-timed alone
    memory_picture.py  a step's memory over time, stacked by category, its phases marked (lesson 11)
    picture.py       --png: one step drawn as the posts' Perfetto figures show it
    export.py        a trace as plain data: what --json prints
    compare_report.py  the diff of two traces as the terminal shows it, in 100 columns; `diff(a, b)` -> TraceDiff
                     (one a notebook shows so)
    compare.py       two traces side by side, by launching op and place: TraceDiff, `TraceDiff.of(a, b)`
    noise.py         an op's per-step spread, the change called beyond it or not, the gate (--fail_slower)
    fusion_report.py the report's "Where fusion would pay" table
    roofline_report.py the report's "Ops by roofline" table
    advice/          what to change: findings ranked by the time each gives back per step (see advice/__init__)
    roofline.py      each op by roofline: FLOPs and bytes per call, GPU time by correlation, bound, share of the peak
    fusion.py        where fusion would pay: memory-bound kernels back to back, bytes moved, time a fused kernel takes
    fusion_dataflow.py  split chains: two pointwise ops a GEMM keeps apart on the stream, linked by shapes and order
    summary.py       where a model's GPU time goes: kinds of work, modules, top kernels, the idle split
    ranks.py         several ranks' traces read together (one process each): a row per rank, the skew, the straggler
    attribution.py   whose collective: the DDP bucket or FSDP2 unit, the kind asked for, the phase that issued it
    communication.py collectives (NCCL kernels, gloo's ranges), the time nothing overlaps
    graphs.py        CUDA graph replays: one row per cudaGraphLaunch, its kernels, span and gaps
    observer.py      what the profiler changed: a lesson's unprofiled timing against the trace, both verdicts;
                     what any trace was recorded with
    profiler_costs.py  what each recording option costs a step, as measured; a trace's step without them
    pace.py          who sets the pace: `verdict(trace)` -> Verdict (overhead-bound or compute-bound)
    peaks.py         what a GPU can do at most: dense TFLOP/s per dtype and TB/s, by datasheet, by the trace's GPU
    flops/           an op's FLOPs and bytes per call from its shapes, one module per family (see flops/__init__)
    op_bytes.py      what an op reads and writes, from its recorded input shapes and types
    reader.py        `read_trace(path)` -> Trace: ops nested, launches linked to their kernels, steps
    nesting.py       how a thread's boxes nest: self times, paths, launching ops; the table's self CPU total
    python_frames.py a Python frame (with_stack=True): the reader's own code (`step() in train.py:42`) or a library's
    overlaps.py      GPU work that runs past the next item on its stream: clipped to it, counted; what Perfetto
                     drops, counted
    memory.py        `[memory]` events (profile_memory=True): per device the peak, when, what was live; the
                     category timeline lesson 11 writes into its trace
    source.py        the file as a stream of events (gzip or not; each chunk's whole events parsed at once)
    frames.py        the tables as DataFrames: each object's rows -> pandas or polars (trace-report[frames]),
                     imported only when asked for (a rank set's: api.ranks_frame)
    model.py         the data model: Trace, Step, Phase, CpuOp, RuntimeCall, GpuWork, KernelStat
    timeline.py      arithmetic on the GPU lane: busy time, gaps, the GPU waiting on launches
    links.py         what a collective's GB/s mean: nccl-tests' algbw and busbw, the peak of the GPU's link
    device.py        which GPU ran the trace, as its vendor names it (sm90, gfx942): its properties, else its kernels
    kernels/         what a kernel's name says, any vendor's: library, ops, dtype, tile, kind of work (see kernels/__init__)

    cli.py, console.py, files.py, errors.py   flags, terminal width, whole-or-nothing writes, one-line errors:
                     the command-line behaviour trace-report and the suite above it share

This package imports no torch (only the standard library and rich; matplotlib for --png), so it reads a trace from
anywhere, fast, on a machine without PyTorch: `uvx --from ./trace_report trace-report TRACE`. The suite's lessons
(profiling_in_pytorch) stand above it and check the posts' claims through it; nothing here imports them.
"""

from trace_report.api import Report, rank_tables, ranks_frame, read
from trace_report.compare import TraceDiff
from trace_report.compare_report import diff
from trace_report.export import trace_to_dict
from trace_report.model import CpuOp, GpuWork, KernelStat, Phase, RuntimeCall, Step, Trace
from trace_report.pace import Verdict, verdict
from trace_report.ranks import read_ranks
from trace_report.reader import read_trace

__all__ = [
    "CpuOp",
    "GpuWork",
    "KernelStat",
    "Phase",
    "Report",
    "RuntimeCall",
    "Step",
    "Trace",
    "TraceDiff",
    "Verdict",
    "diff",
    "read",
    "rank_tables",
    "ranks_frame",
    "read_ranks",
    "read_trace",
    "trace_to_dict",
    "verdict",
]
