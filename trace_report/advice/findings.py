"""What the advice says, as values: a `Finding` per change worth making, and `Advice`, the findings ranked.

A finding is one rule's answer on one trace: the rule (a stable id, `"pageable-copy"`), what the trace shows of it
(the evidence: ops, kernels, counts per step, the Python line and modules it sits in when the trace has stacks), the change as a line of
code the reader pastes, and what the change would give back per step as a range (low, high) in µs, with the basis of
the estimate in words and where the idea comes from. `Advice` ranks them by that saving, and says once what the trace
lacks for the rules it could not run (shapes, stacks, a CPU lane, steps), with the profiler flag that records it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A finding that would give back less than this share of the step at its best is not worth the reader's time: the
# report leaves it out (the step's own noise, run to run, is a few percent).
WORTH_SHARE = 0.01


@dataclass(frozen=True)
class Finding:
    """One change worth making, with what it would save per step."""

    rule: str  # a stable id: "pageable-copy", "sync", "fp32-matmul", ... (RULES)
    title: str  # the finding in a few words: "host-to-device copies from pageable memory"
    evidence: str  # what the trace shows: ops, kernels, counts per step, times
    change: str  # the change, as a line of code the reader can paste
    saving_us: tuple[float, float]  # (low, high) µs per step the change would give back, by the replay of the step
    step_us: float  # the step's period the saving is a share of
    basis: str  # how the saving was estimated, in words
    source: str  # where the rule comes from: torch.profiler's pattern matcher, Nsight Systems' rules, ...
    where: str | None = None  # `train.py:42, in Sequential > Block`: the line and modules, when the trace has stacks
    count_per_step: float | None = None  # how many times a step shows the pattern

    @property
    def share_of_step(self) -> float:
        """The most of the step the change would give back (the range's high end over the step's period)."""
        return self.saving_us[1] / self.step_us if self.step_us > 0 else 0.0

    @property
    def worth_it(self) -> bool:
        return self.share_of_step >= WORTH_SHARE

    def to_dict(self) -> dict:
        low, high = self.saving_us
        return {
            "rule": self.rule,
            "title": self.title,
            "evidence": self.evidence,
            "change": self.change,
            "saving_us": [round(low, 3), round(high, 3)],
            "share_of_step": round(self.share_of_step, 4),
            "basis": self.basis,
            "source": self.source,
            "where": self.where,
            "count_per_step": None if self.count_per_step is None else round(self.count_per_step, 3),
        }


@dataclass
class Advice:
    """A trace's findings, largest saving first; what the trace lacked for some rules; the step they weigh against."""

    findings: list[Finding]
    step_us: float
    missing: list[str] = field(default_factory=list)  # "shapes (record_shapes=True): fp32 GEMMs' FLOPs, ..."
    cause: str | None = None  # what the GPU waits on, when it waits (pace.Verdict.cause)
    # what the rules found but weighed under WORTH_SHARE: not said, kept for a reader who asks why a rule was silent
    unsaid: list[Finding] = field(default_factory=list)

    def __iter__(self):
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def finding(self, rule: str) -> Finding | None:
        """The finding of `rule`, or None when the rule found nothing worth saying."""
        return next((f for f in self.findings if f.rule == rule), None)

    def weighed(self, rule: str) -> Finding | None:
        """The finding of `rule` whether said or not (under WORTH_SHARE of the step); None when it found nothing."""
        return self.finding(rule) or next((f for f in self.unsaid if f.rule == rule), None)

    @property
    def rules(self) -> list[str]:
        return [f.rule for f in self.findings]

    def to_rows(self) -> list[dict]:
        """What `--json` prints under "advice": one row per finding, ranked."""
        return [f.to_dict() for f in self.findings]


def ranked(findings: list[Finding]) -> list[Finding]:
    """Worth saying (WORTH_SHARE), largest saving first: by the range's middle, then its low end."""
    kept = [f for f in findings if f.worth_it]
    return sorted(kept, key=lambda f: (-(f.saving_us[0] + f.saving_us[1]) / 2, -f.saving_us[0], f.rule))
