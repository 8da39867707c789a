"""What a GPU can do at most: dense tensor-core TFLOP/s per dtype, the fp32 rate of its vector units, and its memory
bandwidth in TB/s, from the vendors' datasheets. The op table (roofline.py) weighs each op against them, and
"Where fusion would pay" (fusion.py) reads its bandwidth here.

Every figure is dense: NVIDIA's datasheets print the tensor-core rates "with sparsity" (2:4 structured), twice what a
dense GEMM can reach; the table holds half of those. 1 TFLOP/s = 1e12 FLOP/s, 1 TB/s = 1e12 bytes/s, as the vendors
count. "fp32" is the rate of the vector units (CUDA cores, AMD's vector ALUs), what pointwise and reduction kernels
run on; "fp32 matrix" AMD's matrix cores on fp32 (NVIDIA runs fp32 GEMMs on CUDA cores unless TF32 is allowed).

A GPU is found by the name the trace records (deviceProperties, `NVIDIA H100 80GB HBM3`), matched by the patterns
below in order; without a name, by the architecture its kernels were built for (sm90, gfx942), the most common GPU of
it assumed and said so. `--peak TFLOPS,TBPS` replaces both.

A trace may carry what its own GPU reached, measured beside the profile: a top-level key `"measured_peak"`,
`{"dtype": "bf16", "gemm_tflops": 786.7, "copy_tbps": 4.26, "how": "an 8192³ GEMM's best burst, a 1 GiB copy"}`
(the lessons write it, with the benchmark's own ceilings, profiling_in_pytorch.ceilings.measure_ceilings; any script
can). It replaces the datasheet's rate for matrix ops of that dtype and its bandwidth, and the table says so: a GPU at
its power limit runs below its datasheet (an H200 at 700 W: about 800 TFLOP/s for tens of ms of GEMMs, 989 on paper).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field

from trace_report.model import Trace


@dataclass(frozen=True)
class Peak:
    """One GPU's limits: TFLOP/s by dtype (dense), memory bandwidth in TB/s, and where the figures come from."""

    name: str
    tflops: dict = field(hash=False)  # "bf16", "fp16", "fp8", "tf32" (tensor cores), "fp32" (vector), "fp32 matrix"
    tbps: float
    source: str

    def compute(self, dtype: str, matrix: bool) -> float | None:
        """The peak TFLOP/s an op of `dtype` can reach: a matrix op (GEMM, attention, convolution) on the tensor or
        matrix cores, any other op on the vector units' fp32 rate (what pointwise kernels compute in)."""
        if not matrix:
            return self.tflops.get("fp32")
        if dtype == "fp32":
            return self.tflops.get("fp32 matrix", self.tflops.get("fp32"))
        return self.tflops.get(dtype)

    def ridge(self, dtype: str, matrix: bool) -> float | None:
        """FLOPs per byte where the roofline bends: above it an op is compute-bound, below memory-bound."""
        compute = self.compute(dtype, matrix)
        return compute / self.tbps if compute else None


def _nvidia(name, bf16, fp8, tf32, fp32, tbps, source, fp16=None):
    rates = {"bf16": bf16, "fp16": fp16 if fp16 is not None else bf16, "fp8": fp8, "tf32": tf32, "fp32": fp32}
    return Peak(name, {k: v for k, v in rates.items() if v is not None}, tbps, source)


def _amd(name, bf16, fp8, tf32, fp32_matrix, fp32, tbps, source):
    rates = {"bf16": bf16, "fp16": bf16, "fp8": fp8, "tf32": tf32, "fp32 matrix": fp32_matrix, "fp32": fp32}
    return Peak(name, {k: v for k, v in rates.items() if v is not None}, tbps, source)


H100_SXM_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (SXM), sparse figures halved"
# (pattern on the device's name, its peaks); the first match wins: the more specific names first.
PEAKS = [
    (r"H100.*NVL", _nvidia("H100 NVL", 835.5, 1670.5, 417.5, 60.0, 3.9, "NVIDIA H100 datasheet (NVL), sparse halved")),
    (r"H100.*PCIe", _nvidia("H100 PCIe", 756.5, 1513.0, 378.0, 51.0, 2.0, "NVIDIA H100 datasheet (PCIe), sparse halved")),
    (r"H100", _nvidia("H100 SXM", 989.4, 1978.9, 494.7, 67.0, 3.35, H100_SXM_SHEET)),
    (r"H800", _nvidia("H800 SXM", 989.4, 1978.9, 494.7, 67.0, 3.35, "NVIDIA H800 product brief: H100 SXM's compute")),
    (r"GH200", _nvidia("GH200 480GB", 989.4, 1978.9, 494.7, 67.0, 4.0, "NVIDIA GH200 Grace Hopper datasheet (HBM3)")),
    (r"H200.*NVL", _nvidia("H200 NVL", 835.5, 1670.5, 417.5, 60.0, 4.8, "NVIDIA H200 datasheet (NVL), sparse halved")),
    (r"H200", _nvidia("H200 SXM", 989.4, 1978.9, 494.7, 67.0, 4.8, "NVIDIA H200 datasheet (SXM), sparse halved")),
    (r"H20\b", _nvidia("H20", 148.0, 296.0, 74.0, 44.0, 4.0, "NVIDIA H20 product brief, as reported (no public "
                       "datasheet)")),
    (r"GB200", _nvidia("GB200", 2500.0, 5000.0, 1250.0, 80.0, 8.0, "NVIDIA GB200 NVL72 datasheet, per GPU (÷72), "
                       "sparse halved")),
    (r"B200", _nvidia("B200", 2250.0, 4500.0, 1125.0, 75.0, 8.0, "NVIDIA HGX B200 datasheet, per GPU (÷8), sparse "
                      "halved")),
    (r"A100.*80GB.*PCIe|A100 80GB PCIe", _nvidia("A100 80GB PCIe", 312.0, None, 156.0, 19.5, 1.935,
                                                  "NVIDIA A100 datasheet (80GB PCIe), sparse halved")),
    (r"A100.*80GB", _nvidia("A100 80GB SXM", 312.0, None, 156.0, 19.5, 2.039, "NVIDIA A100 datasheet (80GB SXM), "
                            "sparse halved")),
    (r"A100", _nvidia("A100 40GB", 312.0, None, 156.0, 19.5, 1.555, "NVIDIA A100 datasheet (40GB), sparse halved")),
    (r"A10G", _nvidia("A10G", 125.0, None, 62.5, 31.2, 0.6, "NVIDIA A10 datasheet (AWS's A10G has no sheet of its "
                      "own: the A10's figures, an upper bound), sparse halved")),
    (r"L40S", _nvidia("L40S", 362.0, 733.0, 183.0, 91.6, 0.864, "NVIDIA L40S datasheet, sparse halved")),
    (r"\bL4\b", _nvidia("L4", 121.0, 242.5, 60.0, 30.3, 0.3, "NVIDIA L4 datasheet, sparse halved")),
    (r"\bT4\b", _nvidia("T4", None, None, None, 8.1, 0.32, "NVIDIA T4 datasheet (fp16 tensor cores, no bf16)",
                        fp16=65.0)),
    (r"V100.*PCIE|V100.*PCIe", _nvidia("V100 PCIe", None, None, None, 14.0, 0.9, "NVIDIA V100 datasheet (PCIe)",
                                         fp16=112.0)),
    (r"V100", _nvidia("V100 SXM2", None, None, None, 15.7, 0.9, "NVIDIA V100 datasheet (SXM2)", fp16=125.0)),
    (r"RTX 4090", _nvidia("RTX 4090", 165.2, 330.3, 82.6, 82.6, 1.008, "NVIDIA Ada Lovelace architecture whitepaper "
                          "(RTX 4090, fp32 accumulate)")),
    (r"MI355X", _amd("MI355X", 2516.6, 5033.2, None, 157.3, 157.3, 8.0, "AMD Instinct MI355X data sheet")),
    (r"MI325X", _amd("MI325X", 1307.4, 2614.9, 653.7, 163.4, 163.4, 6.0, "AMD Instinct MI325X data sheet")),
    (r"MI300X", _amd("MI300X", 1307.4, 2614.9, 653.7, 163.4, 163.4, 5.3, "AMD Instinct MI300X data sheet")),
    # ROCm lists each of an MI250X's two dies (GCDs) as a device: half the package's figures.
    (r"MI250X?", _amd("MI250X (one GCD)", 191.5, None, None, 47.9, 23.95, 1.6384,
                      "AMD Instinct MI250X data sheet, halved: one of its two GCDs")),
    (r"MI210", _amd("MI210", 181.0, None, None, 45.3, 22.6, 1.6384, "AMD Instinct MI210 data sheet")),
]
_PEAKS = [(re.compile(pattern), peak) for pattern, peak in PEAKS]
_BY_NAME = {peak.name: peak for _, peak in PEAKS}
MEASURED_KEY = "measured_peak"  # the trace's top-level key for its GPU's measured ceilings (see above)
# An architecture without a GPU's name: its most common data-center GPU, assumed (the report says so).
BY_ARCHITECTURE = {"sm70": "V100 SXM2", "sm80": "A100 80GB SXM", "sm90": "H100 SXM", "sm100": "B200",
                   "gfx90a": "MI250X (one GCD)", "gfx942": "MI300X", "gfx950": "MI355X"}
_ARCH = re.compile(r"\((sm\d+|gfx\w+?)[,) ]")


@dataclass(frozen=True)
class Found:
    """The peaks an analysis uses, and how they were found (said beside the table)."""

    peak: Peak
    how: str  # "NVIDIA H200 datasheet (SXM), ...", "assumed from sm90: H100 SXM", "given by --peak"
    measured: bool = False  # the trace's own ceilings (MEASURED_KEY), over the datasheet's


def peak_for_name(name: str | None) -> Peak | None:
    """The peaks of the GPU named `name` (as CUDA or ROCm name it), or None."""
    if not name:
        return None
    return next((peak for pattern, peak in _PEAKS if pattern.search(name)), None)


def find(trace: Trace, given: tuple[float, float] | None = None) -> Found | None:
    """The peaks for `trace`'s GPU: `given` (TFLOP/s, TB/s) if set, else by its name, else by its architecture."""
    if given is not None:
        tflops, tbps = given
        rates = dict.fromkeys(("bf16", "fp16", "fp8", "tf32", "fp32", "fp32 matrix"), tflops)
        return Found(Peak("given", rates, tbps, "--peak"), f"given by --peak: {tflops:g} TFLOP/s, {tbps:g} TB/s")
    found = _datasheet(trace)
    measured = _measured(trace.meta.get(MEASURED_KEY), found.peak if found is not None else None)
    return measured or found


def architecture(trace: Trace) -> str | None:
    """The architecture the trace's GPU label names (`sm90`, `gfx942`: trace.device, `NVIDIA H200 (sm90)`), or None."""
    found = _ARCH.search(trace.device or "")
    return found.group(1) if found else None


def _datasheet(trace: Trace) -> Found | None:
    name = trace.device_properties.get("name")
    label = trace.device or ""
    peak = peak_for_name(name if isinstance(name, str) else None) or peak_for_name(label.split(" (")[0])
    if peak is not None:
        return Found(peak, peak.source)
    arch = architecture(trace)
    if arch in BY_ARCHITECTURE:
        peak = _BY_NAME[BY_ARCHITECTURE[arch]]
        return Found(peak, f"assumed from {arch}: {peak.name}'s ({peak.source}); --peak sets them")
    return None


def _measured(data, datasheet: Peak | None) -> Found | None:
    """The trace's own measured ceilings (MEASURED_KEY) over the datasheet's: its GEMM rate for matrix ops of its
    dtype (bf16 and fp16 share the tensor cores' rate), its copy rate for the bandwidth; None when absent or not
    numbers."""
    if not isinstance(data, dict):
        return None
    gemm, copy, dtype = data.get("gemm_tflops"), data.get("copy_tbps"), data.get("dtype")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (gemm, copy)) or \
            dtype not in ("bf16", "fp16", "fp32", "fp8", "tf32"):
        return None
    rates = dict(datasheet.tflops) if datasheet is not None else {}
    # an fp32 GEMM's rate is the matrix rate (TF32 or not): the vector units' fp32 rate stays the pointwise ops' peak
    for kind in {"bf16": ("bf16", "fp16"), "fp16": ("bf16", "fp16"), "fp32": ("fp32 matrix",)}.get(dtype, (dtype,)):
        rates[kind] = float(gemm)
    name = datasheet.name if datasheet is not None else "this GPU"
    how = f"measured on this GPU beside the profile: {gemm:,.0f} TFLOP/s {dtype} GEMM, {copy:g} TB/s copy"
    if isinstance(data.get("how"), str):
        how += f" ({data['how']})"
    if datasheet is not None:
        how += f"; the datasheet: {datasheet.tflops.get(dtype, 0):,.0f} and {datasheet.tbps:g}"
    return Found(Peak(name, rates, float(copy), how), how, measured=True)


def bandwidth_gbs(name: str | None) -> float | None:
    """The nominal memory bandwidth of the GPU named `name`, in GB/s (what fusion.py weighs bytes against)."""
    peak = peak_for_name(name)
    return peak.tbps * 1000 if peak is not None else None


def peak_flag(text: str) -> tuple[float, float]:
    """`--peak TFLOPS,TBPS`: two numbers above zero, the peak compute and memory bandwidth."""
    parts = text.split(",")
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 2 or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected TFLOPS,TBPS: two numbers above 0 (e.g. 989,3.35), got {text!r}")
    return values
