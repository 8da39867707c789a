"""What lesson 10 (the FP8 MLP) prints beyond the common plumbing: the FP8 variants a reader would choose, built
from the post's module; each one's error against fp32 beside bf16's, on normal inputs and with outlier tokens;
and the bytes a forward moves in FP8 against bf16."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from rich.table import Table

from trace_report.errors import UsageError
from profiling_in_pytorch.lesson import console, dtype_name
from profiling_in_pytorch.mlp.accuracy import fp32_reference, relative_error
from profiling_in_pytorch.mlp.fp8 import FusedFP8GeGLUMLP, ScaledMMGeGLUMLP, fp8_unavailable, torchao_fp8_mlp
from profiling_in_pytorch.mlp.fp8_scaling import (
    BUDGET_TOKENS,
    OUTLIER_SIZE,
    OUTLIER_TOKENS,
    error_on_other_tokens,
    rounding_budget,
    with_outliers,
)

# Relative error against fp32 that an FP8 forward should stay under. Not bf16's 1.6e-2: e4m3 keeps 3 mantissa bits,
# so each rounding is off by up to 1/16 (about 3.6% RMS over a row), and a forward rounds four tensors in a chain
# (x, the weights, m): every FP8 variant measured 0.063-0.065 on normal inputs on an H100 (docs/fp8.md), the fused
# module's fp32 emulation (fp8_scaling.emulated_fp8_mlp) 0.063 on a CPU. A wrong scale or a swapped weight gives
# tens of percent; 8% leaves room for rounding and catches those.
FP8_TOLERANCE = 0.08


@dataclass(frozen=True)
class Recipe:
    """One FP8 variant of the lesson: how to build it, how its scales are taken, and whether outlier tokens break it."""

    name: str
    build: Callable[[torch.nn.Module], torch.nn.Module]
    scales: str
    outliers_break_it: bool = False  # a tensorwise scale: other tokens lose their precision to the outliers
    fused: bool = False  # our Triton kernels: Hopper, or the interpreter


RECIPES = {
    "fused": Recipe("fused", FusedFP8GeGLUMLP, "x per token, W per channel, m per 1×128", fused=True),
    "rowwise": Recipe("rowwise", lambda mlp: ScaledMMGeGLUMLP(mlp, "rowwise"), "x, m per token, W per channel"),
    "tensorwise": Recipe("tensorwise", lambda mlp: ScaledMMGeGLUMLP(mlp, "tensorwise"), "one per tensor",
                         outliers_break_it=True),
    "torchao": Recipe("torchao", torchao_fp8_mlp, "PerRow: as rowwise"),
}


def unavailable(recipe: Recipe, device: torch.device) -> str | None:
    """Why `recipe` cannot run on `device` (in its FP8 form), or None."""
    return fp8_unavailable(device, fused=recipe.fused)


def build(name: str, reference: torch.nn.Module) -> torch.nn.Module:
    """The named recipe built from `reference`'s weights; UsageError (one line) when it cannot be built here."""
    try:
        return RECIPES[name].build(reference)
    except ImportError as err:  # pragma: no cover - torchao's own imports failing
        raise UsageError(f"{name}: {err}") from err


def check_accuracy(profiled: str, module: torch.nn.Module, reference: torch.nn.Module, x: torch.Tensor,
                   runnable: bool = True) -> bool:
    """Every recipe that runs here, against fp32, before any timing: the error on x and, with a few tokens
    `OUTLIER_SIZE` times larger, the error on the other tokens; the reference module in x's dtype beside them.
    Returns whether the profiled recipe (`module`) is within FP8_TOLERANCE on normal inputs, and with outliers
    unless its recipe is known to break there. `runnable` False (no FP8 here): only `module` is checked, as run."""
    outliers = with_outliers(x)
    want, want_outliers = fp32_reference(reference, x), fp32_reference(reference, outliers)
    table = Table(title=f"Relative error against fp32; outliers: {OUTLIER_TOKENS} tokens {OUTLIER_SIZE:g}× larger, "
                  "error on the others", title_justify="left")
    for column in ("variant", "scales", "error", "outliers", f"≤ {FP8_TOLERANCE:g}"):
        table.add_column(column, justify="right" if column in ("error", "outliers") else "left", no_wrap=column != "scales")
    with torch.no_grad():
        base = relative_error(reference(x), want), error_on_other_tokens(reference(outliers), want_outliers)
        table.add_row(f"eager {dtype_name(x.dtype)}", "none", f"{base[0]:.4f}",
                      f"{base[1]:.4f}", "")
        profiled_ok = False
        for name, recipe in RECIPES.items():
            if name == profiled:
                candidate = module
            elif runnable and unavailable(recipe, x.device) is None:
                try:
                    candidate = build(name, reference)
                except UsageError as err:
                    table.add_row(name, recipe.scales, "—", "—", f"not built: {err}")
                    continue
            else:
                continue
            normal = relative_error(candidate(x), want)
            with_out = error_on_other_tokens(candidate(outliers), want_outliers)
            ok_normal = normal <= FP8_TOLERANCE
            ok_outliers = with_out <= FP8_TOLERANCE
            verdict = ("✓" if ok_normal else "✗") + ("" if ok_outliers else
                                                     ", outliers ✗ (expected)" if recipe.outliers_break_it else
                                                     ", outliers ✗")
            table.add_row(name + (" ◀" if name == profiled else ""), recipe.scales, f"{normal:.4f}",
                          f"{with_out:.4f}", verdict)
            if name == profiled:
                profiled_ok = ok_normal and (ok_outliers or recipe.outliers_break_it)
    console.print(table)
    print_rounding_budget(x, reference)
    return profiled_ok


def print_rounding_budget(x: torch.Tensor, reference: torch.nn.Module) -> None:
    """Which tensor's rounding to e4m3 costs what (`rounding_budget`): the floor under every FP8 recipe above."""
    with torch.no_grad():
        budget = rounding_budget(x, reference.gate_proj.weight, reference.up_proj.weight, reference.down_proj.weight)
    parts = " · ".join(f"{name} {error:.3f}" for name, error in budget.items())
    console.print(f"Where the error comes from (the forward in fp32, tensors rounded to e4m3 as the fused recipe "
                  f"rounds them, {min(BUDGET_TOKENS, x.numel() // x.shape[-1]):,} tokens): {parts}. Rounding is "
                  "the floor, not the kernels: the gate/up GEMM's two operands alone cost "
                  f"{budget['x and W_gate, W_up']:.3f}; finer scales do not help, since e4m3 keeps 3 mantissa bits "
                  "whatever the scale.", soft_wrap=False)


def bytes_per_forward(tokens: int, dim: int, hidden: int) -> dict[str, int]:
    """The least each design reads and writes per forward, kernel by kernel (weights once, no L2 reuse counted):

    bf16 fused (lesson 05)  gate/up reads x and W_gate|up, writes h; down reads h and W_down, writes y
    fp8 fused (ours)        x read, xq written and read (1 byte); W in e4m3; m written and read in e4m3 (+ scales)
    fp8 rowwise, compiled   as ours for x; the gate/up GEMM writes g|u in bf16, one Inductor kernel reads it back
                            and writes m in e4m3; the down GEMM reads m
    """
    m_d, h_d, m_h = tokens * dim, hidden * dim, tokens * hidden
    groups = -(-hidden // 128)
    return {
        "bf16 fused (lesson 05)": 2 * m_d + 2 * 2 * h_d + 2 * m_h + 2 * m_h + 2 * h_d + 2 * m_d,
        "fp8 fused (this lesson)": (2 * m_d + m_d + 4 * tokens) + (m_d + 2 * h_d + m_h + 4 * tokens * groups)
                                   + (m_h + 4 * tokens * groups + h_d + 2 * m_d),
        "fp8 rowwise, --compile": (2 * m_d + m_d + 4 * tokens) + (m_d + 2 * h_d + 2 * 2 * m_h)
                                  + (2 * 2 * m_h + m_h + 4 * tokens) + (m_h + h_d + 2 * m_d),
    }


def print_bytes(tokens: int, dim: int, hidden: int) -> None:
    """The table of `bytes_per_forward`, against bf16's fused module."""
    moved = bytes_per_forward(tokens, dim, hidden)
    base = moved["bf16 fused (lesson 05)"]
    table = Table(title=f"Bytes per forward, at least ({tokens} tokens, {dim} → {hidden})", title_justify="left")
    for column, justify in (("design", "left"), ("MB", "right"), ("vs bf16 fused", "right")):
        table.add_column(column, justify=justify)
    for name, n in moved.items():
        table.add_row(name, f"{n / 1e6:,.1f}", f"{n / base:.2f}×")
    console.print(table)
