"""The post's MLP split over the ranks: gate and up by columns, down by rows, one all-reduce. Nine ways to run it.

Each rank keeps hidden/N of the hidden features: rows r·hidden/N … (r+1)·hidden/N of gate_proj's and up_proj's
weights (each rank computes its slice of g, u, h and m: GELU and the product act feature by feature, so nothing is
exchanged) and the same columns of down_proj's weight (each rank's `m_r @ W_down[:, r]ᵀ` is a partial sum of y).
One all-reduce adds the N partial sums, and every rank holds y.

    dtensor           PyTorch's tensor-parallel API: `parallelize_module(mlp, mesh, tensor_parallel_plan())`
    dtensor-compile   the same under torch.compile
    plain             ShardedGeGLUMLP: plain tensors, and one `dist.all_reduce(y)`
    one-shot          OneShotGeGLUMLP: plain's GEMMs, down_proj writing into symmetric memory, and the all-reduce
                      as one kernel that reads every peer's partial sums over NVLink and adds them (GPUs only)
    overlap           OverlappedGeGLUMLP: the tokens in chunks, chunk i's all-reduce running while chunk i+1 computes
    overlap-ce        CopyEngineGeGLUMLP (parallel/copy_engine.py): the all-reduce as a reduce-scatter and an
                      all-gather of copy-engine pulls from the peers' symmetric memory, each beside GEMMs of the same
                      forward (GPUs only)
    seqpar            SequenceParallelGeGLUMLP: Megatron's sequence parallelism, each rank holding its slice of the
                      tokens: all-gather x, the same GEMMs, reduce-scatter y (each rank keeps its tokens' rows of y)
    async-tp          AsyncTensorParallelGeGLUMLP: the same split through PyTorch's symmetric memory, the all-gather
                      inside gate/up's matmul and the reduce-scatter inside down's (torch.ops.symm_mem), pipelined
                      shard by shard with copy-engine transfers between the GPUs (GPUs only)
    async-tp-compile  FunctionalSequenceParallelGeGLUMLP under torch.compile with Inductor's micro-pipeline TP pass,
                      which finds all-gather → matmul and matmul → reduce-scatter and writes the same fused ops

This file holds the modules; `variants.py` names them (the variants by name, which a CUDA graph captures, which
split the tokens), builds one on a rank and says which rows of the single-process module's output it returns.
"""

from __future__ import annotations

import contextlib
import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

DEFAULT_CHUNKS = 4


def shard(total: int, rank: int, world: int) -> slice:
    """This rank's contiguous share of `total` features, total/world of them (world divides total)."""
    size = total // world
    return slice(rank * size, (rank + 1) * size)


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


class OneShotGeGLUMLP(ShardedGeGLUMLP):
    """plain's part with the all-reduce through symmetric memory: down_proj writes this rank's partial sums straight
    into a buffer every peer has mapped, and `torch.ops.symm_mem.one_shot_all_reduce` is one kernel on each rank that
    waits at a barrier for every peer's partial sums, reads them all over NVLink and adds them. At the post's shape
    the all-reduce is 12.6 MB, small enough that NCCL's ring (two passes, protocol and channel set-up) spends more
    on latency than on bytes; one pass of loads is the shortest path there. Reads, no NVLink multicast."""

    group_name = None

    def join(self, x: torch.Tensor) -> "OneShotGeGLUMLP":
        """The symmetric buffer for y's partial sums at x's token count, every rank together."""
        from torch.distributed import _symmetric_memory as symm_mem

        self.group_name = enable_symmetric_memory(self.group)
        rows = x.numel() // x.shape[-1]
        self.partial = symm_mem.empty(rows, self.down_proj.out_features, dtype=x.dtype, device=x.device)
        symm_mem.rendezvous(self.partial, self.group_name)
        return self

    def forward(self, x):
        g = self.gate_proj(x)
        u = self.up_proj(x)
        m = F.gelu(g, approximate="tanh") * u
        torch.mm(m.reshape(-1, m.shape[-1]), self.down_proj.weight.t(), out=self.partial)  # into symmetric memory
        y = torch.ops.symm_mem.one_shot_all_reduce(self.partial, "sum", self.group_name)
        return y.view(*x.shape[:-1], y.shape[-1])


class OverlappedGeGLUMLP(ShardedGeGLUMLP):
    """The same part over the tokens in `chunks` pieces: each chunk's all-reduce starts once its down_proj is done
    and runs while the next chunk computes (async_op=True: NCCL runs it on its own stream, gloo on its own thread);
    the forward waits for them all at the end. Only the last chunk's all-reduce has no compute left to hide behind.

    `sm_carveout`: the GEMMs that run while an all-reduce is in flight (gate and up of every chunk but the first)
    leave that many SMs free, so that NCCL's blocks do not push part of the GEMM's grid into a second wave (on 2
    H100s at the 7B shape that GEMM ran ~40 µs longer beside a 105 µs all-reduce; docs/tensor-parallel.md)."""

    def __init__(self, dim, hidden_here, group=None, device=None, dtype=None, chunks=DEFAULT_CHUNKS,
                 sm_carveout=None):
        super().__init__(dim, hidden_here, group, device, dtype)
        self.chunks, self.sm_carveout = chunks, sm_carveout

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        y = tokens.new_empty(tokens.shape[0], self.down_proj.out_features)
        bounds = [len(tokens) * i // self.chunks for i in range(self.chunks + 1)]
        pending = []
        for start, end in zip(bounds, bounds[1:]):
            with gemms_leaving(self.sm_carveout if pending else None):  # beside the last chunk's all-reduce
                g = self.gate_proj(tokens[start:end])
                u = self.up_proj(tokens[start:end])
            h = F.gelu(g, approximate="tanh")
            m = h * u
            torch.mm(m, self.down_proj.weight.t(), out=y[start:end])  # this chunk's partial sums, in place in y
            pending.append(dist.all_reduce(y[start:end], group=self.group, async_op=True))  # beside the next chunk
        for work in pending:
            work.wait()  # on a GPU the compute stream waits for NCCL's, the CPU does not
        return y.view(*x.shape[:-1], y.shape[-1])


class SequenceParallelGeGLUMLP(ShardedGeGLUMLP):
    """Megatron's sequence parallelism: each rank holds its slice of the tokens (rows r·T/N … (r+1)·T/N of x's
    tokens; in a model the previous layer's reduce-scatter leaves exactly that on the rank, here it is a view of x).
    The forward all-gathers x, runs the same column/row-parallel GEMMs on every token, and reduce-scatters y: each
    rank gets the sum over the ranks of its own tokens' rows. The two collectives move as many bytes as the one
    all-reduce (an all-reduce is a reduce-scatter then an all-gather), and the output is what the next layer's
    norm, token by token, wants: its own tokens, not every rank's copy of all of them."""

    rank, world = 0, 1  # this rank's place: which slice of the tokens is its own

    @classmethod
    def from_module(cls, module: nn.Module, rank: int, world: int, **kwargs) -> "SequenceParallelGeGLUMLP":
        part = super().from_module(module, rank, world, **kwargs)
        part.rank, part.world = rank, world
        return part

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        mine = tokens[shard(len(tokens), self.rank, self.world)]  # this rank's tokens: what it holds in a model
        gathered = mine.new_empty(len(mine) * self.world, mine.shape[-1])
        dist.all_gather_into_tensor(gathered, mine, group=self.group)  # every rank's tokens, in rank order
        g = self.gate_proj(gathered)
        u = self.up_proj(gathered)
        m = F.gelu(g, approximate="tanh") * u
        partial = self.down_proj(m)  # this rank's partial sums of every token's y
        y = partial.new_empty(len(mine), partial.shape[-1])
        dist.reduce_scatter_tensor(y, partial, group=self.group)  # its own tokens' rows, summed over the ranks
        return y


def enable_symmetric_memory(group=None) -> str:
    """Symmetric memory for the process group (torch 2.11 asks for it; later versions do it themselves); its name."""
    import warnings

    from torch.distributed import _symmetric_memory as symm_mem

    name = (group or dist.group.WORLD).group_name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated, needed no more, in torch 2.15
        symm_mem.enable_symm_mem_for_group(name)
    return name


class AsyncTensorParallelGeGLUMLP(SequenceParallelGeGLUMLP):
    """Sequence parallel through PyTorch's async-TP (torch.ops.symm_mem, symmetric memory): `fused_all_gather_matmul`
    gathers the ranks' token slices shard by shard, copying each peer's shard with the copy engine on a second stream
    while the matmul of the shard already here runs (gate and up in one call), and `fused_matmul_reduce_scatter`
    computes down's partial sums one destination rank at a time, each peer pulling its rows while the next block is
    computed, then adds the N partials it received. No NCCL kernel; nothing that needs NVLink multicast."""

    group_name = None

    def join(self, group, x: torch.Tensor | None = None) -> "AsyncTensorParallelGeGLUMLP":
        """Symmetric memory for the process group, and the weights as the fused ops take them. With `x`, the group's
        symmetric-memory workspace is sized now for the larger of the two ops (the reduce-scatter's two buffers of
        this rank's rows of y), every rank together: the forward then never re-allocates and re-rendezvouses it
        between its two ops, which it otherwise does on its first call. (The lesson's one 7B run of this variant
        stopped inside that first call; a script making the same calls did not, so this is a precaution, not a
        cure shown to work.)"""
        self.group_name = enable_symmetric_memory(group)
        if x is not None and x.is_cuda:
            from torch.distributed._symmetric_memory import get_symm_mem_workspace

            rows = x.numel() // x.shape[-1] // self.world
            get_symm_mem_workspace(self.group_name, 2 * rows * self.down_proj.out_features * x.element_size())
        # [in, out] weights as the fused ops take them, made contiguous once. Gate and up stay two matrices (two
        # outputs): one [dim, 2·hidden/N] matrix would give g and u as strided halves of one output, and GELU·mul on
        # those took ATen's generic elementwise path on 2 H100s at 7B (130 + 135 µs, against 59 + 90 contiguous).
        self.gate_t = self.gate_proj.weight.t().contiguous()
        self.up_t = self.up_proj.weight.t().contiguous()
        self.down_t = self.down_proj.weight.t().contiguous()
        return self

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        mine = tokens[shard(len(tokens), self.rank, self.world)]
        _, (g, u) = torch.ops.symm_mem.fused_all_gather_matmul(mine, [self.gate_t, self.up_t], 0, self.group_name,
                                                               return_A=False)
        m = F.gelu(g, approximate="tanh") * u
        return torch.ops.symm_mem.fused_matmul_reduce_scatter(m, self.down_t, "sum", 0, self.group_name)


class FunctionalSequenceParallelGeGLUMLP(SequenceParallelGeGLUMLP):
    """seqpar written with functional collectives (torch.distributed._functional_collectives), the form Inductor's
    micro-pipeline TP pass reads: compiled with `_micro_pipeline_tp`, its all-gather → gate/up and down →
    reduce-scatter become torch.ops.symm_mem's fused ops, as async-tp calls them by hand."""

    def forward(self, x):
        from torch.distributed import _functional_collectives as funcol

        group = self.group or dist.group.WORLD
        tokens = x.reshape(-1, x.shape[-1])
        mine = tokens[shard(len(tokens), self.rank, self.world)]
        # all_gather_single and reduce_scatter_single where torch has them (2.15); the older names before
        all_gather = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor
        reduce_scatter = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor
        gathered = all_gather(mine, 0, group)
        g = self.gate_proj(gathered)
        u = self.up_proj(gathered)
        m = F.gelu(g, approximate="tanh") * u
        return funcol.wait_tensor(reduce_scatter(self.down_proj(m), "sum", 0, group))


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


@contextlib.contextmanager
def gemms_leaving(sms: int | None):
    """Inside: cuBLAS GEMMs target all but `sms` of the GPU's SMs (PyTorch's experimental SM carveout, a cuBLASLt
    matmul attribute, so cuBLASLt is asked for), leaving room for an NCCL kernel queued beside them. Restored after,
    so the other GEMMs of the run keep every SM. None or 0: nothing changes."""
    if not sms:
        yield
        return
    library = torch.backends.cuda.preferred_blas_library()
    with _first_use_quiet():  # each setting writes a C++ warning at its first use: experimental, as --help says
        torch.backends.cuda.preferred_blas_library("cublaslt")
        torch._C._set_sm_carveout_experimental(sms)
    try:
        yield
    finally:
        torch._C._set_sm_carveout_experimental(None)
        torch.backends.cuda.preferred_blas_library(library)


@contextlib.contextmanager
def _first_use_quiet():
    """The first time only: file descriptor 2 to /dev/null inside (C++ warnings bypass Python's sys.stderr)."""
    if getattr(_first_use_quiet, "done", False):
        yield
        return
    import os
    import sys

    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
        _first_use_quiet.done = True
