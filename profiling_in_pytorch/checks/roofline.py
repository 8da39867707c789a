"""GEMMs against the GPU's ceiling (P2-11's "each GEMM 2·8192·768·3072 ≈ 38.7 GFLOP", counted, timed and weighed):
each GEMM's FLOPs by trace-report's own formula (trace_report.flops, as its "Ops by roofline" counts them), its
kernel's time in the trace (the step's GEMMs in launch order, averaged over the steps), its TFLOP/s, and its share of
the ceiling trace-report reads for the trace: the GEMM rate the lesson measured on this GPU beside the profile where
the trace holds it (ceilings.measure_ceilings, the benchmark's "% matmul" ceiling), else the datasheet's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from profiling_in_pytorch.checks.base import Expectation, Outcome, needs_gpu
from trace_report import peaks
from trace_report.flops import op_cost
from trace_report.kernels import decode
from trace_report.model import CpuOp, Trace
from trace_report.op_bytes import DTYPE_NAMES

__all__ = ["gemm_rates"]

# The profiler's names for the dtypes the lessons run in, as an op's recorded input type.
RECORDED_TYPE = {**{short: recorded for recorded, short in DTYPE_NAMES.items()}, "fp8": "c10::Float8_e4m3fn"}


def gemm_flops(m: int, k: int, n: int, dtype: str) -> int:
    """FLOPs of one [m,k] x [k,n] product, by the formula trace-report counts aten::mm with."""
    kind = RECORDED_TYPE[dtype]
    return op_cost(CpuOp("aten::mm", 0.0, 0.0, None, None, input_dims=((m, k), (k, n)), input_types=(kind, kind))).flops


def gemm_rates(gemms: Sequence[tuple[str, int, int, int]], dtype: str, *, same_work: bool = False,
               claim: str = "") -> Expectation:
    """`gemms`: (name, M, K, N) of each GEMM kernel of a step, in launch order. ✓ when each is found and timed (and,
    with `same_work`, all do the same FLOPs); the evidence gives each one's GFLOP, TFLOP/s and share of the ceiling."""
    counted = [(name, gemm_flops(m, k, n, dtype)) for name, m, k, n in gemms]
    amounts = list(dict.fromkeys(_amount(f) for _, f in counted))  # in launch order, each once
    if len(counted) == 1:
        work = f"1 GEMM of {amounts[0]}"
    elif len(amounts) == 1:
        work = f"{len(counted)} GEMMs of {amounts[0]} each"
    else:
        work = f"{len(counted)} GEMMs: {', '.join(f'{name} {_amount(f)}' for name, f in counted)}"
    text = f"{work}: TFLOP/s and the share of this GPU's GEMM ceiling"

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        per_step = [step.gemms for step in trace.steps]
        if any(len(found) < len(gemms) for found in per_step):
            return Outcome(False, f"GEMM kernels per step: {[len(found) for found in per_step]}, {len(gemms)} expected")
        found = peaks.find(trace)
        ceiling = found.peak.compute(dtype, matrix=True) if found is not None else None
        parts = []
        for i, (name, flops) in enumerate(counted):
            us = statistics.mean(found_gemms[i].dur for found_gemms in per_step)
            tflops = flops / (us * 1e6)
            share = f", {_share(tflops / ceiling)}" if ceiling else ""
            parts.append(f"{name} {_amount(flops)} in {us:,.1f} µs: {_rate(tflops)} TFLOP/s{share} "
                         f"({decode(per_step[0][i].name).short})")
        against = ("no ceiling known for this GPU" if found is None else
                   f"of {ceiling:,.0f} TFLOP/s, {'measured here' if found.measured else 'the datasheet'}"
                   if ceiling else f"no {dtype} ceiling for {found.peak.name}")
        same = len({f for _, f in counted}) == 1
        ok = same or not same_work
        return Outcome(ok, "; ".join(parts) + f" ({against})",
                       None if ok else "the GEMMs do different work: their FLOPs differ")

    return Expectation(text, check, claim)


def _amount(flops: float) -> str:
    """38.7 GFLOP, 4.19 MFLOP: three significant digits in the unit that reads."""
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:,.0f} FLOP"


def _rate(tflops: float) -> str:
    return f"{tflops:,.0f}" if tflops >= 10 else f"{tflops:.2g}"


def _share(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 else f"{share:.2%}"
