"""What a variant is, and the builders `benchmark_mlp.py`'s registry names: each turns the eager module into a forward.

Every builder starts from the eager `SimpleGeGLUMLP`, so that all variants hold its weights.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

import torch
from rich.markup import escape

from common.bench.output import console
from common.errors import UsageError

Forward = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[torch.nn.Module], Forward]
    # Why it cannot run here (device, dtype), or None when it can.
    unavailable: Callable[[torch.device, torch.dtype], "str | None"] = lambda device, dtype: None
    compiles: bool = False  # through torch.compile: start from a clean Dynamo cache
    per_call: str = ""  # what runs on the CPU at every call, besides launching kernels


def needs_cuda(why: str):
    return lambda device, dtype: None if device.type == "cuda" else f"needs CUDA ({why})"


def needs_cuda_in_half(device: torch.device, dtype: torch.dtype) -> str | None:
    if device.type != "cuda":
        return "needs CUDA (a Triton GPU kernel)"
    return None if dtype in (torch.bfloat16, torch.float16) else "runs in bf16 or fp16 only"


def build_compiled(mode: str | None) -> Callable[[torch.nn.Module], Forward]:
    # dynamic=False: one static graph per shape, as a served model's fixed decode and prefill shapes get.
    return lambda mlp: torch.compile(mlp, mode=mode, dynamic=False)


def build_cuda_graphed(mlp: torch.nn.Module) -> Forward:
    graphed = torch.compile(mlp, mode="reduce-overhead", dynamic=False)

    def forward(x):
        # A new step: the graph may now overwrite the previous call's outputs (it reuses their memory).
        # Without this, CUDA graph trees cannot tell a new inference step from a second call in the same one.
        torch.compiler.cudagraph_mark_step_begin()
        return graphed(x)

    return forward


_liger: dict = {}  # the resolved layer (or why none), looked up once per run: the Hub probe costs seconds


def build_liger(mlp: torch.nn.Module) -> Forward:
    from common.mlp.liger import build_liger_geglu_mlp, require_runnable

    hidden, dim = mlp.gate_proj.weight.shape
    if "error" in _liger:
        raise _liger["error"]
    if "resolved" not in _liger:
        try:
            layer, _liger["resolved"] = build_liger_geglu_mlp(dim, hidden)
        except UsageError as err:
            _liger["error"] = err
            raise
        console.print(f"[dim]{escape(_liger['resolved'].describe())}[/dim]", soft_wrap=True)
    else:
        layer = _liger["resolved"].build(dim, hidden)
    require_runnable(_liger["resolved"], mlp.gate_proj.weight.device)
    layer.load_state_dict(mlp.state_dict())  # strict: the same three weights, nothing else
    weight = mlp.gate_proj.weight
    return layer.to(weight.device, weight.dtype)


def build_fused(mlp: torch.nn.Module) -> Forward:
    from common.mlp.fused import FusedGeGLUMLP

    return FusedGeGLUMLP.from_module(mlp)


def parse_variants(text: str, variants: dict[str, Variant]) -> list[str]:
    """`compile,liger` or `all` (for an argparse type); eager joins first, as the baseline of every speedup."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(variants)
    unknown = [n for n in names if n not in variants]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown variant {unknown[0] if unknown else text!r}: use 'all' or some of {', '.join(variants)}"
        )
    names = list(dict.fromkeys(names))
    return names if "eager" in names else ["eager", *names]
