"""How much an op's GPU time varies on its own, step to step, and whether a diff's change stands out of it.

An op's time per step in each trace is a sample of that trace's active steps: its mean and standard deviation
(and min-max) are the op's spread. The change between two traces is the difference of the means; its noise is

    max(SIGMAS × the combined standard error, FLOOR × A's mean)      SE = sqrt(sd_A² / n_A + sd_B² / n_B)

and the call is "slower" or "faster" when the change is beyond that band, "within noise" inside it. A trace with
one active step has no standard deviation: the noise is unknown, the call rests on the floor alone, and the gate
(`Gate`, `trace-report A B --fail_slower PCT`) weighs the change alone.

Why a floor: step to step, one run's GEMMs vary by 1% or less, while two runs of the same command differ by more,
all ops together (the GPU's clock, which GPU of the node): the post's MLP eager recorded twice on one H200
(tests/fixtures/h200/mlp_eager against traces/03_simple_mlp/..._eager) has each GEMM 0.3-2% apart across its own
steps and 3.9-6.3% apart between the runs. The floor keeps a fraction of a percent from being called a change; the
gate's PCT is the margin for what runs differ by (docs/trace-report.md, "Gating a merge on the diff").
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

SIGMAS = 3.0  # the band's width in standard errors: a one-sided 3σ change comes by chance about once in 700 ops
FLOOR = 0.02  # the smallest change called at all, as a share of A's time: a step's GEMMs vary by ~1% (above)
MIN_SHARE = 0.01  # the gate weighs ops that take this share of a step's GPU time or more, in either trace

SLOWER, FASTER, NOISE, NEW, GONE = "slower", "faster", "within noise", "new", "gone"


@dataclass(frozen=True)
class Spread:
    """One trace's per-step times of an op (or kernel, or the step): how many steps, their mean and spread."""

    steps: int
    mean_us: float
    std_us: float | None  # None with one step: no spread to tell
    min_us: float
    max_us: float

    @classmethod
    def of(cls, per_step: list[float]) -> "Spread":
        if not per_step:
            return cls(0, 0.0, None, 0.0, 0.0)
        std = statistics.stdev(per_step) if len(per_step) > 1 else None
        return cls(len(per_step), statistics.fmean(per_step), std, min(per_step), max(per_step))

    @property
    def sem_us(self) -> float | None:
        """The standard error of the mean; None with one step."""
        return None if self.std_us is None else self.std_us / math.sqrt(self.steps)

    def to_dict(self) -> dict:
        return {"steps": self.steps, "mean_us": round(self.mean_us, 3),
                "std_us": None if self.std_us is None else round(self.std_us, 3),
                "min_us": round(self.min_us, 3), "max_us": round(self.max_us, 3)}


@dataclass(frozen=True)
class Change:
    """A's per-step times against B's: the change, its noise band and the call."""

    first: Spread
    second: Spread
    floor: float = FLOOR

    @property
    def delta_us(self) -> float:
        return self.second.mean_us - self.first.mean_us

    @property
    def known(self) -> bool:
        """Whether both traces have the steps to tell their noise (two or more each)."""
        return self.first.sem_us is not None and self.second.sem_us is not None

    @property
    def stderr_us(self) -> float | None:
        if not self.known:
            return None
        return math.hypot(self.first.sem_us, self.second.sem_us)

    @property
    def noise_us(self) -> float:
        """The band a change must leave to be called: SIGMAS standard errors, at least the floor."""
        floor = self.floor * self.first.mean_us
        return max(SIGMAS * self.stderr_us, floor) if self.known else floor

    @property
    def change_pct(self) -> float | None:
        """The change as a percentage of A's time; None for work A does not run."""
        return 100 * self.delta_us / self.first.mean_us if self.first.mean_us > 0 else None

    @property
    def noise_pct(self) -> float | None:
        return 100 * self.noise_us / self.first.mean_us if self.first.mean_us > 0 else None

    @property
    def beyond_pct(self) -> float | None:
        """What the gate weighs: the slowdown past the noise band, as a percentage of A's time (past nothing when
        the noise is unknown: the change alone)."""
        if self.first.mean_us <= 0:
            return None
        past = self.delta_us - (self.noise_us if self.known else 0.0)
        return 100 * past / self.first.mean_us

    @property
    def call(self) -> str:
        if self.first.steps == 0 or (self.first.mean_us <= 0 and self.second.mean_us > 0):
            return NEW
        if self.second.steps == 0 or self.second.mean_us <= 0 < self.first.mean_us:
            return GONE
        if self.delta_us > self.noise_us:
            return SLOWER
        if self.delta_us < -self.noise_us:
            return FASTER
        return NOISE

    def to_dict(self) -> dict:
        def pct(value):
            return None if value is None else round(value, 2)
        return {"first": self.first.to_dict(), "second": self.second.to_dict(), "delta_us": round(self.delta_us, 3),
                "change_pct": pct(self.change_pct), "stderr_us": None if self.stderr_us is None else
                round(self.stderr_us, 3), "noise_us": round(self.noise_us, 3), "noise_pct": pct(self.noise_pct),
                "noise_known": self.known}


def change(first: list[float], second: list[float], floor: float = FLOOR) -> Change:
    """The change from A's per-step times to B's (one value per active step of each trace)."""
    return Change(Spread.of(first), Spread.of(second), floor)


# --- the gate ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """An op the gate fails on: its name and place as the diff prints them, its change, its share of the step."""

    label: str
    where: str
    change: Change
    share: float
    kernels: tuple[str, ...] = ()

    def line(self) -> str:
        """One plain line: what, where, A and B per step, the change past the noise, the share, its kernels."""
        c = self.change
        noise = f"noise ±{c.noise_pct:.1f}%" if c.known else "noise unknown (one step)"
        text = (f"slower: {self.label}{f' ({self.where})' if self.where else ''}: {c.first.mean_us:,.1f} -> "
                f"{c.second.mean_us:,.1f} us per step, {c.change_pct:+.1f}% ({noise}), {self.share:.1%} of the step")
        return text + (f"; kernels: {', '.join(self.kernels)}" if self.kernels else "")

    def to_dict(self) -> dict:
        return {"op": self.label, "where": self.where, "change_pct": round(self.change.change_pct, 2),
                "beyond_noise_pct": round(self.change.beyond_pct, 2), "share_of_step": round(self.share, 4),
                "kernels": list(self.kernels), **{k: v for k, v in self.change.to_dict().items()
                                                  if k in ("delta_us", "noise_us", "noise_known")}}


@dataclass(frozen=True)
class Gate:
    """`--fail_slower PCT`: the ops of MIN_SHARE of the step or more whose slowdown past the noise exceeds PCT."""

    pct: float
    checked: int  # the ops weighed: matched in both traces, MIN_SHARE of the step or more
    failures: list[Failure] = field(default_factory=list)
    min_share: float = MIN_SHARE

    @property
    def passed(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        """What the command prints: one line per failing op, else one line saying what passed."""
        if self.passed:
            return [f"gate passed: no op of {self.min_share:.0%} of the step or more is slower by more than "
                    f"{self.pct:g}% beyond the noise ({self.checked} ops weighed)"]
        n = len(self.failures)
        return [f"gate failed: {n} op{'s' if n != 1 else ''} slower by more than {self.pct:g}% beyond the noise",
                *(f.line() for f in self.failures)]

    def to_dict(self) -> dict:
        return {"fail_slower_pct": self.pct, "min_share": self.min_share, "checked": self.checked,
                "passed": self.passed, "failed": [f.to_dict() for f in self.failures]}


def gate(rows: list[tuple[str, str, Change, float, tuple[str, ...]]], pct: float) -> Gate:
    """The gate over (label, place, change, share of the step, kernels) rows, the biggest slowdown first."""
    weighed = [row for row in rows if row[3] >= MIN_SHARE and row[2].call not in (NEW, GONE)]
    failing = [Failure(label, where, c, share, kernels) for label, where, c, share, kernels in weighed
               if c.call == SLOWER and c.beyond_pct is not None and c.beyond_pct > pct]
    return Gate(pct, len(weighed), sorted(failing, key=lambda f: -f.change.beyond_pct))
