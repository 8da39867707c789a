"""Matrix work in fp32 where the GPU has faster units for it: TF32 on NVIDIA's tensor cores since Ampere, bf16 or fp16
under autocast everywhere (Volta's and Turing's tensor cores take fp16 only; AMD's matrix cores bf16 at 8× their fp32).
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from trace_report import peaks
from trace_report.advice.common import Reading, source_of, times, us, where_of
from trace_report.advice.findings import Finding
from trace_report.advice.replay import edit_events
from trace_report.kernels import decode, math_unit

# What a GEMM reaches of its unit's peak, least and most: an fp32 GEMM on CUDA cores (a simple datapath, near its peak
# at size) against the same GEMM on tensor cores (further from theirs, more so at small sizes).
FP32_EFFICIENCY = (0.7, 0.95)
TENSOR_EFFICIENCY = (0.35, 0.8)
OLD_TENSOR_CORES = ("sm70", "sm72", "sm75")  # tensor cores for fp16 only: no TF32, no bf16


def _fp32(work) -> bool:
    return _fp32_name(work.name)


@lru_cache(maxsize=4096)  # per kernel name: a trace repeats a few hundred names tens of thousands of times
def _fp32_name(kernel: str) -> bool:
    """An fp32 GEMM off the tensor cores. A kernel whose name says tensor cores (`wgmma`, `tensorop`, `s1688gemm`) or
    TF32 math (`sm90_xmma_gemm_f32f32_tf32f32_f32`: fp32 in memory, TF32 in the MMA) already runs on them; CUTLASS's
    `simt_sgemm` and cuBLAS's `sgemm` and `ffma` kernels name no dtype but are fp32 on the CUDA cores (an H100's fp32
    step of lesson 12 ran 12 of its 23 GEMMs a step as cutlass_80_simt_sgemm)."""
    if math_unit(kernel) in ("tensor cores", "matrix cores") or "tf32" in kernel.lower():
        return False
    name = decode(kernel)
    dtype = dict(name.details).get("dtype")
    if dtype is not None:
        return dtype == "fp32"
    if re.search(r"sgemm|ffma", kernel, re.IGNORECASE):
        return True
    return " fp32 " in f" {name.short} "


def fp32_matmul(r: Reading) -> list[Finding]:
    """fp32 GEMMs (and, before Ampere, convolutions) run on the CUDA cores: an H100 does 67 TFLOP/s of fp32 there and
    495 of TF32 on its tensor cores. TF32 keeps fp32's range with a 10-bit mantissa, enough for training; bf16
    autocast halves the bytes too.

    Sources: torch.profiler's pattern matcher (Fp32MatMulPattern), the TensorBoard profiler plugin's recommendation
    (kernels eligible for tensor cores not using them), PyTorch's notes on TF32 on Ampere and later devices."""
    if not r.trace.has_gpu:
        return []
    arch = peaks.architecture(r.trace) or ""
    old = arch in OLD_TENSOR_CORES
    amd = arch.startswith("gfx")
    work = [w for s in r.steps for w in s.gpu if w.kind == "kernel" and _fp32(w)
            and (w.is_gemm or old and decode(w.name).work == "convolution")]
    if not work:
        return []
    found = peaks.find(r.trace)
    if found is None:
        return []
    peak = found.peak
    target = "fp16" if old else "bf16" if amd else "tf32"
    fast = peak.compute(target, True)
    slow = peak.tflops.get("fp32 matrix", peak.tflops.get("fp32"))
    if not fast or not slow or fast <= slow:
        return []
    # The time a GEMM keeps, least and most: its FLOPs at the fast unit's efficiency over the slow unit's.
    keep = (slow * FP32_EFFICIENCY[0] / (fast * TENSOR_EFFICIENCY[1]),
            min(1.0, slow * FP32_EFFICIENCY[1] / (fast * TENSOR_EFFICIENCY[0])))
    ids = {id(w) for w in work}
    by_call: dict[int, list] = {}
    for s in r.steps:
        for w in s.gpu:
            if w.launch is not None:
                by_call.setdefault(id(w.launch), []).append(w)

    def faster(factor: float):
        def change(e):
            launched = by_call.get(id(e.call), []) if e.call is not None else []
            if not any(id(w) in ids for w in launched):
                return e
            return replace(e, work=sum(w.dur * (factor if id(w) in ids else 1.0) for w in launched))
        return edit_events(change)

    if r.replay is not None:
        saving = r.replay.saving(faster(keep[1]), [faster(keep[0])])
    else:
        spent = sum(w.dur for w in work) / r.n
        saving = (spent * (1 - keep[1]), spent * (1 - keep[0]))
    spent = sum(w.dur for w in work) / r.n
    launchers = [w.launch.launcher for w in work if w.launch is not None and w.launch.launcher is not None]
    kinds = "GEMMs and convolutions" if old and any(not w.is_gemm for w in work) else "GEMMs"
    evidence = (f"fp32 {kinds} on the {'vector units' if amd else 'CUDA cores'}: {times(r.per_step(len(work)))} a step, "
                f"{us(spent)} ({spent / r.step_us:.0%} of the step), e.g. {decode(work[0].name).short}")
    if old:
        change = "with torch.autocast('cuda', dtype=torch.float16): (and torch.amp.GradScaler for training)"
        unit = f"fp16 on {peak.name}'s tensor cores"
    elif amd:
        change = "with torch.autocast('cuda', dtype=torch.bfloat16):"
        unit = f"bf16 on {peak.name}'s matrix cores"
    else:
        # the spelling every torch since 1.12 takes, with no warning on 2.15: allow_tf32 gave way to fp32_precision in
        # 2.9, and a process that sets both gets a RuntimeError when the precision is read (lesson 12's tf32_matmuls)
        change = ("torch.set_float32_matmul_precision('high')  # TF32 matmuls (or bf16: with torch.autocast('cuda', "
                  "dtype=torch.bfloat16):)")
        unit = f"TF32 on {peak.name}'s tensor cores"
    basis = (f"{unit}, {fast:g} against {slow:g} TFLOP/s ({found.how}): each such kernel keeps {keep[0]:.0%}-"
             f"{keep[1]:.0%} of its time ({FP32_EFFICIENCY[0]:.0%}-{FP32_EFFICIENCY[1]:.0%} of the fp32 peak now, "
             f"{TENSOR_EFFICIENCY[0]:.0%}-{TENSOR_EFFICIENCY[1]:.0%} of the faster one after)")
    return [Finding("fp32-matmul", f"fp32 {kinds} off the tensor cores", evidence, change, saving, r.step_us,
                    r.basis(basis) if r.replay is not None else basis, source_of(fp32_matmul),
                    where=where_of(launchers), count_per_step=r.per_step(len(work)))]


RULES = (fp32_matmul,)
