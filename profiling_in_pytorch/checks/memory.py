"""A training step's memory (lesson 11): where its peak falls, what it is made of, what the forward holds for the
backward, and what activation checkpointing trades.

They read two things from the trace: the profiler's `[memory]` events (any trace recorded with profile_memory=True)
and the category timeline lesson 11 writes beside them (`memory.CategoryTimeline`, torch's memory profiler: bytes of
parameters, optimizer state, activations, gradients, ... over time). The step they look at is the first recorded one
(ProfilerStep#2): its steps 0 and 1 ran before the recording, so AdamW's state, created in step 0's optimizer step,
is held through it, as in every step of a training run after the first.
"""

from __future__ import annotations

from pathlib import Path

from trace_report.errors import readable_bytes
from profiling_in_pytorch.checks.base import Expectation, Outcome, is_compiled, read_other_trace
from trace_report.memory import CATEGORY_NAMES, UNTOUCHED, CategoryTimeline, memory_peaks

__all__ = [
    "memory_events_recorded",
    "state_held_from_the_start",
    "peak_in_phase",
    "largest_at_peak",
    "peak_matches_allocator",
    "activations_held",
    "recompute_in_backward",
    "checkpointing_saves",
    "steady_peak_not_below_first",
    "NO_TIMELINE",
    "NO_ALLOCATOR",
    "COMPILED_CATEGORIES",
]

NO_TIMELINE = ("the trace holds no memory timeline by category: lesson 11 writes it (torch's memory profiler, with "
               "record_shapes, profile_memory and with_stack on)")
COMPILED_CATEGORIES = ("under torch.compile the memory profiler follows tensors op by op, and a compiled graph is one op: "
                       "what it saves for the backward is filed as parameters or inputs, not activations")
NO_ALLOCATOR = ("a CPU has no caching allocator: no torch.cuda.max_memory_allocated to add the categories up to, no "
                "reserved memory, no snapshot; run it on a GPU")


def _timeline(trace) -> CategoryTimeline | Outcome:
    found = CategoryTimeline.of(trace)
    return found if found is not None else Outcome(False, "no memoryTimeline in the trace", NO_TIMELINE)


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def split_text(split: dict[str, int], total: int) -> str:
    return ", ".join(f"{name} {readable_bytes(b)} ({_pct(b, total)})" for name, b in split.items()) or "nothing"


def _step_peak(trace) -> tuple[CategoryTimeline, object, int] | Outcome:
    """The timeline, the first recorded step and the index of its peak on the timeline; or the Outcome that says
    which of them is missing."""
    timeline = _timeline(trace)
    if isinstance(timeline, Outcome):
        return timeline
    step = trace.steps[0] if trace.steps else None
    i = timeline.peak_index(step.ts, step.ts + step.dur) if step else None
    if i is None:
        return Outcome(False, "no timeline point inside the first recorded step")
    return timeline, step, i


def memory_events_recorded() -> Expectation:
    def check(trace) -> Outcome:
        peaks = memory_peaks(trace)
        if not peaks:
            return Outcome(False, "no [memory] events: the profile ran without profile_memory=True")
        text = "; ".join(f"{p.device}: {p.events:,} events, peak {readable_bytes(p.peak_bytes)} in "
                         f"{' > '.join(p.ranges) or 'no range'} of {p.step or 'no step'}" for p in peaks)
        return Outcome(True, text)

    return Expectation("the profiler records every allocation and free ([memory] events, profile_memory=True)", check)


def state_held_from_the_start(optimizer: bool) -> Expectation:
    """The recorded step starts with the weights (and AdamW's state) already there: made before the recording."""
    what = "the parameters and AdamW's state" if optimizer else "the parameters"

    def check(trace) -> Outcome:
        timeline = _timeline(trace)
        if isinstance(timeline, Outcome):
            return timeline
        step = trace.steps[0]
        split = timeline.split(timeline.index_at(step.ts))
        held = {k: split.get(k, 0) for k in ("parameters", "optimizer state")}
        ok = held["parameters"] > 0 and (held["optimizer state"] > 0) == optimizer
        return Outcome(ok, f"at the start of {step.name}: {split_text(split, sum(split.values()))}")

    return Expectation(f"{what} are held before the recorded step starts: made in the steps the schedule skips "
                       "(AdamW creates its state in the first optimizer step)", check)


def peak_in_phase(phase: str, labels: tuple[str, ...], why: str = "") -> Expectation:
    def check(trace) -> Outcome:
        found = _step_peak(trace)
        if isinstance(found, Outcome):
            return found
        timeline, step, i = found
        t = timeline.times_us[i]
        where, into = "none of the step's ranges", ""
        for label in labels:
            box = step.phase(label)
            if box is not None and box.ts <= t <= box.end:
                where, into = label, f", {_pct(t - box.ts, box.dur)} of the way through it"
                break
        return Outcome(where == phase, f"{step.name}'s peak, {readable_bytes(timeline.total(i))}, at "
                       f"{(t - step.ts) / 1000:.3f} ms: in {where}{into}")

    return Expectation(f"the step's memory peaks in {phase}" + (f": {why}" if why else ""), check)


def largest_at_peak(categories: tuple[str, ...], why: str = "", forward: str | None = None) -> Expectation:
    """The category that holds most of the first recorded step's peak is one of `categories`. With `forward` (the
    forward's range), an unknown share as large as what the forward held is named for what it is."""

    def check(trace) -> Outcome:
        found = _step_peak(trace)
        if isinstance(found, Outcome):
            return found
        timeline, _, i = found
        split = timeline.split(i)
        largest = next(iter(split), "nothing")
        ok = largest in categories
        reason = COMPILED_CATEGORIES if not ok and is_compiled(trace) else None
        if not ok and reason is None and largest == CATEGORY_NAMES["UNKNOWN"] and forward:
            held = _held_by(trace, timeline, forward)
            # By the peak the backward has freed some of what the forward saved (the post's MLP on an H100: 86% left)
            if held and 0.5 <= split[largest] / held <= 1.05:
                reason = (f"torch's memory profiler files as unknown the tensors it cannot tie to an op or to the autograd "
                          f"graph: the {readable_bytes(split[largest])} unknown here is most of what the forward left "
                          f"allocated ({readable_bytes(held)}), the saved activations, uncategorized")
        return Outcome(ok, f"at the peak: {split_text(split, timeline.total(i))}", reason)

    wanted = " or ".join(categories)
    return Expectation(f"the largest part of the peak is {wanted}" + (f": {why}" if why else ""), check)


def peak_matches_allocator(tolerance: float = 0.02) -> Expectation:
    """The categories at the recording's peak, plus what was allocated before it and touched by no op (cuBLAS's
    workspace), against torch.cuda.max_memory_allocated over the same steps."""

    def check(trace) -> Outcome:
        timeline = _timeline(trace)
        if isinstance(timeline, Outcome):
            return timeline
        most = timeline.extras.get("max_memory_allocated")
        if not most:
            return Outcome(False, "no torch.cuda.max_memory_allocated in the trace", NO_ALLOCATOR)
        i = timeline.peak_index()
        untouched = max(0, int(timeline.extras.get("allocated_before", 0)) - timeline.total(0))
        total = timeline.total(i) + untouched
        ratio = total / most
        return Outcome(abs(ratio - 1) <= tolerance,
                       f"categories at the peak {readable_bytes(timeline.total(i))} + {UNTOUCHED} "
                       f"{readable_bytes(untouched)} = {readable_bytes(total)}; torch.cuda.max_memory_allocated "
                       f"{readable_bytes(most)}; ratio {ratio:.4f}")

    return Expectation(f"the categories of the peak add up to torch.cuda.max_memory_allocated, within "
                       f"{tolerance:.0%}", check)


def _held_by(trace, timeline: CategoryTimeline, forward: str) -> int | None:
    """What the first recorded step's `forward` range left allocated: the timeline's total at its end less at its
    start; None without that range."""
    box = trace.steps[0].phase(forward) if trace.steps else None
    if box is None:
        return None
    return timeline.total(timeline.index_at(box.end)) - timeline.total(timeline.index_at(box.ts))


def activations_held(forward: str, predicted: int, what: str, tolerance: float = 0.05) -> Expectation:
    """What the forward leaves allocated for the backward (the timeline's total at its end minus at its start),
    against the bytes the model's shapes predict."""

    def check(trace) -> Outcome:
        timeline = _timeline(trace)
        if isinstance(timeline, Outcome):
            return timeline
        held = _held_by(trace, timeline, forward)
        if held is None:
            return Outcome(False, f"no {forward} range in the first recorded step")
        ratio = held / predicted if predicted else float("inf")
        return Outcome(abs(ratio - 1) <= tolerance,
                       f"{forward} left {readable_bytes(held)} allocated ({held:,} bytes), predicted "
                       f"{readable_bytes(predicted)} ({predicted:,}): ratio {ratio:.3f}")

    return Expectation(f"the forward holds {readable_bytes(predicted)} for the backward, within {tolerance:.0%}: "
                       f"{what}", check)


def recompute_in_backward(label: str, backward: str, per_step: int) -> Expectation:
    """Checkpointing: the forward of each checkpointed layer (the `label` range) runs again inside the backward."""

    def check(trace) -> Outcome:
        step = trace.steps[0]
        box = step.phase(backward)
        if box is None:
            return Outcome(False, f"no {backward} range in {step.name}")
        again = [op for op in box.ops if op.is_label and op.name == label]
        inner = [op for op in box.ops if not op.is_label and label in op.path]
        ops = ", ".join(sorted({op.name for op in inner if op.path and op.path[-1] == label})) or "none"
        if trace.has_gpu:
            gpu = [w for w in box.gpu if label in w.launch_path]
            spent = sum(w.dur for w in gpu)
            busy = sum(w.dur for w in box.gpu)
            cost = f"{spent / 1000:.3f} ms of GPU time, {_pct(spent, busy)} of the backward's"
        else:
            spent = sum(op.dur for op in again)
            cost = f"{spent / 1000:.3f} ms of CPU time, {_pct(spent, box.dur)} of the backward's"
        return Outcome(len(again) == per_step,
                       f"{len(again)} {label} ranges in {step.name}'s {backward} ({ops}): {cost}")

    return Expectation(f"in {backward}: each checkpointed layer's forward runs again ({per_step} per step), the "
                       "time checkpointing pays for its memory", check)


def checkpointing_saves(twin: Path) -> Expectation:
    """This run's peak against the same run without --checkpoint, when that trace is beside it."""

    def check(trace) -> Outcome:
        other = read_other_trace(trace, twin, "the run without --checkpoint", "run it without --checkpoint first")
        if isinstance(other, Outcome):
            return other
        mine, theirs = CategoryTimeline.of(trace), CategoryTimeline.of(other)
        if mine is None or theirs is None:
            return Outcome(False, "a trace without its memory timeline", NO_TIMELINE)
        a, b = theirs.total(theirs.peak_index()), mine.total(mine.peak_index())
        return Outcome(b < a, f"peak {readable_bytes(a)} without checkpointing, {readable_bytes(b)} with it: "
                       f"{readable_bytes(a - b)} saved ({_pct(a - b, a)})")

    return Expectation("checkpointing lowers the step's peak (against the same run without it)", check)


def steady_peak_not_below_first() -> Expectation:
    def check(trace) -> Outcome:
        timeline = _timeline(trace)
        if isinstance(timeline, Outcome):
            return timeline
        first, second = timeline.extras.get("first_step_peak"), timeline.extras.get("second_step_peak")
        if not first or not second:
            return Outcome(False, "no first-step peak in the trace", NO_ALLOCATOR)
        return Outcome(second >= first, f"torch.cuda.max_memory_allocated: {readable_bytes(first)} in the optimizer's "
                       f"first step, {readable_bytes(second)} in the next")

    return Expectation("a later step peaks at least as high as the optimizer's first: it holds AdamW's state from "
                       "its start, so the recorded steps show the run's peak", check)
