"""Who sets the pace: the CPU issuing work (overhead-bound) or the GPU running it (compute-bound), with the
numbers behind the answer (Part 1's cheatsheet). `verdict(trace)` gives a `Verdict`; `trace-report` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiling_in_pytorch.traces.model import RuntimeCall, Trace, rounded
from profiling_in_pytorch.traces.timeline import busy_time, gaps, launch_waits

MIN_GAP_US = 1.0  # shorter idle stretches on the GPU lane are the hardware's own spacing between kernels
STARVED_SHARE = 0.5  # the GPU waited on launches for at least this share of its window: the CPU sets the pace
CLOSE_TO_LINE = (0.8, 1.25)  # GPU work over CPU issue time in this range: both sides matter


@dataclass
class Verdict:
    """Overhead-bound or compute-bound, with the numbers behind it (Part 1's cheatsheet).

    Totals are over the recorded window (every active step and the profiler's flush after them), in µs.
    """

    kind: str  # "overhead-bound" | "compute-bound" | "no GPU data"
    summary: str
    steps: int
    self_cpu_total_us: float  # the table's "Self CPU time total"
    self_gpu_total_us: float  # the table's "Self CUDA time total" (0 without a GPU lane)
    sync_wait_us: float  # of the CPU total: waiting in synchronize calls, in the steps and after them
    closing_sync_us: float | None  # of those: the profiler's flush after the last step; None when absent
    cpu_us_per_step: float  # the CPU total less those waits, per step: what issuing the work costs
    gpu_busy_us_per_step: float | None = None  # time with GPU work running, overlaps counted once
    gpu_window_us: float | None = None  # the GPU lane, from its first work's start to its last one's end
    gpu_idle_fraction: float | None = None  # of that window
    gaps: int | None = None  # idle stretches of the GPU lane over MIN_GAP_US
    longest_gap_us: float | None = None
    launch_waits: int | None = None  # of those gaps, the ones where the GPU ran dry before the launch returned
    launch_wait_us: float | None = None
    launch_wait_fraction: float | None = None  # of the GPU window
    max_gpu_lag_us: float | None = None  # the furthest the GPU lane ran behind the CPU lane (GpuWork.lag_us)
    table_totals_say: str | None = None  # what comparing the two table totals alone would answer
    close_to_line: bool = False  # GPU work over CPU issue time within CLOSE_TO_LINE

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "steps": self.steps,
            "self_cpu_total_us": round(self.self_cpu_total_us, 3),
            "self_gpu_total_us": round(self.self_gpu_total_us, 3),
            "sync_wait_us": round(self.sync_wait_us, 3),
            "closing_sync_us": rounded(self.closing_sync_us),
            "cpu_us_per_step": round(self.cpu_us_per_step, 3),
            "gpu_busy_us_per_step": rounded(self.gpu_busy_us_per_step),
            "gpu_window_us": rounded(self.gpu_window_us),
            "gpu_idle_fraction": rounded(self.gpu_idle_fraction, 4),
            "gpu_gaps": self.gaps,
            "longest_gpu_gap_us": rounded(self.longest_gap_us),
            "launch_waits": self.launch_waits,
            "launch_wait_us": rounded(self.launch_wait_us),
            "launch_wait_fraction": rounded(self.launch_wait_fraction, 4),
            "max_gpu_lag_us": rounded(self.max_gpu_lag_us),
            "table_totals_say": self.table_totals_say,
            "close_to_line": self.close_to_line,
        }



def verdict(trace: Trace) -> Verdict:
    """Who sets the pace: the CPU issuing work (overhead-bound) or the GPU running it (compute-bound).

    Part 1's cheatsheet compares the two totals under `prof.key_averages().table()`: Self CPU time total
    against Self CUDA time total. Read raw, the CPU total also holds the time the CPU spent waiting in
    synchronize calls, above all the profiler's own flush after the last step, which lasts as long as the
    GPU still has queued work: the busier the GPU, the bigger the CPU total. So we weigh the CPU's issue time
    (the total less those waits) against the GPU total, and look at the GPU lane itself: an idle stretch
    where the next work's launch call returned only after the GPU had run dry is the GPU waiting on the CPU.
    Overhead-bound when issuing takes longer than running, or the GPU spent STARVED_SHARE of its window
    waiting on launches; compute-bound otherwise. The summary says when the raw totals would answer otherwise.
    """
    n = len(trace.steps)
    cpu_total = trace.self_cpu_total_us
    waits = trace.sync_wait_us
    issue = max(0.0, cpu_total - waits)
    closing = trace.closing_sync
    closing_us = closing.dur if closing is not None else None
    if not trace.has_gpu:
        return Verdict(
            "no GPU data",
            "no GPU data: the trace has no GPU lane (a CPU-only profile), so there is no GPU to be idle; "
            f"Self CPU total {_us(cpu_total)}, {_us(issue / n)} per step",
            n,
            cpu_total,
            0.0,
            waits,
            closing_us,
            issue / n,
        )

    lane = trace.gpu_lane()
    gpu_total = trace.self_gpu_total_us
    busy = busy_time(lane)
    window = max(w.end for w in lane) - lane[0].ts
    idle = gaps(lane, min_us=MIN_GAP_US)
    starved = launch_waits(lane, min_us=MIN_GAP_US)
    starved_us = sum(starved)
    starved_share = starved_us / window if window > 0 else 0.0
    lags = [w.lag_us for w in lane if w.launch is not None]
    max_lag = max(lags) if lags else None

    if issue > gpu_total:
        kind = "overhead-bound"
        why = "issuing the work takes the CPU longer than the GPU takes to run it, so the GPU waits for launches"
    elif starved_share >= STARVED_SHARE:
        kind = "overhead-bound"
        why = (
            f"the GPU sat idle waiting for the next launch {starved_share:.0%} of its window: the recorded ops "
            "issue the work quickly but late, so the CPU's time goes where the table does not look (between steps)"
        )
    else:
        kind = "compute-bound"
        why = "the GPU's work takes longer than the CPU needs to issue it, so launch costs hide behind it"
    ratio = gpu_total / issue if issue > 0 else float("inf")
    close = CLOSE_TO_LINE[0] <= ratio <= CLOSE_TO_LINE[1]
    if close:
        why += f" (close to the line: {ratio:.2f}x as much GPU work as CPU issue time, both sides matter)"
    table_says = "overhead-bound" if cpu_total > gpu_total else "compute-bound"

    sentences = [f"{kind}: {why}", _totals_sentence(cpu_total, gpu_total, waits, closing)]
    sentences.append(f"Per step ({n}): the CPU issues work for {_us(issue / n)}, the GPU is busy {_us(busy / n)}")
    lane_text = (
        f"The GPU waited on a launch {len(starved)} time{'s' if len(starved) != 1 else ''} "
        f"({_us(starved_us)}, {starved_share:.0%} of its {_us(window)} window; idle {1 - busy / window:.0%} in all)"
        if window > 0
        else "The GPU lane holds a single instant"
    )
    if max_lag is not None:
        lane_text += f"; its work started up to {_us(max_lag)} after the launch call"
    sentences.append(lane_text)
    if table_says != kind:
        alone = f"The table's totals alone would say {table_says} ({_us(cpu_total)} against {_us(gpu_total)})"
        if kind == "compute-bound":
            sentences.append(
                f"{alone}, but {_waits_phrase(waits, closing)}: the CPU waiting for the GPU, not issuing work, "
                f"decides it. Without the waits the CPU spends {_us(issue)} issuing {_us(gpu_total)} of GPU "
                "work: compute-bound"
            )
        else:
            sentences.append(f"{alone}, yet the GPU ran dry waiting for launches")
    if kind == "overhead-bound":
        sentences.append("The profiler adds CPU time to every op: time the code without it before concluding")
    return Verdict(
        kind,
        ". ".join(sentences) + ".",
        n,
        cpu_total,
        gpu_total,
        waits,
        closing_us,
        issue / n,
        gpu_busy_us_per_step=busy / n,
        gpu_window_us=window,
        gpu_idle_fraction=max(0.0, 1.0 - busy / window) if window > 0 else 0.0,
        gaps=len(idle),
        longest_gap_us=max(idle, default=0.0),
        launch_waits=len(starved),
        launch_wait_us=starved_us,
        launch_wait_fraction=starved_share,
        max_gpu_lag_us=max_lag,
        table_totals_say=table_says,
        close_to_line=close,
    )


def _totals_sentence(cpu_total: float, gpu_total: float, waits: float, closing: RuntimeCall | None) -> str:
    text = f"Table totals: Self CPU {_us(cpu_total)}, Self CUDA {_us(gpu_total)}"
    if closing is not None:
        text += f"; {_us(closing.dur)} of the CPU total is the profiler's flush, the {closing.name} after the last step"
    other_waits = waits - (closing.dur if closing is not None else 0.0)
    if other_waits > 0:
        text += f"; {_us(other_waits)} is waiting in {'other ' if closing is not None else ''}synchronize calls"
    return text


def _waits_phrase(waits: float, closing: RuntimeCall | None) -> str:
    if closing is None:
        return f"{_us(waits)} of the CPU total is synchronize waits"
    if closing.dur == waits:
        return f"{_us(closing.dur)} of the CPU total is the profiler's closing {closing.name}"
    return f"{_us(waits)} of the CPU total is synchronize waits, {_us(closing.dur)} of it the profiler's closing {closing.name}"


def _us(value: float) -> str:
    """µs as the table prints them: ms from 1 ms on."""
    return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.1f} µs"
