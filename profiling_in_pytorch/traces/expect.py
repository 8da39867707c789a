"""Guess first, then look: each lesson says what it expects to see, and we check it against the trace.

Every claim the posts make about a trace (numbered P1-01 … P2-19 in docs/claims.md) is one `Expectation` here,
printed by the lesson that makes the trace: announced before profiling, then ✓, or ✗ with the evidence and,
when we know it, the reason (a Hopper GPU where the post used an A100, a CPU where it used a GPU, ...).

A lesson lists its guesses for the run it makes:

    expectations = [ex.kernels_in_order(("GEMM", "GEMM", "gelu", "mul", "GEMM"), claim="P2-08"), ...]

Each check reads a GPU trace for kernels and launches, and a CPU trace for what stands in for them there: the
ops that do the arithmetic (`aten::mm`, `aten::gelu`, Inductor's `cpp_fused_...` kernels), so a CPU run
teaches the same thing. A claim only a GPU can show (runtime calls, registers, a memcpy) is ✗ on a CPU,
with that reason. Each constructor returns an `Expectation`: `.text`, `.claim` and `.check(trace) -> Outcome`.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from rich.markup import escape

from profiling_in_pytorch.console import Console
from profiling_in_pytorch.files import twin_trace
from profiling_in_pytorch.traces.kernel_names import METADATA_OPS, decode, split_fused_ops
from profiling_in_pytorch.traces.model import CpuOp, GpuWork, Step, Trace, per_step_count
from profiling_in_pytorch.traces.pace import verdict
from profiling_in_pytorch.traces.reader import read_trace

OCCUPANCY_QUERY = "cudaOccupancyMaxActiveBlocksPerMultiprocessor"

HOPPER_LAUNCH = (
    "on Hopper (sm90) cuBLAS launches its GEMMs with the extensible launch calls (cuLaunchKernelEx for nvjet "
    "kernels, some after a 4-byte cudaMemsetAsync; cudaLaunchKernelExC after cudaFuncGetAttributes for others), "
    "the calls that can set thread-block clusters; the post's A100 shows an occupancy query "
    "(cudaOccupancyMaxActiveBlocksPerMultiprocessor) and cudaLaunchKernel instead"
)
PROFILER_START = (
    "the first recorded step also pays for the profiler starting to record (every op in it runs slower, warm or "
    "cold, on this machine); the steps after it are alike"
)
NO_GPU = "a CPU profile has no GPU lane: no kernels, no launches, no GPU time to read"
LOOKS_EAGER = "the trace has no Inductor kernels: it looks like an eager run (was --compile given?)"
ATEN_ELEMENTWISE = (
    "these are ATen's eager elementwise kernels: nothing fused gelu and mul (a run without --compile, or a "
    "fused module that fell back to PyTorch ops)"
)
NOT_COMPILED = "the trace has no compiled region: it looks like an eager run (was --compile given?)"
SPLIT_K = "cuBLAS split K for this shape: a split GEMM adds a splitKreduce_kernel that sums its partial results"
COMPILED_NO_VIEW_OPS = (
    "a compiled graph does not dispatch view ops such as aten::t: Inductor hands the GEMM the transposed "
    "layout directly"
)
NO_LT_EPILOGUE = (
    "PyTorch uses cuBLASLt's bias epilogue only when its conditions hold (2-D input, a contiguous 1-D bias, "
    "beta = 1, a supported dtype); otherwise it copies the bias into the output and runs the GEMM on top "
    "(beta = 1): two kernels"
)
ONE_D_BIAS = (
    "a 1-D bias fits cuBLASLt's bias epilogue, so addmm needs no copy: Part 1's bias is (size, size) for this"
)
TEMPLATE_GEMM = "Inductor replaced a cuBLAS GEMM with its own Triton template (max-autotune picks these)"
STEADY_CLOCKS = "this run's GPU held its clocks: the spread is within noise (it shows under power or heat)"
INDUCTOR_CONFIG = (
    "Inductor picks its pointwise kernel's launch configuration when it compiles, so its speed depends on the "
    "compile: an H200 compile that chose 128-thread blocks over a 24,576-block grid ran this kernel in 38.4 µs, "
    "faster than Liger's, as on the post's A100"
)
CPU_OPS_BEFORE = (
    "here the extra work before {op} is CPU ops (reshaping the batch for it), and {op}'s launch is its only "
    "runtime call"
)
SHAPES_OFF = "input shapes are recorded only with --record_shapes (it costs CPU time per op, so it is off)"
CPU_BACKWARD_THREAD = (
    "on a CPU, autograd runs the backward on the thread that called backward(), inside its label; only a GPU's "
    "backward goes to autograd's own device thread"
)

# The ops that do arithmetic in a CPU trace: what stands in for kernels there.
CPU_MATH_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::add", "aten::gelu", "aten::mul"}
CPP_KERNEL = re.compile(r"cpp_fused_(\w+?)_\d+$")  # Inductor's CPU kernels, with enable_kernel_profile
# A backward adds its own: what stands in for the gradient kernels on a CPU (aten::mul, aten::add serve both ways).
CPU_BACKWARD_MATH_OPS = CPU_MATH_OPS | {"aten::gelu_backward"}
VIEW_LIKE = {f"aten::{op}" for op in METADATA_OPS}  # the ATen ops that only rewrite shape and stride


@dataclass(frozen=True)
class Outcome:
    """ok: True (✓), False (✗) or None (skipped, not a failure); evidence: what we saw; reason: why a ✗."""

    ok: bool | None
    evidence: str
    reason: str | None = None


@dataclass(frozen=True)
class Expectation:
    """One guess: `claim` is the posts' number for it (P2-08), empty for the suite's own guesses."""

    text: str
    check_fn: Callable[[Trace], Outcome]
    claim: str = ""

    def check(self, trace: Trace) -> Outcome:
        return self.check_fn(trace)

    @property
    def title(self) -> str:
        return f"{self.claim} · {self.text}" if self.claim else self.text


def _needs_gpu(check: Callable[[Trace], Outcome]) -> Callable[[Trace], Outcome]:
    """A claim only a GPU trace can show: on a trace without a GPU lane it fails, with the reason."""

    @functools.wraps(check)
    def guarded(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        return check(trace)

    return guarded


# --- what the lessons call ----------------------------------------------------------------------------------


def announce(expectations: Sequence[Expectation], console: Console | None = None) -> None:
    """Print what we expect to see, before profiling: the guess comes first."""
    console = console or Console(highlight=False)
    console.print("\n[bold]What we expect to see[/bold]")
    for expectation in expectations:
        console.print(f"  • {escape(expectation.title)}")
    console.print()


def check_trace(expectations: Sequence[Expectation], trace_path: str | Path, device_type: str, console: Console | None = None) -> int:
    """Read the trace, print each expectation with ✓ or ✗ and the evidence; return the number of ✗."""
    console = console or Console(highlight=False)
    trace = read_trace(trace_path)
    console.print(f"\n[bold]What we saw[/bold] ({escape(trace.name)}, {device_type})")
    failed = 0
    for expectation in expectations:
        outcome = expectation.check(trace)
        if outcome.ok is None:
            mark = "[dim]–[/dim]"
        elif outcome.ok:
            mark = "[green]✓[/green]"
        else:
            mark = "[red]✗[/red]"
            failed += 1
        console.print(f"  {mark} {escape(expectation.title)}")
        console.print(f"      {escape(outcome.evidence)}", style="dim" if outcome.ok is None else None)
        if outcome.ok is False and outcome.reason:
            console.print(f"      [yellow]known reason:[/yellow] {escape(outcome.reason)}")
    if failed:
        console.print(f"  {failed} of {len(expectations)} expectations not met: the trace is the truth, not the guess")
    return failed


# --- steps and time: Part 1 ---------------------------------------------------------------------------------


def profiler_steps(n: int = 3, claim: str = "") -> Expectation:
    """The schedule's active steps appear in the CPU lane as ProfilerStep#2..#4."""
    want = [f"ProfilerStep#{i}" for i in range(2, 2 + n)]

    def check(trace: Trace) -> Outcome:
        names = [s.name for s in trace.steps] if trace.from_profiler_steps else []
        return Outcome(names == want, f"steps: {', '.join(names) or 'none (no ProfilerStep events)'}")

    return Expectation(f"{n} profiler steps in the CPU lane, {want[0]}..#{1 + n} (wait=1, warmup=1, active={n})", check, claim)


def overhead_bound(claim: str = "") -> Expectation:
    """Part 1 at --size 64: the table's Self CPU total dwarfs its Self CUDA total; the GPU idles."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            share = _cpu_math_share(trace)
            return Outcome(share < 0.5, _cpu_share_evidence(share))
        v = verdict(trace)
        return Outcome(v.kind == "overhead-bound", v.summary)

    return Expectation("overhead-bound: Self CPU total ≫ Self CUDA total, the GPU mostly idle", check, claim)


def compute_bound(dominant: str = "GEMM", claim: str = "") -> Expectation:
    """Part 1 at --size 4096: the GPU's work is as long as the CPU's or longer, and one kernel dominates it."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            share = _cpu_math_share(trace)
            return Outcome(share >= 0.5, _cpu_share_evidence(share))
        v = verdict(trace)
        gpu = [w for w in trace.gpu_work()]
        total = sum(w.dur for w in gpu)
        top = sum(w.dur for w in gpu if w.is_gemm) if dominant == "GEMM" else 0.0
        share = top / total if total else 0.0
        evidence = f"{v.summary} The {dominant} kernels take {share:.0%} of the GPU time."
        return Outcome(v.kind == "compute-bound" and share > 0.5, evidence)

    return Expectation(f"compute-bound: the GPU's time is as long as the CPU's, and the {dominant} dominates it", check, claim)


def gpu_lane_lag(cpu_ahead: bool, threshold_us: float = 100.0, claim: str = "") -> Expectation:
    """How far the GPU lane runs behind the CPU lane: each step's latest kernel start minus its launch call's start.

    cpu_ahead: the GPU is the bottleneck, so its queue grows and the lag passes `threshold_us` (Part 1 at 4096);
    otherwise the GPU keeps up and every kernel starts within `threshold_us` of its launch (Part 1 at 64)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        lags = _lags(trace)
        last = max(lags) if lags else 0.0
        evidence = f"per step, the latest kernel starts {_us_list(lags) or '?'} µs after its launch call"
        return Outcome(last >= threshold_us if cpu_ahead else last < threshold_us, evidence)

    if cpu_ahead:
        text = f"the CPU lane runs ahead of the GPU lane (kernels start ≥ {threshold_us:g} µs after their launch)"
    else:
        text = f"the GPU keeps up with the CPU: every kernel starts < {threshold_us:g} µs after its launch"
    return Expectation(text, check, claim)


def closing_sync(claim: str = "") -> Expectation:
    """The profiler's own flush: one long cudaDeviceSynchronize after the last step, the GPU mostly idle meanwhile."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        sync = trace.closing_sync
        if sync is None:
            return Outcome(False, "no synchronize after the last step")
        running = sum(max(0.0, min(w.ts + w.dur, sync.ts + sync.dur) - max(w.ts, sync.ts)) for w in trace.gpu_work())
        idle = 1 - running / sync.dur if sync.dur else 0.0
        return Outcome(
            True,
            f"{sync.name} {sync.dur:,.1f} µs after {trace.steps[-1].name}; the GPU ran {running:,.1f} µs of it "
            f"(idle {idle:.0%}): the profiler waiting for the GPU before it stops",
        )

    return Expectation("a cudaDeviceSynchronize closes the active window (the profiler's flush)", check, claim)


def cold_first_step(label: str, claim: str = "") -> Expectation:
    """A cold run: the first recorded step is the longest, and its dead window (from the label's start to the
    first op inside it: workspace allocation, cuBLAS heuristics, lazy loading) is wider than in later steps."""

    def check(trace: Trace) -> Outcome:
        durs = [s.dur for s in trace.steps]
        windows = [_dead_window(step, label) for step in trace.steps]
        if len(durs) < 2 or any(w is None for w in windows):
            return Outcome(False, f"no op inside {label} in every step")
        gaps = [gap for gap, _ in windows]
        rest_dur, rest_gap = statistics.median(durs[1:]), statistics.median(gaps[1:])
        evidence = (
            f"steps {_us_list(durs)} µs; {label} → {windows[0][1]} gap {_us_list(gaps)} µs "
            f"(the first step {durs[0] / rest_dur:.1f}× the others' length)"
        )
        return Outcome(durs[0] > 1.2 * rest_dur and gaps[0] > 2 * rest_gap, evidence)

    return Expectation(f"cold: the first profiled step is the longest, with a dead window at the start of {label}", check, claim)


def steps_alike(claim: str = "") -> Expectation:
    """A warm run: every profiled step takes about the same time."""

    def check(trace: Trace) -> Outcome:
        durs = [s.dur for s in trace.steps]
        spread = max(durs) / min(durs) if min(durs) > 0 else float("inf")
        later = max(durs[1:]) / min(durs[1:]) if len(durs) > 2 and min(durs[1:]) > 0 else spread
        reason = PROFILER_START if spread >= 1.5 and later < 1.5 and durs[0] == max(durs) else None
        return Outcome(spread < 1.5, f"steps {_us_list(durs)} µs: the longest {spread:.2f}× the shortest", reason)

    return Expectation("warm: every profiled step takes a similar time (within 1.5×)", check, claim)


def kernel_time_varies(min_spread: float = 0.01, claim: str = "") -> Expectation:
    """At --size 4096 the same GEMM can run longer in one step than in another: read the trace, not the mean."""

    def check(trace: Trace) -> Outcome:
        if trace.has_gpu:
            durs = [sum(w.dur for w in step.gemms) for step in trace.steps]
            what = "the GEMM"
        else:
            durs = [sum(op.dur for op in step.ops if op.name in ("aten::mm", "aten::bmm")) for step in trace.steps]
            what = "aten::mm"
        if not all(durs):
            return Outcome(False, f"no {what} in every step")
        spread = max(durs) / min(durs) - 1
        evidence = f"{what} per step: {_us_list(durs)} µs (spread {spread:.1%})"
        return Outcome(spread >= min_spread, evidence, None if spread >= min_spread else STEADY_CLOCKS)

    return Expectation("the same GEMM kernel takes different times in different steps", check, claim)


def more_cpu_than_eager(claim: str = "") -> Expectation:
    """--compile: for one small op the compiled step costs the CPU more than the eager one (guards, wrappers)."""

    def check(trace: Trace) -> Outcome:
        other = _twin(trace)
        if isinstance(other, Outcome):
            return other
        ours, theirs = _issue_cpu(trace), _issue_cpu(other)
        evidence = f"CPU per step (each run's fastest): compiled {ours:,.1f} µs, eager {theirs:,.1f} µs ({ours / theirs:.1f}×)"
        return Outcome(ours > theirs, evidence)

    return Expectation("compiled, the CPU spends more per step than eager (Dynamo's guards and wrappers)", check, claim)


# --- what dispatches what ------------------------------------------------------------------------------------


def dispatch_chain(*chain: str, claim: str = "") -> Expectation:
    """Each step runs `chain[-1]` inside `chain[-2]` inside ... inside `chain[0]` (a label, then ops)."""

    def check(trace: Trace) -> Outcome:
        per_step = [[op for op in step.ops if op.name == chain[-1]] for step in trace.steps]
        found = [ops for ops in per_step if any(_path_ends(op, chain[:-1]) for op in ops)]
        if not any(per_step):
            return Outcome(False, f"no {chain[-1]} in the trace; ops per step: {_top_ops(trace)}", _view_reason(trace, chain[-1]))
        example = next((op for ops in per_step for op in ops), None)
        seen = " → ".join(example.path + (example.name,)) if example else ""
        return Outcome(len(found) == len(trace.steps), f"in {len(found)} of {len(trace.steps)} steps: {seen}")

    return Expectation(" → ".join(chain), check, claim)


def runtime_calls_before(parent: str, op: str, claim: str = "") -> Expectation:
    """P1-08, 3-D inputs: `parent` (aten::matmul) makes runtime calls before it reaches `op` (aten::bmm), besides
    the GEMM's own launch. Where the extra work is CPU ops only (broadcasting the batch), the reason says so."""

    def check(trace: Trace) -> Outcome:
        step = trace.steps[0]
        target = next((o for o in step.ops if o.name == op and parent in o.path), None)
        if target is None:
            return Outcome(False, f"no {op} inside {parent}; ops per step: {_top_ops(trace)}")
        calls = [c for c in step.runtime if parent in c.launch_path and c.ts < target.ts]
        ops = [o for o in step.ops if parent in o.path and o.ts < target.ts and o.name != op and op not in o.path]
        evidence = (
            f"inside {parent}, before {op}: runtime calls: {_counts(Counter(c.name for c in calls)) or 'none'}; "
            f"ops: {_op_names(ops)}"
        )
        reason = CPU_OPS_BEFORE.format(op=op) if not calls and ops else None
        return Outcome(bool(calls) if trace.has_gpu else bool(ops), evidence, reason if trace.has_gpu else None)

    return Expectation(f"{parent} dispatches {op} with extra runtime calls before it", check, claim)


def one_op_replaces(new: Sequence[str], old: Sequence[str], claim: str = "") -> Expectation:
    """--compile: `new` runs once per step where eager ran `old` (`aten::addmm` for `aten::mm` + `aten::add`)."""

    def check(trace: Trace) -> Outcome:
        counts = {op: [step.op_names()[op] for step in trace.steps] for op in (*new, *old)}
        ok = all(all(c == 1 for c in counts[op]) for op in new) and not any(any(counts[op]) for op in old)
        evidence = "; ".join(f"{op}: {_per_step_counts(c, trace)}" for op, c in counts.items())
        return Outcome(ok, evidence, None if ok or _is_compiled(trace) else NOT_COMPILED)

    return Expectation(f"one {_and(list(new))} per step replaces {_and(list(old))}", check, claim)


def compiled_region_rows(claim: str = "") -> Expectation:
    """--compile: Dynamo's and AOTAutograd's rows in every step, and one compiled graph (one hash) throughout."""
    rows = ("Torch-Compiled Region", "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "## Call CompiledFxGraph")

    def check(trace: Trace) -> Outcome:
        missing = [r for r in rows if not all(any(op.name.startswith(r) for op in step.ops) for step in trace.steps)]
        graphs = {op.name for step in trace.steps for op in step.ops if op.name.startswith("## Call CompiledFxGraph")}
        regions = sorted({op.name for step in trace.steps for op in step.ops if op.name.startswith("Torch-Compiled Region")})
        evidence = f"{', '.join(regions) or 'no compiled region'}; graphs called: {', '.join(sorted(graphs)) or 'none'}"
        if missing:
            evidence += f"; missing in some step: {', '.join(missing)}"
        return Outcome(not missing and len(graphs) == 1, evidence, None if _is_compiled(trace) else NOT_COMPILED)

    return Expectation("Torch-Compiled Region, Cache Lookup, AOTDispatcher and ## Call CompiledFxGraph rows, one hash in every step", check, claim)


def not_compiled(claim: str = "") -> Expectation:
    """Liger's layer needs no compiler: no compiled region, no Dynamo guards, in any step."""

    def check(trace: Trace) -> Outcome:
        compiled = _is_compiled(trace)
        return Outcome(not compiled, "a compiled region runs" if compiled else f"no compiled region, no Dynamo rows; ops per step: {_top_ops(trace)}")

    return Expectation("no compiler: no Torch-Compiled Region or Dynamo rows", check, claim)


def cpu_op_runs(op: str, per_step: int | None = None, claim: str = "") -> Expectation:
    """`op` runs in every step (`per_step` times when given)."""

    def check(trace: Trace) -> Outcome:
        counts = [step.op_names()[op] for step in trace.steps]
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        if not any(counts):
            return Outcome(False, f"no {op} in the trace; ops per step: {_top_ops(trace)}", _view_reason(trace, op))
        return Outcome(ok, f"{op}: {_per_step_counts(counts, trace)}")

    times = " in every step" if per_step is None else f" {per_step}× per step" if per_step != 1 else " once per step"
    return Expectation(f"{op} runs{times}", check, claim)


def no_cpu_op(*ops: str, claim: str = "") -> Expectation:
    """None of `ops` runs (a compiled graph replaces them with its own code)."""

    def check(trace: Trace) -> Outcome:
        found = Counter()
        for step in trace.steps:
            found.update({name: c for name, c in step.op_names().items() if name in ops})
        if found:
            return Outcome(False, "found " + ", ".join(f"{n} ×{c}" for n, c in found.items()), None if _is_compiled(trace) else NOT_COMPILED)
        return Outcome(True, f"none of {_or(ops)} in {len(trace.steps)} steps; ops per step: {_top_ops(trace)}")

    return Expectation(f"no {_or(ops)} op runs", check, claim)


def gemm_shapes(shapes: Sequence[str], *, recorded: bool, op: str = "aten::mm", claim: str = "") -> Expectation:
    """With --record_shapes: each step's GEMM ops take these input shapes, in order (`[8192,768] x [768,3072]`)."""

    def check(trace: Trace) -> Outcome:
        calls = [o for o in trace.steps[0].ops if o.name == op]
        seen = [" x ".join(_dims(d) for d in o.input_dims[:2]) for o in calls if o.input_dims]
        if not seen:
            return Outcome(None if not recorded else False, f"{len(calls)} {op} calls per step, no input shapes in the trace", SHAPES_OFF)
        return Outcome(seen == list(shapes), f"{op} per step: " + "; ".join(seen))

    return Expectation(f"{op} shapes per step: " + "; ".join(shapes), check, claim)


# --- kernels --------------------------------------------------------------------------------------------------


def kernels_per_step(n: int, claim: str = "") -> Expectation:
    """Every step launches exactly `n` kernels (memsets and memcpys are not kernels); on a CPU, `n` math ops."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            counts = [len(_cpu_kernels(step)) for step in trace.steps]
            return Outcome(all(c == n for c in counts), f"math ops (the CPU's kernels): {_per_step_counts(counts, trace)}: {_op_names(_cpu_kernels(trace.steps[0]))}")
        counts = [len(step.kernels) for step in trace.steps]
        evidence = f"{_per_step_counts(counts, trace)}: {_names_of(trace.steps[0].kernels)}"
        others = Counter(w.kind for w in trace.steps[0].gpu if w.kind != "kernel")
        if others:
            evidence += " (not counted: " + ", ".join(f"{c} {k}{'s' if c > 1 else ''}" for k, c in others.items()) + ")"
        ok = all(c == n for c in counts)
        return Outcome(ok, evidence, SPLIT_K if not ok and _split_k(trace) else None)

    return Expectation(f"{n} kernel{'s' if n != 1 else ''} per step", check, claim)


def kernels_in_order(order: Sequence[str], claim: str = "") -> Expectation:
    """Each step's kernels, in time order, do `order`: "GEMM" for a GEMM, else the op its name says (gelu, mul)."""

    def check(trace: Trace) -> Outcome:
        seen = [[_kernel_role(k) for k in _step_kernels(trace, step)] for step in trace.steps]
        ok = all(s == list(order) for s in seen)
        what = "kernels" if trace.has_gpu else "math ops (the CPU's kernels)"
        return Outcome(ok, f"{what} per step, in order: {', '.join(seen[0]) or 'none'}" + ("" if ok else f" (other steps: {seen[1:]})"))

    return Expectation(f"{len(order)} kernels per step, in this order: {', '.join(order)}", check, claim)


def gemms_per_step(n: int, claim: str = "") -> Expectation:
    """Every step runs exactly `n` GEMM kernels (cuBLAS, CUTLASS, nvjet, Inductor templates)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        counts = [len(step.gemms) for step in trace.steps]
        evidence = f"{_per_step_counts(counts, trace)}: {_names_of(trace.steps[0].gemms) or 'no GEMM'}"
        ok = all(c == n for c in counts)
        return Outcome(ok, evidence, SPLIT_K if not ok and _split_k(trace) else None)

    return Expectation(f"{n} GEMM kernel{'s' if n != 1 else ''} per step", check, claim)


def gemm_variants(same: Sequence[int], other: int, claim: str = "") -> Expectation:
    """The GEMMs at positions `same` (in launch order) share one kernel; the one at `other` is another, faster
    for the same FLOPs (P2-12: gate and up share a tile, down uses a deeper pipeline)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        per_step = [step.gemms for step in trace.steps]
        if any(len(g) <= max(*same, other) for g in per_step):
            return Outcome(False, f"GEMMs per step: {[len(g) for g in per_step]}")
        names = [g.name for g in per_step[0]]
        shared = {names[i] for i in same}
        mean = lambda i: statistics.mean(g[i].dur for g in per_step)  # noqa: E731
        same_us, other_us = statistics.mean(mean(i) for i in same), mean(other)
        evidence = (
            f"{' = '.join(decode(names[i]).short for i in same[:1])} ×{len(same)} at {same_us:,.1f} µs; "
            f"{decode(names[other]).short} at {other_us:,.1f} µs ({other_us / same_us - 1:+.0%})"
        )
        return Outcome(len(shared) == 1 and names[other] not in shared and other_us < same_us, evidence)

    return Expectation("two GEMM variants: gate and up share one kernel, down another, faster for the same FLOPs", check, claim)


def no_separate_kernel_for(*ops: str, claim: str = "") -> Expectation:
    """No kernel computes one of `ops` on its own (a fused kernel that computes it with others is fine)."""
    listed = _or(ops)

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:
            alone = [op for op in _cpu_kernels(trace.steps[0]) if op.name.removeprefix("aten::") in ops]
            if not alone:
                return Outcome(True, f"no aten op computes {listed} alone; math ops per step: {_op_names(_cpu_kernels(trace.steps[0]))}")
            return Outcome(False, f"separate ops per step: {_op_names(alone)}", None if _is_compiled(trace) else NOT_COMPILED)
        alone = [w for w in trace.steps[0].kernels if len(decode(w.name).compute_ops) == 1 and decode(w.name).compute_ops[0] in ops]
        if not alone:
            return Outcome(True, f"none of the {len(trace.steps[0].kernels)} kernels per step computes {listed} alone: {_names_of(trace.steps[0].kernels)}")
        reason = ATEN_ELEMENTWISE if all(decode(w.name).family == "ATen" for w in alone) else None
        return Outcome(False, f"separate kernels per step: {_names_of(alone)}", reason)

    return Expectation(f"no separate kernel for {listed}", check, claim)


def fused_pointwise_kernel(*ops: str, claim: str = "") -> Expectation:
    """One Inductor pointwise kernel per step computes all of `ops`: `triton_poi_fused_..._gelu_mul_0` on a GPU,
    `cpp_fused_gelu_mul_0` on a CPU."""
    listed = _and(ops)

    def check(trace: Trace) -> Outcome:
        per_step = [[k for k in _fused_kernels(trace, step) if set(ops) <= set(_fused_ops(trace, k))] for step in trace.steps]
        counts = [len(found) for found in per_step]
        if all(c == 1 for c in counts):
            kernel = per_step[0][0]
            if trace.has_gpu:
                return Outcome(True, f"{kernel.name} in every step: {decode(kernel.name).describe()}")
            return Outcome(True, f"{kernel.name} in every step: Inductor's C++ kernel for {', '.join(_fused_ops(trace, kernel))}")
        if any(counts):
            return Outcome(False, f"{_per_step_counts(counts, trace)} fused kernels computing {listed}")
        evidence = f"no Inductor kernel computes {listed}; per step: {_names_of(trace.steps[0].kernels) if trace.has_gpu else _op_names(_cpu_kernels(trace.steps[0]))}"
        return Outcome(False, evidence, None if _has_inductor(trace) else LOOKS_EAGER)

    return Expectation(f"one fused Inductor pointwise kernel computes {listed}", check, claim)


def fused_kernel_beats_eager_pointwise(*ops: str, claim: str = "") -> Expectation:
    """P2-16: the fused kernel reads its inputs once and writes once; eager's `ops` each read and write a whole
    [tokens, hidden] tensor. GELU then mul move 5 tensors (g in, h out; h and u in, m out), the fused kernel 3:
    we guess it takes about 3/5 of their time, and at least less."""

    def check(trace: Trace) -> Outcome:
        other = _twin(trace)
        if isinstance(other, Outcome):
            return other
        fused = [k for step in trace.steps for k in _fused_kernels(trace, step) if set(ops) <= set(_fused_ops(trace, k))]
        if not fused:
            return Outcome(False, f"no fused kernel computing {_and(ops)}", LOOKS_EAGER)
        eager = [k for step in other.steps for k in _step_kernels(other, step) if _kernel_role(k) in ops]
        fused_us = sum(k.dur for k in fused) / len(trace.steps)
        eager_us = sum(k.dur for k in eager) / len(other.steps)
        if not eager_us:
            return Outcome(False, f"no separate {_or(ops)} kernel in {other.name}")
        return Outcome(
            fused_us < eager_us,
            f"fused {fused_us:,.1f} µs per step against eager's {'+'.join(ops)} {eager_us:,.1f} µs "
            f"({fused_us / eager_us:.2f}×; 3 tensors moved instead of 5 predicts 0.60×)",
        )

    return Expectation(f"the fused kernel takes less time than eager's separate {_and(ops)} (one round trip to memory, not two)", check, claim)


def same_gemm_kernels_as(reference: str | Path | Callable[[Path], Path], what: str = "the reference trace", missing: str = "", claim: str = "") -> Expectation:
    """The GEMM kernels have byte-identical names, as many per step, as in another trace.

    reference: that trace's path, or a function of this trace's path giving it.
    missing:   what to tell the user when the reference trace does not exist (the check is then skipped).
    """

    def check(trace: Trace) -> Outcome:
        path = Path(reference(trace.path) if callable(reference) else reference)
        other = _read_other(trace, path, what, missing)
        if isinstance(other, Outcome):
            return other
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        ours, theirs = _gemm_names(trace), _gemm_names(other)
        if ours == theirs and ours:
            names = ", ".join(f"{name} ×{per_step_count(n)}" if n != 1 else name for name, n in ours.items())
            total = sum(ours.values())
            return Outcome(True, f"{per_step_count(total)} GEMM{'s' if total != 1 else ''} per step, same names in {path.name}: {names}")
        only_ours = [n for n in ours if n not in theirs]
        only_theirs = [n for n in theirs if n not in ours]
        parts = []
        if only_ours:
            parts.append("only here: " + ", ".join(only_ours))
        if only_theirs:
            parts.append(f"only in {path.name}: " + ", ".join(only_theirs))
        if not parts:
            parts.append(f"same names, different counts per step: {dict(ours)} vs {dict(theirs)}")
        reason = TEMPLATE_GEMM if any(n.startswith("triton_tem_") for n in only_ours + only_theirs) else None
        return Outcome(False, "; ".join(parts), reason)

    return Expectation(f"the GEMM kernels have the same names as in {what}", check, claim)


def same_gemm_kernels_as_eager(claim: str = "") -> Expectation:
    """For a `--compile` trace: the GEMMs are the eager run's, byte for byte (the eager trace of the same
    sizes, next to this one; the check is skipped when it does not exist yet)."""
    return same_gemm_kernels_as(eager_twin, what="the eager run", missing="run without --compile first", claim=claim)


def same_gemm_family_as_eager(claim: str = "") -> Expectation:
    """--compile of lesson 1: the GEMM comes from the same library as eager's (cuBLAS): no new fused kernel."""

    def check(trace: Trace) -> Outcome:
        other = _twin(trace)
        if isinstance(other, Outcome):
            return other
        if not trace.has_gpu:
            return Outcome(False, "no GPU work in the trace", NO_GPU)
        ours = {decode(w.name).family for w in trace.gpu_work() if w.is_gemm}
        theirs = {decode(w.name).family for w in other.gpu_work() if w.is_gemm}
        names = f"{_names_of([w for w in trace.steps[0].gemms])} here, {_names_of(other.steps[0].gemms)} eager"
        return Outcome(bool(ours) and ours == theirs, f"{', '.join(sorted(ours)) or 'no GEMM'}: {names}")

    return Expectation("the GEMM is the same library's as eager (cuBLAS): fusion at the dispatcher, no new kernel", check, claim)


def geglu_kernel(per_step: int = 1, claim: str = "") -> Expectation:
    """A GeGLU kernel: gelu(gate) * up in one launch (Liger's `_geglu_tanh_forward_kernel`, or a Hub
    kernel whose name says gelu and `and_mul`)."""
    return kernel_matching(
        r"geglu|gelu\w*and_mul|and_mul\w*gelu|and_mul_kernel.*gelu",
        per_step,
        text=f"one GeGLU kernel (gelu and mul in one launch) {'per step' if per_step == 1 else f'×{per_step} per step'}",
        claim=claim,
    )


def geglu_kernel_vs_inductor(compiled_mlp: Path, claim: str = "") -> Expectation:
    """P2-19: Liger's hand-written kernel against Inductor's fused one (03_simple_mlp.py --compile): the post
    found Inductor's a little faster (89.4 against 92.8 µs on its A100), specialised for one static shape."""
    pattern = re.compile(r"geglu|gelu\w*and_mul", re.IGNORECASE)

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        other = _read_other(trace, compiled_mlp, "03_simple_mlp.py's compiled trace", "run 03_simple_mlp.py --compile with the same sizes first")
        if isinstance(other, Outcome):
            return other
        liger = [w.dur for w in trace.gpu_work() if w.kind == "kernel" and pattern.search(w.name)]
        inductor = [w.dur for w in other.gpu_work() if decode(w.name).inductor_kind == "pointwise"]
        if not liger or not inductor:
            return Outcome(False, f"GeGLU kernels: {len(liger)} here, {len(inductor)} Inductor pointwise in {other.name}")
        a, b = statistics.mean(liger), statistics.mean(inductor)
        fused = next(w for w in other.gpu_work() if decode(w.name).inductor_kind == "pointwise")
        launch = f" (block {_dims(fused.block)}, grid {_dims(fused.grid)})" if fused.block and fused.grid else ""
        evidence = f"Liger's {a:,.1f} µs against Inductor's {b:,.1f} µs{launch}: Liger's takes {a / b:.2f}× Inductor's time"
        return Outcome(b < a, evidence, None if b < a else INDUCTOR_CONFIG)

    return Expectation("Inductor's fused kernel is a little faster than Liger's (one static shape vs any shape)", check, claim)


def gemms_launched_by(*ops: str, claim: str = "") -> Expectation:
    """Every GEMM kernel is launched from inside one of `ops` (`aten::mm`, `aten::addmm`); on a CPU, every GEMM
    op is one of them (the CPU runs the GEMM inside the op itself)."""
    listed = _or(ops)

    def check(trace: Trace) -> Outcome:
        if trace.has_gpu:
            by = Counter(w.launched_by or "(no op)" for w in trace.gpu_work() if w.is_gemm)
            what, verb = "GEMM kernels", "launched by"
        else:
            by = Counter(o.name for step in trace.steps for o in _cpu_kernels(step) if _kernel_role(o) == "GEMM")
            what, verb = "GEMMs on the CPU", "run as"
        if not by:
            return Outcome(False, f"no {what} in the trace")
        evidence = f"{sum(by.values())} {what} over {len(trace.steps)} steps, {verb} " + ", ".join(f"{op} ×{n}" for op, n in by.items())
        return Outcome(all(op in ops for op in by), evidence)

    return Expectation(f"every GEMM is launched by {listed}", check, claim)


def bias_in_gemm_epilogue(op: str = "aten::addmm", claim: str = "") -> Expectation:
    """The bias add happens inside the GEMM: `op` launches one kernel, a GEMM (nvjet's `_bias_`, CUTLASS's
    epilogue, or simply no second kernel). On a CPU: `op` runs and no aten::add does."""

    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name == op]
        if not calls:
            return Outcome(False, f"no {op} in the trace")
        if not trace.has_gpu:
            adds = sum(step.op_names()["aten::add"] for step in trace.steps)
            return Outcome(adds == 0, f"{op} ×{len(calls)}, aten::add ×{adds}: the bias is added inside {op}")
        kernels = [w for w in trace.gpu_work() if w.kind == "kernel" and w.launched_by == op]
        per_call = len(kernels) / len(calls)
        gemms = [w for w in kernels if w.is_gemm]
        if per_call == 1 and len(gemms) == len(kernels):
            name = decode(gemms[0].name)
            how = f"the name says so: {name.short}" if name.has_bias_epilogue else f"no separate add kernel: {name.short}"
            return Outcome(True, f"{op} ×{len(calls)}, one kernel each, a GEMM; {how}")
        evidence = f"{op} ×{len(calls)} launched {per_step_count(per_call)} kernels each: {_names_of(kernels[: max(1, round(per_call))])}"
        return Outcome(False, evidence, NO_LT_EPILOGUE if per_call == 2 and gemms else None)

    return Expectation(f"the bias add runs in the GEMM's epilogue ({op} launches one GEMM kernel, no add kernel)", check, claim)


def bias_copy_then_gemm(claim: str = "") -> Expectation:
    """Part 1 --compile, 2-D bias: aten::addmm copies the bias into its output (a Memcpy DtoD), then runs one GEMM
    that accumulates onto it: two GPU operations, one kernel launch per step."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        per_step = [(Counter(w.kind for w in step.gpu), len(step.gemms)) for step in trace.steps]
        ok = all(kinds.get("memcpy", 0) == 1 and kinds.get("kernel", 0) == 1 and gemms == 1 for kinds, gemms in per_step)
        step = trace.steps[0]
        copies = [w for w in step.gpu if w.kind == "memcpy"]
        launches = Counter(w.runtime for w in step.gpu)
        evidence = (
            f"per step: {', '.join(f'{w.name} {w.dur:,.1f} µs' for w in step.gpu)}; runtime calls: "
            + ", ".join(f"{n} ×{c}" for n, c in launches.items())
        )
        reason = None
        if not ok and not copies and step.gemms and decode(step.gemms[0].name).has_bias_epilogue:
            reason = ONE_D_BIAS
        return Outcome(ok, evidence, reason)

    return Expectation("a Memcpy DtoD (the 2-D bias copied into the output), then one GEMM: one kernel launch per step", check, claim)


def layout_in_kernel_name(claim: str = "") -> Expectation:
    """The GEMM's name ends in its layout: `_tn_` (A100 CUTLASS), `_TNT` (H200 nvjet)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        gemms = trace.steps[0].gemms
        layouts = {decode(w.name).short: dict(decode(w.name).details).get("layout") for w in gemms}
        ok = bool(layouts) and all(layouts.values())
        return Outcome(ok, ", ".join(f"{name}: layout {lay or '?'}" for name, lay in layouts.items()) or "no GEMM")

    return Expectation("the GEMM kernel's name carries its layout (TN: the weight read transposed)", check, claim)


def launches_nothing(op: str, claim: str = "") -> Expectation:
    """`op` runs in every step and launches no GPU work (a view such as `aten::t`); on a CPU, it calls no math op."""
    return _launch_nothing((op,), f"{op} launches nothing on the GPU (0 µs of CUDA time)", claim)


def views_launch_nothing(claim: str = "") -> Expectation:
    """P2-10: the view ops around each linear (t, transpose, reshape, view, as_strided, _unsafe_view) launch
    nothing: of the ~6 op names per linear only aten::mm reaches the GPU."""
    return _launch_nothing(tuple(sorted(VIEW_LIKE)), "the view ops launch nothing; of each linear's ops only aten::mm reaches the GPU", claim)


def _launch_nothing(ops: Sequence[str], text: str, claim: str) -> Expectation:
    def check(trace: Trace) -> Outcome:
        calls = [o for step in trace.steps for o in step.ops if o.name in ops]
        if not calls:
            return Outcome(False, f"no {_or(ops)} in the trace", COMPILED_NO_VIEW_OPS if _is_compiled(trace) else None)
        per_step = Counter(o.name for o in calls)
        seen = ", ".join(f"{n} ×{per_step_count(c / len(trace.steps))}" for n, c in per_step.items())
        if trace.has_gpu:
            launched = sum(o.launched for o in calls)
            if launched:
                return Outcome(False, f"{seen} per step launched {launched} GPU work items")
            launchers = Counter(w.launched_by for w in trace.steps[0].gpu if w.kind == "kernel")
            return Outcome(True, f"{seen} per step, 0 GPU work items; the kernels come from {_counts(launchers)}")
        math = [o for o in calls if _calls_math(trace, o)]
        if math:
            return Outcome(False, f"{seen} per step; {len(math)} of them run math ops")
        return Outcome(True, f"{seen} per step, none runs a math op: they only rewrite shape and stride")

    return Expectation(text, check, claim)


def kernel_matching(pattern: str, per_step: int | None = 1, text: str | None = None, claim: str = "") -> Expectation:
    """A kernel whose name matches `pattern` (a regex, case-insensitive) runs `per_step` times per step. On a CPU:
    an event of that name (a Triton kernel under the interpreter, named by the code that launches it)."""
    regex = re.compile(pattern, re.IGNORECASE)

    def check(trace: Trace) -> Outcome:
        if trace.has_gpu:
            per = [[w.short_name for w in step.kernels if regex.search(w.name)] for step in trace.steps]
            everything = _names_of(trace.steps[0].kernels)
        else:
            per = [[o.name for o in step.ops if regex.search(o.name)] for step in trace.steps]
            everything = _top_ops(trace)
        counts = [len(found) for found in per]
        if not any(counts):
            reason = NO_GPU if not trace.has_gpu and not trace.steps[0].ops else None
            return Outcome(False, f"no kernel matches /{pattern}/; per step: {everything}", reason)
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        return Outcome(ok, f"{_per_step_counts(counts, trace)}: {_counts(Counter(per[0]))}")

    times = "" if per_step is None else f" {per_step}×" if per_step != 1 else " once"
    return Expectation(text or f"a kernel matching /{pattern}/ runs{times} per step", check, claim)


def kernel_resources(claim: str = "") -> Expectation:
    """P1-10: the trace gives each kernel's registers and shared memory. The GEMM's are large (a tile staged
    through shared memory); the elementwise add's are 32 registers and no shared memory."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        kernels = trace.steps[0].kernels
        gemm = next((w for w in kernels if w.is_gemm), None)
        add = next((w for w in kernels if w.launched_by == "aten::add"), None)
        if gemm is None or add is None or gemm.registers is None or add.registers is None:
            return Outcome(False, f"kernels: {_names_of(kernels)} (no registers in the trace)" if kernels else "no kernels")
        ok = gemm.shared_memory > 0 and gemm.registers > 2 * add.registers and not add.shared_memory
        return Outcome(
            ok,
            f"{decode(gemm.name).short}: {gemm.registers} registers per thread, {gemm.shared_memory:,} B shared memory; "
            f"{decode(add.name).short}: {add.registers} registers, {add.shared_memory:,} B",
        )

    return Expectation("the GEMM uses many registers and much shared memory; the add kernel ~32 registers, none", check, claim)


def runtime_calls_per_gemm(*names: str, claim: str = "") -> Expectation:
    """Each GEMM goes through these runtime calls, as on the post's A100 (default: an occupancy query,
    then cudaLaunchKernel). On Hopper this is a ✗ with its known reason."""
    names = names or (OCCUPANCY_QUERY, "cudaLaunchKernel")

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        # The last name launches each GEMM; the others (an occupancy query) come before, once per GEMM.
        gemm_calls = Counter(w.runtime or "(none)" for w in trace.steps[0].gemms)
        step_calls = trace.steps[0].launch_counts()
        n_gemms = len(trace.steps[0].gemms)
        missing = [n for n in names[:-1] if step_calls.get(n, 0) < n_gemms]
        if gemm_calls.get(names[-1], 0) < n_gemms:
            missing.append(names[-1])
        evidence = f"{n_gemms} GEMM{'s' if n_gemms != 1 else ''} per step launched by {_counts(gemm_calls)}; runtime calls per step: {_counts(step_calls)}"
        if not missing and n_gemms:
            return Outcome(True, evidence)
        hopper = any("LaunchKernelEx" in n for n in gemm_calls) or any(decode(w.name).family == "cuBLAS (nvjet)" for w in trace.steps[0].gemms)
        return Outcome(False, evidence, HOPPER_LAUNCH if hopper else None)

    return Expectation(f"each GEMM launch goes through {_and(names)}", check, claim)


def op_runtime_calls(op: str, calls: Sequence[str], claim: str = "") -> Expectation:
    """Each call of `op` makes exactly these runtime calls (`aten::add`: only cudaLaunchKernel)."""

    @_needs_gpu
    def check(trace: Trace) -> Outcome:
        ops = [o for o in trace.steps[0].ops if o.name == op]
        if not ops:
            return Outcome(False, f"no {op} in the trace")
        made = Counter(c.name for c in trace.steps[0].runtime if op in c.launch_path)
        want = Counter({c: len(ops) for c in calls})
        return Outcome(made == want, f"{op} ×{len(ops)} per step made {_counts(made) or 'no runtime call'}")

    return Expectation(f"{op} makes only {_and(list(calls))}", check, claim)


# --- a training step: forward, backward, optimizer ---------------------------------------------------------
#
# Each check reads one labelled part of every step, a Phase (model.Step.phase): the ops of every thread that
# start inside the label's box, and the GPU work whose launch call does. A GPU's backward runs on autograd's own
# thread, outside the label's tree but inside its time.


def labels_per_step(*labels: str, claim: str = "") -> Expectation:
    """Every step opens each of `labels` once, in this order (a training step: forward, backward, optimizer)."""

    def check(trace: Trace) -> Outcome:
        seen = [[o.name for o in sorted((o for o in step.ops if o.is_label and o.name in labels), key=lambda o: o.ts)]
                for step in trace.steps]
        ok = bool(seen) and all(names == list(labels) for names in seen)
        evidence = "; ".join(f"{step.name}: {' → '.join(names) or 'none'}" for step, names in zip(trace.steps, seen))
        return Outcome(ok, evidence)

    return Expectation(f"{_and(list(labels))} once per step, in this order", check, claim)


def phase_kernels(label: str, counts: dict[str, int], claim: str = "") -> Expectation:
    """In each step's `label`, this many kernels of each role: "GEMM", or the one op a kernel computes alone
    (`gelu_backward`, `mul`, `add`); 0 means no kernel computes that op alone (a fused kernel may). Other kernels
    are listed, not counted. On a CPU the math ops stand in (aten::mm for a GEMM, aten::gelu_backward, ...)."""

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        roles = [Counter(_phase_role(k) for k in _phase_kernels(trace, phase)) for phase in phases]
        ok = all(all(seen[role] == n for role, n in counts.items()) for seen in roles)
        what = "kernels" if trace.has_gpu else "math ops (the CPU's kernels)"
        evidence = f"{label}'s {what} per step: {_counts(roles[0]) or 'none'}"
        if any(seen != roles[0] for seen in roles[1:]):
            evidence += " (other steps: " + "; ".join(_counts(seen) or "none" for seen in roles[1:]) + ")"
        return Outcome(ok, evidence)

    parts = [f"{n} GEMM{'s' if n != 1 else ''}" if role == "GEMM" else f"{n} {role}" for role, n in counts.items() if n]
    absent = [role for role, n in counts.items() if not n]
    text = ", ".join(parts) + (("; " if parts else "") + f"no {_or(absent)} kernel on its own" if absent else "")
    return Expectation(f"per step in {label}: {text}", check, claim)


def phase_kernel_matching(label: str, pattern: str, per_step: int = 1, text: str | None = None, claim: str = "") -> Expectation:
    """In each step's `label`, `per_step` kernels whose name matches `pattern` (a regex, case-insensitive); on a
    CPU, ops of that name (Inductor's C++ kernels; a Triton kernel under the interpreter)."""
    regex = re.compile(pattern, re.IGNORECASE)

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if trace.has_gpu:
            found = [[w.short_name for w in phase.kernels if regex.search(w.name)] for phase in phases]
        else:
            found = [[o.name for o in phase.ops if not o.is_label and regex.search(o.name)] for phase in phases]
        counts = [len(names) for names in found]
        if not any(counts):
            everything = _counts(Counter(_phase_role(k) for k in _phase_kernels(trace, phases[0]))) or "none"
            return Outcome(False, f"no kernel in {label} matches /{pattern}/; {label} per step: {everything}")
        return Outcome(all(c == per_step for c in counts), f"{_per_step_counts(counts, trace)}: {_counts(Counter(found[0]))}")

    times = "once" if per_step == 1 else f"{per_step}×"
    return Expectation(text or f"in {label}: a kernel matching /{pattern}/ {times} per step", check, claim)


def phase_fused_kernel(label: str, *ops: str, claim: str = "") -> Expectation:
    """In each step's `label`, one Inductor pointwise kernel computes all of `ops` (`triton_poi_fused_...` on a GPU,
    `cpp_fused_...` on a CPU; Inductor names a kernel after the ATen ops it fused, gelu_backward included)."""
    listed = _and(ops)

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        fused = [[k for k in _phase_inductor_kernels(trace, phase) if set(ops) <= set(_fused_ops(trace, k))] for phase in phases]
        counts = [len(found) for found in fused]
        if all(c == 1 for c in counts):
            kernel = fused[0][0]
            described = decode(kernel.name).describe() if trace.has_gpu else f"Inductor's C++ kernel for {', '.join(_fused_ops(trace, kernel))}"
            return Outcome(True, f"{kernel.name} in every step's {label}: {described}")
        inductor = [k.name for k in _phase_inductor_kernels(trace, phases[0])]
        evidence = f"{_per_step_counts(counts, trace)} computing {listed}; Inductor kernels in {label}: {', '.join(inductor) or 'none'}"
        return Outcome(False, evidence, None if inductor or _has_inductor(trace) else LOOKS_EAGER)

    return Expectation(f"in {label}: one fused Inductor kernel computes {listed}", check, claim)


def phase_ops(label: str, pattern: str, per_step: int | None = None, text: str | None = None, claim: str = "") -> Expectation:
    """In each step's `label`, CPU ops whose name matches `pattern` (a regex) run `per_step` times (at least once
    when None); an op inside another of the same name counts once."""
    regex = re.compile(pattern)

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        found = [[o for o in phase.ops if not o.is_label and regex.search(o.name) and o.name not in o.path] for phase in phases]
        counts = [len(ops) for ops in found]
        if not any(counts):
            top = _counts(Counter(dict(Counter(o.name for o in phases[0].ops if not o.is_label).most_common(6)))) or "none"
            return Outcome(False, f"no op in {label} matches /{pattern}/; ops per step: {top}")
        ok = all(c == per_step for c in counts) if per_step is not None else all(counts)
        return Outcome(ok, f"{_per_step_counts(counts, trace)}: {_op_names(found[0])}")

    times = " in every step" if per_step is None else " once per step" if per_step == 1 else f" {per_step}× per step"
    return Expectation(text or f"in {label}: an op matching /{pattern}/ runs{times}", check, claim)


def backward_on_autograd_thread(label: str, claim: str = "") -> Expectation:
    """On a GPU, autograd runs the backward on its own device thread: every GEMM of `label` (the box around
    `loss.backward()`) is launched from another thread than the one that opened the label. Only what `backward()`
    does before handing over (the loss's seed gradient, `torch.ones_like(loss)`) comes from the calling thread. In
    Perfetto the backward's ops sit on that other thread's row, under `autograd::engine::evaluate_function: ...`,
    not under the label. A CPU runs the backward on the calling thread: ✗ there, with that reason."""

    def check(trace: Trace) -> Outcome:
        phases = _phases(trace, label)
        if isinstance(phases, Outcome):
            return phases
        if not trace.has_gpu:
            threads = Counter(_thread_name(op, phases[0]) for op in phases[0].ops if not op.is_label)
            return Outcome(False, f"no GPU work; {label}'s ops per step by thread: {_counts(threads) or 'none'}", CPU_BACKWARD_THREAD)
        gemms = [w for phase in phases for w in phase.gemms if w.launch is not None]
        if not gemms:
            return Outcome(False, f"no GEMM launched inside {label}")
        own = [phase.thread for phase in phases]
        gemm_threads = Counter(_launch_thread(w, phase) for phase in phases for w in phase.gemms if w.launch is not None)
        work_threads = Counter(_launch_thread(w, phase) for phase in phases for w in phase.gpu if w.launch is not None)
        per_step = Counter({t: n / len(phases) for t, n in work_threads.items()})
        ok = all((w.launch.pid, w.launch.tid) not in own for w in gemms)
        evidence = (
            f"{label} opened on thread {phases[0].thread[1]}; its GEMMs launched from {_counts(gemm_threads)} "
            f"over {len(phases)} steps; its GPU work per step, by launching thread: "
            + ", ".join(f"{t} ×{per_step_count(n)}" for t, n in per_step.items())
        )
        return Outcome(ok, evidence)

    return Expectation(f"the backward's GEMMs are launched from autograd's own thread, not the one that opened {label}", check, claim)


def _launch_thread(work: GpuWork, phase) -> str:
    thread = (work.launch.pid, work.launch.tid)
    return f"thread {thread[1]}" + (" (the label's)" if thread == phase.thread else "")


def _phases(trace: Trace, label: str) -> list | Outcome:
    """Each step's `label` phase, or the Outcome that says which step has none."""
    phases = [step.phase(label) for step in trace.steps]
    missing = [step.name for step, phase in zip(trace.steps, phases) if phase is None]
    if missing:
        return Outcome(False, f"no {label} in {', '.join(missing)}; labels per step: {_counts(trace.steps[0].op_names(labels=True)) or 'none'}")
    return phases


def _phase_kernels(trace: Trace, phase) -> list:
    return phase.kernels if trace.has_gpu else _math_ops(phase.ops, CPU_BACKWARD_MATH_OPS)


def _phase_inductor_kernels(trace: Trace, phase) -> list:
    if trace.has_gpu:
        return [w for w in phase.kernels if decode(w.name).inductor_kind == "pointwise"]
    return [o for o in phase.ops if CPP_KERNEL.search(o.name)]


def _phase_role(item) -> str:
    """_kernel_role, with an in-place op's role its op's (aten::add_ is an add)."""
    role = _kernel_role(item)
    return role[:-1] if isinstance(item, CpuOp) and role.endswith("_") and not role.startswith("_") else role


def _thread_name(op: CpuOp, phase) -> str:
    return f"thread {op.tid}" + (" (the label's)" if (op.pid, op.tid) == phase.thread else "")


# --- helpers -------------------------------------------------------------------------------------------------


def eager_twin(path: Path) -> Path:
    """This run's eager trace, next to it under the lessons' file names."""
    return twin_trace(path, "eager")


def _twin(trace: Trace) -> Trace | Outcome:
    """This run's eager twin (same sizes, next to it), or the Outcome that says why it cannot be compared."""
    return _read_other(trace, eager_twin(trace.path), "the eager run", "run without --compile first")


def _read_other(trace: Trace, path: Path, what: str, missing: str) -> Trace | Outcome:
    if path.resolve() == trace.path.resolve():
        return Outcome(None, f"skipped: {path.name} is {what} itself")
    if not path.is_file():
        return Outcome(None, f"skipped: {what} is not at {path}" + (f": {missing}" if missing else ""))
    return read_trace(path)


def _lags(trace: Trace) -> list[float]:
    """Per step, how long after its launch call the step's last kernel started: the GPU lane's delay."""
    lags = []
    for step in trace.steps:
        launched = [w for w in step.gpu if w.launch_ts is not None]
        if launched:
            lags.append(max(w.ts - w.launch_ts for w in launched))
    return lags


def _issue_cpu(trace: Trace) -> float:
    """CPU time per step spent issuing work (the step's box, less time waiting in a synchronize), of the fastest
    step: a cold first step, or another process taking the CPU for a while (a CI machine's two cores), only ever
    adds time, so the fastest step is the closest to the run's own cost and two runs compare fairly."""
    return min(s.cpu_us for s in trace.steps)


def _dead_window(step: Step, label: str) -> tuple[float, str] | None:
    """From the label's start to the start of the first op inside it (Part 1's dead window), and that op."""
    box = next((o for o in step.ops if o.is_label and o.name == label), None)
    if box is None:
        return None
    inner = [o for o in step.ops if not o.is_label and box.ts <= o.ts <= box.ts + box.dur]
    if not inner:
        return None
    first = min(inner, key=lambda o: o.ts)
    return first.ts - box.ts, first.name


def _cpu_kernels(step: Step) -> list[CpuOp]:
    """The CPU's stand-in for kernels: the math ops and Inductor's C++ kernels, in time order, outermost only."""
    return _math_ops(step.ops, CPU_MATH_OPS)


def _math_ops(ops: Sequence[CpuOp], names: set[str]) -> list[CpuOp]:
    """Of `ops`, those named in `names` and Inductor's C++ kernels, in time order, outermost only."""
    found = [o for o in ops if not o.is_label and (o.name in names or CPP_KERNEL.search(o.name))]
    return sorted((o for o in found if not any(p in names for p in o.path)), key=lambda o: o.ts)


def _step_kernels(trace: Trace, step: Step) -> list:
    return step.kernels if trace.has_gpu else _cpu_kernels(step)


def _kernel_role(item) -> str:
    """"GEMM", or the op a kernel (or a CPU math op) computes: gelu, mul, add, fused ops joined by +."""
    if isinstance(item, CpuOp):
        if item.name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"):
            return "GEMM"
        m = CPP_KERNEL.search(item.name)
        return "+".join(split_fused_ops(m.group(1))) if m else item.name.removeprefix("aten::")
    if item.is_gemm:
        return "GEMM"
    return "+".join(decode(item.name).compute_ops) or decode(item.name).short


def _fused_kernels(trace: Trace, step: Step) -> list:
    if trace.has_gpu:
        return [w for w in step.kernels if decode(w.name).inductor_kind == "pointwise"]
    return [o for o in step.ops if CPP_KERNEL.search(o.name)]


def _fused_ops(trace: Trace, kernel) -> tuple[str, ...]:
    if trace.has_gpu:
        return decode(kernel.name).ops
    return split_fused_ops(CPP_KERNEL.search(kernel.name).group(1))


def _calls_math(trace: Trace, op: CpuOp) -> bool:
    return any(op.name in o.path and (o.name in CPU_MATH_OPS or CPP_KERNEL.search(o.name)) for s in trace.steps for o in s.ops if o.ts >= op.ts and o.ts <= op.ts + op.dur)


def _cpu_math_share(trace: Trace) -> float:
    """On a CPU: the share of each step spent inside the math ops, the rest being Python and dispatch."""
    math = sum(o.dur for step in trace.steps for o in _cpu_kernels(step))
    total = sum(step.dur for step in trace.steps)
    return math / total if total else 0.0


def _cpu_share_evidence(share: float) -> str:
    return (
        f"no GPU here: the math ops take {share:.0%} of each step's CPU time, the other {1 - share:.0%} is "
        "Python, dispatch and the profiler (a CPU's version of the same question)"
    )


def _path_ends(op: CpuOp, chain: Sequence[str]) -> bool:
    """`op` sits inside `chain` (outermost first), each directly or through ops in between."""
    it = iter(op.path)
    return all(any(name == want for name in it) for want in chain)


def _dims(dims) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _view_reason(trace: Trace, op: str) -> str | None:
    return COMPILED_NO_VIEW_OPS if _is_compiled(trace) and op in VIEW_LIKE else None


def _split_k(trace: Trace) -> bool:
    return any(decode(w.name).ops == ("split-K reduce",) for w in trace.gpu_work())


def _gemm_names(trace: Trace) -> Counter:
    counts = Counter(w.name for w in trace.gpu_work() if w.is_gemm)
    return Counter({name: n / len(trace.steps) for name, n in counts.items()})


def _has_inductor(trace: Trace) -> bool:
    return any(decode(w.name).family.startswith("Inductor") for w in trace.gpu_work()) or _is_compiled(trace)


def _is_compiled(trace: Trace) -> bool:
    return any(o.name.startswith("Torch-Compiled Region") or "CompiledFxGraph" in o.name for step in trace.steps for o in step.ops)


def _names_of(work: Sequence[GpuWork]) -> str:
    return _counts(Counter(w.short_name for w in work))


def _op_names(ops: Sequence[CpuOp]) -> str:
    return _counts(Counter(o.name for o in ops)) or "none"


def _counts(counts: Counter) -> str:
    return ", ".join(f"{name} ×{n}" if n > 1 else str(name) for name, n in counts.items())


def _per_step_counts(counts: Sequence[int], trace: Trace) -> str:
    if len(set(counts)) == 1:
        return f"{counts[0]} in each of {len(counts)} step{'s' if len(counts) != 1 else ''}"
    return ", ".join(f"{c} in {s.name}" for c, s in zip(counts, trace.steps))


def _top_ops(trace: Trace, n: int = 6) -> str:
    counts = trace.steps[0].op_names()
    return ", ".join(f"{name} ×{c}" if c > 1 else name for name, c in counts.most_common(n)) or "none"


def _us_list(values: Sequence[float]) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)


def _or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
