"""What a variant is, and the builders `benchmark_mlp.py`'s registry names: each turns the eager module into a forward.

Every builder starts from the eager `SimpleGeGLUMLP`, so that all variants hold its weights.
"""

from __future__ import annotations

import argparse
import logging
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from rich.markup import escape

from profiling_in_pytorch.bench.output import console
from trace_report.errors import UsageError

Forward = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[torch.nn.Module], Forward]
    # Why it cannot run here (device, dtype), or None when it can.
    unavailable: Callable[[torch.device, torch.dtype], "str | None"] = lambda device, dtype: None
    compiles: bool = False  # through torch.compile: start from a clean Dynamo cache
    per_call: str = ""  # what runs on the CPU at every call, besides launching kernels
    inference_only: str | None = None  # why it is not measured in training mode (--train), when it is not
    tolerance: float | None = None  # its own bound against fp32 (FP8), instead of the dtype's
    fp8: bool = False  # its GEMMs run in FP8: its share of the GEMM rate is of the FP8 ceiling


def needs_cuda(why: str):
    return lambda device, dtype: None if device.type == "cuda" else f"needs CUDA ({why})"


def needs_cuda_in_half(device: torch.device, dtype: torch.dtype) -> str | None:
    if device.type != "cuda":
        return "needs CUDA (a Triton GPU kernel)"
    return None if dtype in (torch.bfloat16, torch.float16) else "runs in bf16 or fp16 only"


class IgnoredChoiceFilter(logging.Filter):
    """Drops Inductor's records of autotuning choices it skips because they do not fit the GPU.

    max-autotune compiles every GEMM template in its list; on an H200 a few need more shared memory than the SM
    has, and `torch._inductor.select_algorithm` logs each one it ignores as an ERROR ("Runtime error during
    autotuning: No valid triton configs. OutOfResources: out of resource ... Ignoring this choice."), or an
    OutOfResources exception as a WARNING. The winner comes from the choices that fit; every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if type(record.msg).__name__ == "OutOfResources":
            return False
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record we cannot format is not ours to judge
            return True
        # "Runtime error during autotuning: ... Ignoring this choice." and, from its precompile threads (torch
        # 2.11 on an H200), "Exception No valid triton configs. OutOfMemoryError: out of resource ... for
        # benchmark choice ..." with a traceback: both about a template that does not fit.
        return not ("out of resource" in text.lower() and ("Ignoring this choice" in text or "No valid triton configs" in text))


INDUCTOR_AUTOTUNE_LOGGER = "torch._inductor.select_algorithm"
_ignored_choices = IgnoredChoiceFilter()


def quiet_compiler(device: torch.device) -> None:
    """Keep a successful run's stderr for our own lines: what Inductor prints while it compiles, and we report.

    - the AUTOTUNE tables (each GEMM's candidate timings, written straight to stderr), its "PRESCREENING
      CANDIDATE TIMINGS" and "Autotune Choices Stats" JSON: the choice shows in the kernel names and the time
      in our table;
    - the choices it ignores because they do not fit the GPU (`IgnoredChoiceFilter`);
    - "TypedStorage is deprecated", a UserWarning from code inside the compile stack, not from ours;
    - on a CPU, the "No CUDA runtime is found" line a CUDA build of torch gives once per compile (the run's
      first line says it runs on the CPU), as the lessons do.

    Anything else Inductor logs or warns still reaches stderr.
    """
    import torch._inductor.config as inductor_config

    if hasattr(inductor_config, "autotune_num_choices_displayed"):  # torch >= 2.3
        inductor_config.autotune_num_choices_displayed = 0
    if hasattr(inductor_config, "max_autotune_report_choices_stats"):  # "Autotune Choices Stats:" + JSON
        inductor_config.max_autotune_report_choices_stats = False
    logger = logging.getLogger(INDUCTOR_AUTOTUNE_LOGGER)
    if _ignored_choices not in logger.filters:
        logger.addFilter(_ignored_choices)
    warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
    if device.type == "cpu":
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)


def build_compiled(mode: str | None) -> Callable[[torch.nn.Module], Forward]:
    def build(mlp: torch.nn.Module) -> Forward:
        quiet_compiler(mlp.gate_proj.weight.device)
        # dynamic=False: one static graph per shape, as a served model's fixed decode and prefill shapes get.
        return torch.compile(mlp, mode=mode, dynamic=False)

    return build


def build_cuda_graphed(mlp: torch.nn.Module) -> Forward:
    """torch.compile(mode="reduce-overhead"), a new CUDA graph trees step at every call (profiling_in_pytorch/mlp/graphs.py)."""
    from profiling_in_pytorch.mlp.graphs import compiled_with_cuda_graphs

    quiet_compiler(mlp.gate_proj.weight.device)
    return compiled_with_cuda_graphs(mlp)


# A captured graph replays what it recorded under torch.no_grad(): an inference forward, nothing for a backward.
CAPTURED_INFERENCE_ONLY = "forward only (a captured graph replays an inference forward)"


def build_captured(mlp: torch.nn.Module) -> Forward:
    """The eager module in a CUDA graph captured by hand (torch.cuda.CUDAGraph), for the first call's shape: that
    call warms up and captures, every later one copies its input into the graph's buffer and replays."""
    from profiling_in_pytorch.mlp.graphs import captured_on_first_call

    return captured_on_first_call(mlp)


def build_fused_captured(mlp: torch.nn.Module) -> Forward:
    """FusedGeGLUMLP in a CUDA graph: its warm-up compiles and tunes the Triton kernel before the capture."""
    from profiling_in_pytorch.mlp.graphs import captured_on_first_call

    return captured_on_first_call(build_fused(mlp))


_liger: dict = {}  # the resolved layer (or why none), looked up once per run: the Hub probe costs seconds


def build_liger(mlp: torch.nn.Module) -> Forward:
    from profiling_in_pytorch.mlp.liger import require_runnable, resolve_liger_geglu_mlp

    hidden, dim = mlp.gate_proj.weight.shape
    if "error" in _liger:
        raise _liger["error"]
    if "resolved" not in _liger:
        try:
            _liger["resolved"] = resolve_liger_geglu_mlp()
        except UsageError as err:
            _liger["error"] = err
            raise
        console.print(f"[dim]{escape(_liger['resolved'].describe())}[/dim]", soft_wrap=True)
    require_runnable(_liger["resolved"], mlp.gate_proj.weight.device)
    layer = _liger["resolved"].build_holding(mlp, dim, hidden)
    weight = mlp.gate_proj.weight
    return layer.to(weight.device, weight.dtype)


def build_fused(mlp: torch.nn.Module) -> Forward:
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    return FusedGeGLUMLP.from_module(mlp)


def build_fp8(recipe: str, compiled: bool = False) -> Callable[[torch.nn.Module], Forward]:
    """An FP8 recipe of lesson 10 (profiling_in_pytorch/lesson/fp8.py's RECIPES) from the eager module's weights,
    torch.compile'd (default mode) when `compiled`."""

    def build(mlp: torch.nn.Module) -> Forward:
        from profiling_in_pytorch.lesson.fp8 import build as build_recipe

        module = build_recipe(recipe, mlp)
        if not compiled:
            return module
        quiet_compiler(mlp.gate_proj.weight.device)
        return torch.compile(module, dynamic=False)

    return build


def needs_fp8(fused: bool = False):
    """FP8 tensor cores (sm_89+), bf16 in and out; our fused kernels also Hopper's TMA."""

    def unavailable(device: torch.device, dtype: torch.dtype) -> str | None:
        from profiling_in_pytorch.mlp.fp8 import fp8_unavailable

        if device.type != "cuda":
            return "needs CUDA (FP8 GEMMs)"
        return fp8_unavailable(device, fused=fused) or (None if dtype == torch.bfloat16 else "runs in bf16 only")

    return unavailable


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
