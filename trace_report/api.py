"""`read(path)`: a trace and its analyses as plain objects, for notebooks and programs; `to_json()` is what
`trace-report --json` prints.

    import trace_report
    report = trace_report.read("traces/03_simple_mlp/64_128_768_3072_eager.json")
    report.verdict.kind, report.summary.kinds, report.communication, report.memory
    report.advice.findings[0].change      # what to change, ranked by the time it would give back per step
    report.to_json()                      # the dict --json prints (json.dumps it as is)
    trace_report.read_ranks([...])        # one run's ranks, as `trace-report RUN_rank*.json`
    report.kernels.to_pandas(), report.frames()   # the tables as DataFrames (frames.py; trace-report[frames])

In a notebook a Report shows itself as the terminal prints it (`_repr_html_`).

Each analysis is computed when first asked for and kept: reading a trace costs what its parsing costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from trace_report import communication as comm
from trace_report.advice import Advice, advise
from trace_report import fusion, graphs, roofline
from trace_report import text_report  # a Report in a notebook: one trace's report as the terminal prints it
from trace_report.console import html_of
from trace_report.export import trace_to_dict
from trace_report.frames import KernelTable, Rows, Tabular, dataframe, kernel_table, records
from trace_report.fusion_report import FUSION_BRIEF_ROWS
from trace_report.memory import memory_peaks, memory_to_dict
from trace_report.model import Trace
from trace_report.observer import observe
from trace_report.pace import Verdict, verdict
from trace_report.reader import read_trace
from trace_report.roofline_report import ROOFLINE_BRIEF_ROWS
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
        found = advise(self.trace, self.verdict)
        return AdviceTable(**{name: getattr(found, name) for name in found.__dataclass_fields__})

    @cached_property
    def kernels(self) -> KernelTable:
        """One row per GPU work name across the steps, most GPU time first: the post's avg CUDA table."""
        return kernel_table(self.trace)

    def frames(self, library: str = "pandas") -> dict:
        """Every table of the report as a DataFrame (pandas or polars), by name."""
        tables = [("kernels", self.kernels, None), ("op_table", self.op_table, None), ("advice", self.advice, None)]
        tables += [(f"summary_{part}", self.summary, part) for part in self.summary.TABLES]
        if self.communication is not None:
            tables += [(f"communication_{part}", self.communication, part) for part in self.communication.TABLES]
        return {name: dataframe(found.frame_rows(part), library) for name, found, part in tables}

    def __repr__(self) -> str:  # the trace's events are no line to read: its name, steps and verdict
        return f"<Report {self.trace.name}: {len(self.trace.steps)} steps, {self.verdict.kind}>"

    def _repr_html_(self) -> str:
        """In a notebook, the report as the terminal prints it without flags."""
        return html_of(lambda console: text_report.print_report(
            self.trace, console, rows=text_report.BRIEF_ROWS, fusion_found=self.fusion(),
            fusion_rows=FUSION_BRIEF_ROWS, op_table=self.op_table, op_rows=ROOFLINE_BRIEF_ROWS,
            lines=text_report.BRIEF_LINES), 120)

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

    def to_json(self, second: Trace | None = None, lazy_steps: bool = False) -> dict:
        """The report as plain data, what `trace-report --json` prints for one trace (documented key by key in
        docs/trace-report.md); `second`: the other trace of a diff, for the fusion section's "what it fused";
        `lazy_steps`: "steps" made a step at a time as they are read (export.LazyRows), for --json's writing."""
        data = self.with_communication(second=second, lazy_steps=lazy_steps)
        return {**data, "summary": self.summary.to_dict(), "advice": self.advice.to_rows(),
                "advice_missing": self.advice.missing, "observer_effect": self.observer_effect.to_dict(),
                "memory": memory_to_dict(self.memory), "ops": self.op_table.to_rows(),
                "op_table": self.op_table.to_dict()}

    def with_communication(self, second: Trace | None = None, lazy_steps: bool = False) -> dict:
        """`trace_to_dict(trace)`, the collectives it found and its CUDA graph replays (a rank's part of --json)."""
        payload = trace_to_dict(self.trace, judged=self.verdict, bandwidth_gbs=self.bandwidth_gbs, second=second,
                                lazy_steps=lazy_steps)
        if self.communication is not None:
            payload["communication"] = self.communication.to_dict()
        replays = graphs.graphs_to_dict(self.trace)
        if replays is not None:
            payload["cuda_graphs"] = replays
        return payload


class AdviceTable(Advice, Tabular):
    """The advice, and its findings as a DataFrame: one row per finding, the saving's range in two columns."""

    def frame_rows(self, table: str | None = None) -> Rows:
        rows = [{**row, "saving_low_us": row["saving_us"][0], "saving_high_us": row["saving_us"][1]}
                for row in self.to_rows()]
        return records(["rule", "title", "saving_low_us", "saving_high_us", "share_of_step", "count_per_step",
                        "where", "evidence", "change", "basis", "source"], rows)


RANK_TABLES = {  # table -> how a rank's Report gives it
    "kernels": lambda report: report.kernels,
    "op_table": lambda report: report.op_table,
    "summary": lambda report: report.summary,
    "advice": lambda report: report.advice,
    "communication": lambda report: report.communication,
}


class RankTables(dict):
    """A rank's tables as rank_tables made them: (table, part) -> its rows (`frame_rows`)."""


def rank_tables(rank) -> RankTables:
    """`read_ranks(paths, per_rank=trace_report.rank_tables)`: every table ranks_frame gives of a rank (but the
    collectives, which read_ranks keeps), as rows, made where the rank's trace is read: a worker's, a cluster's. Only
    the rows come back, so a rank set's DataFrames need no trace kept (`keep_traces=True` holds every rank's trace in
    this process, read one after the other)."""
    report = Report(rank.trace)
    rows = RankTables()
    for table, of in RANK_TABLES.items():
        if table != "communication":  # read_ranks brings the collectives back already
            found = of(report)
            rows.update({(table, part): found.frame_rows(part) for part in found.TABLES})
    return rows


def ranks_frame(ranks, table: str = "kernels", library: str = "pandas", part: str | None = None):
    """One rank set's table (`read_ranks`), every rank's rows in one frame with a `rank` column first. `table`:
    kernels, op_table, summary, advice or communication; `part`: that object's table ("modules" of the summary,
    "kinds" of the communication). The collectives come from what read_ranks kept; the other tables from each
    rank's `rank_tables` (`read_ranks(paths, per_rank=trace_report.rank_tables)`), else its trace
    (`read_ranks(paths, keep_traces=True)`)."""
    if table not in RANK_TABLES:
        raise ValueError(f"a rank set's tables are {', '.join(RANK_TABLES)}, not {table!r}")
    columns: list[str] = []
    rows: list[dict] = []
    for rank in ranks:
        if table == "communication":
            found = rank.comm
        elif isinstance(rank.extra, RankTables):
            found = _MadeRows(rank.extra, table)
        elif rank.trace is None:
            raise ValueError(f"the {table} of each rank needs its trace or its rows: read_ranks(paths, "
                             "per_rank=trace_report.rank_tables), or keep_traces=True")
        else:
            found = RANK_TABLES[table](Report(rank.trace))
        if found is None:  # a rank without collectives
            continue
        names, part_rows = found.frame_rows(found._table(part))
        columns = columns or ["rank", *names]
        rows += [{"rank": rank.rank, **row} for row in part_rows]
    return dataframe((columns or ["rank"], rows), library)


class _MadeRows(Tabular):
    """A rank's table as rank_tables made its rows, where its trace was read."""

    def __init__(self, made: RankTables, table: str):
        self.made, self.table = made, table
        self.TABLES = tuple(part for name, part in made if name == table)

    def frame_rows(self, table: str | None = None) -> Rows:
        return self.made[(self.table, table)]


def read(path: str | Path, *, bandwidth_gbs: float | None = None, peak: tuple[float, float] | None = None) -> Report:
    """Read a torch.profiler Chrome trace (.json or .json.gz) into a Report; a file that is no trace raises
    UsageError with the one line trace-report prints."""
    return Report(read_trace(path), bandwidth_gbs, peak)
