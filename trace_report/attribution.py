"""Whose collective is it: the gradient bucket or FSDP unit each collective of a data-parallel step belongs to, the
collective the code asked for, and the phase (forward, backward, optimizer) that issued it.

What the trace says, and where:

    FSDP2        record functions around each unit's communication, on the thread that issues it:
                 `FSDP::all_gather (layers.0)` (before the unit's forward, and before its backward once resharded),
                 `FSDP::post_backward_reduce (layers.0)` (its gradients' reduce-scatter); the c10d op inside
                 (`c10d::_allgather_base_`, `c10d::_reduce_scatter_base_`) launches the NCCL kernel, so the kernel's
                 launch path names the unit
    DDP          `DistributedDataParallel.forward` around the forward; no name for a bucket: the reducer all-reduces
                 its buckets in index order, each from the autograd hook of its last gradient, so the k-th all-reduce
                 issued in a step's backward is bucket k (as DDP counts them, from the last layers' gradients)

On a GPU each NCCL kernel is tied to the op that launched it. On a CPU gloo runs the collectives on its own threads
with no link to the caller; it runs them in the order they were issued, so the k-th c10d op of a step is paired
with the k-th backend record function. gloo also runs some collectives as others: FSDP2's reduce-scatter shows as
`gloo:all_reduce`, and the issuing op says what was asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trace_report.communication import BACKEND_LABEL, ISSUING_PREFIX, Collective, Communication
from trace_report.communication import collective_of_op
from trace_report.model import CpuOp, Trace

FSDP_RANGE = re.compile(r"^FSDP::(?P<what>all_gather|post_backward_reduce|reduce_scatter)\w* \((?P<unit>[^)]+)\)$")
DDP_FORWARD = "DistributedDataParallel.forward"


@dataclass
class Owned:
    """One collective with what it belongs to."""

    collective: Collective
    kind: str  # what the code asked for: "AllGather", "ReduceScatter", "AllReduce", ...
    unit: str | None  # "layers.0" (FSDP2), "bucket 2" (DDP), None when the trace does not say
    phase: str | None  # the label of the step's phase that issued it (`dp_bwd`), None outside them
    issued_at: float  # when its issuing op (or launch) started; the collective's own start where none is known


def owners(trace: Trace, comm: Communication, labels: tuple[str, ...] | None = None) -> list[list[Owned]]:
    """Per step, each collective of `comm` with its kind, unit and phase. `labels`: the step's phase labels
    (`dp_fwd`, `dp_bwd`, `optimizer_step`); by default the labels the step's code opened at its top level."""
    found = []
    for step, steps_comm in zip(trace.steps, comm.steps):
        boxes = [(op.name, op.ts, op.ts + op.dur) for op in step.ops if op.is_label and _is_phase(op, labels)]
        issuing = sorted((op for op in step.ops if _issues(op)), key=lambda op: op.ts)
        owned = []
        for i, c in enumerate(steps_comm.collectives):
            if c.where == "gpu":
                work = c.work
                path = work.launch_path if work is not None else ()
                at = work.launch_ts if work is not None and work.launch is not None else c.ts
                kind = c.collective
            else:  # gloo: the i-th issued op ran as the i-th backend record function
                op = issuing[i] if i < len(issuing) else None
                path = (*op.path, op.name) if op is not None else ()
                at = op.ts if op is not None else c.ts
                kind = (collective_of_op(op.name) if op is not None else None) or c.collective
            owned.append(Owned(c, kind, _fsdp_unit(path), _phase(boxes, at), at))
        forward = [op for op in step.ops if op.name == DDP_FORWARD]
        if forward:
            _number_buckets(owned, max(op.ts + op.dur for op in forward))
        found.append(owned)
    return found


def _is_phase(op: CpuOp, labels: tuple[str, ...] | None) -> bool:
    if labels is not None:
        return op.name in labels
    return (not op.path and not op.name.startswith(("FSDP::", "ProfilerStep#")) and op.name != DDP_FORWARD
            and BACKEND_LABEL.match(op.name) is None)


def _issues(op: CpuOp) -> bool:
    return not op.is_label and op.name.startswith(ISSUING_PREFIX) and collective_of_op(op.name) not in (None, "Barrier")


def _fsdp_unit(path: tuple[str, ...]) -> str | None:
    for name in reversed(path):
        if found := FSDP_RANGE.match(name):
            return found["unit"]
    return None


def _phase(boxes: list[tuple[str, float, float]], at: float) -> str | None:
    return next((name for name, start, end in boxes if start <= at <= end), None)


def _number_buckets(owned: list[Owned], forward_end: float) -> None:
    """DDP's all-reduces after its forward, in the order they were issued: bucket 0, 1, ... (the reducer's order)."""
    ours = [o for o in owned if o.kind == "AllReduce" and o.unit is None and o.issued_at >= forward_end]
    for number, o in enumerate(sorted(ours, key=lambda o: o.issued_at)):
        o.unit = f"bucket {number}"


# --- printing (trace-report, lesson 09) ------------------------------------------------------------------------

GROUPED_ROWS = 24  # more rows than this: the units of one kind and phase are summed into one row


def rank_owner_rows(rank: int, trace: Trace, comm: Communication | None,
                    labels: tuple[str, ...] | None = None) -> list[dict]:
    """One rank's collectives per kind, unit and phase: count, µs, exposed µs and bytes, each per step (means; bytes
    None where a collective's size is not recorded: a CUDA graph's replay, gloo)."""
    if comm is None or comm.where == "none":
        return []
    rows: dict[tuple, dict] = {}
    steps = len(comm.steps)
    for step in owners(trace, comm, labels):
        for o in step:
            row = rows.setdefault((o.kind, o.unit, o.phase), {
                "rank": rank, "collective": o.kind, "unit": o.unit, "phase": o.phase, "per_step": 0.0,
                "us_per_step": 0.0, "exposed_us_per_step": 0.0, "bytes_per_step": 0.0})
            row["per_step"] += 1 / steps
            row["us_per_step"] += o.collective.dur / steps
            row["exposed_us_per_step"] += o.collective.exposed_us / steps
            nbytes = o.collective.bytes
            row["bytes_per_step"] = None if nbytes is None or row["bytes_per_step"] is None else \
                row["bytes_per_step"] + nbytes / steps
    return list(rows.values())


def owner_rows(ranks, *, group_units: bool | None = None) -> list[dict]:
    """Every rank's rows (`ranks`: ranks.RankTrace); with more than GROUPED_ROWS, the units of one rank, kind and
    phase summed into one row ("4 units")."""
    found = [row for r in ranks for row in r.figures.owners]
    if not (group_units if group_units is not None else len(found) > GROUPED_ROWS):
        return found
    grouped: dict[tuple, dict] = {}
    for row in found:
        into = grouped.setdefault((row["rank"], row["collective"], row["phase"]), {
            **row, "per_step": 0.0, "us_per_step": 0.0, "exposed_us_per_step": 0.0, "bytes_per_step": 0.0,
            "units": set()})
        for name in ("per_step", "us_per_step", "exposed_us_per_step"):
            into[name] += row[name]
        known = into["bytes_per_step"] is not None and row.get("bytes_per_step") is not None
        into["bytes_per_step"] = into["bytes_per_step"] + row["bytes_per_step"] if known else None
        if row["unit"]:
            into["units"].add(row["unit"])
    for row in grouped.values():
        units = row.pop("units")
        what = "buckets" if all(unit.startswith("bucket ") for unit in units) else "units"
        row["unit"] = f"{len(units)} {what}" if len(units) > 1 else next(iter(units), None)
    return list(grouped.values())


def print_owners(ranks, console) -> None:
    """One row per rank, collective kind, bucket or unit, and phase: what it cost and how much of it was exposed."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from trace_report.communication import size_text
    from trace_report.model import per_step_count

    rows = owner_rows(ranks)
    if not rows:
        return
    table = Table(title="per rank, per collective (means per step)", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("rank", "collective", "unit", "phase"):
        table.add_column(name, no_wrap=True)
    sized = any(row.get("bytes_per_step") for row in rows)
    for name in ("/step", "µs", "exposed µs", "exposed", *(("size/step",) if sized else ())):
        table.add_column(name, justify="right", no_wrap=True)
    for row in sorted(rows, key=lambda row: row["rank"]):  # within a rank, in the order they were issued
        share = row["exposed_us_per_step"] / row["us_per_step"] if row["us_per_step"] > 0 else None
        table.add_row(str(row["rank"]), row["collective"], escape(row["unit"] or "-"), escape(row["phase"] or "-"),
                      per_step_count(row["per_step"]), f"{row['us_per_step']:,.0f}",
                      f"{row['exposed_us_per_step']:,.0f}", "-" if share is None else f"{share:.0%}",
                      *((size_text(row.get("bytes_per_step")),) if sized else ()))
    console.print(table)
    console.print("  unit: FSDP2's unit as its ranges name it; DDP's bucket by the order its reducer issues "
                  "them (bucket 0: the last layers' gradients); exposed: nothing else ran beside it")
    console.print()
