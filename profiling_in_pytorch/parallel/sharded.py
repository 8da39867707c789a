"""The post's MLP split over the ranks: gate and up by columns, down by rows, one all-reduce. Four ways to run it.

Each rank keeps hidden/N of the hidden features: rows r·hidden/N … (r+1)·hidden/N of gate_proj's and up_proj's
weights (each rank computes its slice of g, u, h and m: GELU and the product act feature by feature, so nothing is
exchanged) and the same columns of down_proj's weight (each rank's `m_r @ W_down[:, r]ᵀ` is a partial sum of y).
One all-reduce adds the N partial sums, and every rank holds y.

    dtensor           PyTorch's tensor-parallel API: `parallelize_module(mlp, mesh, tensor_parallel_plan())`
    dtensor-compile   the same under torch.compile
    plain             ShardedGeGLUMLP: plain tensors, and one `dist.all_reduce(y)`
    overlap           OverlappedGeGLUMLP: the tokens in chunks, chunk i's all-reduce running while chunk i+1 computes

plain and overlap can also be captured in a CUDA graph (`GraphedForward`), NCCL's all-reduce included.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from profiling_in_pytorch.errors import UsageError

VARIANTS = ("dtensor", "dtensor-compile", "plain", "overlap")
GRAPHABLE = ("plain", "overlap")
DEFAULT_CHUNKS = 4


def shard(total: int, rank: int, world: int) -> slice:
    """This rank's contiguous share of `total` features, total/world of them (world divides total)."""
    size = total // world
    return slice(rank * size, (rank + 1) * size)


def require_shardable(hidden: int, world: int, tokens: int, chunks: int) -> None:
    """One line (exit 2) for sizes the split cannot take: hidden features in equal shares, a token per chunk."""
    if hidden % world:
        raise UsageError(f"--hidden {hidden} does not split into {world} equal shares: give a multiple of {world}")
    if chunks > tokens:
        raise UsageError(f"--chunks {chunks} is more chunks than the {tokens} tokens (batch × seq) to split")


class ShardedGeGLUMLP(nn.Module):
    """One rank's part of the post's MLP with plain tensors: its rows of gate_proj and up_proj (column-parallel),
    the same columns of down_proj (row-parallel), and one all-reduce of y."""

    def __init__(self, dim, hidden_here, group=None, device=None, dtype=None):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden_here, bias=False, device=device, dtype=dtype)
        self.up_proj = nn.Linear(dim, hidden_here, bias=False, device=device, dtype=dtype)
        self.down_proj = nn.Linear(hidden_here, dim, bias=False, device=device, dtype=dtype)
        self.group = group

    @classmethod
    def from_module(cls, module: nn.Module, rank: int, world: int, **kwargs) -> "ShardedGeGLUMLP":
        """Rank `rank`'s part of `module` (the post's SimpleGeGLUMLP, the same on every rank): its weights, sliced."""
        hidden, dim = module.gate_proj.weight.shape
        features = shard(hidden, rank, world)
        weight = module.gate_proj.weight
        part = cls(dim, features.stop - features.start, device=weight.device, dtype=weight.dtype, **kwargs)
        with torch.no_grad():
            part.gate_proj.weight.copy_(module.gate_proj.weight[features])
            part.up_proj.weight.copy_(module.up_proj.weight[features])
            part.down_proj.weight.copy_(module.down_proj.weight[:, features])
        return part.eval().requires_grad_(False)

    def forward(self, x):
        g = self.gate_proj(x)
        u = self.up_proj(x)
        h = F.gelu(g, approximate="tanh")
        m = h * u
        y = self.down_proj(m)  # this rank's partial sum: its hidden features' share of every output
        dist.all_reduce(y, group=self.group)  # y summed over the ranks, in place, on every rank
        return y


class OverlappedGeGLUMLP(ShardedGeGLUMLP):
    """The same part over the tokens in `chunks` pieces: each chunk's all-reduce starts once its down_proj is done
    and runs while the next chunk computes (async_op=True: NCCL runs it on its own stream, gloo on its own thread);
    the forward waits for them all at the end. Only the last chunk's all-reduce has no compute left to hide behind."""

    def __init__(self, dim, hidden_here, group=None, device=None, dtype=None, chunks=DEFAULT_CHUNKS):
        super().__init__(dim, hidden_here, group, device, dtype)
        self.chunks = chunks

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        y = tokens.new_empty(tokens.shape[0], self.down_proj.out_features)
        bounds = [len(tokens) * i // self.chunks for i in range(self.chunks + 1)]
        pending = []
        for start, end in zip(bounds, bounds[1:]):
            g = self.gate_proj(tokens[start:end])
            u = self.up_proj(tokens[start:end])
            h = F.gelu(g, approximate="tanh")
            m = h * u
            torch.mm(m, self.down_proj.weight.t(), out=y[start:end])  # this chunk's partial sums, in place in y
            pending.append(dist.all_reduce(y[start:end], group=self.group, async_op=True))  # beside the next chunk
        for work in pending:
            work.wait()  # on a GPU the compute stream waits for NCCL's, the CPU does not
        return y.view(*x.shape[:-1], y.shape[-1])


def tensor_parallel_plan() -> dict:
    """DTensor's plan for the post's module: which Linear splits how (fresh objects: a plan is applied once)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(), "down_proj": RowwiseParallel()}


class DTensorGeGLUMLP(nn.Module):
    """The post's module after `parallelize_module`: its weights become DTensors sharded over the mesh, and DTensor
    turns x into a replicated DTensor, runs each Linear on the local shards and all-reduces down_proj's output."""

    def __init__(self, module: nn.Module, mesh):
        super().__init__()
        from torch.distributed.tensor.parallel import parallelize_module

        self.mlp = parallelize_module(copy.deepcopy(module), mesh, tensor_parallel_plan())

    def forward(self, x):
        from torch.distributed._functional_collectives import AsyncCollectiveTensor

        y = self.mlp(x)
        # RowwiseParallel returns y with its all-reduce still pending (an AsyncCollectiveTensor waits at y's first
        # use); the next layer of a model would wait there, so the forward waits here, inside its own step.
        return y.wait() if isinstance(y, AsyncCollectiveTensor) else y


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
          cuda_graph: bool = False):
    """This rank's `variant` of `reference` (the post's module, the same on every rank), ready to call on x."""
    if variant in ("dtensor", "dtensor-compile"):
        model = DTensorGeGLUMLP(reference, ranks.mesh)
        return torch.compile(model) if variant == "dtensor-compile" else model
    if variant == "plain":
        model = ShardedGeGLUMLP.from_module(reference, ranks.rank, ranks.world)
    elif variant == "overlap":
        model = OverlappedGeGLUMLP.from_module(reference, ranks.rank, ranks.world, chunks=chunks)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return GraphedForward(model, x) if cuda_graph else model


def describe(variant: str, chunks: int = DEFAULT_CHUNKS, cuda_graph: bool = False) -> str:
    """A variant's name in a table or a check's line."""
    name = {
        "dtensor": "DTensor",
        "dtensor-compile": "DTensor, compiled",
        "plain": "plain + all_reduce",
        "overlap": f"overlap, {chunks} chunks",
    }[variant]
    return name + (", CUDA graph" if cuda_graph else "")
