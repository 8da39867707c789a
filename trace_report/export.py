"""The report as plain data: what `trace-report --json` prints, for programs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from trace_report import fusion
from trace_report.kernels import decode
from trace_report.model import WHOLE_TRACE, RuntimeCall, Step, Trace, rounded
from trace_report.pace import Verdict, verdict


def trace_to_dict(trace: Trace, *, bandwidth_gbs: float | None = None, second: Trace | None = None,
                  judged: Verdict | None = None, lazy_steps: bool = False) -> dict:
    """The report as plain data: what `trace-report --json` prints. Under "fusion", where fusion would pay
    (`fusion.analyze`, at `bandwidth_gbs` if given; with `second`, what that trace did with each candidate).
    `judged`: the trace's verdict, when the caller has it already. `lazy_steps`: "steps" as LazyRows, each step's
    dict made when asked for (--json writes them one at a time), not a list."""
    steps = LazyRows(trace.steps, partial(step_to_dict, trace))
    steps = steps if lazy_steps else list(steps)
    kernels = [
        {
            "kind": s.kind,
            "name": s.name,
            "short_name": s.short_name,
            "decoded": decode(s.name).describe() if s.kind == "kernel" else "",
            "is_gemm": s.kind == "kernel" and decode(s.name).is_gemm,
            "count": s.count,
            "per_step": round(s.count / len(trace.steps), 3),
            "avg_us": round(s.avg_us, 3),
            "min_us": round(s.min_us, 3),
            "max_us": round(s.max_us, 3),
            "total_us": round(s.total_us, 3),
            "launched_by": s.launched_by,
        }
        for s in trace.kernel_stats()
    ]
    closing = trace.closing_sync
    first_ts = trace.steps[0].ts
    return {
        "trace": trace.name,
        "device": trace.device,
        "steps_from": "ProfilerStep" if trace.from_profiler_steps else WHOLE_TRACE,
        "self_cpu_total_us": round(trace.self_cpu_total_us, 3),
        "self_gpu_total_us": round(trace.self_gpu_total_us, 3),
        "closing_sync": None
        if closing is None
        else {"name": closing.name, "start_us": round(closing.ts - first_ts, 3), "dur_us": round(closing.dur, 3)},
        "steps": steps,
        "outside_steps": {  # times from the first step's start
            "runtime_calls": runtime_rows(trace.runtime_outside_steps),
            "cpu_ops": [
                {"name": op.name, "is_label": op.is_label, "start_us": round(op.ts - first_ts, 3), "dur_us": round(op.dur, 3)}
                for op in trace.ops_outside_steps
            ],
            "gpu": [
                {"kind": w.kind, "name": w.name, "launched_by": w.launched_by, "start_us": round(w.ts - first_ts, 3), "dur_us": round(w.dur, 3)}
                for w in trace.gpu_outside_steps
            ],
        },
        "kernels": kernels,
        "verdict": (judged or verdict(trace)).to_dict(),
        "fusion": fusion.analyze(trace, bandwidth_gbs, second).to_dict(),
        "notes": trace.notes + ([trace.skipped_note] if trace.skipped_note else []),
        "skipped_events": dict(trace.skipped_events),  # why -> how many events the reader could not use
        # GPU work clipped on its stream (overlaps.py): only where some was, so that other traces' JSON stays as it was
        **({"overlaps": trace.overlaps.to_dict()} if trace.overlaps else {}),
    }


def step_to_dict(trace: Trace, step: Step) -> dict:
    """One step of `trace_to_dict`'s "steps": its GPU work, runtime calls, ops and labels."""
    total = step.gpu_time_us
    gpu = [
        {
            "kind": w.kind,
            "name": w.name,
            "short_name": w.short_name,
            "launched_by": w.launched_by,
            "launch_path": w.launch_path,  # a tuple, shared by the step's work: json writes it as a list
            "runtime_call": w.runtime,
            "dur_us": round(w.dur, 3),
            "share": round(w.dur / total, 4) if total else None,
            "start_us": round(w.ts - step.ts, 3),
            "lag_us": rounded(w.lag_us),
        }
        for w in step.gpu
    ]
    cpu_ops = [{**row, "cpu_us": round(row["cpu_us"], 3), "self_us": round(row["self_us"], 3)} for row in step.op_rows()]
    return {
        "name": step.name,
        "cpu_us": round(step.dur, 3),
        "sync_us": round(step.sync_us, 3),
        "gpu_time_us": round(total, 3),
        "gpu_busy_us": round(step.gpu_busy_us, 3),
        "kernels": len(step.kernels),
        "gemms": len(step.gemms),
        "gpu": gpu,
        "runtime_calls": runtime_rows(step.runtime),
        "idle_cpu_ops": [{"name": n, "count": c} for n, c in step.idle_ops().items()] if trace.has_gpu else [],
        "cpu_ops": cpu_ops,
        "labels": dict(step.op_names(labels=True)),
    }


class LazyRows(Sequence):
    """A list whose items are made when asked for, one at a time: `--json` writes each as it comes (report._print_json).
    The steps' rows of a 147 MB trace, held whole, were 12 MB of the process's peak of 158 MB."""

    def __init__(self, items: Sequence, row: Callable[[Any], dict]):
        self.items, self.row = items, row

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.row(item) for item in self.items[i]]
        return self.row(self.items[i])


def runtime_rows(calls: list[RuntimeCall]) -> list[dict]:
    """Runtime calls by name, in the order of first appearance: count and total time."""
    rows: dict[str, dict] = {}
    for call in calls:
        row = rows.setdefault(call.name, {"name": call.name, "count": 0, "total_us": 0.0})
        row["count"] += 1
        row["total_us"] += call.dur
    return [{**row, "total_us": round(row["total_us"], 3)} for row in rows.values()]
