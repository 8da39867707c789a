"""FP8 forwards (lesson 10): the FP8 GEMMs a step runs (their names say e4m3 and how they scale), and the kernels
around them that scale and cast, which `--compile` fuses and the suite's fused module puts in a GEMM's epilogue.
"""

from __future__ import annotations

import re
from collections import Counter

from profiling_in_pytorch.checks.base import (
    Expectation,
    Outcome,
    counts_text,
    math_ops,
    needs_gpu,
    per_step_counts,
)
from trace_report.kernels import decode
from trace_report.model import Trace

__all__ = ["fp8_gemms_per_step", "scaling_kernels_per_step"]

# Elementwise work that is the MLP's own, not the FP8 recipe's: the activation, and the product in bf16 (eager's
# `BinaryFunctor<c10::BFloat16, ..., MulFunctor>`); a kernel that also scales or casts (Inductor's
# `..._abs_amax_clamp_..._gelu_mul_...`) is a scaling kernel.
ACTIVATION = re.compile(r"gelu|BFloat16.*MulFunctor", re.IGNORECASE)
SCALING = re.compile(r"amax|abs|clamp|div|_to_copy|float8|quant", re.IGNORECASE)
SCALING_OPS = {"aten::abs", "aten::amax", "aten::div", "aten::clamp", "aten::_to_copy", "aten::max"}  # on a CPU


def is_scaling_kernel(work) -> bool:
    """A kernel of the FP8 recipe's own: neither a GEMM nor only the GeGLU's activation or product."""
    return not work.is_gemm and (SCALING.search(work.name) is not None or not ACTIVATION.search(work.name))


def is_fp8_gemm(name: str) -> bool:
    """A GEMM kernel whose decoded name says its inputs are fp8."""
    decoded = decode(name)
    details = dict(decoded.details)
    return decoded.is_gemm and "fp8" in (details.get("inputs", "") + details.get("dtype", ""))


def scale_mode(name: str) -> str:
    details = dict(decode(name).details)
    return details.get("scales", "")


def fp8_gemms_per_step(n: int, claim: str = "") -> Expectation:
    """Every step runs `n` GEMM kernels on fp8 inputs (cuBLAS's nvjet `qq…` kernels, this suite's Triton FP8
    GEMMs); the evidence gives each one's scale mode, as trace-report decodes it from the name."""

    @needs_gpu
    def check(trace: Trace) -> Outcome:
        per = [[k for k in step.kernels if is_fp8_gemm(k.name)] for step in trace.steps]
        counts = [len(found) for found in per]
        shown = Counter(f"{k.short_name} ({scale_mode(k.name) or 'fp8'})" for k in per[0])
        others = [k.short_name for k in trace.steps[0].gemms if not is_fp8_gemm(k.name)]
        evidence = f"{per_step_counts(counts, trace)}: {counts_text(shown) or 'no FP8 GEMM'}"
        if others:
            evidence += f"; other GEMMs: {', '.join(others)}"
        return Outcome(all(c == n for c in counts) and not others, evidence)

    return Expectation(f"{n} FP8 GEMM kernel{'s' if n != 1 else ''} per step (e4m3 in the name, and the scale mode)",
                       check, claim)


def scaling_kernels_per_step(n: int | None, what: str, claim: str = "") -> Expectation:
    """Every step runs `n` kernels that are neither a GEMM nor the GeGLU's own activation or product: the amax
    reductions, divisions and casts of the FP8 recipe, however they are fused (n None: at least one). On a CPU:
    the aten ops that do that work (abs, amax, div, clamp, casts), or the Inductor C++ kernels that fuse them."""

    def check(trace: Trace) -> Outcome:
        if not trace.has_gpu:  # aten ops eagerly, Inductor's C++ kernels (cpp_fused_...) compiled
            per = [[o.name for o in math_ops(step.ops, SCALING_OPS) if o.name in SCALING_OPS or SCALING.search(o.name)]
                   for step in trace.steps]
        else:
            per = [[k.short_name for k in step.kernels if is_scaling_kernel(k)] for step in trace.steps]
        counts = [len(found) for found in per]
        ok = all(c == n for c in counts) if n is not None else all(counts)
        label = "scaling and cast kernels" if trace.has_gpu else "scaling ops (the CPU's kernels)"
        return Outcome(ok, f"{label}: {per_step_counts(counts, trace)}: {counts_text(Counter(per[0])) or 'none'}")

    count = "some" if n is None else str(n)
    return Expectation(f"{count} scaling/cast kernel{'s' if n != 1 else ''} per step: {what}", check, claim)
