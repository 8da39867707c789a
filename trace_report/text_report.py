"""One trace's report as the terminal prints it: the header and summary, the advice, then each section (the steps
one by one, what fell outside them, the CUDA graph replays, the per-kernel tables, the collectives, the verdict's
numbers, the memory, what the profiler changed, the ops by roofline, where fusion would pay). Without --rows or
--steps the sections that do not fit a screen are left out, the least telling first.

`trace-report TRACE` (report.py) prints it, and so does a Report in a notebook (api.py's `_repr_html_`).
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from trace_report import communication as comm
from trace_report import fusion, graphs, roofline
from trace_report.advice import BRIEF as ADVICE_BRIEF, advise, print_advice
from trace_report.console import Column, Console, clipped, fitted_table
from trace_report.export import runtime_rows
from trace_report.fusion_report import print_fusion
from trace_report.kernels import COMMUNICATION, decode, distinct_short_names
from trace_report.memory import memory_peaks, print_memory
from trace_report.model import Step, Trace, per_step_count
from trace_report.observer import observe, print_observed
from trace_report.pace import Verdict, verdict
from trace_report.roofline_report import print_op_table
from trace_report.summary import print_summary, summarize

DEFAULT_STEPS = 3
AUTO_STEPS = -1  # --steps not given: as many as fit STEP_LINES (auto_steps), up to DEFAULT_STEPS
DEFAULT_ROWS = 40
# Without --rows, every table of one trace's report stops at this many rows: the whole report fits a screen (about
# 120 lines) on a model's trace of thousands of kernels; --rows N or 0 shows more.
BRIEF_ROWS = 10
STEP_LINES = 40  # without --steps, the steps printed one by one take about this many lines at most
BRIEF_LINES = 120  # without --rows or --steps, one trace's report fits this many lines: a screen



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
    if trace.overlaps:
        console.print(f"[dim]{escape(trace.overlaps.note)}[/dim]")


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
                                Column("launched by", least=12, most=22, fold="op"),
                                Column("calls", right=True, optional=True),  # /step says it, on 80 columns
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



# --- rows and counts -----------------------------------------------------------------------------------------


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

