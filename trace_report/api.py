"""`read(path)`: a trace and its analyses as plain objects, for notebooks and programs; `to_json()` is what
`trace-report --json` prints.

    import trace_report
    report = trace_report.read("traces/03_simple_mlp/64_128_768_3072_eager.json")
    report.verdict.kind, report.summary.kinds, report.communication, report.memory
    report.advice.findings[0].change      # what to change, ranked by the time it would give back per step
    report.to_json()                      # the dict --json prints (json.dumps it as is)
    trace_report.read_ranks([...])        # one run's ranks, as `trace-report RUN_rank*.json`

Each analysis is computed when first asked for and kept: reading a trace costs what its parsing costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from trace_report import communication as comm
from trace_report.advice import Advice, advise
from trace_report import fusion, graphs, roofline
from trace_report.export import trace_to_dict
from trace_report.memory import memory_peaks, memory_to_dict
from trace_report.model import Trace
from trace_report.observer import observe
from trace_report.pace import Verdict, verdict
from trace_report.reader import read_trace
from trace_report.summary import summarize


@dataclass
class Report:
    """One trace and what trace-report says of it. `bandwidth_gbs`: the memory bandwidth the fusion estimates use
    (`--bandwidth`; None: the GPU's own, where the trace names it); `peak`: (TFLOP/s, TB/s) the op table weighs ops
    against (`--peak`; None: the GPU's datasheet figures, peaks.py)."""

    trace: Trace
    bandwidth_gbs: float | None = None
    peak: tuple[float, float] | None = None

    @cached_property
    def verdict(self) -> Verdict:
        """Who sets the pace: overhead-, compute- or communication-bound, with its numbers."""
        return verdict(self.trace)

    @cached_property
    def summary(self):
        """Where the GPU time goes: kinds of work, modules, top kernels, the idle split."""
        return summarize(self.trace, self.verdict)

    @cached_property
    def communication(self) -> comm.Communication | None:
        """The collectives and the time nothing overlapped; None for a trace without any."""
        return comm.communication(self.trace)

    @cached_property
    def advice(self) -> Advice:
        """What to change: the findings, largest saving per step first, each with its evidence, the line to paste,
        the saving as a range and its basis (trace_report/advice)."""
        return advise(self.trace, self.verdict)

    @cached_property
    def memory(self) -> list:
        """Per device the memory peak, when and what was live (profile_memory=True; else empty)."""
        return memory_peaks(self.trace)

    @cached_property
    def observer_effect(self):
        """What the profiler changed: the unprofiled timing where the trace holds one, else what it recorded."""
        return observe(self.trace, self.verdict)

    @cached_property
    def op_table(self) -> roofline.OpTable:
        """Each op and its input shapes by roofline: FLOPs and bytes per call, GPU time, rates, bound, share of peak."""
        return roofline.op_table(self.trace, self.peak)

    def fusion(self, second: Trace | None = None):
        """Where fusion would pay (a trace recorded with shapes); with `second`, what that trace fused."""
        return fusion.analyze(self.trace, self.bandwidth_gbs, second)

    def to_json(self, second: Trace | None = None) -> dict:
        """The report as plain data, what `trace-report --json` prints for one trace (documented key by key in
        docs/trace-report.md); `second`: the other trace of a diff, for the fusion section's "what it fused"."""
        data = self.with_communication(second=second)
        return {**data, "summary": self.summary.to_dict(), "advice": self.advice.to_rows(),
                "advice_missing": self.advice.missing, "observer_effect": self.observer_effect.to_dict(),
                "memory": memory_to_dict(self.memory), "ops": self.op_table.to_rows(),
                "op_table": self.op_table.to_dict()}

    def with_communication(self, second: Trace | None = None) -> dict:
        """`trace_to_dict(trace)`, the collectives it found and its CUDA graph replays (a rank's part of --json)."""
        payload = trace_to_dict(self.trace, judged=self.verdict, bandwidth_gbs=self.bandwidth_gbs, second=second)
        if self.communication is not None:
            payload["communication"] = self.communication.to_dict()
        replays = graphs.graphs_to_dict(self.trace)
        if replays is not None:
            payload["cuda_graphs"] = replays
        return payload


def read(path: str | Path, *, bandwidth_gbs: float | None = None, peak: tuple[float, float] | None = None) -> Report:
    """Read a torch.profiler Chrome trace (.json or .json.gz) into a Report; a file that is no trace raises
    UsageError with the one line trace-report prints."""
    return Report(read_trace(path), bandwidth_gbs, peak)
