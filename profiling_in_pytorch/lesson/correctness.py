"""Before profiling: does the module compute what the post's module does? Its output, its gradients, and what its
forward keeps for the backward, each in one line (✓ or ✗); the lesson exits 1 if not."""

from __future__ import annotations

import math

import torch
from rich.markup import escape

from trace_report.errors import readable_bytes
from profiling_in_pytorch.device import dtype_name
from profiling_in_pytorch.lesson.terminal import console
from profiling_in_pytorch.mlp.accuracy import check_backward, fp32_reference
from profiling_in_pytorch.mlp.accuracy import check_output as check_output_against


def check_output(name: str, module, reference, x) -> bool:
    """Before profiling: does `module` compute what the post's module does? One line; the lesson exits 1 if not.

    Both are judged by the project's one rule (profiling_in_pytorch.mlp.accuracy): relative error against `reference` run in
    fp32 on the same input. The post's module in the run's dtype is printed beside it: neither is the truth, and
    a fast kernel that computes something else is the first thing to rule out before reading its trace.
    """
    want = fp32_reference(reference, x)
    with torch.no_grad():
        ours, eager = check_output_against(module(x), want, x.dtype), check_output_against(reference(x), want, x.dtype)
    console.print(
        f"output check against fp32: {name} {ours.describe()}; {type(reference).__name__} ({dtype_name(x.dtype)}) "
        f"relative error {eager.error:.1e} {'[green]✓[/green]' if ours.ok else '[red]✗[/red]'}",
        soft_wrap=True,
    )
    return ours.ok


def check_training(name: str, module, reference, x, dy) -> bool:
    """Before profiling a training step: do `module`'s output and gradients match the post's module's? One line
    (the worst error among them, then each); the lesson exits 1 if not.

    The project's one rule (profiling_in_pytorch.mlp.accuracy.check_backward), on the output, the input's gradient and each
    weight's gradient, all from one backward of `dy`; the post's module in the run's dtype is printed beside it.
    """
    ours, eager = check_backward(module, reference, x, dy), check_backward(reference, reference, x, dy)
    ok = all(a.ok for a in ours.values())
    errors = " · ".join(f"{_grad_name(key)} {_error(a.error)}" for key, a in ours.items())
    tolerance = next(iter(ours.values())).tolerance
    console.print(
        f"output and gradient check against fp32: {name} worst {_error(max(a.error for a in ours.values()))} "
        f"(tolerance {tolerance:g}; {errors}); {type(reference).__name__} ({dtype_name(x.dtype)}) worst "
        f"{_error(max(a.error for a in eager.values()))} {'[green]✓[/green]' if ok else '[red]✗[/red]'}",
        soft_wrap=True,
    )
    for key, a in ours.items():
        if not a.ok:
            console.print(f"  {_grad_name(key)}: {a.describe()}", soft_wrap=True, markup=False)
    return ok


def _grad_name(key: str) -> str:
    return key if key == "output" else f"d{key}" if key == "x" else f"d {key}"


def _error(value: float) -> str:
    return f"{value:.1e}" if math.isfinite(value) else "inf"


def check_saved(name: str, saved, expected: str, why: str, allocated: int | None = None) -> bool:
    """What a forward keeps for its backward (profiling_in_pytorch.mlp.saved.SavedForBackward), against what the module's code
    says it keeps: ✓ or ✗ in the style of the trace's checks, then what was counted. Returns whether it matched.

    expected: `saved.describe()`'s form, `x [8192, 768] + 4 × [8192, 3072]`; why: which tensors those are.
    allocated: on a GPU, what the caching allocator gained over the forward, its output left out; it should be
    the saved tensors other than x (which existed before), give or take the allocator's rounding.
    """
    seen = saved.describe()
    ok = seen == expected
    console.print("\n[bold]What the forward keeps for the backward[/bold] (saved-tensor hooks; weights left out)")
    console.print(f"  {'[green]✓[/green]' if ok else '[red]✗[/red]'} {escape(name)}: {escape(expected)} ({escape(why)})", soft_wrap=True)
    console.print(f"      saved: {escape(seen)} = {readable_bytes(saved.activation_bytes)}", soft_wrap=True)
    if allocated is not None:
        besides_x = sum(t.nbytes for t in saved.of_kind("activation"))
        console.print(
            f"      allocator: {readable_bytes(allocated)} more allocated after the forward, its output left out "
            f"(torch.cuda.memory_allocated); the saved tensors besides x: {readable_bytes(besides_x)}",
            soft_wrap=True,
        )
    return ok
