"""What a run leaves behind: the terminal it prints to, the JSON and CSV of every number, and the PNG of speedups.

The JSON and CSV are rewritten after every shape (`write_results`), so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import csv
import datetime
import importlib.metadata
import io
import json
import sys
from pathlib import Path

import torch

from trace_report.console import Console
from trace_report.files import write_atomically
from profiling_in_pytorch.mlp.accuracy import TOLERANCES

# Not a terminal (CI logs, a remote run): rich would assume 80 columns and fold the table; give it room.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def write_results(rows: list[dict], meta: dict, json_path: Path, csv_path: Path) -> None:
    """JSON: the run's context and every row, nested values kept. CSV: one line per row, flat columns only."""
    payload = {"meta": meta, "results": rows}
    write_atomically(json_path, (json.dumps(payload, indent=1, ensure_ascii=False) + "\n").encode())
    columns = [key for key in rows[0] if not isinstance(rows[0][key], (dict, list))] if rows else []
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(csv_path, text.getvalue().encode())


def plot_speedups(
    rows: list[dict],
    shapes: list[str],
    variants: list[str],
    panels: list[tuple[str, str]],
    title: str,
    path: Path,
) -> None:
    """Grouped bars, one group per shape, one bar per variant; one panel per (row key, panel title).

    A variant with no number at a shape (skipped, failed, wrong) leaves a gap, marked under its slot.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, none opened
    import matplotlib.pyplot as plt

    by_key = {(r["shape"], r["variant"]): r for r in rows}
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.6), squeeze=False)
    width = 0.8 / max(1, len(variants))
    colors = plt.get_cmap("tab10").colors
    for ax, (key, panel_title) in zip(axes[0], panels):
        for i, variant in enumerate(variants):
            xs, ys = [], []
            for j, shape in enumerate(shapes):
                row = by_key.get((shape, variant))
                x = j + (i - (len(variants) - 1) / 2) * width
                value = row.get(key) if row else None
                if value is None:
                    mark = "✗" if row and row["status"] in ("WRONG", "failed") else "–"
                    ax.text(x, 0.02, mark, ha="center", va="bottom", fontsize=8, color="grey",
                            transform=ax.get_xaxis_transform())
                    continue
                xs.append(x)
                ys.append(value)
            if not xs:
                continue
            bars = ax.bar(xs, ys, width=width * 0.95, label=variant, color=colors[i % len(colors)])
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=1)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(shapes)), shapes)
        ax.set_ylabel("speedup vs eager (higher is faster)")
        ax.set_title(panel_title, fontsize=10)
        ax.margins(y=0.15)
    handles, labels = {}, {}
    for ax in axes[0]:  # a variant with no bar in the first panel may have some in another
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    handles, labels = list(handles.values()), list(handles)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))  # room for the legend under the panels
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    write_atomically(path, buffer.getvalue())


def run_metadata(settings, dtype_label: str, shapes: list, variants: list[str], argv: list[str]) -> dict:
    """The JSON's `meta`: what ran, where, with which versions, timed and checked how."""
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    for package in ("triton", "liger-kernel"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    device = settings.device
    element = torch.tensor([], dtype=settings.dtype).element_size()
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "versions": versions,
        "dtype": dtype_label,
        "command": " ".join(["benchmark_mlp.py", *argv]),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "variants": variants,
        "shapes": [
            {"name": s.name, "spec": s.spec, "tokens": s.tokens, "flops": s.train_flops if settings.train else s.flops,
             "min_bytes": s.min_bytes(element)}
            for s in shapes
        ],
        "mode": "train" if settings.train else "forward",
        "timer": timer_text(device.type == "cuda", settings.train),
        "warmup_ms": settings.warmup_ms,
        "rep_ms": settings.rep_ms,
        "check": "relative L2 error against the same MLP in fp32 on the same (rounded) input"
        + (", of the output, x's gradient and each weight's (backward from the same dy)" if settings.train else ""),
        "tolerance": TOLERANCES[settings.dtype],
    }


TRAINING_CALL = "gradients set to None, forward on x requiring grad, y.backward(dy) with a fixed dy"


def timer_text(on_gpu: bool, train: bool) -> str:
    """The JSON's `timer`: what each time field measures, in this mode on this device."""
    if train:
        timer = (
            f"time_us: CUDA events per training call ({TRAINING_CALL}), L2 flushed and the GPU held until the call "
            "is queued; peak_mib: torch.cuda.max_memory_allocated during one call above what was allocated before it"
            if on_gpu else f"time_us: time.perf_counter per training call ({TRAINING_CALL})"
        )
        return timer + "; saved_bytes: x and the activations autograd saves for the backward (weights left out)"
    if on_gpu:
        return (
            "time_us: CUDA events per forward, L2 flushed and the GPU held until the forward is queued; loop_us: CUDA "
            "events around back-to-back forwards, the median of `loops` loops run for about half a second "
            "(loop_p20_us, loop_p80_us: their spread); cpu_us: host time per forward in those loops, their median; "
            "busy_loop_us, busy_in_loop_us: the same loop with events around each forward, its period and the "
            "GPU's time inside forwards"
        )
    return "time_us: time.perf_counter per forward"
