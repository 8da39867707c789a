"""What to change: a saved trace read for the changes that would make its step faster, each with the time it would
give back per step as a range, the evidence, and the line of code to paste.

    import trace_report
    advice = trace_report.read("train.json").advice      # Advice: findings, largest saving first
    advice.findings[0].rule, .change, .saving_us, .share_of_step, .basis, .source, .where (train.py:42, its modules)
    advice.finding("sync")                                 # one rule's finding, or None

One module per family of rule, beside the analysis it reads:

    findings.py     Finding and Advice, the values; what is worth saying (1% of the step at best), the ranking
    replay.py       the step replayed as the CPU issued it, with a change and without (Daydream's method): every
                    saving that hangs on who waits for whom comes from here
    common.py       the trace as the rules read it (Reading), words for sizes and times, where a pattern sits
    host.py         the host's side: pageable copies, synchronisations, DataLoader without workers, tensors built on
                    the CPU every step
    optimizer.py    optimizers one tensor at a time, zero_grad writing zeros
    precision.py    fp32 GEMMs on CUDA cores (TF32, bf16), GEMM dimensions the tensor cores do not tile
    launches.py     Python loops of tiny kernels, steps the launches pace (CUDA graphs, compile)
    kernels.py      an out-of-place op that copies first, a convolution's bias before batch norm, attention on the
                    math path
    communication.py  collectives nothing overlaps (DDP, FSDP)

`advise(trace, verdict)` runs every rule; a rule that needs what the trace lacks (shapes, stacks, a CPU lane) is said
once in `Advice.missing`, with the profiler flag that records it, and guesses nothing.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace

from rich.markup import escape

from trace_report.advice import host, kernels, launches, optimizer, precision
from trace_report.advice import communication as comm_rules
from trace_report.advice.common import Reading, us
from trace_report.advice.findings import WORTH_SHARE, Advice, Finding, ranked
from trace_report.console import Console
from trace_report.model import Trace
from trace_report.observer import recording_options
from trace_report.pace import Verdict, verdict as judge

RULES = (*host.RULES, *optimizer.RULES, *precision.RULES, *launches.RULES, *kernels.RULES, *comm_rules.RULES)
BRIEF = 3  # findings the report's first screen shows whole; the rest one line each


def advise(trace: Trace, verdict: Verdict | None = None) -> Advice:
    """Every rule on `trace`: the findings worth saying, ranked; what the trace lacked."""
    verdict = verdict or judge(trace)
    options = frozenset(recording_options(trace, trace.meta))
    reading = Reading(trace, verdict, options)
    findings: list[Finding] = []
    step_us = reading.step_us if trace.steps else 0.0
    for rule in RULES:
        for found in rule(reading):
            # No change gives back more than the step: a replay run with the CPU as recorded can say so of a step
            # timed faster without the profiler.
            low, high = found.saving_us
            findings.append(replace(found, saving_us=(min(low, step_us), min(high, step_us)), step_us=step_us))
    return Advice(ranked(findings), step_us, _missing(reading), verdict.cause,
                  unsaid=[f for f in findings if not f.worth_it])


def _missing(r: Reading) -> list[str]:
    """What the trace lacks for some rules, each with the profiler flag that records it."""
    lacks = []
    if r.trace.has_gpu and not any(s.runtime for s in r.steps):
        lacks.append("a CPU lane (ProfilerActivity.CPU): every saving that hangs on the CPU's launches and waits")
    if r.trace.has_gpu and not r.has_shapes:
        lacks.append("shapes (record_shapes=True): GEMMs' FLOPs for the fp32 and alignment rules")
    if not r.has_stacks:
        lacks.append("Python stacks (with_stack=True): the line of your code and the module each pattern sits in")
    return lacks


def print_advice(advice: Advice, console: Console, *, rows: int | None = BRIEF) -> None:
    """The report's "What to change" section. With `rows` (a screen's report), the first finding whole (what was
    seen, the change, where), the next up to `rows` with their change, the rest a line each; None: every one whole."""
    step = f" of {us(advice.step_us)}" if advice.step_us else ""
    console.print(f"[bold]What to change[/bold] · ranked by the time each would give back per step{escape(step)}")
    width = max(40, console.width - 4)
    if not advice.findings:
        console.print(f"  nothing found worth {WORTH_SHARE:.0%} of the step or more")
    for i, f in enumerate(advice.findings, 1):
        low, high = f.saving_us
        head = f"{i}. {f.title}: {us(low)}-{us(high)} a step (up to {f.share_of_step:.0%})"
        if rows is not None and i > rows:
            console.print(f"  [dim]{escape(head)}[/dim]")
            continue
        console.print(f"  [bold]{escape(head)}[/bold]")
        parts = (("seen", f.evidence), ("change", f.change), ("at", f.where))
        if rows is not None and i > 1:
            parts = (("change", f.change),)
        for label, text in parts:
            if text:
                for line in textwrap.wrap(f"{label}: {text}", width=width, subsequent_indent="  "):
                    console.print(f"    {escape(line)}", highlight=False)
    if advice.missing:
        text = "the trace lacks " + "; ".join(advice.missing)
        for line in textwrap.wrap(text, width=width + 2):
            console.print(f"  [dim]{escape(line)}[/dim]", highlight=False)
    if rows is not None and advice.findings:
        console.print("  [dim]each finding's evidence and basis: --rows 0, or --json's \"advice\"[/dim]")
    console.print()


__all__ = ["RULES", "WORTH_SHARE", "Advice", "Finding", "advise", "print_advice"]
