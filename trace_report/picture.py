"""A picture of one profiled step, drawn as the posts' Perfetto figures are, into a PNG: no browser, no upload.

    CPU thread 988     [ProfilerStep#2                                        ]
                         [mlp_fwd                                           ]
                           [aten::linear      ] [aten::linear  ] [gelu] [mul]
                             [aten::mm      ]     [aten::mm  ]
                               [cuLaunchKernelEx]
                                     ↘ an arrow from each launch call to the work it queued
    GPU 0 · stream 7                  [nvjet_…_TNT    ] [nvjet_…_TNT   ] [gelu] [mul] [nvjet_…]

Each CPU thread is a band of nested boxes (the step, the lesson's label, the aten ops, the runtime calls at the
bottom); a training step has a second band, autograd's thread, where the backward's ops and launches run. Each
GPU stream is a band of kernels, memsets and memcpys in time order, named by their decoded short names
(`kernel_names`, as `trace-report` prints them) and coloured by kind. Times are µs from the step's start.
A dashed line marks where the step ends on the CPU: what the GPU runs after it was queued before it.

Drawing happens in two parts. `layout` turns a step into plain data (rows, boxes, arrows, in µs), the part the
tests read; `render` turns that into a PNG with matplotlib (imported there, so a report without a picture never
pays for it). Boxes narrower than MIN_BOX_PX on the picture are merged with their small neighbours into one box
that says how many it holds ("12 kernels"), and a name is written only where it fits, so a long step stays
readable. Only the chosen step's ops, runtime calls and GPU work are touched: a 200 MB trace costs its reading,
then milliseconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from trace_report.errors import UsageError
from trace_report.files import write_atomically
from trace_report.communication import BACKEND_LABEL
from trace_report.kernels import decode, decode_nccl

# The figure: 16 in wide at 100 dpi, row titles in the left margin; the plot itself is PLOT_WIDTH_PX wide.
DPI = 100
FIGURE_WIDTH_IN = 16.0
LEFT_IN, RIGHT_IN = 1.75, 0.25
PLOT_WIDTH_PX = round((FIGURE_WIDTH_IN - LEFT_IN - RIGHT_IN) * DPI)
CPU_LEVEL_IN = 0.22  # one nesting level of a CPU thread
GPU_LEVEL_IN = 0.34  # a GPU stream: taller, it is what the picture is about
ROW_GAP_IN = 0.3  # between bands: the launch arrows cross it
TOP_IN, BOTTOM_IN = 0.75, 0.95  # title above; time axis and legend below
FONT_PT = 7

MIN_BOX_PX = 2.0  # narrower boxes are merged with their small neighbours: one pixel wide says nothing
MERGE_GAP_PX = 2.0  # small boxes this close together merge
CHAR_PX = 6.0  # a character of FONT_PT text at DPI, a little wider than DejaVu Sans' average: names never overflow
TEXT_PAD_PX = 4.0
MIN_CHARS = 4  # a name cut shorter than this (plus "…") is no help: the box stays blank
MIDDLE_CUT_CHARS = 12  # a kernel name cut to fewer keeps its start: two stubs around "…" read as nothing

# What each kind of box is, in the legend's words and order, with its colour.
KINDS = {
    "step": ("ProfilerStep", "#d9d9d9"),
    "label": ("label (record_function)", "#f1ce63"),
    "op": ("CPU op", "#a0cbe8"),
    "runtime": ("runtime call (launch, memset, ...)", "#ff9d9a"),
    "sync": ("synchronize (CPU waits)", "#d37295"),
    "gemm": ("GEMM", "#4e79a7"),
    "elementwise": ("elementwise", "#f28e2b"),
    "attention": ("attention", "#e15759"),
    "copy": ("copy / memset", "#bab0ac"),
    "triton": ("Triton", "#59a14f"),
    "collective": ("collective (NCCL kernel, gloo's thread)", "#17becf"),
    "other": ("other kernel", "#b07aa1"),
}
_ATTENTION = re.compile(r"flash|fmha|attention|attn|sdpa|_mha", re.IGNORECASE)
ARROW_COLOR = "#333333"


@dataclass(frozen=True)
class Row:
    """One band of the picture: a CPU thread (one level per nesting depth) or a GPU stream."""

    title: str
    lane: str  # "cpu" | "gpu"
    thread: tuple  # (pid, tid)
    levels: int


@dataclass
class Box:
    """One drawn box: a trace item (an op, a runtime call, a kernel, ...) or several small neighbours merged."""

    row: int  # index into Layout.rows
    level: int  # nesting depth inside the row, 0 at the top
    start: float  # µs from the step's start
    end: float
    kind: str  # a key of KINDS
    name: str  # the item's name (a kernel's decoded short name), or what a merged box holds: "12 kernels"
    text: str  # what is written inside: the name, cut to fit, or "" where nothing fits
    items: tuple = ()  # the trace objects it stands for, in time order
    faded: bool = False  # GPU work launched before this step: no launch to draw an arrow from

    @property
    def merged(self) -> bool:
        return len(self.items) > 1


@dataclass(frozen=True)
class Arrow:
    """From a launch call's box to the box of the GPU work it queued (Perfetto's flow arrow)."""

    source: int  # index into Layout.boxes: the runtime call
    target: int  # index into Layout.boxes: the kernel, memset or memcpy
    start: float  # µs: the launch call's start
    end: float  # µs: the GPU work's start


@dataclass
class Layout:
    """What the picture shows, as data: the tests read this, `render` draws it."""

    title: str
    subtitle: str
    rows: list[Row]
    boxes: list[Box]
    arrows: list[Arrow]
    x_range: tuple[float, float]  # µs shown, from the step's start
    step_end: float | None  # µs: where the step's CPU box ends (None without ProfilerStep events)
    step_name: str
    width_px: int
    kinds: list[str] = field(default_factory=list)  # the legend: the kinds drawn, in KINDS order

    def boxes_in(self, lane: str) -> list[Box]:
        """The boxes of every row of one lane ("cpu" or "gpu"), row by row, each row's in time order."""
        rows = {i for i, row in enumerate(self.rows) if row.lane == lane}
        return sorted((b for b in self.boxes if b.row in rows), key=lambda b: (b.row, b.level, b.start))


# --- which step --------------------------------------------------------------------------------------------


def step_flag(text: str) -> int | str:
    """`--step`: a number (a ProfilerStep number, else an index), or `ProfilerStep#N` / `#N` (that step only)."""
    text = text.strip()
    named = re.fullmatch(r"(?:ProfilerStep)?#([0-9]+)", text)
    if named:
        return f"ProfilerStep#{int(named.group(1))}"
    if re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
    raise argparse.ArgumentTypeError(
        "expected a ProfilerStep number (3 or ProfilerStep#3) or an index (0 for the first, -1 for the last), "
        f"got {text!r}"
    )


def choose_step(trace, choice: int | str | None):
    """The step `--step` names: None for the first active step; a number is ProfilerStep#number when the trace
    has it, else an index into the active steps (negative from the end); `ProfilerStep#N` only that step."""
    steps = trace.steps
    if choice is None:
        return steps[0]
    if isinstance(choice, str):
        found = next((s for s in steps if s.name == choice), None)
        if found is None:
            raise UsageError(f"--step {choice}: {trace.name} has no such step; {_steps_text(steps)}")
        return found
    found = next((s for s in steps if s.name == f"ProfilerStep#{choice}"), None)
    if found is not None:
        return found
    if -len(steps) <= choice < len(steps):
        return steps[choice]
    raise UsageError(
        f"--step {choice}: {trace.name} has no ProfilerStep#{choice} and no step at index {choice}; {_steps_text(steps)}"
    )


def _steps_text(steps) -> str:
    names = [s.name for s in steps]
    span = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
    return f"its steps are {span} (indices 0 … {len(names) - 1}, or -1 for the last)"


def picture_path(trace_path: Path, ending: str = ".png") -> Path:
    """Where a trace's picture goes by default: beside it, `.json` or `.json.gz` replaced by `ending`."""
    name = trace_path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return trace_path.with_name(name[: -len(suffix)] + ending)
    return trace_path.with_name(name + ending)


# --- layout: the picture as data ---------------------------------------------------------------------------


class _Item(NamedTuple):
    """A trace item placed on its row: its level and time span (µs from the step's start), colour and name."""

    level: int
    start: float
    end: float
    kind: str
    name: str
    obj: Any  # the trace's own object: a CpuOp, a RuntimeCall, a GpuWork, or the Step for the step's box


def gpu_kind(work) -> str:
    """A kernel's colour: what it computes, as its name tells (memsets and memcpys are copies)."""
    if work.kind != "kernel":
        return "copy"
    if decode_nccl(work.name) is not None:  # NCCL's kernels: communication, not compute
        return "collective"
    name = decode(work.name)
    if _ATTENTION.search(work.name):
        return "attention"
    if name.is_gemm:
        return "gemm"
    if "Triton" in name.family:
        return "triton"
    if "copy" in name.ops:  # aten::copy_'s kernel (a dtype cast, .contiguous()): moving bytes, like a memcpy
        return "copy"
    if name.family == "ATen" and "elementwise" in name.short:
        return "elementwise"
    return "other"


def layout(trace, step, *, width_px: int = PLOT_WIDTH_PX, t0: float | None = None,
           x_range: tuple[float, float] | None = None, row_prefix: str = "") -> Layout:
    """Rows, boxes and arrows of `step` (one of `trace.steps`), for a plot `width_px` pixels wide. `t0`, `x_range`
    and `row_prefix` place it among other ranks' (layout_ranks): times from `t0` (default: the step's start)."""
    t0 = step.ts if t0 is None else t0
    threads = _cpu_threads(step)
    placed = {thread: _cpu_items(step, thread, t0, on_main=trace.from_profiler_steps and i == 0)
              for i, thread in enumerate(threads)}
    streams = sorted({(w.pid, w.tid) for w in step.gpu}, key=lambda key: tuple(str(k) for k in key))
    gpu_items = {
        stream: [_Item(0, w.ts - t0, w.ts - t0 + w.dur, gpu_kind(w), w.short_name, w) for w in step.gpu
                 if (w.pid, w.tid) == stream]
        for stream in streams
    }
    everything = [item for items in [*placed.values(), *gpu_items.values()] for item in items]
    x0 = min([step.ts - t0, *(item.start for item in everything)])
    x1 = max([step.ts - t0 + step.dur, *(item.end for item in everything)])
    x1 = x1 + 0.01 * (x1 - x0) if x1 > x0 else x0 + 1.0  # a little room after the last box
    if x_range is not None:
        x0, x1 = x_range
    px_per_us = width_px / (x1 - x0)

    rows: list[Row] = []
    boxes: list[Box] = []
    for i, thread in enumerate(threads):
        items = placed[thread]
        rows.append(Row(row_prefix + _thread_title(step, thread, i == 0), "cpu", thread,
                        1 + max(item.level for item in items)))
        for level in range(rows[-1].levels):
            boxes += _boxes(len(rows) - 1, [item for item in items if item.level == level], px_per_us, "cpu")
    launched_here = {id(call) for call in step.runtime}
    for stream in streams:
        rows.append(Row(f"{row_prefix}GPU {stream[0]} · stream {stream[1]}", "gpu", stream, 1))
        for box in _boxes(len(rows) - 1, gpu_items[stream], px_per_us, "gpu"):
            launch = box.items[0].launch
            box.faded = not box.merged and (launch is None or id(launch) not in launched_here)
            boxes.append(box)

    box_of = {id(item): i for i, box in enumerate(boxes) for item in box.items}
    arrows = []
    for i, box in enumerate(boxes):
        if rows[box.row].lane == "gpu" and not box.merged and not box.faded:
            work = box.items[0]
            arrows.append(Arrow(box_of[id(work.launch)], i, work.launch.ts - t0, work.ts - t0))

    present = {box.kind for box in boxes}
    return Layout(
        title=" · ".join(part for part in (trace.name, step.name, trace.device) if part),
        subtitle=" · ".join(
            [f"CPU {step.dur:,.1f} µs"]
            + ([f"GPU busy {step.gpu_busy_us:,.1f} µs", gpu_counts(step), "arrows: launch call → the GPU work it queued"]
               if step.gpu else ["no GPU work in this step"])
        ),
        rows=rows,
        boxes=boxes,
        arrows=arrows,
        x_range=(x0, x1),
        step_end=step.ts - t0 + step.dur if trace.from_profiler_steps else None,
        step_name=step.name,
        width_px=width_px,
        kinds=[kind for kind in KINDS if kind in present],
    )


def gpu_counts(step) -> str:
    """`5 kernels (3 GEMMs) + 2 memsets`: the step's GPU work by kind, as the report's step titles count it."""
    kernels, gemms = len(step.kernels), len(step.gemms)
    others: dict[str, int] = {}
    for work in step.gpu:
        if work.kind != "kernel":
            others[work.kind] = others.get(work.kind, 0) + 1
    text = f"{kernels} kernel{'s' if kernels != 1 else ''} ({gemms} GEMM{'s' if gemms != 1 else ''})"
    return text + "".join(f" + {n} {kind}{'s' if n != 1 else ''}" for kind, n in others.items())


def layout_ranks(chosen: Sequence[tuple[int, Any, Any]], *, width_px: int = PLOT_WIDTH_PX) -> Layout:
    """Several ranks' steps, `(rank, trace, step)` each, one above the other on one time axis: on one host the ranks
    share a clock, so a collective that starts later on one rank is drawn later. Times are µs from the earliest
    step's start; each rank's rows are titled with its rank."""
    t0 = min(step.ts for _, _, step in chosen)
    alone = [layout(trace, step, width_px=width_px, t0=t0) for _, trace, step in chosen]
    x_range = (min(lay.x_range[0] for lay in alone), max(lay.x_range[1] for lay in alone))
    rows: list[Row] = []
    boxes: list[Box] = []
    arrows: list[Arrow] = []
    for rank, trace, step in chosen:
        lay = layout(trace, step, width_px=width_px, t0=t0, x_range=x_range, row_prefix=f"rank {rank} · ")
        first_box = len(boxes)
        boxes += [dataclasses.replace(box, row=box.row + len(rows)) for box in lay.boxes]
        arrows += [dataclasses.replace(a, source=a.source + first_box, target=a.target + first_box)
                   for a in lay.arrows]
        rows += lay.rows
    names = sorted({step.name for _, _, step in chosen})
    present = {box.kind for box in boxes}
    return Layout(
        title=f"{len(chosen)} ranks · {chosen[0][1].name} … · {', '.join(names)}",
        subtitle=" · ".join(f"rank {rank}: CPU {step.dur:,.1f} µs" + (f", GPU busy {step.gpu_busy_us:,.1f} µs"
                                                                       if step.gpu else "")
                            for rank, _, step in chosen) + " · one clock: later is later on every rank",
        rows=rows, boxes=boxes, arrows=arrows, x_range=x_range, step_end=None,
        step_name=f"the earliest rank's {names[0]}",
        width_px=width_px, kinds=[kind for kind in KINDS if kind in present],
    )


def write_ranks_picture(chosen: Sequence[tuple[int, Any, Any]], path: Path) -> Layout:
    """Draw several ranks' steps stacked (layout_ranks) into `path`, a PNG written whole or not at all."""
    lay = layout_ranks(chosen)
    write_atomically(path, render(lay))
    return lay


def _cpu_threads(step) -> list[tuple]:
    """The step's CPU threads: the one whose box comes first (the thread that runs the step), then the others
    (autograd's, in a training step) by their first box."""
    first: dict[tuple, float] = {}
    for item in [*step.ops, *step.runtime]:
        key = (item.pid, item.tid)
        if key not in first or item.ts < first[key]:
            first[key] = item.ts
    return sorted(first, key=lambda key: first[key])


def _cpu_items(step, thread: tuple, t0: float, on_main: bool) -> list[_Item]:
    """One thread's ops and runtime calls with their nesting level: the number of boxes open at their start on that
    thread (outer, longer boxes first at the same instant; ops before calls). The main thread's boxes sit one level
    under the step's own box."""
    boxes = [(op.ts, op.dur, 0, op) for op in step.ops if (op.pid, op.tid) == thread]
    boxes += [(call.ts, call.dur, 1, call) for call in step.runtime if (call.pid, call.tid) == thread]
    boxes.sort(key=lambda box: box[:3])
    base = 1 if on_main else 0
    items = [_Item(0, step.ts - t0, step.ts - t0 + step.dur, "step", step.name, step)] if on_main else []
    open_ends: list[float] = []
    for ts, dur, is_call, obj in boxes:
        while open_ends and open_ends[-1] <= ts:
            open_ends.pop()
        kind = ("sync" if obj.is_sync else "runtime") if is_call else ("label" if obj.is_label else "op")
        if kind == "label" and BACKEND_LABEL.match(obj.name) and not obj.name.startswith("nccl:"):
            kind = "collective"  # gloo:all_reduce on gloo's thread: the collective itself (nccl:... only enqueues)
        items.append(_Item(base + len(open_ends), ts - t0, ts - t0 + dur, kind, obj.name, obj))
        open_ends.append(ts + dur)
    return items


def _thread_title(step, thread: tuple, main: bool) -> str:
    ops = [op for op in step.ops if (op.pid, op.tid) == thread]
    if not main and any(op.name.startswith("autograd::engine") for op in ops):
        return f"autograd thread {thread[1]}\n(the backward)"
    if not main and ops and all(op.name.startswith("gloo:") for op in ops):
        return f"gloo thread {thread[1]}\n(collectives)"
    return f"CPU thread {thread[1]}"


def _boxes(row: int, items: Sequence[_Item], px_per_us: float, lane: str) -> list[Box]:
    """One level's items as boxes, in time order: each wide one alone, each run of small neighbours merged into one
    box that counts them."""
    out: list[Box] = []
    run: list[_Item] = []

    def close_run() -> None:
        if len(run) == 1:
            out.append(_box(row, run[0], run[0].name, px_per_us, lane))
        elif run:
            time_by_kind: dict[str, float] = {}
            for item in run:
                time_by_kind[item.kind] = time_by_kind.get(item.kind, 0.0) + item.end - item.start
            kind = max(time_by_kind, key=time_by_kind.get)  # its colour: the kind that takes most of its time
            merged = _Item(run[0].level, run[0].start, max(item.end for item in run), kind, _count(run, lane), None)
            box = _box(row, merged, merged.name, px_per_us, lane, tuple(item.obj for item in run))
            if not box.text:  # "24 kernels" does not fit: "24" may
                box.text = _fit(str(len(run)), (merged.end - merged.start) * px_per_us, lane)
            out.append(box)
        run.clear()

    run_end = 0.0
    for item in sorted(items, key=lambda item: item.start):
        small = (item.end - item.start) * px_per_us < MIN_BOX_PX
        if small and run and (item.start - run_end) * px_per_us < MERGE_GAP_PX:
            run.append(item)
            run_end = max(run_end, item.end)
            continue
        close_run()
        if small:
            run.append(item)
            run_end = item.end
        else:
            out.append(_box(row, item, item.name, px_per_us, lane))
    close_run()
    return out


def _box(row: int, item: _Item, name: str, px_per_us: float, lane: str, objs: tuple | None = None) -> Box:
    text = _fit(name, (item.end - item.start) * px_per_us, lane)
    return Box(row, item.level, item.start, item.end, item.kind, name, text, objs if objs is not None else (item.obj,))


def _count(run: list[_Item], lane: str) -> str:
    """What a merged box holds: `12 kernels`, `3 memsets`, `7 GPU work items`, `9 ops`, `4 runtime calls`."""
    if lane == "gpu":
        kinds = {item.obj.kind for item in run}
        what = f"{kinds.pop()}s" if len(kinds) == 1 else "GPU work items"
    else:
        calls = sum(item.kind in ("runtime", "sync") for item in run)
        what = "runtime calls" if calls == len(run) else "ops" if calls == 0 else "CPU boxes"
    return f"{len(run)} {what}"


def _fit(name: str, width_px: float, lane: str) -> str:
    """What of `name` fits in `width_px`: all of it; on a CPU thread the op's own name (`mm` for `aten::mm`,
    `MmBackward0` for autograd's `evaluate_function: MmBackward0`) or its start; a kernel's two ends around "…"
    (a decoded name says the most at both: `nvjet_sm90_…_coopA_TNT`, `vectori…kernel<gelu>`); else nothing."""
    room = int((width_px - TEXT_PAD_PX) // CHAR_PX)
    if room >= len(name):
        return name
    if lane == "cpu":
        name = name.rsplit("::", 1)[-1].split(": ")[-1]
        if room >= len(name):
            return name
    keep = room - 1
    if keep < MIN_CHARS:
        return ""
    if lane == "gpu" and keep >= MIDDLE_CUT_CHARS:
        head = keep // 2
        return name[:head] + "…" + name[len(name) - (keep - head) :]
    return name[:keep] + "…"


# --- render: the picture as a PNG --------------------------------------------------------------------------


def render(lay: Layout) -> bytes:
    """The layout drawn with matplotlib's Agg canvas (no display, no pyplot state), as PNG bytes."""
    # matplotlib logs warnings (a font cache built on first use, a config folder it cannot write) through
    # `logging`, which prints them on stderr: a lesson's successful run keeps stderr empty.
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tops, y = [], 0.0
    for row in lay.rows:
        tops.append(y)
        y += row.levels * _level_height(row) + ROW_GAP_IN
    plot_h = max(y - ROW_GAP_IN, CPU_LEVEL_IN)
    fig_h = TOP_IN + plot_h + BOTTOM_IN
    fig = Figure(figsize=(FIGURE_WIDTH_IN, fig_h), dpi=DPI)
    FigureCanvasAgg(fig)
    plot = (LEFT_IN / FIGURE_WIDTH_IN, BOTTOM_IN / fig_h, lay.width_px / DPI / FIGURE_WIDTH_IN, plot_h / fig_h)
    ax = fig.add_axes(plot)
    ax.set_xlim(*lay.x_range)
    ax.set_ylim(plot_h, 0)

    def level_top(row: int, level: int) -> tuple[float, float]:
        height = _level_height(lay.rows[row])
        return tops[row] + level * height, height

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a glyph a font lacks in some kernel's name: the picture still draws
        _draw_rows(ax, lay, level_top)
        _draw_boxes(ax, lay, level_top)
        _draw_arrows(ax, lay, level_top)
        _draw_frame(fig, ax, lay, level_top, fig_h)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _level_height(row: Row) -> float:
    return GPU_LEVEL_IN if row.lane == "gpu" else CPU_LEVEL_IN


def _draw_rows(ax, lay: Layout, level_top) -> None:
    """Each band's background and title, in the left margin."""
    from matplotlib.transforms import blended_transform_factory

    margin = blended_transform_factory(ax.transAxes, ax.transData)
    for i, row in enumerate(lay.rows):
        top, height = level_top(i, 0)
        bottom = top + row.levels * height
        shade = "#f5f5f5" if i % 2 == 0 else "#fbfbfb"
        ax.axhspan(top - ROW_GAP_IN * 0.2, bottom + ROW_GAP_IN * 0.2, color=shade, zorder=0, lw=0)
        ax.text(-0.006, (top + bottom) / 2, row.title, transform=margin, ha="right", va="center", fontsize=8,
                parse_math=False)


def _draw_boxes(ax, lay: Layout, level_top) -> None:
    """The boxes as two collections (merged ones hatched), each at least a pixel wide; then the names that fit."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    x0, x1 = lay.x_range
    pixel = (x1 - x0) / lay.width_px
    for merged in (False, True):
        patches, faces = [], []
        for box in lay.boxes:
            if box.merged == merged:
                top, height = level_top(box.row, box.level)
                patches.append(Rectangle((box.start, top + 0.02), max(box.end - box.start, pixel), height - 0.04))
                faces.append(_rgba(KINDS[box.kind][1], 0.4 if box.faded else 1.0))
        if patches:
            ax.add_collection(PatchCollection(
                patches, facecolors=faces, edgecolors="#777777" if merged else "white", linewidths=0.3,
                hatch="////" if merged else None, zorder=2,
            ))
    for box in lay.boxes:
        if box.text:
            top, height = level_top(box.row, box.level)
            ax.text((box.start + box.end) / 2, top + height / 2, box.text, ha="center", va="center", fontsize=FONT_PT,
                    color="#1a1a1a", zorder=4, parse_math=False, clip_on=True)


def _draw_arrows(ax, lay: Layout, level_top) -> None:
    """From the bottom of each launch call, where it starts, to the top of its GPU work, where that starts."""
    if not lay.arrows:
        return
    from matplotlib.collections import LineCollection

    segments = []
    for arrow in lay.arrows:
        source, target = lay.boxes[arrow.source], lay.boxes[arrow.target]
        top, height = level_top(source.row, source.level)
        segments.append([(arrow.start, top + height - 0.02), (arrow.end, level_top(target.row, target.level)[0] + 0.02)])
    ax.add_collection(LineCollection(segments, colors=ARROW_COLOR, linewidths=0.6, alpha=0.6, zorder=3))
    heads = list(zip(*(segment[1] for segment in segments)))
    ax.plot(*heads, linestyle="none", marker="v", markersize=3.5, color=ARROW_COLOR, alpha=0.8, zorder=3)


def _draw_frame(fig, ax, lay: Layout, level_top, fig_h: float) -> None:
    """The step's end on the CPU, the time axis, the title and the legend."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    x0, x1 = lay.x_range
    if lay.step_end is not None:
        ax.axvline(lay.step_end, color="#555555", linestyle="--", linewidth=0.8, zorder=1)
        # Beside the step's own box, on the side with room: after it, unless the step ends at the right edge.
        note = f"{lay.step_name} ends on the CPU"
        after = (x1 - lay.step_end) / (x1 - x0) * lay.width_px > (len(note) + 3) * CHAR_PX
        top, height = level_top(0, 0)
        ax.text(lay.step_end, top + height / 2, f"  ← {note}" if after else f"{note} →  ", ha="left" if after else "right",
                va="center", fontsize=FONT_PT, color="#444444", zorder=5, parse_math=False)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="x", labelsize=8)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda us, _: f"{us:,.0f}" if us == int(us) else f"{us:,.1f}"))
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.set_xlabel(f"µs from the start of {lay.step_name}", fontsize=8)
    left = LEFT_IN / FIGURE_WIDTH_IN
    fig.text(left, 1 - 0.3 / fig_h, lay.title, fontsize=11, weight="bold", va="center", parse_math=False)
    fig.text(left, 1 - 0.55 / fig_h, lay.subtitle, fontsize=8.5, color="#333333", va="center", parse_math=False)

    handles = [Patch(facecolor=KINDS[kind][1], edgecolor="none", label=KINDS[kind][0]) for kind in lay.kinds]
    if any(box.merged for box in lay.boxes):
        merged = "small boxes merged and counted, coloured by the kind that takes most of their time"
        handles.append(Patch(facecolor="white", edgecolor="#777777", hatch="////", label=merged))
    if any(box.faded for box in lay.boxes):
        handles.append(Patch(facecolor=_rgba("#888888", 0.4), edgecolor="none", label="launched before this step"))
    if lay.arrows:
        handles.append(Line2D([], [], color=ARROW_COLOR, linewidth=0.8, marker="v", markersize=4, label="launch → GPU work"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 8), fontsize=7.5, frameon=False,
               bbox_to_anchor=(0.5, 0.0))


def _rgba(color: str, alpha: float) -> tuple[float, float, float, float]:
    value = int(color.lstrip("#"), 16)
    return ((value >> 16) / 255, ((value >> 8) & 0xFF) / 255, (value & 0xFF) / 255, alpha)


def write_picture(trace, step, path: Path) -> Layout:
    """Draw `step` of `trace` into `path` (a PNG, written whole or not at all); returns what was drawn."""
    lay = layout(trace, step)
    write_atomically(path, render(lay))
    return lay
