"""Lesson 08's variants by name, in one place: which there are, which a CUDA graph can capture, which split the tokens,
which need GPUs; building one on this rank, and its name in a table.

The modules themselves are in `sharded.py` (eight of them) and `copy_engine.py` (overlap-ce, built on sharded's
plain module): this registry imports both, and neither imports it.
"""

from __future__ import annotations

import torch
from torch import nn

from profiling_in_pytorch.parallel.copy_engine import CopyEngineGeGLUMLP
from profiling_in_pytorch.parallel.sharded import (DEFAULT_CHUNKS, AsyncTensorParallelGeGLUMLP, DTensorGeGLUMLP,
                                                   FunctionalSequenceParallelGeGLUMLP, OneShotGeGLUMLP,
                                                   OverlappedGeGLUMLP, SequenceParallelGeGLUMLP, ShardedGeGLUMLP,
                                                   enable_symmetric_memory, shard)
from trace_report.errors import UsageError

VARIANTS = ("dtensor", "dtensor-compile", "plain", "one-shot", "overlap", "overlap-ce", "seqpar", "async-tp",
            "async-tp-compile")
GRAPHABLE = ("plain", "one-shot", "overlap", "overlap-ce", "seqpar", "async-tp")
SEQUENCE_SHARDED = ("seqpar", "async-tp", "async-tp-compile")  # x and y split by tokens over the ranks
GPU_ONLY = ("one-shot", "overlap-ce", "async-tp", "async-tp-compile")
TOKEN_BLOCKS = SEQUENCE_SHARDED + ("overlap-ce",)  # the tokens in equal shares over the ranks
COMPILED = ("dtensor-compile", "async-tp-compile")


def require_shardable(hidden: int, world: int, tokens: int, chunks: int, variants=()) -> None:
    """One line (exit 2) for sizes the split cannot take: hidden features in equal shares, a token per chunk, and
    for the sequence-parallel variants the tokens in equal shares."""
    if hidden % world:
        raise UsageError(f"--hidden {hidden} does not split into {world} equal shares: give a multiple of {world}")
    if chunks > tokens:
        raise UsageError(f"--chunks {chunks} is more chunks than the {tokens} tokens (batch × seq) to split")
    split = [v for v in variants if v in TOKEN_BLOCKS]
    if split and tokens % world:
        raise UsageError(f"--variant {split[0]} gives each rank tokens/{world} of the {tokens} tokens (batch × seq): "
                         f"give a multiple of {world}")
    if "overlap-ce" in variants and tokens // world < chunks:
        raise UsageError(f"--chunks {chunks} cuts each rank's {tokens // world} tokens of overlap-ce into more pieces "
                         "than rows")


def wanted_rows(y: torch.Tensor, variant: str, rank: int, world: int) -> torch.Tensor:
    """What `variant` returns on this rank, cut from the single-process module's output `y`: all of it, or for the
    sequence-parallel variants this rank's token slice, [tokens/N, dim]."""
    if variant not in SEQUENCE_SHARDED:
        return y
    return y.reshape(-1, y.shape[-1])[shard(y.numel() // y.shape[-1], rank, world)]


class TokenSlice(nn.Module):
    """The single-process module, returning only `rank`'s token slice of its output: what a sequence-parallel
    variant's output is checked against."""

    def __init__(self, module: nn.Module, variant: str, rank: int, world: int):
        super().__init__()
        self.module, self.variant, self.rank, self.world = module, variant, rank, world

    def forward(self, x):
        return wanted_rows(self.module(x), self.variant, self.rank, self.world)


class GraphedForward:
    """A forward captured once in a CUDA graph and replayed: one cudaGraphLaunch per call for all its kernels,
    NCCL's all-reduce among them (NCCL collectives can be captured). `x` becomes the graph's input: a call on it
    copies nothing (another tensor is copied into it first), and every call returns the same output tensor."""

    def __init__(self, module, x: torch.Tensor, warmup: int = 3):
        self.module = module
        self.x = x
        # Warm up on a side stream, as torch.cuda.graphs asks: NCCL's communicator, cuBLAS's workspace and the
        # allocator's blocks exist before the capture.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(warmup):
                module(self.x)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread may query its events during the capture, which "global" forbids.
        with torch.no_grad(), torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self.y = module(self.x)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.data_ptr() != self.x.data_ptr():
            self.x.copy_(x)
        self.graph.replay()
        return self.y


def build(variant: str, reference: nn.Module, x: torch.Tensor, ranks, *, chunks: int = DEFAULT_CHUNKS,
          cuda_graph: bool = False, sm_carveout: int | None = None):
    """This rank's `variant` of `reference` (the post's module, the same on every rank), ready to call on x;
    `sm_carveout` (overlap): the GEMMs beside an all-reduce leave that many SMs to it."""
    if variant in ("dtensor", "dtensor-compile"):
        model = DTensorGeGLUMLP(reference, ranks.mesh)
        return torch.compile(model) if variant == "dtensor-compile" else model
    if variant == "plain":
        model = ShardedGeGLUMLP.from_module(reference, ranks.rank, ranks.world)
    elif variant == "one-shot":
        model = OneShotGeGLUMLP.from_module(reference, ranks.rank, ranks.world).join(x)
    elif variant == "overlap":
        model = OverlappedGeGLUMLP.from_module(reference, ranks.rank, ranks.world, chunks=chunks,
                                               sm_carveout=sm_carveout)
    elif variant == "overlap-ce":
        model = CopyEngineGeGLUMLP.from_module(reference, ranks.rank, ranks.world, chunks=chunks).join(x)
    elif variant == "seqpar":
        model = SequenceParallelGeGLUMLP.from_module(reference, ranks.rank, ranks.world)
    elif variant == "async-tp":
        model = AsyncTensorParallelGeGLUMLP.from_module(reference, ranks.rank, ranks.world).join(None, x)
    elif variant == "async-tp-compile":
        import warnings

        enable_symmetric_memory()  # the pass fuses only for a group with symmetric memory
        # torch 2.11's pass, having fused a matmul, asks FX to erase it again: a UserWarning per matmul, no harm
        warnings.filterwarnings("ignore", message=r"erase_node\(.*\) on an already erased node")
        model = FunctionalSequenceParallelGeGLUMLP.from_module(reference, ranks.rank, ranks.world)
        return torch.compile(model, options={"_micro_pipeline_tp": True})
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return GraphedForward(model, x) if cuda_graph else model


def describe(variant: str, chunks: int = DEFAULT_CHUNKS, cuda_graph: bool = False,
             sm_carveout: int | None = None) -> str:
    """A variant's name in a table or a check's line."""
    name = {
        "dtensor": "DTensor",
        "dtensor-compile": "DTensor, compiled",
        "plain": "plain + all_reduce",
        "one-shot": "plain + one-shot all-reduce",
        "overlap": f"overlap, {chunks} chunk{'s' if chunks != 1 else ''}",
        "overlap-ce": f"overlap, copy engine, {chunks} piece{'s' if chunks != 1 else ''}",
        "seqpar": "seq-parallel AG + RS",
        "async-tp": "async-TP (symm. memory)",
        "async-tp-compile": "async-TP, compiled",
    }[variant]
    carved = f", GEMMs -{sm_carveout} SMs" if sm_carveout and variant == "overlap" else ""
    return name + carved + (", CUDA graph" if cuda_graph else "")
