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
weighed against one baseline. Of each step's timings the median is kept, with its standard error (1.25 σ/√n, σ read
off the median absolute deviation, 1.48 MAD, so that a host's few hiccups do not widen it), and a saving (the
difference of two medians) is off by about the two errors combined (`Judged.error_us`). A ✗ whose miss is within
TOLD_APART such errors is not told from a ✓, and the lesson marks it `?` and says so.

Why the median and its error, not the least timing: on an H100 host, two instances of lesson 12's planted step timed
in the same 12 rounds (6 steps a round, turning) had timings of 77-100 and 76-92 ms, a standard deviation of 4-6 ms,
and no correlation from round to round (r = 0.01: the noise is each timing's own, not a drift that pairing rounds
would cancel). Over any 5 consecutive rounds, their least timings stood 3.4-5.3 ms apart in 6 windows of 8, their
medians 0.3-2.5 ms. Their medians over all 12 were 1.70 ms apart, against an error of 1.36 ms read off the MAD and
2.55 ms off the standard deviation, which a few slow rounds (up to 100 ms) widen and the medians do not follow. On a
quieter H100 host, 10 rounds: the two instances 0.02 ms apart, an error of 0.51 ms by the MAD and 2.97 ms by σ;
loop-kernels' fix 2.84 ± 0.30 ms, pageable-copy's 5.21 ± 0.45 ms (the same steps timed 80 times one by one: 2.61 and
5.28 ms).
"""

from __future__ import annotations

import math
import statistics
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
# 7 steps a round, about 1.4 s each on an H100 host; 2-3 findings a few ms each on a CPU). The error of a median
# shrinks as 1/√rounds: a saving's, about 2.9 ms in 9 rounds on the H100 host above.
ROUNDS = {"cpu": 5, "cuda": 9}
TOLD_APART = 2.0  # a miss of more standard errors than this is a ✗; a smaller one cannot be told from a ✓


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
    error_us: float = 0.0  # the measured saving's standard error (Timings.judged); 0 where unknown

    @property
    def saving_us(self) -> float:
        return self.before_us - self.after_us

    @property
    def ok(self) -> bool:
        return holds(self.saving_us, self.low_us, self.high_us)

    @property
    def told_apart(self) -> bool:
        """A miss the timing can tell from a ✓: more than TOLD_APART standard errors outside the slack."""
        return not self.ok and _miss(self.saving_us, self.low_us, self.high_us) > TOLD_APART * self.error_us

    @property
    def mark(self) -> str:
        """✓, ✗, or ? for a miss the timing cannot tell from a ✓."""
        return "✓" if self.ok else "✗" if self.told_apart else "?"

    @property
    def predicted(self) -> str:
        return range_text(self.low_us, self.high_us)

    @property
    def reason(self) -> str:
        """Why a ✗ or a ?, in one line with both numbers (a ?'s says the timing cannot tell it from a ✓); empty for a
        ✓."""
        if self.ok:
            return ""
        text = miss_text(self.saving_us, self.low_us, self.high_us, self.error_us)
        if not self.told_apart:
            text += (f", within {TOLD_APART:g} standard errors of the timing ({_us(TOLD_APART * self.error_us)}): it "
                     "cannot tell it from a ✓")
        return text


def holds(saving: float, low: float, high: float, slack: float = SLACK) -> bool:
    """Inside [low, high], or outside by at most `slack` of the nearest end's value."""
    return _miss(saving, low, high, slack) == 0.0


def _miss(saving: float, low: float, high: float, slack: float = SLACK) -> float:
    """How far `saving` falls outside [low, high] widened by `slack` of each end's value; 0 inside."""
    low, high = min(low, high), max(low, high)
    return max(low - slack * abs(low) - saving, saving - high - slack * abs(high), 0.0)


def range_text(low: float, high: float) -> str:
    """"4.00–6.20 ms", "120.0–340.0 µs": one unit for both ends, the high end's."""
    if high >= 1000:
        return f"{low / 1000:,.2f}–{high / 1000:,.2f} ms"
    return f"{low:,.1f}–{high:,.1f} µs"


def _signed(us: float) -> str:
    return _us(us) if us >= 0 else "-" + _us(-us)


def miss_text(saving: float, low: float, high: float, error: float = 0.0) -> str:
    """"measured 3.10 ms ± 0.40 ms, predicted 4.00–6.20 ms: 23% below the range's low end" (or above its high end, or
    a slowdown)."""
    measured = _signed(saving) + (f" ± {_us(error)}" if error > 0 else "")
    head = f"measured {measured}, predicted {range_text(low, high)}"
    if saving < 0:
        text = f"{head}: the step got slower with the fix"
    elif saving < low:
        text = f"{head}: {(low - saving) / low:.0%} below the range's low end" if low else head
    else:
        text = f"{head}: {(saving - high) / high:.0%} above the range's high end" if high else head
    return text


@dataclass(frozen=True)
class Timings:
    """Each step's timings (µs per step), in the order taken: their median, and its standard error."""

    samples_us: dict[str, list[float]]

    def typical_us(self, name: str) -> float:
        return statistics.median(self.samples_us[name])

    def error_us(self, name: str) -> float:
        """The median's standard error, 1.25 σ/√n, σ as 1.48 times the timings' median absolute deviation (σ's for
        normal noise, and unmoved by a few slow outliers); 0 with one timing."""
        samples = self.samples_us[name]
        if len(samples) < 2:
            return 0.0
        middle = statistics.median(samples)
        sigma = 1.4826 * statistics.median(abs(t - middle) for t in samples)
        return 1.2533 * sigma / math.sqrt(len(samples))

    def judged(self, rule: str, low_us: float, high_us: float, baseline: str = "baseline") -> Judged:
        """`rule`'s fixed step against the baseline, with its predicted range."""
        return Judged(rule, low_us, high_us, self.typical_us(baseline), self.typical_us(rule),
                      math.hypot(self.error_us(baseline), self.error_us(rule)))


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
    return Timings(times)


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


_MARKUP = {"✓": "[green]✓[/green]", "✗": "[red]✗[/red]", "?": "[yellow]?[/yellow]"}


def print_judged(judged: Sequence[Judged], title: str) -> None:
    """The table: each fix's predicted range, the saving measured, ✓, ✗ or ?; then each ✗'s and ?'s reason, in words."""
    table = Table(title=title, title_justify="left")
    # The rule whole (single-tensor-optimizer is 23 characters): the numbers' columns give way first, and the
    # saving's header is one word, so that 80 columns hold the table.
    table.add_column("rule", no_wrap=True, min_width=max((len(j.rule) for j in judged), default=4))
    for name, justify in (("predicted", "right"), ("before", "right"), ("after", "right"), ("saved", "right"),
                          ("", "center")):
        table.add_column(name, justify=justify)
    for j in judged:
        table.add_row(j.rule, j.predicted, _us(j.before_us), _us(j.after_us), _signed(j.saving_us), _MARKUP[j.mark])
    console.print(table)
    for j in judged:
        if not j.ok:
            console.print(f"  {_MARKUP[j.mark]} {escape(j.rule)}: {escape(j.reason)}", soft_wrap=True)


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
