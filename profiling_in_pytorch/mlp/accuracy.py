"""One correctness rule for every MLP variant: its relative error against an fp32 run of the same weights.

    error = ‖out − ref‖ / ‖ref‖, with ref the same module in fp32 on the same (rounded) input

bf16 keeps 8 significant bits, so the eager bf16 MLP itself lands near 4e-3 at the post's shape; 1.6e-2
(torch.testing's bf16 rtol) leaves room for another valid order of rounding (a fused kernel rounds once, eager
four times) and is far below what a wrong activation, a swapped weight or a stale input gives (tens of
percent). The lessons, the benchmark and the tests all judge outputs by `check_output`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

TOLERANCES = {torch.bfloat16: 1.6e-2, torch.float16: 4e-3, torch.float32: 1e-3}  # fp32: room for TF32 GEMMs


@dataclass(frozen=True)
class Accuracy:
    """How far an output is from the fp32 reference, and whether that is within the dtype's tolerance."""

    error: float  # relative L2 error; inf for a wrong shape or a non-finite value
    tolerance: float
    problem: str | None = None  # why it is wrong, when it is

    @property
    def ok(self) -> bool:
        return self.problem is None

    def describe(self) -> str:
        shown = f"{self.error:.1e}" if math.isfinite(self.error) else "inf"
        return f"relative error {shown} (tolerance {self.tolerance:g})" + (f": {self.problem}" if self.problem else "")


def fp32_reference(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The same module, weights upcast to fp32, on the same input upcast: what every variant is judged against."""
    with torch.no_grad():
        return copy.deepcopy(module).float()(x.float())


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


def check_output(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, tolerance: float | None = None) -> Accuracy:
    """Judge `got` (computed in `dtype`) against `want` (the fp32 reference), within the dtype's tolerance or the
    one given (an FP8 forward computes in e4m3 whatever dtype it takes and returns)."""
    tolerance = TOLERANCES[dtype] if tolerance is None else tolerance
    if tuple(got.shape) != tuple(want.shape):
        return Accuracy(math.inf, tolerance, f"output shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    if not torch.isfinite(got).all():
        return Accuracy(math.inf, tolerance, "NaN or inf in the output")
    error = relative_error(got, want)
    return Accuracy(error, tolerance, None if error <= tolerance else f"over the {dtype} tolerance")


def check_backward(module: torch.nn.Module, reference: torch.nn.Module, x: torch.Tensor, dy: torch.Tensor
                   ) -> dict[str, Accuracy]:
    """The same rule for a training step: `module`'s output and gradients against `reference` run in fp32.

    Both take the same input `x` and the same gradient `dy` from above; `module` holds the reference's weights
    under the same names (a torch.compile wrapper's `_orig_mod.` is dropped). Returns, judged as `check_output`
    judges an output (relative L2 error against fp32, the tolerance of x's dtype): "output", "x" (the input's
    gradient, what earlier layers would receive) and each weight of the reference by name ("gate_proj.weight",
    ...). The modules' own `.grad` fields are left as they were found.
    """
    got = _output_and_gradients(module, x, dy)
    want = _output_and_gradients(copy.deepcopy(reference).float(), x.float(), dy.float())
    tolerance = TOLERANCES[x.dtype]
    return {
        name: check_output(got[name], grad, x.dtype) if got.get(name) is not None
        else Accuracy(math.inf, tolerance, "no gradient reached it")
        for name, grad in want.items()
    }


def _output_and_gradients(module: torch.nn.Module, x: torch.Tensor, dy: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """{"output": module(x), "x": its gradient, name: each parameter's} after one backward of `dy`."""
    params = {name.replace("_orig_mod.", ""): p for name, p in module.named_parameters()}
    kept = {name: p.grad for name, p in params.items()}
    x = x.detach().requires_grad_()
    try:
        for p in params.values():
            p.grad = None
        with torch.enable_grad():
            out = module(x)
            out.backward(dy)
        return {"output": out.detach(), "x": x.grad, **{name: p.grad for name, p in params.items()}}
    finally:
        for name, p in params.items():
            p.grad = kept[name]
