"""The op table by roofline: each op (by name, input shapes and types) with its FLOPs and bytes per call (flops/), the
GPU time of the kernels it launched, the rates it reached, and how far they are from the GPU's peaks (peaks.py).

Per op and call: FLOPs and bytes from its recorded shapes; GPU µs, the summed time of the GPU work (kernels, and the
memsets and copies) it launched, linked by correlation; TFLOP/s and TB/s, FLOPs and bytes over that time; the
arithmetic intensity, FLOPs per byte. Against the peaks: the ridge point (peak FLOP/s over peak bytes/s) splits
compute-bound ops (intensity above it) from memory-bound ones, and the share of the peak is that of the bounding
resource: TFLOP/s over the peak compute for the op's dtype (tensor cores for GEMMs, attention and convolutions, the
vector units' fp32 rate for the rest), or TB/s over the memory bandwidth. An op with bytes but no FLOPs (the kernels
Inductor generates) is weighed as memory-bound. Rows are ranked by what a kernel at the peak would save, the op's GPU
time × (1 − share); without a share, by its time.

Which op a kernel belongs to: ops nest (`aten::linear` > `aten::matmul` > `aten::mm`), and each kernel is counted
once, for the innermost op around its launch that has a formula: the op that launched it (the reader's `launcher`), or
the nearest op around it with one. Innermost, because its shapes are the kernel's own: `aten::mm` sees the
`[8192, 768]` the reshape made of linear's `[64, 128, 768]`, and a composite (SDPA's math path, a layer norm written
as ops) shows each of its kernels beside its own op, not one sum under a name that did none of the work itself.

Left out of the rows, and said once: GPU work no op launched (CUDA graph replays, a trace without its CPU side),
collectives (the communication section weighs them: no FLOPs, no HBM roofline), and the work of ops recorded
without shapes (`record_shapes=True` records them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trace_report.flops import Cost, op_cost
from trace_report.frames import Rows, Tabular, records
from trace_report.kernels import COMMUNICATION, decode, kind_of_kernel
from trace_report.model import CpuOp, Trace
from trace_report.op_bytes import DTYPE_NAMES, ITEMSIZE, NOT_TENSORS
from trace_report.peaks import Found, find

SHAPES_HINT = "record_shapes=True"
TYPE_NAMES = {**DTYPE_NAMES, "c10::Float8_e4m3fn": "fp8e4m3", "c10::Float8_e5m2": "fp8e5m2",
              "c10::Float8_e4m3fnuz": "fp8e4m3fnuz", "c10::Float8_e5m2fnuz": "fp8e5m2fnuz", "unsigned char": "uint8",
              "signed char": "int8", "c10::Half": "fp16"}
COMPUTE, MEMORY = "compute", "memory"


@dataclass
class OpRow:
    """One op with one set of input shapes and types, over the trace's steps."""

    op: str
    shapes: tuple  # the tensor inputs' shapes, as recorded
    dtypes: tuple  # their types: "bf16", "fp32", ...
    cost: Cost | None  # None: no formula knows the op
    steps: int
    calls: int = 0  # calls that launched GPU work
    gpu_us: float = 0.0  # summed over the calls
    peak_tflops: float | None = None  # the peak compute for its dtype, and the bandwidth
    peak_tbps: float | None = None
    tf32: bool = False  # an fp32 GEMM or convolution whose kernels run TF32 (their names say so)
    launchers: set = field(default_factory=set, repr=False)  # id() of each call that launched GPU work

    @property
    def family(self) -> str | None:
        return self.cost.family if self.cost is not None else None

    @property
    def flops(self) -> int | None:
        return self.cost.flops if self.cost is not None else None

    @property
    def bytes(self) -> int | None:
        return self.cost.bytes if self.cost is not None else None

    @property
    def note(self) -> str:
        return self.cost.note if self.cost is not None else "no formula"

    @property
    def per_step(self) -> float:
        return self.calls / self.steps if self.steps else 0.0

    @property
    def us_per_call(self) -> float:
        return self.gpu_us / self.calls if self.calls else 0.0

    @property
    def tflops(self) -> float | None:
        """FLOPs over the kernels' time: FLOP/µs / 1e6 = TFLOP/s."""
        return self.flops * self.calls / self.gpu_us / 1e6 if self.flops is not None and self.gpu_us > 0 else None

    @property
    def tbps(self) -> float | None:
        return self.bytes * self.calls / self.gpu_us / 1e6 if self.bytes is not None and self.gpu_us > 0 else None

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved."""
        return self.flops / self.bytes if self.flops is not None and self.bytes else None

    @property
    def bound(self) -> str | None:
        """"compute" above the ridge point, "memory" below; an op with bytes and no FLOP count (Inductor's
        pointwise and reduction kernels) "memory"; None without a peak or a count."""
        if self.peak_tflops is None or self.peak_tbps is None:
            return None
        if self.intensity is not None:
            return COMPUTE if self.intensity >= self.peak_tflops / self.peak_tbps else MEMORY
        if self.bytes is not None and self.flops is None and not self.op.startswith("triton_tem"):
            return MEMORY
        return None

    @property
    def peak_share(self) -> float | None:
        """The share of the peak the op reached, for its bounding resource."""
        bound = self.bound
        if bound == COMPUTE and self.tflops is not None:
            return self.tflops / self.peak_tflops
        if bound == MEMORY and self.tbps is not None:
            return self.tbps / self.peak_tbps
        return None

    @property
    def saving_us(self) -> float:
        """What a kernel at the peak would save over the trace: time × (1 − share), the whole time without a share."""
        share = self.peak_share
        return self.gpu_us * (1.0 - min(1.0, share)) if share is not None else self.gpu_us

    def shape_text(self) -> str:
        """`8192×768 · 768×3072 bf16`: the tensor inputs, their type once when they share it."""
        shapes = " · ".join(_shape(s) for s in self.shapes) or "no tensors"
        kinds = [kind for kind in dict.fromkeys(self.dtypes) if kind]
        return f"{shapes} {'/'.join(kinds)}".strip()

    def to_dict(self) -> dict:
        def rounded(value, digits):
            return round(value, digits) if value is not None else None
        return {
            "op": self.op, "shapes": [list(s) for s in self.shapes], "dtypes": list(self.dtypes),
            "family": self.family, "note": self.note, "calls": self.calls, "calls_per_step": round(self.per_step, 3),
            "flops": self.flops, "bytes": self.bytes, "gpu_us": round(self.us_per_call, 3),
            "gpu_us_total": round(self.gpu_us, 3), "tflops": rounded(self.tflops, 3), "tbps": rounded(self.tbps, 4),
            "intensity": rounded(self.intensity, 3), "bound": self.bound, "peak_share": rounded(self.peak_share, 4),
            "saving_us": round(self.saving_us, 3),
        }


# OpRow.to_dict's keys, in its order: a table's columns even when it has no rows.
OP_COLUMNS = ["op", "shapes", "dtypes", "family", "note", "calls", "calls_per_step", "flops", "bytes", "gpu_us",
              "gpu_us_total", "tflops", "tbps", "intensity", "bound", "peak_share", "saving_us"]


@dataclass
class OpTable(Tabular):
    """The rows, the peaks they are weighed against, and the GPU time no row holds."""

    trace: str
    device: str | None  # the GPU as the trace names it
    steps: int
    found: Found | None
    has_gpu: bool
    has_shapes: bool
    rows: list[OpRow] = field(default_factory=list)
    gpu_us: float = 0.0  # all the steps' GPU work
    no_shapes_us: float = 0.0  # launched by ops recorded without shapes
    communication_us: float = 0.0
    unlaunched_us: float = 0.0  # no op launched it (graph replays, GPU-only traces)

    @property
    def counted_us(self) -> float:
        return sum(row.gpu_us for row in self.rows if row.cost is not None and (row.flops is not None or
                                                                               row.bytes is not None))

    @property
    def unknown_us(self) -> float:
        """GPU time of ops no formula knows."""
        return sum(row.gpu_us for row in self.rows if row.cost is None)

    @property
    def uncounted_us(self) -> float:
        """GPU time of ops of a known family whose recorded shapes or arguments do not give their numbers."""
        return sum(row.gpu_us for row in self.rows if row.cost is not None and row.flops is None and row.bytes is None)

    def to_rows(self) -> list[dict]:
        return [row.to_dict() for row in self.rows]

    def frame_rows(self, table: str | None = None) -> Rows:
        """DataFrame rows (frames.py): `to_rows`, the shapes and types as the table prints them."""
        rows = [{**row.to_dict(), "shapes": " · ".join(_shape(s) for s in row.shapes), "dtypes": "/".join(row.dtypes)}
                for row in self.rows]
        return records(OP_COLUMNS, rows)


    def to_dict(self) -> dict:
        peak = self.found.peak if self.found is not None else None
        return {
            "peak": None if peak is None else {"gpu": peak.name, "tflops": peak.tflops, "tbps": peak.tbps,
                                               "source": self.found.how},
            "gpu_us": round(self.gpu_us, 3), "unknown_us": round(self.unknown_us, 3),
            "uncounted_us": round(self.uncounted_us, 3), "no_shapes_us": round(self.no_shapes_us, 3),
            "communication_us": round(self.communication_us, 3), "unlaunched_us": round(self.unlaunched_us, 3),
        }


def op_table(trace: Trace, peak: tuple[float, float] | None = None) -> OpTable:
    """The op table of `trace` (see the module's docstring); `peak`: (TFLOP/s, TB/s) from --peak."""
    steps = len(trace.steps)
    table = OpTable(trace.name, trace.device, steps, find(trace, peak), trace.has_gpu,
                    any(op.input_dims for step in trace.steps for op in step.ops))
    rows: dict[tuple, OpRow] = {}
    for step in trace.steps:
        chosen: dict[int, tuple[CpuOp, Cost | None]] = {}  # id(launcher) -> the op its kernels count for
        for work in step.gpu:
            table.gpu_us += work.dur
            launcher = work.launch.launcher if work.launch is not None else None
            if work.kind == "kernel" and kind_of_kernel(work.name) == COMMUNICATION:
                table.communication_us += work.dur
                continue
            if launcher is None:
                table.unlaunched_us += work.dur
                continue
            target = chosen.get(id(launcher))
            if target is None:
                cost = op_cost(launcher)
                op = launcher
                if cost is None:
                    above = launcher.parent_op
                    while above is not None:
                        found = op_cost(above)
                        if found is not None:
                            op, cost = above, found
                            break
                        above = above.parent_op
                target = chosen[id(launcher)] = (op, cost)
            op, cost = target
            if not op.input_dims:
                table.no_shapes_us += work.dur
                continue
            row = rows.get(_key(op))
            if row is None:
                row = rows[_key(op)] = _row(op, cost, steps)
            if id(op) not in row.launchers:
                row.launchers.add(id(op))
                row.calls += 1
            row.gpu_us += work.dur
            if cost is not None and cost.matrix and cost.dtype == "fp32" and not row.tf32:
                row.tf32 = "tf32" in decode(work.name).describe()
    for row in rows.values():
        row.launchers.clear()
        if table.found is not None and row.cost is not None:
            dtype = "tf32" if row.tf32 else row.cost.dtype  # fp32 GEMMs run on CUDA cores unless TF32 is allowed
            row.peak_tflops = table.found.peak.compute(dtype, row.cost.matrix)
            row.peak_tbps = table.found.peak.tbps
    table.rows = sorted(rows.values(), key=lambda row: -row.saving_us)
    return table


def _shape(shape: tuple) -> str:
    """`8192×768`; a TensorList's as how many tensors and elements: `21 tensors, 1.7M elements`."""
    if shape and isinstance(shape[0], tuple):
        elements = sum(math.prod(s) for s in shape)
        return f"{len(shape)} tensors, {elements / 1e6:.1f}M elements" if elements >= 1e5 else (
            f"{len(shape)} tensors, {elements:,} elements")
    return "×".join(map(str, shape)) if shape else "scalar"


def shown_inputs(input_dims: tuple, input_types: tuple) -> tuple[tuple, tuple]:
    """(shapes, dtypes) of an op's tensor inputs, as a row shows them: scalars and left-out optional inputs dropped."""
    shapes, dtypes = [], []
    for dims, kind in zip(input_dims, input_types or ("",) * len(input_dims)):
        if kind in NOT_TENSORS or (not dims and kind not in ITEMSIZE and kind != "TensorList"):
            continue  # a scalar argument, or an optional tensor left out (a 0-dim tensor is kept: "scalar")
        shapes.append(tuple(tuple(d) if isinstance(d, list) else d for d in dims))
        dtypes.append("" if kind == "TensorList" else TYPE_NAMES.get(kind, kind.removeprefix("c10::")))
    return tuple(shapes), tuple(dtypes)


def _row(op: CpuOp, cost: Cost | None, steps: int) -> OpRow:
    shapes, dtypes = shown_inputs(op.input_dims, op.input_types)
    return OpRow(op.name, shapes, dtypes, cost, steps)


def _key(op: CpuOp) -> tuple:
    key = (op.name, op.input_dims, op.input_types, op.concrete_inputs)
    try:
        hash(key)
    except TypeError:  # a TensorList's shapes are lists
        key = (op.name, repr(op.input_dims), op.input_types, op.concrete_inputs)
    return key
