"""A picture of one step's memory, into a PNG: bytes over time stacked by category, the step's phases marked.

    GB ▲                 peak ┐
       │            ▄▄▄▄▄▄▄▄▄▄█▄▄▄▄
       │        ▄▄▄▄██ activations ██▄▄▄▄
       │ ▄▄▄▄▄▄▄████████████████████████▄▄▄▄ gradients
       │ ████ parameters, optimizer state ███████████████
       └──[ forward ][      backward       ][ optimizer ]──▶ ms

The categories are torch's memory profiler's (lesson 11 writes them into its trace: memory.CategoryTimeline), the
phases the step's `record_function` ranges. `memory_layout` turns the timeline into plain data (the part tests read);
`render_memory` draws it with matplotlib, imported there.
"""

from __future__ import annotations

import io
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

from trace_report.files import write_atomically
from trace_report.memory import CATEGORY_NAMES, UNTOUCHED, CategoryTimeline
from trace_report.picture import picture_path

# Colours by category, in the order the bands stack from the bottom: what lives the whole step first.
COLORS = {
    UNTOUCHED: "#bbbbbb",
    "parameters": "#2e7d32",
    "optimizer state": "#d4a017",
    "inputs": "#444444",
    "gradients": "#1e56c8",
    "activations": "#d32f2f",
    "temporaries": "#9575cd",
    "autograd detail": "#64b5f6",
    "unknown (no tensor)": "#9e9e9e",
}
PHASE_COLORS = ("#e3f2fd", "#fff3e0", "#e8f5e9", "#f3e5f5")


@dataclass(frozen=True)
class MemoryLayout:
    title: str
    times_ms: list[float]  # from the step's start
    bands: dict[str, list[int]]  # category -> bytes at each time, in stacking order
    phases: list[tuple[str, float, float]]  # (label, start ms, end ms)
    peak: tuple[float, int]  # (ms, bytes)
    end_ms: float


def memory_layout(timeline: CategoryTimeline, step, labels: tuple[str, ...], title: str) -> MemoryLayout:
    """The step's part of the timeline (its last point before the step too, so the bands start where they stand)."""
    start, end = step.ts, step.ts + step.dur
    first = timeline.index_at(start)
    indexes = [first] + [i for i, t in enumerate(timeline.times_us) if start < t <= end]
    times = [0.0] + [(timeline.times_us[i] - start) / 1000 for i in indexes[1:]]  # the first: as the step starts
    names = [CATEGORY_NAMES.get(c, c.lower()) for c in timeline.categories]
    bands: dict[str, list[int]] = {}
    untouched = max(0, int(timeline.extras.get("allocated_before", 0)) - timeline.total(0))
    if untouched:
        bands[UNTOUCHED] = [untouched] * len(indexes)
    for name in COLORS:
        if name in names:
            column = names.index(name)
            values = [timeline.sizes[i][column] for i in indexes]
            if any(values):
                bands[name] = values
    totals = [sum(band[k] for band in bands.values()) for k in range(len(indexes))]
    top = max(range(len(totals)), key=lambda k: (totals[k], -k)) if totals else 0
    phases = []
    for label in labels:
        box = step.phase(label)
        if box is not None:
            phases.append((label, (box.ts - start) / 1000, (box.end - start) / 1000))
    return MemoryLayout(title, times, bands, phases, (times[top], totals[top]) if totals else (0.0, 0),
                        step.dur / 1000)


def render_memory(lay: MemoryLayout) -> bytes:
    """The layout drawn with matplotlib's Agg canvas (no display, no pyplot state), as PNG bytes."""
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    scale, unit = _unit(max((lay.peak[1], 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, (label, a, b) in enumerate(lay.phases):
            ax.axvspan(a, b, color=PHASE_COLORS[k % len(PHASE_COLORS)], zorder=0)
            ax.text((a + b) / 2, 1.01, label, transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=9)
        if lay.bands:
            ax.stackplot(lay.times_ms, *[[v / scale for v in band] for band in lay.bands.values()],
                         labels=list(lay.bands), colors=[COLORS[name] for name in lay.bands], step="post", zorder=2)
        ms, peak = lay.peak
        ax.annotate(f"peak {peak / scale:.3g} {unit}", (ms, peak / scale), xytext=(0, 12), textcoords="offset points",
                    ha="center", fontsize=9, arrowprops={"arrowstyle": "->"}, zorder=3)
        ax.set_xlim(0, max(lay.end_ms, lay.times_ms[-1] if lay.times_ms else 0))
        ax.set_ylim(0, peak / scale * 1.15 if peak else 1)
        ax.set_xlabel("ms from the step's start")
        ax.set_ylabel(unit)
        ax.set_title(lay.title, fontsize=10, pad=18)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, ncol=5, frameon=False)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None})
    return buffer.getvalue()


def _unit(peak: int) -> tuple[float, str]:
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if peak >= scale:
            return scale, unit
    return 1.0, "bytes"


def memory_picture_path(trace_path: Path) -> Path:
    """Beside the trace, with its tag: `<tag>.memory.png`."""
    return picture_path(trace_path, ".memory.png")


def write_memory_picture(timeline: CategoryTimeline, step, labels: tuple[str, ...], path: Path,
                         title: str) -> MemoryLayout:
    """Draw the step's memory into `path` (a PNG, written whole or not at all); returns what was drawn."""
    lay = memory_layout(timeline, step, labels, title)
    write_atomically(path, render_memory(lay))
    return lay
