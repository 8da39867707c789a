"""What this machine reaches, measured in the run: the rate of a large GEMM and of a large copy. The lessons write
them into the trace (lesson/output.py), where trace-report's op table reads its shares of peak against them; the
benchmark weighs every variant against them.

    measure_ceilings  how fast can this machine multiply and copy?   a large GEMM and a large copy, same run
    matmul_burst      and at the clocks a variant ran at?            the GEMM again; the best burst counts
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch

from profiling_in_pytorch.device import require_fit
from profiling_in_pytorch.timers import cpu_timing, gpu_timing


@dataclass(frozen=True)
class Ceilings:
    """What this machine reaches, measured in this run: the rate of a large GEMM and of a large copy.

    The GEMM's rate is the best of its bursts (`matmul_bursts`, TFLOP/s each, in the order measured): one before
    the variants, then one right after each variant timed, at the clocks that variant ran at.
    """

    matmul_tflops: float
    matmul_size: int
    copy_gb_per_s: float
    copy_bytes: int  # bytes read plus bytes written per copy
    matmul_bursts: tuple[float, ...] = ()
    # The same in FP8 (e4m3 in, bf16 out, torch._scaled_mm), where the run has FP8 variants and the GPU FP8 units.
    fp8_matmul_tflops: float | None = None
    fp8_bursts: tuple[float, ...] = ()

    def floor_us(self, flops: float, min_bytes: float, fp8: bool = False) -> float:
        """The fastest a forward can be: its arithmetic at the GEMM rate (the FP8 one for an FP8 forward, where
        measured), or its traffic at copy speed."""
        rate = self.fp8_matmul_tflops if fp8 and self.fp8_matmul_tflops else self.matmul_tflops
        return max(flops / (rate * 1e6), min_bytes / (self.copy_gb_per_s * 1e3))

    def limited_by(self, flops: float, min_bytes: float) -> str:
        return "compute" if flops / (self.matmul_tflops * 1e6) >= min_bytes / (self.copy_gb_per_s * 1e3) else "memory"

    def with_matmul_burst(self, tflops: float) -> "Ceilings":
        """One burst more: the GEMM ceiling is the best of them all."""
        return replace(self, matmul_tflops=max(self.matmul_tflops, tflops), matmul_bursts=(*self.matmul_bursts, tflops))

    def with_fp8_burst(self, tflops: float) -> "Ceilings":
        return replace(self, fp8_matmul_tflops=max(self.fp8_matmul_tflops or 0.0, tflops),
                       fp8_bursts=(*self.fp8_bursts, tflops))


CEILING_BURST_MS = 40


def matmul_size(device: torch.device, dtype: torch.dtype) -> int:
    """The ceiling's square GEMM: 8192³ on a GPU, 1024³ on a CPU (512³ in half precision, slow there)."""
    return 8192 if device.type == "cuda" else (1024 if dtype == torch.float32 else 512)


def matmul_burst(device: torch.device, dtype: torch.dtype, warmup_ms: int, rep_ms: int) -> float:
    """The GEMM's rate in one short burst, TFLOP/s, at the fast end of its timings (the 20th percentile).

    Random data, never zeros: a GEMM on zeros runs measurably faster than on real values. Short, because under
    sustained load a GPU at its power limit clocks down (an H200 at 700 W: about 800 TFLOP/s for the first tens of
    ms of 8192³ GEMMs, about 680 after a second). One burst can still read low (clocks caught on their way up, a
    busy moment): the ceiling is the best of several, one right after each variant, at the clocks it ran at.
    """
    n = matmul_size(device, dtype)
    timing = gpu_timing if device.type == "cuda" else cpu_timing
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    matmul_us = timing(functools.partial(torch.mm, a, b), warmup_ms, min(rep_ms, CEILING_BURST_MS)).p20_us
    del a, b
    return 2 * n**3 / (matmul_us * 1e6)


def fp8_matmul_burst(device: torch.device, warmup_ms: int, rep_ms: int) -> float:
    """`matmul_burst` in FP8: e4m3 operands, one scale each, bf16 out (torch._scaled_mm, cuBLAS's nvjet `qq`
    kernel), 8192³. Measured on an H100 (torch 2.11): 1,250 TFLOP/s through triton's do_bench, bf16's 752."""
    n = matmul_size(device, torch.bfloat16)
    a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants it
    one = torch.ones((), device=device)
    call = functools.partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    matmul_us = gpu_timing(call, warmup_ms, min(rep_ms, CEILING_BURST_MS)).p20_us
    del a, b
    return 2 * n**3 / (matmul_us * 1e6)


def measure_ceilings(device: torch.device, dtype: torch.dtype, warmup_ms: int, rep_ms: int) -> Ceilings:
    """A first GEMM burst (matmul_burst) in the run's dtype, and a copy (1 GiB on a GPU, 64 MiB on a CPU).

    A ceiling is what the machine reaches, so the copy too is taken at the fast end of its timings (the 20th
    percentile), not the median.
    """
    on_gpu = device.type == "cuda"
    n = matmul_size(device, dtype)
    nbytes = (1 << 30) if on_gpu else (64 << 20)
    require_fit(device, max(3 * n * n * dtype.itemsize, 2 * nbytes), "the ceilings' GEMM and copy")
    matmul_tflops = matmul_burst(device, dtype, warmup_ms, rep_ms)
    src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    copy_us = (gpu_timing if on_gpu else cpu_timing)(functools.partial(dst.copy_, src), warmup_ms, rep_ms).p20_us
    del src, dst
    if on_gpu:
        torch.cuda.empty_cache()
    return Ceilings(
        matmul_tflops=matmul_tflops,
        matmul_size=n,
        copy_gb_per_s=2 * nbytes / (copy_us * 1e3),
        copy_bytes=2 * nbytes,
        matmul_bursts=(matmul_tflops,),
    )
