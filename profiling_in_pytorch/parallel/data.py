"""Data parallel: every rank trains the whole model on its own batch, and the gradients are summed over the ranks.

    ddp    DistributedDataParallel: a full copy of the weights on every rank; the backward's gradients go into
           buckets (`--bucket_mb`), and each bucket is all-reduced as soon as its last gradient is written,
           while the backward goes on with the layers before it
    fsdp   FSDP2, `fully_shard` on each repeated layer (a unit) and on the root: each rank keeps 1/N of every
           weight; a unit's weights are all-gathered before its forward (and again before its backward, unless
           `reshard_after_forward=False` kept them), its gradients reduce-scattered after its backward

What lesson 09 builds and times: the models (the post's MLP stacked with residuals, or a transformers preset built
from its config), the strategy's wrapping, the collectives the strategy should issue per step (the guess before
the profile), and one training step on one GPU against N.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rich.table import Table

from trace_report.files import writable_dir, writable_file, write_atomically
from profiling_in_pytorch.device import describe_device, dtype_name
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.parallel.timing import CPU_CALLS, GPU_CALLS, timed

STRATEGIES = ("ddp", "fsdp")
MLP = "mlp"


class StackedGeGLUMLP(nn.Module):
    """The post's MLP, `layers` times, each with a residual connection: x = x + mlp(x). Each layer is an FSDP unit."""

    def __init__(self, dim: int, hidden: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(SimpleGeGLUMLP(dim, hidden) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


@dataclass
class Workload:
    """A model and one training batch for it: `loss()` runs the forward and the loss."""

    model: nn.Module
    loss: Callable[[nn.Module], torch.Tensor]
    tokens: int  # per rank and step
    what: str


def model_flag(text: str) -> str:
    """`--model`: the stacked MLP or a transformers preset (lessons 09 and 11)."""
    from profiling_in_pytorch.model.presets import PRESETS

    if text != MLP and text not in PRESETS:
        raise argparse.ArgumentTypeError(f"unknown model {text!r}: use {MLP} or a preset ({', '.join(PRESETS)})")
    return text


def mlp_workload(batch: int, seq: int, dim: int, hidden: int, layers: int, device, dtype, *,
                 batch_seed: int = 0) -> Workload:
    """The stacked MLP (weights from the current seed) and a random batch with a random target, drawn from
    `batch_seed` (each rank its own): the loss is the MSE, as in lesson 06."""
    model = StackedGeGLUMLP(dim, hidden, layers).to(device, dtype)
    torch.manual_seed(batch_seed)
    x = torch.randn(batch, seq, dim, device=device, dtype=dtype)
    target = torch.randn(batch, seq, dim, device=device, dtype=dtype)
    what = f"the post's MLP ×{layers} with residuals, {dim}→{hidden}"
    return Workload(model, lambda m: F.mse_loss(m(x), target), batch * seq, what)


def preset_workload(name: str, batch: int, seq: int, device, dtype, *, batch_seed: int = 0) -> Workload:
    """A transformers preset built from its config (random weights from the current seed, nothing downloaded), on
    random tokens drawn from `batch_seed` that are also its labels: the model computes its own loss."""
    from profiling_in_pytorch.model.load import build_transformers, loss_of, token_inputs, transformers_config

    config, _, what = transformers_config(name)
    model = build_transformers(name, config, device, dtype, pretrained=False)
    torch.manual_seed(batch_seed)
    inputs = token_inputs(config, batch, seq, device, train=True)
    return Workload(model, lambda m: loss_of(m(**inputs)), batch * seq, what)


def units(model: nn.Module) -> list[nn.Module]:
    """The model's repeated layers (its longest ModuleList): FSDP2's units, one all-gather and one reduce-scatter each."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
    return list(max(lists, key=len)) if lists else []


def root_keeps_parameters(model: nn.Module) -> bool:
    """Whether parameters stay with the root unit once the layers are units of their own (embeddings, norm, head)."""
    inside = {id(p) for unit in units(model) for p in unit.parameters()}
    return any(id(p) not in inside for p in model.parameters())


def wrap(model: nn.Module, strategy: str, ranks, *, bucket_mb: float, reshard_after_forward: bool = True) -> nn.Module:
    """The model under DDP (gradient buckets of `bucket_mb` MB) or FSDP2 (each repeated layer a unit, then the root)."""
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [ranks.local_rank] if ranks.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=bucket_mb)
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for unit in units(model):
            fully_shard(unit, reshard_after_forward=reshard_after_forward)
        fully_shard(model)
        return model
    raise ValueError(f"unknown strategy {strategy!r}")


def ddp_buckets(model: nn.Module) -> list[int] | None:
    """The bytes of each of DDP's gradient buckets as its reducer holds them now (after the first backward rebuilt
    them in the order the gradients came); None where this torch does not say."""
    reducer = getattr(model, "reducer", None)
    buckets = getattr(reducer, "_get_zeros_like_grad_buckets", None)
    if buckets is None:
        return None
    return [b.buffer().numel() * b.buffer().element_size() for b in buckets()]


def fsdp_collectives(model: nn.Module, reshard_after_forward: bool = True) -> dict[str, int]:
    """What FSDP2 issues per training step: an all-gather per unit before its forward and, once resharded, again
    before its backward; a reduce-scatter per unit after its backward. The root keeps its parameters gathered from
    its forward to its backward (FSDP2 does not reshard the root)."""
    layers, root = len(units(model)), int(root_keeps_parameters(model))
    return {"AllGather": layers * (2 if reshard_after_forward else 1) + root, "ReduceScatter": layers + root}


def training_step(model: nn.Module, loss_fn: Callable, optimizer) -> Callable[[], None]:
    """One step as the lesson profiles it, without its labels: fresh gradients, forward and loss, backward, AdamW."""

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model).backward()
        optimizer.step()

    return step




# --- one GPU against N: the scaling efficiency --------------------------------------------------------------

SCALING_GOAL = 0.9  # the stacked 7B-shaped MLP (16×512 tokens, 4096→11008), bf16, on 2 and 4 GPUs: ≥ 90% of N × one
GOAL_SIZES = (16, 512, 4096, 11008)


@dataclass
class ScalingRow:
    name: str
    us: float  # per training step, the slowest rank's, median over calls
    world: int  # the ranks working together (1 for one GPU)
    tokens: int  # per rank and step

    def tokens_per_s(self) -> float:
        return self.world * self.tokens / self.us * 1e6


def bench(build: Callable[[], Workload], strategies: Sequence[str], ranks, *, bucket_mb: float,
          reshard_after_forward: bool = True) -> list[ScalingRow]:
    """One training step on one GPU (each rank trains its own whole model, alone: no collective), then under each
    strategy on all ranks, timed in this run. Each rank trains on its own batch of the same size (weak scaling):
    N ranks do N × the tokens of one GPU per step, so the scaling efficiency is one GPU's step time over theirs."""
    rows = []
    for name in ("one", *strategies):
        work = build()
        model = work.model if name == "one" else wrap(work.model, name, ranks, bucket_mb=bucket_mb,
                                                     reshard_after_forward=reshard_after_forward)
        optimizer = torch.optim.AdamW(model.parameters())
        us = timed(training_step(model, work.loss, optimizer), ranks.device)[0]
        one = "1 GPU" if ranks.device.type == "cuda" else "1 process"
        label = one if name == "one" else {"ddp": "DDP", "fsdp": "FSDP2"}[name] + f", {ranks.world} ranks"
        rows.append(ScalingRow(label, us, 1 if name == "one" else ranks.world, work.tokens))
        del model, optimizer, work
        if ranks.device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def scaling_table(rows: Sequence[ScalingRow], title: str) -> Table:
    """µs per step, tokens/s over all ranks, the scaling efficiency and the share of the step one GPU does not spend."""
    out = Table(title=title)
    names = scaling_headers()
    out.add_column(names[0], no_wrap=True)
    for name in names[1:]:
        out.add_column(name, justify="right", overflow="fold")
    for row in rows:
        out.add_row(*_scaling_cells(row, rows[0]))
    return out


def scaling_headers() -> list[str]:
    return ["strategy", "µs per step", "tokens/s, all ranks", "scaling efficiency", "exposed comm. share"]


def _scaling_cells(row: ScalingRow, one: ScalingRow) -> list[str]:
    if row is one:
        return [row.name, f"{row.us:,.1f}", f"{row.tokens_per_s():,.0f}", "-", "-"]
    efficiency = row.tokens_per_s() / (row.world * one.tokens_per_s())
    return [row.name, f"{row.us:,.1f}", f"{row.tokens_per_s():,.0f}", f"{efficiency:.0%}",
            f"{max(0.0, 1 - one.us / row.us):.0%}"]


def scaling_markdown(rows: Sequence[ScalingRow], title: str) -> str:
    lines = [f"{title}\n", "| " + " | ".join(scaling_headers()) + " |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += ["| " + " | ".join(_scaling_cells(row, rows[0])) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def goal_lines(rows: Sequence[ScalingRow]) -> list[str]:
    """The scaling goal for each strategy: reported, never asserted."""
    one = rows[0]
    out = []
    for row in rows[1:]:
        efficiency = row.tokens_per_s() / (row.world * one.tokens_per_s())
        verdict = "reached" if efficiency >= SCALING_GOAL else "not reached"
        out.append(f"goal: {row.name} at ≥ {SCALING_GOAL:.0%} scaling efficiency; here {efficiency:.1%}: {verdict}")
    return out


def bench_and_report(script: str, args, ranks, console, build: Callable[[], Workload], tag: Sequence, what: str,
                     dtype: torch.dtype) -> None:
    """Time one GPU's training step and each of `args.strategy` on all ranks; rank 0 prints the table (and the
    scaling goal at the 7B-shaped MLP) and writes it in Markdown beside the traces, `<tag>_dp<N>_bench[...].md`."""
    device = ranks.device
    parts = [*tag, f"dp{ranks.world}", "bench"] + ([dtype_name(dtype)] if dtype != torch.bfloat16 else [])
    parts += [device.type] if device.type != "cuda" else []
    folder = writable_dir(Path(args.trace_dir) / Path(script).stem, "traces")
    path = writable_file(folder / ("_".join(map(str, parts)) + ".md"), "the timings")
    with console.status("timing one GPU's training step, then each strategy's"):
        rows = bench(build, args.strategy, ranks, bucket_mb=args.bucket_mb,
                     reshard_after_forward=not args.no_reshard)
    if not ranks.leader:
        return
    calls = GPU_CALLS if device.type == "cuda" else CPU_CALLS
    title = (f"training step, {what}, {rows[0].tokens} tokens per rank, {ranks.world} ranks ({ranks.backend}), "
             f"{dtype_name(dtype)}, {describe_device(device)}: the slowest rank, median of {calls} steps")
    console.print()
    console.print(scaling_table(rows, title))
    console.print("  scaling efficiency: tokens/s on N ranks ÷ (N × one GPU's); exposed comm. share: 1 − one GPU's "
                  "step ÷ this step, the part of the step that one GPU does not spend: communication nothing hid, and "
                  "the wrapper's own work (an upper bound; the traces' exposed µs say which)", soft_wrap=True)
    sizes = (args.batch, args.seq, args.dim, args.hidden)
    if args.model == MLP and sizes == GOAL_SIZES and device.type == "cuda" and dtype == torch.bfloat16:
        for line in goal_lines(rows):
            console.print(line)
    write_atomically(path, scaling_markdown(rows, title))
    console.print(f"timings: {path}")
