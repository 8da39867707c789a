"""The report's tables as DataFrames, for notebooks: rows -> pandas or polars, the one place that converts.

    report = trace_report.read("trace.json.gz")
    report.kernels.to_pandas()            # one row per kernel name: calls, per step, avg, min, max, share
    report.op_table.to_polars()           # each op and its shapes by roofline
    report.summary.to_pandas("modules")   # the summary's tables: "kinds" (default), "modules", "top"
    report.communication.to_pandas()      # one row per collective ("kinds": one per kind)
    report.advice.to_pandas()             # one row per finding
    report.frames()                       # every table at once: {name: DataFrame}
    trace_report.diff(a, b).to_pandas()   # the diff by op with its noise and call ("kernels", "kinds")
    trace_report.ranks_frame(trace_report.read_ranks(paths, per_rank=trace_report.rank_tables), "kernels")  # `rank`
                                          # first; each rank's rows made where its trace is read (api.rank_tables)

Each object gives its rows (`frame_rows(table)`: the column names and a dict per row, plain values: str, int,
float, bool or None); `Tabular` turns them into a frame. pandas and polars are optional (`pip install
'trace-report[frames]'`) and imported only here, when a frame is asked for: `import trace_report` stays what it was
without them (rich alone).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Sequence

from trace_report.model import KernelStat

INSTALL = "pip install 'trace-report[frames]'"
LIBRARIES = ("pandas", "polars")
Rows = tuple[list[str], list[dict]]  # column names, a dict per row


class FramesUnavailable(ImportError):
    """pandas or polars is not installed: the one line says what to install."""


def _library(name: str):
    if name not in LIBRARIES:
        raise ValueError(f"a DataFrame library is one of {', '.join(LIBRARIES)}, not {name!r}")
    try:
        return importlib.import_module(name)
    except ImportError:
        raise FramesUnavailable(f"DataFrames need {name}, which is not installed here: {INSTALL}") from None


def dataframe(rows: Rows, library: str = "pandas") -> Any:
    """`(columns, rows)` as a pandas or polars DataFrame, the columns in their order even with no rows."""
    module = _library(library)
    columns, records = rows
    if library == "pandas":
        return module.DataFrame.from_records(records, columns=columns)
    # Column by column, strict=False: a column of ints and floats (a count per step, `2` then `2.33`) is one of
    # floats, and one of None alone stays a column.
    return module.DataFrame({c: [r.get(c) for r in records] for c in columns}, strict=False)


class Tabular:
    """What converts an object that gives rows (`frame_rows(table)`) into a DataFrame; `TABLES` names its tables,
    the first the default."""

    TABLES: tuple[str, ...] = ("rows",)

    def frame_rows(self, table: str | None = None) -> Rows:
        raise NotImplementedError

    def to_pandas(self, table: str | None = None):
        """This table as a pandas DataFrame (`pip install 'trace-report[frames]'`)."""
        return dataframe(self.frame_rows(self._table(table)), "pandas")

    def to_polars(self, table: str | None = None):
        """This table as a polars DataFrame (`pip install 'trace-report[frames]'`)."""
        return dataframe(self.frame_rows(self._table(table)), "polars")

    def _table(self, table: str | None) -> str:
        table = table or self.TABLES[0]
        if table not in self.TABLES:
            raise ValueError(f"{type(self).__name__} has the tables {', '.join(self.TABLES)}, not {table!r}")
        return table


def records(columns: Sequence[str], rows: list[dict]) -> Rows:
    """Rows cut to `columns`, in that order."""
    return list(columns), [{c: row.get(c) for c in columns} for row in rows]


# --- the kernels: the post's avg CUDA table --------------------------------------------------------------------


KERNEL_COLUMNS = ["kind", "name", "short_name", "launched_by", "calls", "per_step", "total_us", "avg_us", "min_us",
                  "max_us", "share"]


@dataclass
class KernelTable(Tabular):
    """One row per GPU work name across the steps (`Trace.kernel_stats()`), most GPU time first."""

    stats: list[KernelStat]
    steps: int

    def __iter__(self):
        return iter(self.stats)

    def __len__(self) -> int:
        return len(self.stats)

    def __getitem__(self, i):
        return self.stats[i]

    def frame_rows(self, table: str | None = None) -> Rows:
        total = sum(s.total_us for s in self.stats)
        n = self.steps or 1
        return records(KERNEL_COLUMNS, [
            {"kind": s.kind, "name": s.name, "short_name": s.short_name, "launched_by": s.launched_by,
             "calls": s.count, "per_step": round(s.count / n, 3), "total_us": round(s.total_us, 3),
             "avg_us": round(s.avg_us, 3), "min_us": round(s.min_us, 3), "max_us": round(s.max_us, 3),
             "share": round(s.total_us / total, 4) if total else None}
            for s in self.stats])


def kernel_table(trace) -> KernelTable:
    return KernelTable(sorted(trace.kernel_stats(), key=lambda s: -s.total_us), len(trace.steps))
