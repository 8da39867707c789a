"""`trace-report`: print the post's tables for any torch.profiler trace, or diff two traces.

    uv run trace-report traces/03_simple_mlp/64_128_768_3072_eager.json
    uv run trace-report EAGER.json COMPILED.json          # which op got slower, by kind, what only one runs
    uv run trace-report TRACE.json --json                  # the same content, for programs
    uv run trace-report TRACE.json --png [FILE] [--step N] # one step drawn as Perfetto shows it, into a PNG
    uv run trace-report TRACE.json --open                  # Perfetto opens it from this machine: no upload
    uv run trace-report RUN_rank0.json RUN_rank1.json      # one run's ranks: collectives, exposed time, skew
    uv run trace-report GRAPHED.json --graph_kernels       # CUDA graphs: each replay's kernels under its row
    uv run trace-report SHAPES.json --bandwidth 3350       # where fusion would pay, at this memory bandwidth

For each active step (`ProfilerStep#N`): the GPU work in time order, each with the op that launched it,
its duration and share of the step's GPU time; the runtime calls; the CPU ops that launched nothing.
Then what happened outside the steps (the profiler's closing synchronize), one row per kernel across steps
(the post's "avg CUDA" table), what each kernel's name says, and a verdict: overhead-bound or compute-bound,
with the numbers behind it, starting from the two totals under `prof.key_averages().table()`, and what the profiler
changed (trace_report/observer.py): the step timed without it where the trace holds that timing (the lessons write it),
else what the trace was recorded with and, for an overhead-bound verdict, whether it would likely survive without the
profiler. In a trace recorded with profile_memory=True, where the memory goes: per device the peak, when, and the ops
that allocated what was live then (memory.py). Each op by roofline (roofline.py), then where fusion would pay (trace_report/fusion.py), in a trace recorded with shapes; with two traces, what the
second fused.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from typing import Sequence

from rich.markup import escape
from rich.table import Table

from trace_report.cli import ArgumentParser, count_or_zero, positive_int
from trace_report.console import Column, Console, clipped, fitted_table
from trace_report.errors import CannotRunHere, UsageError, exits_cleanly, note
from trace_report.files import writable_file
from trace_report.compare import TraceDiff, diff
from trace_report.compare_report import WIDTH as DIFF_WIDTH
from trace_report.compare_report import print_comparison, print_fusion_line, print_gate
from trace_report.export import runtime_rows
from trace_report.fusion_report import FUSION_BRIEF_ROWS, print_fusion
from trace_report.roofline_report import ROOFLINE_BRIEF_ROWS, print_op_table
from trace_report import communication as comm
from trace_report import ranks as rank_traces
from trace_report.api import Report
from trace_report.advice import BRIEF as ADVICE_BRIEF, advise, print_advice
from trace_report.attribution import print_owners
from trace_report import fusion, graphs  # fusion candidates (fusion.py), CUDA graph replays (graphs.py)
from trace_report import peaks, roofline  # the ops by roofline against the GPU's peaks
from trace_report.kernels import COMMUNICATION, decode, distinct_short_names
from trace_report.memory import memory_peaks, print_memory
from trace_report.model import Step, Trace, per_step_count
from trace_report.observer import observe, print_observed
from trace_report.pace import Verdict, verdict
from trace_report.picture import choose_step, gpu_counts, picture_path, step_flag, write_picture
from trace_report.picture import write_ranks_picture
from trace_report.reader import read_trace
from trace_report.replay import replay_command
from trace_report.serve import PERFETTO_PORT, open_in_perfetto
from trace_report.summary import print_summary, summarize

DEFAULT_STEPS = 3
AUTO_STEPS = -1  # --steps not given: as many as fit STEP_LINES (auto_steps), up to DEFAULT_STEPS
DEFAULT_ROWS = 40
AUTO_ROWS = -1  # --rows not given: a short report (BRIEF_ROWS a table) for one trace; a diff's short default
# Without --rows, every table of one trace's report stops at this many rows: the whole report fits a screen (about
# 120 lines) on a model's trace of thousands of kernels; --rows N or 0 shows more.
BRIEF_ROWS = 10
STEP_LINES = 40  # without --steps, the steps printed one by one take about this many lines at most
BRIEF_LINES = 120  # without --rows or --steps, one trace's report fits this many lines: a screen


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="trace-report",
        description="Read a torch.profiler Chrome trace (.json or .json.gz): kernels per step, the ops that "
        "launched them, per-kernel stats, a verdict; with two traces, a diff of their kernels.",
    )
    parser.add_argument("trace", help="a Chrome trace written by torch.profiler (.json or .json.gz)")
    parser.add_argument("other", nargs="?", help="a second trace: print what differs (e.g. eager vs --compile)")
    # --- communication: several ranks' traces (trace_report/communication.py) ---
    parser.add_argument("more", nargs="*", help="more traces, with --ranks: the other ranks of the same run")
    parser.add_argument(
        "--ranks",
        action="store_true",
        help="read the traces as the ranks of one distributed run: a row per rank, the skew between them "
        "(automatic when the names are RUN_rank0.json, RUN_rank1.json, ...)",
    )
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="ranks: read N traces at a time (default: one per core)")
    parser.add_argument("--skip_bad", action="store_true",
                        help="ranks: a trace that cannot be read is skipped (a note on stderr), not the end of the run")
    # --- end communication ---
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument("--fail_slower", type=_percent_flag, default=None, metavar="PCT",
                        help="with two traces: exit 1 when an op of 1%% of the step or more is slower by more than "
                        "PCT%% beyond the noise of its per-step times, one line per op on stderr (noise.py)")
    parser.add_argument("--full_names", action="store_true", help="show kernel names whole, not shortened")
    parser.add_argument("--kernels", action="store_true",
                        help="always print the post's avg CUDA table and what each kernel's name says (by default "
                        "only when the steps are printed one by one: the summary's top kernels stand for them)")
    # --- CUDA graphs (trace_report/graphs.py) ---
    parser.add_argument("--graph_kernels", action="store_true",
                        help="with CUDA graph replays: list each replay's kernels under its row")
    # --- end CUDA graphs ---
    # --- where fusion would pay (trace_report/fusion.py) ---
    parser.add_argument("--bandwidth", type=fusion.bandwidth_flag, default=None, metavar="GB/s",
                        help="the GPU's memory bandwidth for 'Where fusion would pay' (default: the nominal peak of "
                        "the GPU the trace names, when known)")
    # --- end fusion ---
    parser.add_argument("--replay", default=None, metavar="ROW|OP",
                        help="re-time one op of 'Ops by roofline' alone on this machine's GPU (its row number or op "
                        "name), rebuilt from the trace's shapes, strides and types; needs torch and a GPU")
    parser.add_argument("--replay_script", default=None, metavar="FILE",
                        help="with --replay: write the standalone script that re-times the op to FILE, run nothing")
    parser.add_argument("--peak", type=peaks.peak_flag, default=None, metavar="TFLOPS,TBPS",
                        help="the GPU's peak compute and memory bandwidth for 'Ops by roofline' (default: the datasheet "
                        "figures of the GPU the trace names, peaks.py)")
    parser.add_argument(
        "--steps",
        type=_steps_flag,
        default=AUTO_STEPS,
        help=f"how many steps to print one by one: a number or 'all' (default: up to {DEFAULT_STEPS} when their "
        f"kernels fit about {STEP_LINES} lines, else none: the summary stands for them)",
    )
    parser.add_argument(
        "--rows",
        type=count_or_zero,
        default=AUTO_ROWS,
        help=f"rows per table; 0 for all (default: {BRIEF_ROWS} for one trace, the report about 120 lines at most; "
        "with two traces a short diff, ~40 lines)",
    )
    # Seeing a step without uploading it: a picture, or Perfetto fed from this machine (_look, at the end).
    parser.add_argument(
        "--png", nargs="?", const="", metavar="FILE",
        help="draw one step as Perfetto shows it (CPU threads over GPU streams, an arrow from each launch to its "
        "kernel) into FILE, a PNG (default: beside the trace, .json replaced by .png); prints no tables",
    )
    parser.add_argument(
        "--step", type=step_flag, default=None,
        help="the step --png draws: a ProfilerStep number (3 or ProfilerStep#3), else an index (0 the first, "
        "-1 the last) (default: the first active step)",
    )
    parser.add_argument(
        "--open", action="store_true",
        help="serve this one trace from 127.0.0.1 to ui.perfetto.dev, print the link (and open it where a browser "
        "is); no upload; Ctrl-C stops",
    )
    parser.add_argument(
        "--port", type=count_or_zero, default=None,
        help=f"where --open listens (default: {PERFETTO_PORT}, the one port ui.perfetto.dev fetches from; "
        "0: any free one, for the far end of an SSH forward)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    frozen_before = gc.get_freeze_count()
    try:
        return exits_cleanly(_main)(argv)
    finally:
        if not frozen_before:  # called in a longer process (a test, a notebook): its objects go back to the GC
            gc.unfreeze()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.png is not None or args.open or args.step is not None or args.port is not None:
        return _look(args, parser)
    if args.replay is not None or args.replay_script is not None:
        if args.replay is None or args.other or args.more:
            parser.error("--replay ROW re-times an op of one trace (--replay_script FILE writes its script)")
        return replay_command(args.trace, args.replay, args.replay_script, args.peak)
    # --- communication: several ranks' traces ---
    paths = [args.trace, *([args.other] if args.other else []), *args.more]
    if args.ranks or rank_traces.is_rank_set(paths):
        return _ranks_main(paths, args)
    if args.more:
        raise UsageError(f"{len(paths)} traces: give --ranks to read them as the ranks of one run (a diff takes two)")
    # --- end communication ---
    if args.fail_slower is not None and not args.other:
        parser.error("--fail_slower PCT gates the diff of two traces: give the base trace and the new one")
    first = read_trace(args.trace)
    second = read_trace(args.other) if args.other else None
    # The traces' objects live as long as this process: kept out of the cyclic GC's later passes, which would walk
    # them all again while the analyses allocate (0.1-0.25 s of CPU on a 54 MB trace of 216k events, 2 cores).
    gc.freeze()
    for trace in (first, second):
        if trace is not None and trace.skipped_note:
            note(f"{trace.path}: {trace.skipped_note}")
    rows = _rows(args.rows)
    compared = diff(first, second) if second is not None else None
    gate = compared.gate(args.fail_slower) if args.fail_slower is not None else None
    if args.json:
        payload = Report(first, args.bandwidth, args.peak).to_json() if second is None else {
            "traces": [Report(first, args.bandwidth, args.peak).to_json(second),
                       Report(second, args.bandwidth, args.peak).to_json()],
            "diff": compared.to_dict(gate),
        }
        # JSON has no NaN or Infinity: a value a trace could not give (a zero-length window) is null.
        _print_json(payload)
        return _gated(gate)
    console = Console(highlight=False, width=_width())
    found = fusion.analyze(first, args.bandwidth, second)  # the last section
    if second is None:
        brief = args.rows == AUTO_ROWS and args.steps == AUTO_STEPS and not args.kernels  # asked for detail: 40 rows
        print_report(first, console, full_names=args.full_names, steps=args.steps,
                     rows=BRIEF_ROWS if brief else rows, graph_kernels=args.graph_kernels, kernels=args.kernels,
                     fusion_found=found, fusion_rows=FUSION_BRIEF_ROWS if brief else rows,
                     op_table=roofline.op_table(first, args.peak), op_rows=ROOFLINE_BRIEF_ROWS if brief else rows,
                     lines=BRIEF_LINES if brief else None)
        return 0
    console.width = min(console.width, DIFF_WIDTH)  # a diff fits 100 columns, its fusion section too
    compact = args.rows == AUTO_ROWS
    print_diff(compared, console, full_names=args.full_names, rows=rows, compact=compact)
    if compact:
        print_fusion_line(found, console)
    else:
        print_fusion(found, console, rows=rows)
    return _gated(gate)


def _gated(gate) -> int:
    """--fail_slower: the gate's lines on stderr (stdout stays the report, or --json's JSON), exit 1 when it fails."""
    if gate is None:
        return 0
    sys.stdout.flush()
    print_gate(gate, sys.stderr)
    return 0 if gate.passed else 1


def _percent_flag(text: str) -> float:
    try:
        value = float(text.removesuffix("%"))
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a percentage, 0 or more (5 or 5%), got {text!r}")
    return value


# --- communication (trace_report/communication.py) ---------------------------------------------


def _ranks_main(paths: list[str], args) -> int:
    """The ranks of one run: each rank's collectives and steps in a row, the skew between them, the straggler, and
    per rank each collective with its bucket or unit (attribution.py). The traces are read --jobs at a time."""
    if len(paths) < 2:
        raise UsageError("--ranks reads two traces or more, one per rank of the same run")
    ranks = rank_traces.read_ranks(paths, keep_traces=args.json, jobs=args.jobs, skip_bad=args.skip_bad)
    if args.json:
        lag = rank_traces.skew(ranks)
        slow = rank_traces.straggler(ranks, lag)
        payload = {
            "ranks": [{"rank": r.rank, **_rank_report(r).with_communication(), "collectives_by_unit": r.figures.owners}
                      for r in ranks],
            "skew": lag.to_dict() if lag is not None else None,
            "straggler": slow.to_dict() if slow is not None else None,
        }
        _print_json(payload)
        return 0
    console = Console(highlight=False, width=_width())
    rank_traces.print_ranks(ranks, console)
    print_owners(ranks, console)
    first = ranks[0]
    if first.comm is not None:
        console.print(f"[bold]rank {first.rank}[/bold]: {escape(first.figures.name)}")
        comm.print_communication(first.comm, console, rows=_rows(args.rows))
    return 0


def _rank_report(rank) -> Report:
    """A rank's Report, with the collectives read_ranks found already."""
    report = Report(rank.trace)
    report.communication = rank.comm
    return report


# --- end communication ---


def _print_json(payload) -> None:
    """The report as one line of JSON: json's C encoder writes it only without indentation, 0.4 s sooner on a 14 MB
    report (jq or python -m json.tool indent it for reading)."""
    try:  # most reports hold no NaN or infinity: one pass of the C encoder, without walking the payload first
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(payload), ensure_ascii=False, allow_nan=False)
    sys.stdout.write(text)
    sys.stdout.write("\n")


def _finite(value):
    """`value` with every non-finite float replaced by None, in dicts and lists at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


# --- one trace -----------------------------------------------------------------------------------------------


def print_report(
    trace: Trace, console: Console, *, full_names: bool = False, steps: int | None = AUTO_STEPS, rows: int | None = DEFAULT_ROWS,
    graph_kernels: bool = False, kernels: bool = False, fusion_found: fusion.Fusion | None = None,
    fusion_rows: int | None = None, op_table: roofline.OpTable | None = None, op_rows: int | None = None,
    lines: int | None = None,
) -> None:
    """The report of one trace: header and summary, then the sections below them in order. With `lines`, the sections
    that do not fit that many lines in all are left out, the least telling first (the per-kernel tables, the graph
    replays, the steps one by one), and one line at the end says which and how to see them."""
    judged = verdict(trace)
    observed = observe(trace, judged)
    summary = summarize(trace, judged)
    collapse = steps == AUTO_STEPS  # asked for steps (--steps) are printed whole; else a repeated step is one line
    if steps == AUTO_STEPS:
        steps = auto_steps(summary.max_per_step)
    kernels = kernels or steps is None or steps > 0
    shown = trace.steps if steps is None else trace.steps[:steps]
    found = comm.communication(trace)

    def steps_section() -> None:
        _print_steps(trace, shown, console, full_names=full_names, rows=rows, collapse=collapse)

    def kernels_section() -> None:
        if trace.has_gpu and kernels:
            if len(trace.steps) > 1 or not shown:  # one step printed one by one is its own avg CUDA table
                print_kernel_stats(trace, console, full_names=full_names, rows=rows)
            print_decoded(trace, console, full_names=full_names,
                          rows=rows if rows is None or rows > BRIEF_ROWS else max(1, rows // 2))
        elif trace.has_gpu:
            console.print("[dim]per step and per kernel: --steps N prints steps one by one, --kernels the post's avg "
                          "CUDA table and what each kernel's name says[/dim]")
            console.print()

    # (name said when left out, how it prints, the order in which sections are given up to fit `lines`: high first)
    sections = [
        ("the steps one by one", steps_section, 3),
        ("what fell outside the steps", lambda: print_outside_steps(trace, console), 4),
        ("the CUDA graph replays", lambda: graphs.print_graph_replays(  # CUDA graphs
            trace, console, kernels=graph_kernels, full_names=full_names, rows=rows), 2),
        ("the per-kernel tables", kernels_section, 1),
        ("the collectives", lambda: comm.print_communication(found, console, rows=rows) if found else None,
         _collectives_keep(summary, judged)),
        ("the verdict's numbers", lambda: print_verdict(trace, console, judged), 7),
        ("where the memory goes", lambda: print_memory(memory_peaks(trace), console, rows=rows), 6),
        ("what the profiler changed", lambda: print_observed(observed, console), 8),
        ("the ops by roofline", lambda: print_op_table(op_table, console, rows=op_rows, brief=lines is not None)
         if op_table else None, 7),
        ("where fusion would pay", lambda: print_fusion(fusion_found, console, rows=fusion_rows)
         if fusion_found is not None else None, 6),
    ]
    found_advice = advise(trace, judged)
    head = _rendered(console, lambda: (print_header(trace, console), print_summary(summary, console, rows=rows),
                                       print_advice(found_advice, console, rows=ADVICE_BRIEF if lines else None)))
    console.file.write(head)
    rendered = [(name, _rendered(console, draw), keep) for name, draw, keep in sections]
    kept = {name for name, _, _ in rendered}
    if lines is not None:
        used = head.count("\n") + 2  # and the line (two at 100 columns) saying what was left out
        kept = set()
        for name, text, _ in sorted(rendered, key=lambda section: -section[2]):
            if used + text.count("\n") <= lines:
                kept.add(name)
                used += text.count("\n")
    for name, text, _ in rendered:
        if name in kept:
            console.file.write(text)
    left = [name for name, text, _ in rendered if name not in kept and text.strip()]
    if left:
        console.print(f"[dim]left out to fit a screen: {', '.join(left)} (--rows 0 prints every section whole)[/dim]")


# Collectives holding this share of the GPU's time or more make the rank what it is (a DDP rank: 24% in its
# gradients' all-reduces): their section is kept before fusion's and memory's when a screen cannot hold all.
COLLECTIVES_SHARE = 0.10


def _collectives_keep(summary, judged: Verdict | None = None) -> float:
    """The collectives section's place in what is kept to fit a screen: from what the trace is made of; first of all
    for a rank the collectives pace (its verdict's numbers and the op table go before them)."""
    if judged is not None and judged.kind == "communication-bound":
        return 7.5
    comm_us = sum(row.us for row in summary.kinds if row.kind == COMMUNICATION)
    return 6.5 if summary.total_us and comm_us >= COLLECTIVES_SHARE * summary.total_us else 5


def _rendered(console: Console, draw) -> str:
    """What `draw` prints to the console, as text (styles kept), not yet written."""
    with console.capture() as captured:
        draw()
    return captured.get()


def _print_steps(trace: Trace, shown: list[Step], console: Console, *, full_names: bool, rows: int | None,
                 collapse: bool) -> None:
    printed: dict[tuple, Step] = {}  # the GPU work sequences printed in full so far, and their steps
    for step in shown:
        if trace.has_gpu:
            sequence = tuple((w.kind, w.name, w.launched_by) for w in step.gpu)
            if collapse and sequence in printed:  # a step like one above: its times, not the same table again
                print_repeated_step(step, printed[sequence], console)
                continue
            printed[sequence] = step
            print_gpu_step(step, console, full_names=full_names, rows=rows)
        else:
            print_cpu_step(step, console, rows=rows)
    if len(shown) < len(trace.steps):
        left = len(trace.steps) - len(shown)
        console.print(f"[dim]… {left} {'more ' if shown else ''}step{'s' if left != 1 else ''} not printed one by one "
                      "(--steps N or all)[/dim]")


def auto_steps(max_per_step: int) -> int:
    """How many steps to print one by one when --steps is not given: up to DEFAULT_STEPS, in about STEP_LINES lines
    (a step's table takes its rows and about 8 more): 3 steps of the post's MLP (5 kernels), 1 of SDPA's math
    attention (20), none of a model's (hundreds: the summary stands for them)."""
    return min(DEFAULT_STEPS, STEP_LINES // (max_per_step + 8))


def print_header(trace: Trace, console: Console) -> None:
    where = trace.device or "no GPU in the trace"
    if trace.from_profiler_steps:
        names = [s.name for s in trace.steps]
        span = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
        steps = f"{len(names)} active step{'s' if len(names) != 1 else ''} ({span})"
    else:
        steps = "one step: the whole trace"
    console.print(f"[bold]{escape(trace.name)}[/bold] · {escape(where)} · {escape(steps)}")
    for text in trace.notes:
        console.print(f"[yellow]note:[/yellow] {escape(text)}")


def print_gpu_step(step: Step, console: Console, *, full_names: bool, rows: int | None) -> None:
    kernels = step.kernels
    others = _kind_counts(w.kind for w in step.gpu if w.kind != "kernel")
    title = (
        f"{step.name} · CPU {step.dur:,.1f} µs"
        + (f" ({step.sync_us:,.1f} of them waiting in synchronize)" if step.sync_us else "")
        + f" · GPU busy {step.gpu_busy_us:,.1f} µs · {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"
        + f" ({len(step.gemms)} GEMM{'s' if len(step.gemms) != 1 else ''})"
        + (f" + {others}" if others else "")
    )
    console.print(f"[bold]{escape(title)}[/bold]")
    total = step.gpu_time_us
    cells = [[str(i), work.kind, work.name if full_names else work.short_name, work.launched_by or "-",
              f"{work.dur:,.1f}", f"{work.dur / total:.0%}" if total else "-"] for i, work in enumerate(_head(step.gpu, rows), 1)]
    console.print(fitted_table([Column("#", right=True, style="dim"), Column("kind"),
                                Column("GPU work", least=24, fold="name", lines=99 if full_names else 3),
                                Column("launched by", least=12, most=22, fold="op"), Column("µs", right=True),
                                Column("share", right=True)], cells, console.width))
    _more(console, step.gpu, rows, "GPU work items")
    calls = runtime_rows(step.runtime)
    if calls:
        text = ", ".join(f"{row['name']} ×{row['count']} ({row['total_us']:,.1f} µs)" for row in calls)
        console.print(f"  runtime calls: {escape(text)}")
    idle = step.idle_ops()
    if idle:
        text = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in idle.items())
        console.print(f"  launched nothing (0 µs on the GPU): {escape(text)}")
    console.print()


def print_repeated_step(step: Step, same: Step, console: Console) -> None:
    """One line for a step that ran the same GPU work, in the same order, from the same ops, as one printed above."""
    console.print(
        f"[bold]{escape(step.name)}[/bold] · CPU {step.dur:,.1f} µs · GPU busy {step.gpu_busy_us:,.1f} µs · the same "
        f"{len(step.gpu)} GPU work items as {escape(same.name)}, in the same order, from the same ops (--json has "
        "each one's time)"
    )
    console.print()


def print_cpu_step(step: Step, console: Console, *, rows: int | None) -> None:
    """No GPU lane: the CPU ops are all there is to read, as in the harness's CPU runs."""
    ops = step.op_rows()
    labels = step.op_names(labels=True)
    title = f"{step.name} · CPU {step.dur:,.1f} µs · {sum(row['count'] for row in ops)} CPU ops"
    if labels:
        title += " · labels: " + ", ".join(f"{n} ×{c}" if c > 1 else n for n, c in labels.items())
    console.print(f"[bold]{escape(title)}[/bold]")
    ordered = sorted(ops, key=lambda row: row["cpu_us"], reverse=True)
    cells = [[row["name"], str(row["count"]), f"{row['cpu_us']:,.1f}", f"{row['self_us']:,.1f}"] for row in _head(ordered, rows)]
    console.print(fitted_table([Column("CPU op", least=24, fold="name", lines=4), Column("calls", right=True),
                                Column("CPU µs", right=True), Column("self µs", right=True)], cells, console.width))
    _more(console, ordered, rows, "ops")
    console.print()


def print_outside_steps(trace: Trace, console: Console) -> None:
    """What no step holds: the profiler's closing synchronize above all, which the table counts as CPU time."""
    calls: dict[str, list[float]] = {}
    for call in trace.runtime_outside_steps:
        row = calls.setdefault(call.name, [0, 0.0])
        row[0] += 1
        row[1] += call.dur
    parts = [f"{name} ×{n} ({total:,.1f} µs)" for name, (n, total) in calls.items()]
    if trace.ops_outside_steps:
        parts.append(f"{len(trace.ops_outside_steps)} CPU ops and labels")
    if trace.gpu_outside_steps:
        n = len(trace.gpu_outside_steps)
        parts.append(f"{n} GPU work item{'s' if n != 1 else ''} from outside the steps")
    if not parts:
        return
    console.print(f"[bold]outside the steps:[/bold] {escape(', '.join(parts))}")
    closing = trace.closing_sync
    if closing is not None:
        console.print(
            f"  that {escape(closing.name)} is the profiler's flush: the CPU waiting for the GPU, yet Self CPU time "
            "in the table"
        )
    unlaunched = sum(1 for work in trace.gpu_outside_steps if work.launch is None)
    if unlaunched:
        console.print(
            f"  {unlaunched} GPU work item{'s' if unlaunched != 1 else ''} with no launch call in the trace: launched "
            "before the profiler recorded the CPU (the warmup step's, still running), no step's"
        )
    console.print()


def print_kernel_stats(trace: Trace, console: Console, *, full_names: bool, rows: int | None) -> None:
    stats = trace.kernel_stats()
    n = len(trace.steps)
    grand = sum(s.total_us for s in stats)
    console.print(f"[bold]GPU work across {n} step{'s' if n != 1 else ''}[/bold] (the post's avg CUDA table)")
    told_apart = distinct_short_names(s.name for s in stats if s.kind == "kernel")  # one name, one row
    cells = [[s.name if full_names else told_apart.get(s.name, s.short_name), s.launched_by or "-", str(s.count),
              per_step_count(s.count / n), f"{s.avg_us:,.1f}", f"{s.min_us:,.1f}–{s.max_us:,.1f}",
              f"{s.total_us / grand:.0%}" if grand else "-"]
             for s in _head(sorted(stats, key=lambda s: s.total_us, reverse=True), rows)]
    console.print(fitted_table([Column("GPU work", least=24, fold="name", lines=99 if full_names else 3),
                                Column("launched by", least=12, most=22, fold="op"), Column("calls", right=True),
                                Column("/step", right=True), Column("avg µs", right=True),
                                Column("min–max", right=True), Column("share", right=True)], cells, console.width))
    _more(console, stats, rows, "names")
    console.print()


def print_decoded(trace: Trace, console: Console, *, full_names: bool, rows: int | None) -> None:
    names = [s.name for s in trace.kernel_stats() if s.kind == "kernel" and decode(s.name).describe()]
    if not names:
        return
    console.print("[bold]What the kernel names say[/bold]")
    told_apart = distinct_short_names(names)
    cells = [[name if full_names else told_apart[name],
              decode(name).describe() if full_names else clipped(decode(name).describe(), console.width - 46, 3)]
             for name in _head(names, rows)]
    console.print(fitted_table([Column("kernel", least=24, most=None if full_names else 36, fold="name",
                                       lines=99 if full_names else 3), Column("decoded", least=30)],
                               cells, console.width))
    _more(console, names, rows, "names")
    console.print()


def print_verdict(trace: Trace, console: Console, given: Verdict | None = None) -> None:
    v = given or verdict(trace)
    if v.kind not in ("no GPU data", "GPU only"):  # with no CPU side, the numbers a verdict weighs are not there
        print_verdict_numbers(v, console)
    style = {"overhead-bound": "yellow", "compute-bound": "green", "communication-bound": "magenta"}.get(v.kind, "dim")
    kind, _, rest = v.summary.partition(": ")
    console.print(f"[bold]verdict:[/bold] [{style}]{kind}[/{style}]: {escape(rest)}")


def print_verdict_numbers(v: Verdict, console: Console) -> None:
    """The numbers the verdict weighs: the table's two totals, what the CPU total holds, the GPU lane."""
    console.print(f"[bold]Who sets the pace[/bold] ({v.steps} step{'s' if v.steps != 1 else ''})")
    table = Table()
    table.add_column("number")
    table.add_column("µs", justify="right")
    table.add_column("per step", justify="right")
    table.add_column("what it is", overflow="fold")
    # No per-step figure for the CPU total: the closing synchronize belongs to no step.
    table.add_row("Self CPU time total", f"{v.self_cpu_total_us:,.1f}", "", "as the table sums it: every CPU box's self time")
    if v.closing_sync_us is not None:
        table.add_row("  closing synchronize", f"{v.closing_sync_us:,.1f}", "", "of it: the profiler's flush after the last step, waiting for the GPU")
    other_waits = v.sync_wait_us - (v.closing_sync_us or 0.0)
    if other_waits > 0:
        table.add_row("  other synchronize", f"{other_waits:,.1f}", "", "of it: waiting in the other synchronize calls")
    issue = v.cpu_us_per_step * v.steps
    table.add_row("CPU issuing work", f"{issue:,.1f}", f"{v.cpu_us_per_step:,.1f}", "the CPU total less the waits")
    steps_us = v.self_gpu_total_us - v.outside_gpu_us  # per step: the steps' own work, as the summary's header
    table.add_row("Self CUDA time total", f"{v.self_gpu_total_us:,.1f}", f"{steps_us / v.steps:,.1f}", "kernels, memsets and memcpys, summed")
    if v.outside_gpu_items:
        table.add_row("  outside the steps", f"{v.outside_gpu_us:,.1f}", "", f"of it: {v.outside_gpu_items} GPU work items in no "
                      "step (before the first: the warmup's or a graph replay, still running), in no per-step figure")
    table.add_row("GPU busy", f"{v.gpu_busy_us_per_step * v.steps:,.1f}", f"{v.gpu_busy_us_per_step:,.1f}", "time with the steps' GPU work running, overlaps counted once")
    table.add_row(
        "GPU waiting on launches",
        f"{v.launch_wait_us:,.1f}",
        "",
        f"{v.launch_waits} gap{'s' if v.launch_waits != 1 else ''}, {v.launch_wait_fraction:.0%} of the GPU's "
        f"{v.gpu_window_us:,.1f} µs window: the next launch returned after the GPU ran dry",
    )
    if v.max_gpu_lag_us is not None:
        table.add_row("GPU behind CPU, at most", f"{v.max_gpu_lag_us:,.1f}", "", "a GPU work's start minus its launch call's start")
    console.print(table)


# --- two traces ----------------------------------------------------------------------------------------------


def print_diff(d: TraceDiff, console: Console, *, full_names: bool, rows: int | None, compact: bool = False) -> None:
    """Two traces: which op got slower, by kind, what only one runs, kernels by name, step times
    (compare_report.py). `compact`: each table's short default instead of `rows`."""
    print_comparison(d, console, full_names=full_names, rows=rows, compact=compact)


# --- one step drawn, or the trace opened in Perfetto (picture.py, serve.py) ----------------------------------


def _look(args: argparse.Namespace, parser: ArgumentParser) -> int:
    """`--png` and `--open`: the picture first (its flags checked before the trace is read), then the server. With
    several ranks' traces, `--png` draws them one above the other on one time axis."""
    paths = [args.trace, *([args.other] if args.other else []), *args.more]
    several = len(paths) > 1 and args.png is not None and (args.ranks or rank_traces.is_rank_set(paths))
    if (args.other and not several) or args.json:
        parser.error(f"--png and --open take one trace (or, --png, each rank's of one run) and print no report: drop "
                     f"{'the second trace' if args.other else '--json'}")
    if several and args.open:
        parser.error("--open opens one trace in Perfetto: give one, or drop --open")
    if args.png is None and args.step is not None:
        parser.error("--step picks the step that --png draws: add --png")
    if not args.open and args.port is not None:
        parser.error("--port is where --open listens: add --open")
    trace_path = Path(args.trace)
    if args.png is not None:
        if importlib.util.find_spec("matplotlib") is None:
            raise CannotRunHere("--png draws with matplotlib, which is not installed here: install trace-report[png] "
                                "(uvx --from './trace_report[png]' trace-report ...) or pip install matplotlib")
        default = picture_path(trace_path)
        if several:  # RUN_rank0.json, RUN_rank1.json -> RUN_ranks.png
            default = default.with_name(rank_traces.RANK_NAME.sub(r"\g<run>_ranks.png", trace_path.name))
        png = Path(args.png) if args.png else default
        if png.suffix.lower() != ".png":
            parser.error(f"--png writes a PNG: give it a file name ending in .png, not {png.name!r}")
        writable_file(png, "the picture")
        if several:
            ranks = rank_traces.read_ranks(paths, keep_traces=True)
            chosen = [(r.rank, r.trace, choose_step(r.trace, args.step)) for r in ranks]
            drawn = write_ranks_picture(chosen, png)
            print(f"picture: {png} ({len(chosen)} ranks, {chosen[0][2].name}, {len(drawn.arrows)} launch arrows)",
                  flush=True)
            return 0
        trace = read_trace(trace_path)
        step = choose_step(trace, args.step)
        drawn = write_picture(trace, step, png)
        gpu = f": {gpu_counts(step)}, {len(drawn.arrows)} launch arrows" if step.gpu else ""
        print(f"picture: {png} ({step.name}{gpu})", flush=True)
    if args.open:
        return open_in_perfetto(trace_path, args.port)
    return 0


# --- small helpers -------------------------------------------------------------------------------------------


def _kind_counts(kinds) -> str:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in counts.items())


def _head(items, rows: int | None):
    return items if rows is None else items[:rows]


def _more(console: Console, items, rows: int | None, what: str) -> None:
    if rows is not None and len(items) > rows:
        console.print(f"[dim]… {len(items) - rows} more {what} (--rows 0 for all)[/dim]")


def _rows(flag: int) -> int | None:
    """--rows as a number of rows per table: None for all (0), DEFAULT_ROWS when not given."""
    return None if flag == 0 else DEFAULT_ROWS if flag == AUTO_ROWS else flag


def _steps_flag(text: str) -> int | None:
    if text == "all":
        return None
    try:
        return count_or_zero(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of steps (0 or more) or 'all', got {text!r}") from None


def _width() -> int | None:
    """A terminal's own width; 120 columns when piped, so kernel names do not fold at 80."""
    return None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120


if __name__ == "__main__":
    sys.exit(main())
