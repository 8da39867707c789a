"""What trace-report's advice should say of a training step (lesson 12): a habit planted in the step is found (its
rule among the findings), a habit fixed is not.

The advice is `trace_report.Report(trace).advice`: the findings ranked by the time each would save per step. These
checks read it once per trace; a lesson imports them by module, `from profiling_in_pytorch.checks import advice as
ax`.
"""

from __future__ import annotations

from trace_report.advice import WORTH_SHARE
from trace_report.api import Report
from trace_report.model import Trace
from trace_report.pace import _us

from profiling_in_pytorch.checks.base import Expectation, Outcome

__all__ = ["rule_found", "rule_silent", "advice_of", "weighed_text"]

_cache: dict[int, tuple[Trace, object]] = {}


def advice_of(trace: Trace):
    """The trace's advice, computed once per trace (the checks of one run share it)."""
    held = _cache.get(id(trace))
    if held is None or held[0] is not trace:
        _cache.clear()
        held = _cache[id(trace)] = (trace, Report(trace).advice)
    return held[1]


def _found_text(advice) -> str:
    rules = [f.rule for f in advice.findings]
    return f"the advice's findings: {', '.join(rules) if rules else 'none'}"


def weighed_text(advice, rule: str) -> str:
    """What the advice made of `rule`, in a line: named (its rank and saving), weighed under what it names, or not
    found at all."""
    finding = advice.finding(rule)
    if finding is not None:
        rank = advice.rules.index(rule) + 1
        low, high = finding.saving_us
        return (f"{rule}: named, #{rank} of {len(advice.findings)} (saves {_us(low)}–{_us(high)} a step, "
                f"{finding.share_of_step:.1%} of it at most); {finding.evidence}")
    unsaid = advice.weighed(rule)
    if unsaid is None:
        return f"{rule}: its pattern is not in the trace"
    low, high = unsaid.saving_us
    return (f"{rule}: weighed at {_us(low)}–{_us(high)} a step, {unsaid.share_of_step:.1%} of it, under the "
            f"{WORTH_SHARE:.0%} the advice names; {unsaid.evidence}")


def rule_found(rule: str, what: str) -> Expectation:
    """The advice names `rule` among its findings: `what` is the habit, in words."""

    def check(trace: Trace) -> Outcome:
        advice = advice_of(trace)
        finding = advice.finding(rule)
        if finding is None:
            missing = f"; the trace lacks: {'; '.join(advice.missing)}" if advice.missing else ""
            weighed = f" ({weighed_text(advice, rule)})" if advice.weighed(rule) is not None else ""
            return Outcome(False, f"not found{weighed}: {_found_text(advice)}{missing}")
        rank = advice.rules.index(rule) + 1
        low, high = finding.saving_us
        return Outcome(True, f"#{rank} of {len(advice.findings)}: {finding.title} "
                             f"(saves {_us(low)}–{_us(high)} a step, {finding.share_of_step:.0%} of it at most)")

    return Expectation(f"the advice finds {rule}: {what}", check)


def rule_silent(rule: str, why: str) -> Expectation:
    """The advice must not name `rule`: `why`, in words (the habit fixed, or one that costs too little here)."""

    def check(trace: Trace) -> Outcome:
        advice = advice_of(trace)
        finding = advice.finding(rule)
        if finding is None:
            unsaid = advice.weighed(rule)
            weighed = "" if unsaid is None else \
                f"; it weighed {rule} at {unsaid.share_of_step:.1%} of the step, under the {WORTH_SHARE:.0%} it names"
            return Outcome(True, _found_text(advice) + weighed)
        low, high = finding.saving_us
        return Outcome(False, f"found anyway: {finding.title} (saves {_us(low)}–{_us(high)} a step); "
                              f"evidence: {finding.evidence}")

    return Expectation(f"the advice is silent on {rule}: {why}", check)
