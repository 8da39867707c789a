"""Who sets the pace: the CPU issuing work (overhead-bound) or the GPU running it (compute-bound), with the
numbers behind the answer (Part 1's cheatsheet). `verdict(trace)` gives a `Verdict`; `trace-report` prints it.

Two more answers for traces the posts never showed: communication-bound, when collectives (NCCL/RCCL kernels) hold
most of the GPU's busy time with no other kernel beside them (a data-parallel rank waiting on its all-reduces; not
an overlapped rank, whose collectives run beside its compute); and "GPU only", when the trace holds
GPU work but no CPU side to weigh it against (a trace exported with the CPU activities left out). CUDA graph replays
and captures are said as such: a replay's kernels cost no launch each, a capture's launches run nothing.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from trace_report.kernels import COMMUNICATION, kind_of_kernel
from trace_report.model import RuntimeCall, Trace, rounded
from trace_report.timeline import alone_time, busy_time, gaps, launch_waits

MIN_GAP_US = 1.0  # shorter idle stretches on the GPU lane are the hardware's own spacing between kernels
STARVED_SHARE = 0.5  # the GPU waited on launches for at least this share of its window: the CPU sets the pace
CLOSE_TO_LINE = (0.8, 1.25)  # GPU work over CPU issue time in this range: both sides matter
COMMUNICATION_SHARE = 0.5  # collectives run with no other kernel beside them this share of the busy time: their pace
# A GPU busy this share of its window is not waiting on the CPU, whatever the CPU's ops add up to: their time runs
# beside the GPU's (a compiled MLP on an H200: CPU 245 µs a step, GPU 213 µs, busy 92% of the window; a DDP rank:
# 87% busy, its CPU also waiting in the all-reduces' record functions)
BUSY_SHARE = 0.8


@dataclass
class Verdict:
    """Overhead-bound or compute-bound, with the numbers behind it (Part 1's cheatsheet).

    Totals are over the recorded window (every active step and the profiler's flush after them), in µs.
    """

    kind: str  # "overhead-bound" | "compute-bound" | "communication-bound" | "CUDA graph capture" | "GPU only"
    #            | "no GPU data"
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
    communication_share: float | None = None  # of the GPU's busy time: collectives running
    exposed_communication_share: float | None = None  # of it: collectives running with no other kernel beside them
    graph_share: float | None = None  # of the GPU work's time: launched by CUDA graph replays
    # GPU work in no step (before the first: the warmup's or a graph replay still running; after the last): in the
    # totals, the window and the idle time, never in a per-step figure, so that these agree with the summary's
    outside_gpu_us: float = 0.0
    outside_gpu_items: int = 0
    # What the GPU's idle time in the steps waited on, µs by cause (idle_stretches), and the cause of an overhead-bound
    # verdict: "launches", "synchronization", "pageable copies" or "data loading"
    idle_by_cause_us: dict = field(default_factory=dict)
    cause: str | None = None
    # the stretches themselves, for the advice's host-gaps (40k in a grown Mamba trace: walked once, here)
    idle_stretches: list = field(default_factory=list, repr=False, compare=False)

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
            "communication_share": rounded(self.communication_share, 4),
            "exposed_communication_share": rounded(self.exposed_communication_share, 4),
            "graph_share": rounded(self.graph_share, 4),
            "outside_steps_gpu_us": round(self.outside_gpu_us, 3),
            "outside_steps_gpu_items": self.outside_gpu_items,
            "cause": self.cause,
            "idle_by_cause_us": {k: round(v, 3) for k, v in self.idle_by_cause_us.items()},
        }


def paced_by_timing(cpu_issue_us: float, gpu_busy_us: float, period_us: float) -> str:
    """The verdict's rule on figures timed without the profiler, where no GPU lane is read: "overhead-bound" when
    issuing a step takes the CPU longer than the GPU's work, or the GPU idles STARVED_SHARE of a step's period (steps
    back to back); else "compute-bound"."""
    idle_share = 1.0 - min(1.0, gpu_busy_us / period_us) if period_us > 0 else 0.0
    return "overhead-bound" if cpu_issue_us > gpu_busy_us or idle_share >= STARVED_SHARE else "compute-bound"


def verdict(trace: Trace) -> Verdict:
    """Who sets the pace: the CPU issuing work (overhead-bound) or the GPU running it (compute-bound).

    Part 1's cheatsheet compares the two totals under `prof.key_averages().table()`: Self CPU time total
    against Self CUDA time total. Read raw, the CPU total also holds the time the CPU spent waiting in
    synchronize calls, above all the profiler's own flush after the last step, which lasts as long as the
    GPU still has queued work: the busier the GPU, the bigger the CPU total. So we weigh the CPU's issue time
    (the total less those waits) against the GPU total, and look at the GPU lane itself: an idle stretch
    where the next work's launch call returned only after the GPU had run dry is the GPU waiting on the CPU.
    Overhead-bound when issuing takes longer than running while the GPU idles (busy under BUSY_SHARE of its
    window), or the GPU spent STARVED_SHARE of its window waiting on launches; compute-bound otherwise. The
    summary says when the raw totals would answer otherwise.
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

    is_collective = [w.kind == "kernel" and kind_of_kernel(w.name, False, w.launched_by) == COMMUNICATION for w in lane]
    collectives = [w for w, c in zip(lane, is_collective) if c]
    comm_share = busy_time(collectives) / busy if busy > 0 and collectives else 0.0
    others = [w for w, c in zip(lane, is_collective) if not c and w.kind == "kernel"]
    exposed_share = alone_time(collectives, others) / busy if comm_share else 0.0
    graphed = sum(w.dur for w in lane if w.runtime is not None and "GraphLaunch" in w.runtime)
    graph_share = graphed / gpu_total if gpu_total > 0 else 0.0
    cpu_side = any(s.ops or s.runtime for s in trace.steps) or trace.runtime_outside_steps or trace.ops_outside_steps

    if not cpu_side:
        return _gpu_only(trace, lane, busy, window, comm_share, graph_share)
    stretches = idle_stretches(trace)
    by_cause = _idle_causes(stretches)
    idle_share = sum(by_cause.values()) / window if window > 0 else 0.0
    cause = max(by_cause, key=by_cause.get) if by_cause and max(by_cause.values()) > 0 else None
    capture = _capture_calls(trace, lane)
    if capture and gpu_total < 0.1 * issue:
        kind = "CUDA graph capture"
        why = ("the window records a CUDA graph being captured, whose launches queue no GPU work: there is no pace to "
               "judge here; profile the graph's replays")
    elif exposed_share >= COMMUNICATION_SHARE:
        kind = "communication-bound"
        why = (
            f"collectives run during {comm_share:.0%} of the GPU's busy time, {exposed_share:.0%} with no other kernel "
            "beside them; a collective kernel's time includes waiting for the other ranks to reach it, so part of it "
            "may be another rank's lateness: read the ranks' traces together (trace-report RUN_rank0.json "
            "RUN_rank1.json ...) for the skew"
        )
    elif issue > gpu_total and busy < BUSY_SHARE * window:
        kind = "overhead-bound"
        why = "issuing the work takes the CPU longer than the GPU takes to run it, so the GPU waits for launches"
        if cause not in (None, "launches"):
            why = CAUSES[cause]
        elif cause is None and not starved:  # no idle stretch inside the steps, no launch ever waited on
            why = (f"the CPU works {_us(issue / n)} a step against the GPU's {_us(gpu_total / n)}, and the GPU idles "
                   "with nothing launched: the step's time is the CPU's own work, not its launches")
    elif issue > gpu_total:
        kind = "compute-bound"
        why = (f"the GPU is busy {busy / window:.0%} of its window: the CPU's ops take longer than the GPU's work "
               f"({_us(issue / n)} against {_us(gpu_total / n)} a step) but run beside it, so the GPU's work sets the "
               "pace")
    elif starved_share >= STARVED_SHARE or cause not in (None, "launches") and (
            idle_share >= STARVED_SHARE or by_cause[cause] >= (1 - BUSY_SHARE) * window):
        # a fifth of the window or more idle on the loader or a sync is not a GPU setting the pace (an OWLv2 step on
        # an H100: 46% of its window waiting on a DataLoader without workers, its GPU 53% busy)
        kind = "overhead-bound"
        why = (
            f"the GPU sat idle waiting for the next launch {starved_share:.0%} of its window: the recorded ops "
            "issue the work quickly but late, so the CPU's time goes where the table does not look (between steps)"
        ) if cause in (None, "launches") else CAUSES[cause]
    else:
        kind = "compute-bound"
        why = "the GPU's work takes longer than the CPU needs to issue it, so launch costs hide behind it"
    ratio = gpu_total / issue if issue > 0 else float("inf")
    close = CLOSE_TO_LINE[0] <= ratio <= CLOSE_TO_LINE[1]
    if close:
        why += f" (close to the line: {ratio:.2f}x as much GPU work as CPU issue time, both sides matter)"
    table_says = "overhead-bound" if cpu_total > gpu_total else "compute-bound"

    sentences = [f"{kind}: {why}", _totals_sentence(cpu_total, gpu_total, waits, closing)]
    # Per step: the steps' own work, as the summary's header counts it; the work outside them is said once, in the
    # numbers' table (outside_gpu_us)
    steps_busy = trace.gpu_busy_us_per_step() if any(step.gpu for step in trace.steps) else None
    steps_busy = busy / n if steps_busy is None else steps_busy  # no step holds GPU work: the lane is the steps'
    outside = trace.gpu_outside_steps if any(step.gpu for step in trace.steps) else []
    outside_us = sum(w.dur for w in outside)
    sentences.append(f"Per step ({n}): the CPU issues work for {_us(issue / n)}, the GPU is busy {_us(steps_busy)}")
    lane_text = (
        f"The GPU waited on a launch {len(starved)} time{'s' if len(starved) != 1 else ''} "
        f"({_us(starved_us)}, {starved_share:.0%} of its {_us(window)} window; idle {1 - busy / window:.0%} in all)"
        if window > 0
        else "The GPU lane holds a single instant"
    )
    if max_lag is not None:
        lane_text += f"; its work started up to {_us(max_lag)} after the launch call"
    sentences.append(lane_text)
    if graph_share > 0:
        sentences.append(f"{graph_share:.0%} of the GPU work ran in CUDA graph replays (cudaGraphLaunch): one launch "
                         "for a whole graph, no launch cost per kernel")
    if capture:
        sentences.append(f"The trace records a CUDA graph capture ({capture}): launches inside it queue no GPU work, "
                         "the graph's kernels run later, on its replays")
    if table_says != kind and kind in ("overhead-bound", "compute-bound"):
        alone = f"The table's totals alone would say {table_says} ({_us(cpu_total)} against {_us(gpu_total)})"
        if kind == "compute-bound" and issue > gpu_total:  # the waits do not explain it: the GPU's busy share does
            sentences.append(
                f"{alone}, but the GPU is busy {busy / window:.0%} of its window: the CPU's ops run beside its work, "
                "and the table's totals do not say which waits for which"
            )
        elif kind == "compute-bound":
            sentences.append(
                f"{alone}, but {_waits_phrase(waits, closing)}: the CPU waiting for the GPU, not issuing work, "
                f"decides it. Without the waits the CPU spends {_us(issue)} issuing {_us(gpu_total)} of GPU "
                "work: compute-bound"
            )
        else:
            sentences.append(f"{alone}, yet the GPU ran dry waiting for launches")
    if kind == "overhead-bound":
        sentences.append("The profiler adds CPU time to every op: time the code without it before concluding")
    if comm_share >= COMMUNICATION_SHARE and kind != "communication-bound":
        sentences.append(f"Collectives run during {comm_share:.0%} of the GPU's busy time, but other kernels run beside "
                         f"them for all but {exposed_share:.0%} of it: they are hidden, not setting the pace")
    return Verdict(
        kind,
        ". ".join(sentences) + ".",
        n,
        cpu_total,
        gpu_total,
        waits,
        closing_us,
        issue / n,
        gpu_busy_us_per_step=steps_busy,
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
        communication_share=comm_share,
        exposed_communication_share=exposed_share,
        graph_share=graph_share,
        outside_gpu_us=outside_us,
        outside_gpu_items=len(outside),
        idle_by_cause_us=by_cause,
        cause=cause if kind == "overhead-bound" else None,
        idle_stretches=stretches,
    )


# What the GPU waits on, as the verdict says it when that is not the launches (the advice's rules follow from it).
CAUSES = {
    "synchronization": "the GPU idles after each synchronization inside the step (.item(), a copy with "
                       "non_blocking=False, torch.cuda.synchronize()): the CPU waits for the GPU to drain, then the GPU "
                       "waits for the CPU's next launch",
    "pageable copies": "the GPU idles around copies from pageable host memory: CUDA makes each wait for the stream and "
                       "the CPU wait for the copy, so nothing is queued behind it",
    "data loading": "the GPU idles while the loop's own thread makes the next batch (a DataLoader without "
                    "workers)",
    "queued work": "the GPU idles with its next work already launched: that work waits on something the trace does "
                   "not show running (another stream's event, another process's work), not on this CPU's launches",
    "host work": "the GPU idles while the host launches nothing for 10 ms or more at a time (Python, a first call's "
                 "setup, work on the CPU): not the launches' cost, so no CUDA graph takes it away; what the launching "
                 "thread ran in those stretches is the place to look",
}
# Work that starts this long after its launch call returned, over most of a GPU idle stretch, waited on something other
# than its launch: another stream's event, work outside the trace (an sglang decode trace: launched 38 µs into a 463 ms
# idle stretch). An eager step's kernel starts microseconds after its launch returns.
QUEUED_US = 1000.0
# A stretch this long with no launch call from any thread, over most of a GPU idle stretch, is the host's other work,
# not launch overhead: an AlexNet trace read whole went seconds without one (cudaMalloc and attribute queries beside),
# where the world's eager training steps go 1-2 ms at most (an optimizer's foreach ops, a model's Python: work CUDA
# graphs and compile do take away).
HOST_WORK_US = 10_000.0


def _idle_causes(stretches: list[IdleStretch]) -> dict[str, float]:
    """The GPU's idle time inside the steps, µs by what it waited on."""
    causes = dict.fromkeys(IDLE_CAUSES, 0.0)
    for stretch in stretches:
        causes[stretch.cause] += stretch.end - stretch.start
    return {k: v for k, v in causes.items() if v > 0}


IDLE_CAUSES = ("launches", "synchronization", "pageable copies", "data loading", "host work", "queued work")


@dataclass(frozen=True)
class IdleStretch:
    """A stretch of the GPU idle inside the steps (over MIN_GAP_US), what it waited on, and the work that ended it."""

    start: float
    end: float
    cause: str  # one of IDLE_CAUSES
    work: object  # the GpuWork that ran next
    quiet_from: float | None = None  # host work: when the last launch call before it (any thread's) returned


def idle_stretches(trace: Trace) -> list[IdleStretch]:
    """The GPU's idle stretches inside the steps (over MIN_GAP_US), each by what the GPU waited on: "data loading" (a
    DataLoader's `__next__` runs during the stretch), "pageable copies" or "synchronization" (a synchronize call, or a
    pageable copy's, returns during it or was waiting as it began: the CPU held back until the GPU drained), "host
    work" (no thread made a launch call for HOST_WORK_US over most of it), "queued work" (the next work started
    QUEUED_US or more after its launch returned), else "launches" (the CPU had not yet issued the next work). Each
    stretch goes to one cause, in that order. In the spirit of HTA's critical path, which tells data loading apart from
    launch overhead."""
    lane = [w for step in trace.steps for w in step.gpu]
    if not lane:
        return []
    lane.sort(key=lambda w: w.ts)
    calls = [c for step in trace.steps for c in step.runtime]
    pageable = {id(w.launch.launcher) for w in lane if w.is_pageable_copy
                and w.launch is not None and w.launch.launcher is not None}
    waits = sorted((c.ts, c.end, "pageable copies" if id(c.launcher) in pageable else "synchronization")
                   for c in calls if c.is_sync or ("Memcpy" in c.name and id(c.launcher) in pageable))
    loads = sorted((op.ts, op.ts + op.dur) for step in trace.steps for op in step.ops
                   if "DataLoader" in op.name and "__next__" in op.name)
    wait_starts, load_starts = [a for a, _, _ in waits], [a for a, _ in loads]
    # every thread's launch calls (calls that queued GPU work: not a cudaMalloc, an attribute query) by start, and the
    # latest end so far: a training step launches from two threads, its backward's from autograd's own
    launched = {id(w.launch) for w in lane if w.launch is not None}
    starts: list[float] = []
    ends: list[float] = []
    for c in sorted((c for c in calls if id(c) in launched), key=lambda c: c.ts):
        starts.append(c.ts)
        ends.append(max(c.end, ends[-1]) if ends else c.end)
    stretches = []
    end = lane[0].end
    for w in lane[1:]:
        if w.ts - end > MIN_GAP_US:
            gap_start, gap_end = end, w.ts
            # the few that start before the gap ends, latest first: a step holds a handful of waits and loads
            # (none at all in most traces' steps: 40k stretches of a Mamba trace skip both)
            i = bisect.bisect_left(load_starts, gap_end) if loads else 0
            j = bisect.bisect_left(wait_starts, gap_end) if waits else 0
            loaded = sum(max(0.0, min(gap_end, b) - max(gap_start, a)) for a, b in loads[max(0, i - 4):i]) if i else 0.0
            waited = [kind for a, b, kind in waits[max(0, j - 8):j] if b > gap_start - MIN_GAP_US] if j else ()
            quiet_from = None
            if loaded > 0.5 * (gap_end - gap_start):
                cause = "data loading"
            elif waited:
                cause = "pageable copies" if "pageable copies" in waited else "synchronization"
            elif (quiet_from := _host_work(w, starts, ends, gap_start, gap_end)) is not None:
                cause = "host work"
            elif w.launch is not None and w.ts - w.launch.end >= QUEUED_US and \
                    w.ts - max(w.launch.end, gap_start) > 0.5 * (gap_end - gap_start):
                cause = "queued work"
            else:
                cause = "launches"
            stretches.append(IdleStretch(gap_start, gap_end, cause, w, quiet_from))
        end = max(end, w.end)
    return stretches


def _host_work(work, starts: list[float], ends: list[float], gap_start: float, gap_end: float) -> float | None:
    """When the last launch call before `work`'s returned (any thread's: `starts`, and `ends` the latest end so far),
    where none came for HOST_WORK_US before `work`'s launch, over most of the GPU's idle stretch before it (gap_start
    to gap_end); else None."""
    call = work.launch
    if call is None:
        return None
    i = bisect.bisect_left(starts, call.ts)
    if i == 0:
        return None
    quiet_from = ends[i - 1]  # every launch call before this one had returned by then
    quiet = min(call.ts, gap_end) - max(quiet_from, gap_start)
    return quiet_from if call.ts - quiet_from >= HOST_WORK_US and quiet > 0.5 * (gap_end - gap_start) else None


def _gpu_only(trace: Trace, lane: list, busy: float, window: float, comm_share: float, graph_share: float) -> Verdict:
    """A trace with GPU work and no CPU side: no launch to weigh, so only what the GPU lane itself shows."""
    n = len(trace.steps)
    gpu_total = trace.self_gpu_total_us
    idle = gaps(lane, min_us=MIN_GAP_US)
    summary = (
        f"GPU only: the trace holds GPU work but no CPU ops or launch calls, so who sets the pace cannot be read from "
        f"it. The GPU is busy {_us(busy / n)} per step, {busy / window:.0%} of its {_us(window)} window"
        if window > 0 else "GPU only: the trace holds GPU work but no CPU side"
    )
    if comm_share:
        summary += f"; collectives run during {comm_share:.0%} of that busy time"
    if idle:
        summary += f"; its longest idle stretch {_us(max(idle))}"
    return Verdict(
        "GPU only", summary + ".", n, 0.0, gpu_total, 0.0, None, 0.0, gpu_busy_us_per_step=busy / n,
        gpu_window_us=window, gpu_idle_fraction=max(0.0, 1.0 - busy / window) if window > 0 else 0.0, gaps=len(idle),
        longest_gap_us=max(idle, default=0.0), communication_share=comm_share, graph_share=graph_share,
    )


def _capture_calls(trace: Trace, lane: list) -> str:
    """The capture calls a trace holds (`cudaStreamBeginCapture ×2, ...`), or "". The profiler does not always record
    the capture's begin and end: then a capture shows as launch calls that queued no GPU work, most of them, beside
    the capture-status queries (`cudaStreamGetCaptureInfo`) that PyTorch and vLLM make while capturing."""
    calls = [c for s in trace.steps for c in s.runtime] + list(trace.runtime_outside_steps)
    names = Counter(c.name for c in calls)  # a few dozen names for tens of thousands of calls: words looked up once
    found = {name: count for name, count in names.items()
             if any(word in name for word in ("BeginCapture", "EndCapture", "GraphInstantiate", "GetCaptureInfo"))}
    if not found:
        return ""
    if not any(word in name for name in found for word in ("BeginCapture", "EndCapture", "GraphInstantiate")):
        launched = {id(w.launch) for w in lane if w.launch is not None}
        launches = [c for c in calls if "Launch" in c.name and "GraphLaunch" not in c.name]
        if not launches or sum(id(c) not in launched for c in launches) < len(launches) / 2:
            return ""  # the status queries of a process that also captures, not a capture in this window
    return ", ".join(f"{name} ×{count}" for name, count in found.items())


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
