"""One rank's files: the lesson's trace name for a variant, with `_rank<r>` at the end.

    traces/08_tensor_parallel_mlp/64_128_768_3072_tp2_overlap4_eager_rank0.json

The tag names the world size, the variant (with its chunk count for `overlap` and `overlap-ce`), `carve<N>` for
overlap's SM carveout, `nccl<N>ch` for NCCL's channels, `graph` for a CUDA graph, then `eager` or `compile`, the
dtype and `_cpu` as every lesson's do; the rank comes last, so that one run's traces differ only there and
`trace-report RUN_rank0.json RUN_rank1.json` reads them as ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from profiling_in_pytorch import lesson
from trace_report.files import writable_file
from profiling_in_pytorch.parallel.variants import COMPILED, GRAPHABLE

RANK_SUFFIX = "_rank{rank}"


def variant_tag(args: argparse.Namespace, variant: str, world: int) -> list[Any]:
    """The parts of the file name before `eager|compile`: sizes, world size, variant and what changes its trace."""
    name = {"dtensor": "dtensor", "dtensor-compile": "dtensor", "plain": "plain", "one-shot": "oneshot",
            "overlap": f"overlap{args.chunks}", "overlap-ce": f"overlapce{args.chunks}", "seqpar": "seqpar",
            "async-tp": "asynctp", "async-tp-compile": "asynctp"}
    carve = getattr(args, "sm_carveout", None)
    carved = [f"carve{carve}"] if carve and variant == "overlap" else []
    channels = getattr(args, "nccl_channels", None)
    nccl = [f"nccl{channels}ch"] if channels else []
    graph = ["graph"] if args.cuda_graph else []
    return [args.batch, args.seq, args.dim, args.hidden, f"tp{world}", name[variant], *carved, *nccl, *graph]


def compiles(variant: str) -> bool:
    return variant in COMPILED


def rank_run(script: str, args: argparse.Namespace, variant: str, ranks, *, label: str,
             tag: list[Any] | None = None) -> lesson.Run:
    """lesson.setup for one variant on this rank: its files end in `_rank<r>`, proved writable now. `tag`: the file
    name's parts before `eager|compile` when they are not lesson 08's (variant_tag)."""
    flags = argparse.Namespace(**{**vars(args), "compile": compiles(variant)})
    run = lesson.setup(script, flags, label=label, tag=tag if tag is not None else variant_tag(args, variant, ranks.world))
    trace, table = (for_rank(path, ranks.rank) for path in (run.trace_path, run.table_path))
    writable_file(trace, "the trace")
    writable_file(table, "the op table")
    return dataclasses.replace(run, trace_path=trace, table_path=table)


def for_rank(path: Path, rank: int) -> Path:
    """`<tag>.json` -> `<tag>_rank<r>.json` (any suffix)."""
    return path.with_name(path.stem + RANK_SUFFIX.format(rank=rank) + path.suffix)


def every_rank(run: lesson.Run, rank: int, world: int) -> list[Path]:
    """The traces of this run on every rank, this rank's among them."""
    suffix = RANK_SUFFIX.format(rank=rank) + ".json"
    base = run.trace_path.name.removesuffix(suffix)
    return [run.trace_path.with_name(base + RANK_SUFFIX.format(rank=r) + ".json") for r in range(world)]


def other_variant(run: lesson.Run, script: str, args: argparse.Namespace, variant: str, ranks) -> Path:
    """Where this rank's trace of another variant, at the same sizes, dtype and device, is written."""
    flags = argparse.Namespace(**{**vars(args), "cuda_graph": args.cuda_graph and variant in GRAPHABLE})
    tag = variant_tag(flags, variant, ranks.world)
    return for_rank(lesson.trace_of(run, Path(script).stem, tag, compiled=compiles(variant)), ranks.rank)
