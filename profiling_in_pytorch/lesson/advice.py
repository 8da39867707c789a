"""Lesson 12's plumbing: a fix's saving measured without the profiler, weighed against the saving trace-report's
advice predicted for it, and the table of both.

The rule (`judge`): a prediction is a range of µs per step, [low, high]. The measured saving holds it when it falls
inside, or outside by at most SLACK of the nearest end's value: 25% below low, or 25% above high. A range is read off
three profiled steps and a timing is a median of a few: neither is exact, and the slack says how far apart they may
fall before the prediction is called wrong. Anything further is a ✗ with both numbers, which is a result of the
lesson, not an error.

How the savings are measured (`measure_savings`): the step without any fix (the baseline) and each step with one fix
added, each timed as `lesson.measure_step` times a step (the loop's period, `wall_us_per_step`: what one step costs a
training run), in rounds: every round times the baseline and every fixed step once, in an order that turns from round
to round, so that a machine that slows down or speeds up during the timing weighs on all alike and every fix is
weighed against one baseline. Of each step's timings the least is kept, since other work on the machine only ever
adds time to a step. How far each step's own timings spread (the most less the least) is kept too: a ✗ that misses its
range by less than the wider of the baseline's and the fix's spread says so, since the timing cannot tell it from a ✓.
(Timed a fix at a time, each against its own turns of the baseline, the same planted step's least timing ranged 73 to
102 ms from one fix to the next on an H100 host, and 69 to 78 ms on an H200 host.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from rich.markup import escape
from rich.table import Table

from profiling_in_pytorch.lesson.terminal import console
from profiling_in_pytorch.lesson.unprofiled import measure_step
from trace_report.pace import _us

SLACK = 0.25  # how far outside the predicted range a measured saving may fall, as a share of the nearest end
# Rounds of timings: each times the baseline and every fixed step once (lesson 12: 5 findings and every fix at once,
# 7 steps a round, about 1 s each on an H100 host; 2-3 findings a few ms each on a CPU).
ROUNDS = {"cpu": 3, "cuda": 5}


def rounds_on(device: torch.device) -> int:
    return ROUNDS.get(device.type, ROUNDS["cpu"])


@dataclass(frozen=True)
class Judged:
    """One fix: the saving predicted for it (µs per step, low and high), the one measured, and the verdict."""

    rule: str
    low_us: float
    high_us: float
    before_us: float
    after_us: float
    spread_us: float = 0.0  # how far the two steps' own timings spread, the wider of the two (Timings)

    @property
    def saving_us(self) -> float:
        return self.before_us - self.after_us

    @property
    def ok(self) -> bool:
        return holds(self.saving_us, self.low_us, self.high_us)

    @property
    def predicted(self) -> str:
        return range_text(self.low_us, self.high_us)

    @property
    def reason(self) -> str:
        """Why a ✗, in one line with both numbers; empty for a ✓."""
        return "" if self.ok else miss_text(self.saving_us, self.low_us, self.high_us, self.spread_us)


def holds(saving: float, low: float, high: float, slack: float = SLACK) -> bool:
    """Inside [low, high], or outside by at most `slack` of the nearest end's value."""
    low, high = min(low, high), max(low, high)
    return low - slack * abs(low) <= saving <= high + slack * abs(high)


def range_text(low: float, high: float) -> str:
    """"4.00–6.20 ms", "120.0–340.0 µs": one unit for both ends, the high end's."""
    if high >= 1000:
        return f"{low / 1000:,.2f}–{high / 1000:,.2f} ms"
    return f"{low:,.1f}–{high:,.1f} µs"


def miss_text(saving: float, low: float, high: float, spread: float = 0.0) -> str:
    """"measured 3.10 ms, predicted 4.00–6.20 ms: 23% below the range's low end" (or above its high end, or a
    slowdown); and, where the miss is smaller than the timings' own spread, that it is."""
    head = f"measured {_us(saving) if saving >= 0 else '-' + _us(-saving)}, predicted {range_text(low, high)}"
    if saving < 0:
        text = f"{head}: the step got slower with the fix"
    elif saving < low:
        text = f"{head}: {(low - saving) / low:.0%} below the range's low end" if low else head
    else:
        text = f"{head}: {(saving - high) / high:.0%} above the range's high end" if high else head
    miss = low - saving if saving < low else saving - high
    if 0 < miss <= spread:
        text += f", by less than the step's own timings spread ({_us(spread)}): the timing cannot tell it from a ✓"
    return text


@dataclass(frozen=True)
class Timings:
    """The least timing of each step (µs per step) and how far its timings spread (the most less the least)."""

    least_us: dict[str, float]
    spread_us: dict[str, float]

    def judged(self, rule: str, low_us: float, high_us: float, baseline: str = "baseline") -> Judged:
        """`rule`'s fixed step against the baseline, with its predicted range."""
        return Judged(rule, low_us, high_us, self.least_us[baseline], self.least_us[rule],
                      max(self.spread_us[baseline], self.spread_us[rule]))


def measure_savings(steps: dict[str, Callable[[], object]], device: torch.device, rounds: int | None = None,
                    progress: Callable[[int, int], object] | None = None) -> Timings:
    """Each of `steps` (name -> step(): the baseline and the fixed steps) timed once a round for `rounds` rounds, the
    order turned by one each round and reversed every other, so that no step always follows the same one;
    `progress(done, rounds)` after each round. Nothing printed."""
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    rounds = rounds or rounds_on(device)
    for turn in range(rounds):
        order = names[turn % len(names):] + names[:turn % len(names)]
        for name in order if turn % 2 == 0 else reversed(order):
            times[name].append(measure_step(steps[name], device).wall_us_per_step)
        if progress is not None:
            progress(turn + 1, rounds)
    return Timings({name: min(t) for name, t in times.items()}, {name: max(t) - min(t) for name, t in times.items()})


DRIFT = 0.25  # the step as profiled, timed in the rounds, this far from the step the advice's ranges are shares of


def drift_text(step_us: float, baseline_us: float) -> str:
    """A line where the host's pace changed between the step timed before the profile (the step the advice's ranges
    are read against) and the same step timed beside its fixes; empty where they agree within DRIFT. (An H100 host
    timed lesson 12's planted step at 164 ms before its profile and 70 ms in the rounds: its CPU had run 2.3x slower
    for the first 20 s, and the dataloader's range, read off a trace recorded then, was 2.6x the saving measured.)"""
    if step_us <= 0 or abs(baseline_us / step_us - 1) <= DRIFT:
        return ""
    return (f"the host's pace changed: the step as profiled took {_us(baseline_us)} in these rounds and "
            f"{_us(step_us)} when timed before the profile, whose trace the ranges are read off; a range of CPU "
            "work is then off by as much, one of GPU work is not")


def print_judged(judged: Sequence[Judged], title: str) -> None:
    """The table: each fix's predicted range, the saving measured, ✓ or ✗; then each ✗'s reason, in words."""
    table = Table(title=title, title_justify="left")
    # The rule whole (single-tensor-optimizer is 23 characters): the numbers' columns give way first, and the
    # saving's header is one word, so that 80 columns hold the table.
    table.add_column("rule", no_wrap=True, min_width=max((len(j.rule) for j in judged), default=4))
    for name, justify in (("predicted", "right"), ("before", "right"), ("after", "right"), ("saved", "right"),
                          ("", "center")):
        table.add_column(name, justify=justify)
    for j in judged:
        saving = _us(j.saving_us) if j.saving_us >= 0 else "-" + _us(-j.saving_us)
        table.add_row(j.rule, j.predicted, _us(j.before_us), _us(j.after_us), saving,
                      "[green]✓[/green]" if j.ok else "[red]✗[/red]")
    console.print(table)
    for j in judged:
        if not j.ok:
            console.print(f"  [red]✗[/red] {escape(j.rule)}: {escape(j.reason)}", soft_wrap=True)


def ranking(first_rule: str, judged: Sequence[Judged]) -> tuple[bool | None, str]:
    """Does the advice's first finding (of those measured) save the most when applied alone? None when fewer than
    two fixes were measured: nothing to rank."""
    if len(judged) < 2:
        return None, "fewer than two fixes measured: nothing to rank"
    best = max(judged, key=lambda j: j.saving_us)
    first = next(j for j in judged if j.rule == first_rule)
    if best.rule == first.rule:
        return True, f"{first.rule} first, and it saved the most alone: {_us(first.saving_us)} a step"
    return False, (f"{first.rule} first ({_us(first.saving_us) if first.saving_us >= 0 else 'no saving'} measured), "
                   f"but {best.rule} saved the most alone: {_us(best.saving_us)} a step")
