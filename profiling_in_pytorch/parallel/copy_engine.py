"""Lesson 08's all-reduce moved by the copy engine and pipelined with the GEMMs: `--variant overlap-ce`.

NCCL's all-reduce runs on SMs. Beside a GEMM that wants every SM it slows that GEMM about as much as it hides: on
2 H100s at the 7B shape the overlapped variant's gate GEMM ran 166-169 µs beside an all-reduce instead of 123-131
alone (docs/tensor-parallel.md). A GPU also has copy engines, which move bytes between GPUs over NVLink without an
SM, and PyTorch's symmetric memory maps every rank's buffer into every other rank's address space: a rank pulls a
peer's rows with one cudaMemcpyAsync (`Memcpy PtoP` in the trace), and the ranks tell each other "ready" through
signal kernels of one thread block (`c10d::symmetric_memory::put_signal_kernel`, `wait_signal_kernel`).

An all-reduce is a reduce-scatter then an all-gather. Here each hides behind GEMMs of the same forward. The tokens
are cut into N blocks of rows, block d owned by rank d:

1. Each rank first computes the other ranks' blocks, all of the MLP on them (gate, up, GELU·mul, down): its partial
   sums of their rows, written into its symmetric buffer. After each block it signals the block's owner.
2. Reduce-scatter, beside the rank's own block's gate, up and GELU·mul: a second stream waits for each peer's
   signal and pulls the peer's partial sums of this rank's rows (copy engine; with more than two ranks one kernel
   then adds them).
3. The own block's down GEMM starts from those sums (`addmm_`, β = 1: the last addition is the GEMM's epilogue),
   in `chunks` pieces. After each piece the rank signals every peer.
4. All-gather, beside the next piece: each peer pulls the finished piece into its output. Only the last piece's
   pull has nothing left to hide behind.

What it costs: the GEMMs run on T/N rows at a time instead of T (the own block's down GEMM on T/(N·chunks)), one
barrier kernel per forward (a rank must not overwrite its buffer before every peer has read the last forward's), and
a few signal kernels. The output is a fresh tensor: the rank's own rows are copied out of its symmetric buffer
beside the pulls.

The transport (`SymmetricTransport` on GPUs) is a small interface: per-rank buffers, barrier, signal and wait, and a
second stream. The same schedule runs on CPU threads in the tests, with threading primitives in its place.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.profiler import record_function

from profiling_in_pytorch.parallel.sharded import DEFAULT_CHUNKS, ShardedGeGLUMLP, enable_symmetric_memory

PARTIAL, FINAL = 1, 2  # signal channels: 0 is the barrier's; the partial sums; FINAL + k for the own block's piece k
REDUCE_SCATTER, ALL_GATHER = "copy_engine_reduce_scatter", "copy_engine_all_gather"  # record functions (trace-report)


class SymmetricTransport:
    """What the copy-engine MLP needs between GPUs: one symmetric buffer per rank, [N, T/N, dim] (slot d: this rank's
    partial sums of rank d's rows; its own slot: its own rows of y), every peer's mapped here, the signal pads behind
    `barrier`, `signal` and `wait`, and a second stream for the copies."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, group=None):
        from torch.distributed import _symmetric_memory as symm_mem

        name = enable_symmetric_memory(group)
        self.handle = symm_mem.rendezvous(symm_mem.empty(*shape, dtype=dtype, device=device), name)
        self.rank, self.world = self.handle.rank, self.handle.world_size
        self.buffers = [self.handle.get_buffer(r, shape, dtype) for r in range(self.world)]
        self.streams = {"pulls": torch.cuda.Stream(device), "copies": torch.cuda.Stream(device)}
        pad = getattr(self.handle, "signal_pad_size", None)  # bytes; one uint32 per (channel, peer)
        self.pieces_allowed = pad // 4 // self.world - FINAL if pad else 8

    def barrier(self) -> None:
        self.handle.barrier(channel=0)

    def signal(self, dst: int, channel: int) -> None:
        self.handle.put_signal(dst, channel)

    def wait(self, src: int, channel: int) -> None:
        self.handle.wait_signal(src, channel)

    def on(self, stream: str):
        """Inside: work goes to the side stream `stream` ("pulls": the copies from the peers and the waits for their
        signals; "copies": this rank's own rows into its output)."""
        return torch.cuda.stream(self.streams[stream])

    def fork(self, stream: str) -> None:
        """The side stream `stream` waits for what the current stream has queued so far."""
        self.streams[stream].wait_stream(torch.cuda.current_stream())

    def join(self) -> None:
        """The current stream waits for everything queued on the side streams."""
        for side in self.streams.values():
            torch.cuda.current_stream().wait_stream(side)


class CopyEngineGeGLUMLP(ShardedGeGLUMLP):
    """One rank's part of the post's MLP, its all-reduce done as a copy-engine reduce-scatter and all-gather, each
    beside GEMMs of the same forward (the module's docstring has the schedule). x is whole on every rank, and every
    rank returns y whole, as `plain` does."""

    rank, world, chunks, tokens = 0, 1, DEFAULT_CHUNKS, 0
    transport = None

    @classmethod
    def from_module(cls, module, rank: int, world: int, chunks: int = DEFAULT_CHUNKS, **kwargs) -> "CopyEngineGeGLUMLP":
        part = super().from_module(module, rank, world, **kwargs)
        part.rank, part.world, part.chunks = rank, world, chunks
        return part

    def join(self, x: torch.Tensor, transport=None) -> "CopyEngineGeGLUMLP":
        """Every rank together: the symmetric buffers for x's token count (or `transport`, made for it elsewhere).
        The token count must split into N blocks, and each block into `chunks` pieces."""
        tokens = x.numel() // x.shape[-1]
        if tokens % self.world or tokens // self.world < self.chunks:
            raise ValueError(f"{tokens} tokens do not split into {self.world} blocks of at least {self.chunks} rows")
        shape = (self.world, tokens // self.world, self.down_proj.out_features)
        self.transport = transport or SymmetricTransport(shape, x.dtype, x.device, self.group)
        allowed = getattr(self.transport, "pieces_allowed", self.chunks)
        if self.chunks > allowed:
            raise ValueError(f"{self.chunks} pieces need more signal channels than symmetric memory has: at most "
                             f"{allowed}")
        self.tokens = tokens
        if self.world > 2:  # the N-1 partial sums of this rank's rows, pulled before one kernel adds them
            self.received = x.new_empty(self.world - 1, *shape[1:])
        return self

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gate_proj(x)
        u = self.up_proj(x)
        h = F.gelu(g, approximate="tanh")
        return h * u

    def forward(self, x):
        t, r, n = self.transport, self.rank, self.world
        tokens = x.reshape(-1, x.shape[-1])
        if t is None or len(tokens) != self.tokens:
            raise ValueError(f"join() sized the symmetric buffers for {self.tokens} tokens; this x has {len(tokens)}")
        rows = self.tokens // n
        block = [slice(d * rows, (d + 1) * rows) for d in range(n)]
        mine = t.buffers[r]  # [n, rows, dim] in symmetric memory; the peers read it
        down_t = self.down_proj.weight.t()
        y = tokens.new_empty(self.tokens, self.down_proj.out_features)
        t.barrier()  # every peer has pulled what it needed of the last forward's buffer

        # 1. The other ranks' blocks first, the next owner's first: this rank's partial sums of their rows.
        for step in range(1, n):
            owner = (r + step) % n
            torch.mm(self.hidden(tokens[block[owner]]), down_t, out=mine[owner])
            t.signal(owner, PARTIAL)

        # 2. Reduce-scatter, beside this rank's own gate, up and GELU·mul: rank r - step computed this rank's block
        # at its step `step`, so the pulls go in the order the peers finish. The pulls' stream starts only now, when
        # the peers are about done too: a signal kernel waiting on an SM beside a GEMM slowed it by 20-45% (2 H100s,
        # 7B shape: a 4,096-row gate GEMM 351 µs beside a 1 ms wait, 251 µs alone).
        t.fork("pulls")
        with t.on("pulls"), record_function(REDUCE_SCATTER):
            for step in range(1, n):
                peer = (r - step) % n
                t.wait(peer, PARTIAL)
                (mine[r] if n == 2 else self.received[step - 1]).copy_(t.buffers[peer][r])
            if n > 2:
                torch.sum(self.received, dim=0, out=mine[r])
        m = self.hidden(tokens[block[r]])
        t.join()

        # 3. and 4. The own block's down GEMM on top of the sums, in pieces; each piece pulled by the peers (and
        # copied out here, on a stream of its own so that the pulls do not queue behind it) while the next computes.
        bounds = [rows * i // self.chunks for i in range(self.chunks + 1)]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            mine[r][a:b].addmm_(m[a:b], down_t)
            for step in range(1, n):
                t.signal((r + step) % n, FINAL + k)
            t.fork("copies")
            t.fork("pulls")
            with t.on("copies"), record_function(ALL_GATHER):
                y[block[r]][a:b].copy_(mine[r][a:b])
            with t.on("pulls"), record_function(ALL_GATHER):
                for step in range(1, n):
                    peer = (r - step) % n
                    t.wait(peer, FINAL + k)
                    y[block[peer]][a:b].copy_(t.buffers[peer][peer][a:b])
        t.join()
        return y.view(*x.shape[:-1], y.shape[-1])
