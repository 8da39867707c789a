"""An op re-timed alone: rebuild one op of a trace from what the profiler recorded (`record_shapes=True`: each input's
shape, strides and type, and the value of each scalar input), run it on this machine's GPU without the profiler,
and put its time beside the trace's.

    trace-report TRACE --replay 1                 # the op table's first row (or an op name: --replay aten::mm)
    trace-report TRACE --replay 1 --replay_script mm.py   # the standalone script instead, to share

The script this module writes is the whole method, readable on its own: inputs built with the recorded strides
(a transposed weight stays transposed, so cuBLAS picks the same layout), random values (a GEMM's time does not depend
on them; a kernel that branches on values, a sort or a top-k, may), the op called through the dispatcher by name,
queued behind a spin kernel so that CUDA events time its kernels and not its launch, twice: 100 calls after 10
warm-up calls, each with L2 flushed before it and between its own pair of events (as the op meets its inputs in a
model, after other ops evicted them; the events add a few µs around one kernel), and 100 calls back to back between
one pair (warm: its inputs in L2, as a loop of the same op finds them). What the profiler does not record takes its default: a string argument (`gelu`'s approximate="tanh"
reads as "", so the replay runs the erf GELU), an optional input left out, the output's dtype of a cast.

The trace's time is the op's GPU time per call, its kernels' summed durations (by correlation). A replay within a
few percent of it says the trace's kernel ran as the op runs alone. Slower in the trace than alone: a neighbour's
kernel on another stream shared the SMs, the profiler's own work, clocks lower under a longer step's power draw;
faster in the trace: warm caches the flushed replay does not have, or another GPU or library version here.

Only this module's `run_replay` needs torch, and only in the process it starts: trace_report itself imports none.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trace_report.console import read_progress
from trace_report.errors import CannotRunHere, UsageError
from trace_report.files import writable_file, write_atomically
from trace_report.reader import read_trace
from trace_report.roofline import OpRow, OpTable, op_table, shown_inputs
from trace_report.source import TraceSource, open_text

# The profiler's names for tensor element types -> torch's.
TORCH_DTYPES = {
    "double": "torch.float64", "float": "torch.float32", "c10::BFloat16": "torch.bfloat16", "c10::Half": "torch.float16",
    "long int": "torch.int64", "int": "torch.int32", "short int": "torch.int16", "signed char": "torch.int8",
    "unsigned char": "torch.uint8", "bool": "torch.bool",
    "c10::Float8_e4m3fn": "torch.float8_e4m3fn", "c10::Float8_e5m2": "torch.float8_e5m2",
    "c10::Float8_e4m3fnuz": "torch.float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "torch.float8_e5m2fnuz",
}
FLOAT8 = ("c10::Float8_e4m3fn", "c10::Float8_e5m2", "c10::Float8_e4m3fnuz", "c10::Float8_e5m2fnuz")
CALLS, WARMUP = 100, 10


@dataclass(frozen=True)
class RecordedOp:
    """One call of an op as the trace recorded it: its name and, per input, shape, strides, type, scalar value."""

    name: str
    dims: tuple
    strides: tuple
    types: tuple
    values: tuple

    @property
    def unrecorded(self) -> int:
        """Inputs the trace holds no value for (a string, an optional left out): the replay leaves them at their
        defaults."""
        return sum(not dims and kind == "" and value == "" for dims, kind, value in zip(self.dims, self.types, self.values))

    @property
    def signature(self) -> str:
        shapes = ", ".join(f"{t or 'None'}{list(d) if d else ''}" for d, t in zip(self.dims, self.types))
        return f"{self.name}({shapes})"


def recorded_op(path: str | Path, name: str, dims: tuple | None = None, tensors: tuple | None = None) -> RecordedOp:
    """The first call of op `name` in the trace (with these input shapes, if given; or these (shapes, dtypes) of its
    tensor inputs, as an op table's row has them), read from its raw event: the strides and scalar values the report
    does not keep."""
    with open_text(Path(path)) as text:
        for event in TraceSource(text, Path(path)).events():
            if not isinstance(event, dict) or event.get("name") != name or event.get("cat") != "cpu_op":
                continue
            args = event.get("args") or {}
            found = tuple(tuple(d) if isinstance(d, list) else () for d in args.get("Input Dims", ()))
            if "Input Dims" not in args or (dims is not None and found != tuple(tuple(d) for d in dims)):
                continue
            if tensors is not None and shown_inputs(found, tuple(args.get("Input type", ()))) != tensors:
                continue
            count = len(found)
            return RecordedOp(
                name,
                found,
                tuple(tuple(s) if isinstance(s, list) else () for s in _padded(args.get("Input Strides"), count)),
                tuple(str(t) for t in _padded(args.get("Input type"), count)),
                tuple(str(v) for v in _padded(args.get("Concrete Inputs"), count)),
            )
    shapes = f" with inputs {[list(d) for d in dims]}" if dims is not None else ""
    raise UsageError(f"{path}: no call of {name}{shapes} recorded with shapes (record_shapes=True records them)")


def _padded(values, count: int) -> list:
    values = list(values) if isinstance(values, list) else []
    return values + [""] * (count - len(values))


def _argument(i: int, dims: tuple, strides: tuple, kind: str, value: str) -> str:
    """The Python expression that rebuilds input `i`."""
    if kind in TORCH_DTYPES:
        if not strides or len(strides) != len(dims):
            strides = tuple(_contiguous(dims))
        dtype = TORCH_DTYPES[kind]
        make = (f"torch.empty_strided({list(dims)}, {list(strides)}, dtype={dtype}, device='cuda')")
        if kind in FLOAT8:  # no random fill in float8: drawn in bf16, then cast
            return f"{make}.copy_(torch.randn({list(dims)}, device='cuda').clamp(-4, 4))" if dims else make
        if dtype in ("torch.float64", "torch.float32", "torch.bfloat16", "torch.float16"):
            return f"{make}.normal_()"
        return f"{make}.random_(0, 2)"  # bools, and integers kept small: valid indices for any dimension
    if kind == "Scalar":
        return repr(_scalar(value, i))
    if kind == "ScalarList":
        try:
            return repr(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            raise UsageError(f"input {i} is a list the trace did not record ({value!r}): this op cannot be replayed") \
                from None
    if kind == "" and value == "":
        return "None"  # an optional input left out, or a string the profiler does not record: its default
    raise UsageError(f"input {i} is a {kind} ({value or 'no value recorded'}): only tensors, scalars and lists of "
                     "them are replayed")


def _scalar(value: str, i: int):
    if value in ("True", "False"):
        return value == "True"
    for parse in (int, float):
        try:
            return parse(value)
        except ValueError:
            continue
    raise UsageError(f"input {i} is a scalar whose value the trace did not record: this op cannot be replayed")


def _contiguous(dims: tuple) -> list[int]:
    strides, size = [], 1
    for d in reversed(dims):
        strides.append(size)
        size *= max(int(d), 1)
    return list(reversed(strides))


def replay_script(op: RecordedOp, trace_us: float | None = None, source: str = "") -> str:
    """A standalone Python script that rebuilds `op`, times it alone on a GPU and prints one JSON line."""
    args = [_argument(i, d, s, t, v) for i, (d, s, t, v) in enumerate(zip(op.dims, op.strides, op.types, op.values))]
    # Trailing Nones are the op's own defaults: left out, so that an overload without them still matches.
    while args and args[-1] == "None":
        args.pop()
    namespace, _, short = op.name.partition("::")
    if not short or not short.replace("_", "").isalnum():
        raise UsageError(f"{op.name} is not an op the dispatcher knows by name: it cannot be replayed")
    inputs = "\n".join(f"    {a}," for a in args)
    told = f"# In the trace: {trace_us:.2f} µs of GPU time per call.\n" if trace_us is not None else ""
    return f'''"""{op.signature}, re-timed alone{f" (from {source})" if source else ""}.

Written by trace-report --replay_script: the inputs rebuilt from the trace's recorded shapes, strides and types
(random values), the op called through PyTorch's dispatcher, timed with CUDA events, L2 flushed and warm."""
{told}import json
import statistics
import sys
import time

import torch

if not torch.cuda.is_available():
    sys.exit("this replay runs on a GPU: none is visible to torch here")
torch.manual_seed(0)
op = torch.ops.{namespace}.{short}
inputs = (
{inputs}
)
l2 = torch.empty(max(2 * torch.cuda.get_device_properties(0).L2_cache_size, 1 << 20), dtype=torch.uint8, device="cuda")


def cycles_per_us() -> float:
    """torch.cuda._sleep's cycles in a microsecond on this GPU (its clock), measured."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    torch.cuda.synchronize()
    return 1_000_000 / (start.elapsed_time(end) * 1e3)


op(*inputs)  # the first call: the library picks its kernel, allocates its workspace
torch.cuda.synchronize()
began = time.perf_counter()
op(*inputs)
issue_us = (time.perf_counter() - began) * 1e6
# The GPU spins while the CPU issues the calls, so that the events time the op's kernels, not its launch (a 3.6 µs
# cumsum issued in ~20 µs read 24.5 µs without the hold on an H200).
cycles = cycles_per_us()


def flushed() -> float:
    """Median µs per call over {CALLS} calls after {WARMUP}, each after an L2 flush, between two CUDA events (which add
    a few µs of their own around one kernel)."""
    times = []
    for i in range({WARMUP} + {CALLS}):
        l2.zero_()  # evicts the inputs: the op reads them from HBM, as in a model
        torch.cuda._sleep(int((50 + 2 * issue_us) * cycles))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        op(*inputs)
        end.record()
        if i >= {WARMUP}:
            times.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in times)


def warm() -> float:
    """µs per call of {CALLS} calls back to back between one pair of CUDA events, their inputs in L2 after the first:
    the median of 5 such runs."""
    runs = []
    for _ in range(5):
        torch.cuda._sleep(int((50 + 2 * issue_us * {CALLS}) * cycles))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range({CALLS}):
            op(*inputs)
        end.record()
        runs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 / {CALLS} for s, e in runs)


print(json.dumps({{"op": {op.name!r}, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                  "flushed_us": flushed(), "warm_us": warm()}}))
'''


def run_replay(script: str, timeout: float = 300) -> dict:
    """Run the script in a Python process of its own (this interpreter's), the one step that needs torch and a GPU."""
    if importlib.util.find_spec("torch") is None:
        raise CannotRunHere("--replay runs the op with PyTorch on a GPU, and torch is not installed here: "
                            "--replay_script FILE writes the script to run where it is")
    try:
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CannotRunHere(f"the replay took longer than {timeout:.0f} s") from None
    if run.returncode != 0:
        lines = [line for line in run.stderr.strip().splitlines() if line.strip()]
        raise CannotRunHere(f"the replay failed: {lines[-1] if lines else f'exit {run.returncode}'}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def compare_line(trace_us: float | None, replayed: dict, unrecorded: int = 0) -> str:
    """The trace's time beside the replay's, and what the difference says. `unrecorded`: the op's arguments the trace
    holds no value for (a string, an optional), which the replay left at their defaults."""
    flushed, warm = replayed["flushed_us"], replayed["warm_us"]
    head = f"replayed alone on {replayed['device']} (torch {replayed['torch']}): {flushed:,.2f} µs with L2 flushed, " \
           f"{warm:,.2f} µs warm back to back"
    if trace_us is None or trace_us <= 0:
        return head
    low, high = min(flushed, warm), max(flushed, warm)
    if 0.9 * low <= trace_us <= 1.1 * high:
        meaning = "as alone: the kernel ran in the trace as the op runs by itself"
    elif trace_us > high:
        meaning = ("slower in the trace: a kernel beside it on another stream, the profiler's own work, lower clocks "
                   "in a longer step, or another GPU than this one")
    else:
        meaning = "faster in the trace: its inputs were warm there, or another GPU or library version ran it"
        if low < 10:
            meaning += "; a kernel of a few µs: the replay's events and launch gaps weigh on it"
    if unrecorded and not meaning.startswith("as alone"):
        meaning += (f"; {unrecorded} argument{'s' if unrecorded > 1 else ''} the trace does not record took "
                    "the default (a string such as gelu's approximate='tanh')")
    return f"{head}; the trace: {trace_us:,.2f} µs a call ({trace_us / flushed:.2f}× the flushed replay), {meaning}"


def replay_command(path: str, which: str, script_file: str | None, peak: tuple[float, float] | None) -> int:
    """`trace-report TRACE --replay N|OP [--replay_script FILE]`: row N of the op table (or the first row of op OP)
    re-timed alone here, or its script written to FILE."""
    with read_progress([path]) as progress:  # a bar on a terminal for a long read
        trace = read_trace(path, progress(path))
    table = op_table(trace, peak)
    row = chosen_row(table, which)
    op = recorded_op(path, row.op, tensors=(row.shapes, row.dtypes))
    script = replay_script(op, row.us_per_call if row.calls else None, Path(path).name)
    if script_file is not None:
        target = writable_file(Path(script_file), "the replay script")
        write_atomically(target, script)
        print(f"replay script: {target} ({op.signature}; run it with python3 where a GPU is)")
        return 0
    print(f"replaying {op.signature}: {row.us_per_call:,.2f} µs of GPU time a call in the trace", flush=True)
    print(compare_line(row.us_per_call if row.calls else None, run_replay(script), op.unrecorded))
    return 0


def chosen_row(table: OpTable, which: str) -> OpRow:
    """Row `which` of the op table: its number as the report prints it (1 the first), or the first row of that op."""
    if not table.has_shapes:
        raise UsageError(f"{table.trace}: --replay rebuilds an op from its recorded shapes, and this trace has none "
                         "(profile with record_shapes=True)")
    if which.isdigit():
        if not 1 <= int(which) <= len(table.rows):
            raise UsageError(f"--replay {which}: the op table has rows 1 to {len(table.rows)}")
        return table.rows[int(which) - 1]
    for row in table.rows:
        if row.op in (which, f"aten::{which}"):
            return row
    raise UsageError(f"--replay {which}: no op of that name in the op table (give a row's number or an op's name)")
