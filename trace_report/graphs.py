"""CUDA graph replays in a trace: which kernels each `cudaGraphLaunch` ran, how tightly, and what they compute.

A replayed graph shows in a trace as one runtime call on the CPU, `cudaGraphLaunch`, and its kernels (memsets and
copies too) on the GPU lane, each carrying the launch's correlation id: CUPTI gives every piece of work of a replay
the id of the call that launched the graph. The reader links each of them to that call (so the step tables say
`cudaGraphLaunch` launched them, and the verdict counts them as GPU work like any other); here they are grouped
back into replays:

    Replay        one cudaGraphLaunch and its GPU work, in GPU order: kernel count, GPU span (first start to last
                  end), busy time, the idle gaps inside it, how long after the launch call the first one started
    replays()     every replay of a trace, in launch order
    name_work()   what each piece of work computes: the op that launched it during the capture when the trace
                  recorded the capture (cudaStreamBeginCapture ... cudaStreamEndCapture), else what the kernel's
                  name says (GEMM, gelu+mul, split-K reduce, a Triton kernel's own name)

A graph captured before the profiler started (the usual case: warm up, capture, then profile the replays) leaves
no trace of its capture: the kernel names are then all there is to name the ops by. Like the reader, this module
imports no torch.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from rich.markup import escape
from rich.table import Table

from trace_report.console import Console, clipped
from trace_report.kernels import decode
from trace_report.model import GpuWork, RuntimeCall, Trace
from trace_report.timeline import busy_time

GRAPH_LAUNCH_CALLS = ("cudaGraphLaunch", "cuGraphLaunch")  # the runtime's and the driver's; _ptsz variants too
CAPTURE_BEGIN = ("cudaStreamBeginCapture", "cuStreamBeginCapture")
CAPTURE_END = ("cudaStreamEndCapture", "cuStreamEndCapture")


def is_graph_launch(name: str) -> bool:
    return name.startswith(GRAPH_LAUNCH_CALLS)


def _enqueues_work(name: str) -> bool:
    """A runtime call that puts work on a stream (inside a capture: a node of the graph)."""
    return not is_graph_launch(name) and ("Launch" in name or "Memset" in name or "Memcpy" in name)


@dataclass
class Replay:
    """One cudaGraphLaunch and the GPU work it ran, in GPU order."""

    launch: RuntimeCall
    work: list[GpuWork]
    step: str | None  # the profiler step whose CPU window holds the launch call; None outside the steps
    ops: list[str] = field(default_factory=list)  # what each piece of work computes (name_work)
    named_from: str = "kernel names"  # or "the capture"

    @property
    def kernels(self) -> list[GpuWork]:
        return [w for w in self.work if w.kind == "kernel"]

    @property
    def start(self) -> float | None:
        return self.work[0].ts if self.work else None

    @property
    def end(self) -> float | None:
        return max(w.end for w in self.work) if self.work else None

    @property
    def span_us(self) -> float:
        """From the first piece of work's start to the last one's end."""
        return self.end - self.start if self.work else 0.0

    @property
    def busy_us(self) -> float:
        return busy_time(self.work)

    @property
    def gaps_us(self) -> list[float]:
        """The idle stretch before each piece of work after the first (0 when it started as the previous ended)."""
        gaps, end = [], None
        for w in self.work:
            if end is not None:
                gaps.append(max(0.0, w.ts - end))
            end = w.end if end is None else max(end, w.end)
        return gaps

    @property
    def after_launch_us(self) -> float | None:
        """How long after the launch call started the GPU started the replay's first work."""
        return self.start - self.launch.ts if self.work else None

    @property
    def signature(self) -> tuple[str, ...]:
        """The work's names in order: replays of one graph share it."""
        return tuple(w.name for w in self.work)


@dataclass(frozen=True)
class Capture:
    """A capture the trace recorded: the calls between cudaStreamBeginCapture and cudaStreamEndCapture on one
    thread that enqueued work, in order; each became a node of the graph."""

    begin: RuntimeCall
    end: RuntimeCall
    enqueued: tuple[RuntimeCall, ...]


def _all_runtime(trace: Trace) -> list[RuntimeCall]:
    calls = [c for step in trace.steps for c in step.runtime] + list(trace.runtime_outside_steps)
    return sorted(calls, key=lambda c: c.ts)


def replays(trace: Trace) -> list[Replay]:
    """Every graph launch of the trace with its GPU work, in launch order; the work named by `name_work`."""
    step_of = {id(call): step.name for step in trace.steps for call in step.runtime}
    launches = [c for c in _all_runtime(trace) if is_graph_launch(c.name)]
    work: dict[int, list[GpuWork]] = {id(c): [] for c in launches}
    for w in trace.gpu_lane():
        if w.launch is not None and id(w.launch) in work:
            work[id(w.launch)].append(w)
    found = [Replay(c, work[id(c)], step_of.get(id(c))) for c in launches]
    name_work(found, captures(trace))
    return found


def captures(trace: Trace) -> list[Capture]:
    """The captures the trace recorded, in time order (none when the graphs were captured before profiling)."""
    by_thread: dict[tuple, list[RuntimeCall]] = {}
    for call in _all_runtime(trace):
        by_thread.setdefault((call.pid, call.tid), []).append(call)
    found = []
    for calls in by_thread.values():
        begin, inside = None, []
        for call in calls:
            if call.name.startswith(CAPTURE_BEGIN):
                begin, inside = call, []
            elif call.name.startswith(CAPTURE_END) and begin is not None:
                found.append(Capture(begin, call, tuple(inside)))
                begin = None
            elif begin is not None and _enqueues_work(call.name):
                inside.append(call)
    return sorted(found, key=lambda c: c.begin.ts)


def name_work(found: list[Replay], recorded: list[Capture]) -> None:
    """Set each replay's `ops`: from the latest capture before its launch with as many nodes as it ran work (each
    node is named by the op that enqueued it, `aten::mm`), else from its kernels' names."""
    for replay in found:
        capture = next(
            (c for c in reversed(recorded) if c.end.ts <= replay.launch.ts and len(c.enqueued) == len(replay.work)),
            None,
        )
        if capture is not None and replay.work:
            replay.ops = [call.launched_by or call.name for call in capture.enqueued]
            replay.named_from = "the capture"
        else:
            replay.ops = [_computes(w) for w in replay.work]
            replay.named_from = "kernel names"


def _computes(work: GpuWork) -> str:
    if work.kind != "kernel":
        return work.kind
    name = decode(work.name)
    if name.is_gemm:  # with what its epilogue adds, when the name says: lesson 05's kernel is GEMM+gelu+mul
        return "+".join(["GEMM", *(op for op in name.compute_ops if op != "mm")])
    return "+".join(name.compute_ops) or name.short


def outside_graphs(trace: Trace) -> list[GpuWork]:
    """The steps' kernels that no graph launch ran (launched one by one)."""
    return [w for w in trace.gpu_work() if w.kind == "kernel" and not (w.launch and is_graph_launch(w.launch.name))]


# --- what trace-report prints and --json adds ---------------------------------------------------------------


def summary(found: list[Replay]) -> str:
    """One paragraph: how many replays of how many graphs, and how tightly their kernels ran."""
    graphs = Counter(r.signature for r in found if r.work)
    gaps = [g for r in found for g in r.gaps_us]
    empty = sum(1 for r in found if not r.work)
    text = (
        f"{len(found)} graph launch{'es' if len(found) != 1 else ''} ({', '.join(sorted({r.launch.name for r in found}))}), "
        f"{len(graphs)} distinct graph{'s' if len(graphs) != 1 else ''} by the work they ran"
    )
    first_of = {}
    for r in found:
        first_of.setdefault(r.signature, r)
    for signature, n in graphs.most_common(3):
        kernels = len(first_of[signature].kernels)
        text += f"; {n}× a graph of {kernels} kernel{'s' if kernels != 1 else ''}"
        others = len(signature) - kernels
        if others:
            text += f" and {others} memset/copy{'s' if others != 1 else ''}"
    if gaps:
        text += (
            f". Inside a replay the GPU went from one piece of work to the next in {statistics.median(gaps):,.1f} µs "
            f"(median; longest {max(gaps):,.1f} µs)"
        )
    if empty:
        text += f". {empty} launch{'es' if empty != 1 else ''} with no GPU work recorded (run outside the window?)"
    return text + ". Their kernels count as GPU work in the verdict, like kernels launched one by one."


def print_graph_replays(
    trace: Trace, console: Console, *, kernels: bool = False, full_names: bool = False, rows: int | None = None
) -> None:
    """One row per graph launch: step, kernels, GPU span, busy time, gaps inside, delay after the launch call; with
    `kernels`, each replay's work under it (name, what it computes, µs, the gap before it)."""
    found = replays(trace)
    if not found:
        return
    console.print("[bold]CUDA graph replays[/bold] (one row per cudaGraphLaunch; span: first start to last end on the GPU; "
                  "gaps: idle inside the replay, total and longest; lag: from the launch call to the replay's start)")
    console.print(f"  {escape(summary(found))}")
    shown = found if rows is None else found[: max(1, rows // 2)]  # a replay's row takes two lines
    table = Table()
    table.add_column("#", justify="right", style="dim")
    table.add_column("step")
    table.add_column("launch / GPU work", overflow="fold", max_width=None if kernels else 20)
    table.add_column("computes", overflow="fold", max_width=None if kernels else 20)
    table.add_column("kernels", justify="right")
    table.add_column("span µs", justify="right")
    table.add_column("busy µs", justify="right")
    table.add_column("gaps µs", justify="right")
    table.add_column("lag µs", justify="right")
    for i, replay in enumerate(shown, 1):
        gaps = replay.gaps_us
        after = replay.after_launch_us
        table.add_row(
            str(i), escape((replay.step or "outside").replace("ProfilerStep", "")),
            escape(clipped(f"{replay.launch.name} ← {replay.launch.launched_by or '-'}", 20)),
            escape(clipped(_computes_cell(replay.ops), 20)),
            str(len(replay.kernels)), f"{replay.span_us:,.1f}", f"{replay.busy_us:,.1f}",
            f"{sum(gaps):,.1f} (max {max(gaps):,.1f})" if gaps else "-",
            f"{after:,.1f}" if after is not None else "no work",
        )
        if kernels:
            for w, op, gap in zip(replay.work, replay.ops, [None, *gaps]):
                name = w.name if full_names else w.short_name
                table.add_row("", "", f"  [dim]{escape(name)}[/dim]", escape(op), "", f"{w.dur:,.1f}", "",
                              f"{gap:,.1f} before" if gap is not None else "", "")
    console.print(table)
    if len(shown) < len(found):
        console.print(f"[dim]… {len(found) - len(shown)} more replays (--rows 0 for all)[/dim]")
    named = {r.named_from for r in shown}
    how = "the ops that enqueued them in the recorded capture" if named == {"the capture"} else (
        "what their kernel names say (the capture was not recorded: it came before the profile)")
    hint = "" if kernels else "; --graph_kernels lists each replay's kernels"
    console.print(f"  [dim]kernels named by {escape(how)}{hint}[/dim]")
    console.print()


def _computes_cell(ops: list[str], most: int = 6) -> str:
    """What a replay computes, for its table cell: its ops in order when they are few (`mm, gelu, mul, mm`), else the
    most frequent with their counts (`GEMM ×96, add ×64, … 12 more`): a model's graph runs hundreds of kernels."""
    if len(ops) <= most:
        return ", ".join(ops)
    counts = Counter(ops).most_common()
    shown = [f"{op} ×{n}" if n > 1 else op for op, n in counts[:most]]
    return ", ".join(shown) + (f", … {len(counts) - most} more" if len(counts) > most else "")


def graphs_to_dict(trace: Trace) -> dict | None:
    """The replays as plain data (trace-report --json's `cuda_graphs`); None when the trace launched no graph."""
    found = replays(trace)
    if not found:
        return None
    first = trace.steps[0].ts
    return {
        "launches": len(found),
        "distinct_graphs": len({r.signature for r in found if r.work}),
        "kernels_outside_graphs": len(outside_graphs(trace)),
        "replays": [
            {
                "step": r.step,
                "runtime_call": r.launch.name,
                "launched_by": r.launch.launched_by,
                "launch_us": round(r.launch.ts - first, 3),
                "kernels": len(r.kernels),
                "span_us": round(r.span_us, 3),
                "busy_us": round(r.busy_us, 3),
                "gaps_us": [round(g, 3) for g in r.gaps_us],
                "after_launch_us": None if r.after_launch_us is None else round(r.after_launch_us, 3),
                "named_from": r.named_from,
                "work": [
                    {"kind": w.kind, "name": w.name, "short_name": w.short_name, "op": op,
                     "start_us": round(w.ts - first, 3), "dur_us": round(w.dur, 3)}
                    for w, op in zip(r.work, r.ops)
                ],
            }
            for r in found
        ],
    }
