"""What one call of an op costs (Cost), and the helpers every family's formulas share: the dtype a peak is read
for, an argument's recorded value."""

from __future__ import annotations

from dataclasses import dataclass

from trace_report.model import CpuOp

MATRIX_FAMILIES = ("GEMM", "attention", "convolution")  # run on tensor (matrix) cores: weighed against their peak
# The profiler's type names -> the dtype a peak is listed for.
PEAK_DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64",
               "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
               "c10::Float8_e5m2fnuz": "fp8", "signed char": "int8", "unsigned char": "int8"}


@dataclass(frozen=True, slots=True)
class Cost:
    """One call of an op: its family, FLOPs and bytes (None where its shapes do not say), the dtype of its first
    floating-point input (what the peak is read for), and what the count assumes."""

    family: str
    flops: int | None
    bytes: int | None
    dtype: str = ""
    note: str = ""

    @property
    def matrix(self) -> bool:
        return self.family in MATRIX_FAMILIES


def peak_dtype(types) -> str:
    """The dtype a peak is read for: the first floating-point (or 8-bit) tensor type among the inputs."""
    for kind in types:
        if kind in PEAK_DTYPES:
            return PEAK_DTYPES[kind]
    return ""


def concrete(op: CpuOp, index: int) -> str | None:
    """The recorded value of the op's argument `index` ("True", "0.125", "[1, 1]"), None when the trace does not keep
    it (traces before PyTorch 2.3 keep no "Concrete Inputs"; the reader keeps them for attention and convolutions)."""
    values = op.concrete_inputs
    if index < len(values) and values[index] not in ("", None):
        return values[index]
    return None


def int_list(text: str | None) -> tuple[int, ...] | None:
    """`"[2, 2]"` -> (2, 2); `"3"` -> (3,); None when unreadable."""
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.strip("[]() ").split(",") if part.strip())
    except ValueError:
        return None
