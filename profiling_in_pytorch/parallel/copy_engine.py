"""Lesson 08's all-reduce moved by the copy engine and pipelined with the GEMMs: `--variant overlap-ce`.

NCCL's all-reduce runs on SMs. Beside a GEMM that wants every SM it slows that GEMM about as much as it hides: on
2 H100s at the 7B shape the overlapped variant's gate GEMM ran 166-169 µs beside an all-reduce instead of 123-131
alone (docs/tensor-parallel.md). A GPU also has copy engines, which move bytes between GPUs over NVLink without an
SM, and PyTorch's symmetric memory maps every rank's buffer into every other rank's address space: a rank pulls a
peer's rows with one cudaMemcpyAsync (`Memcpy PtoP` in the trace), and the ranks tell each other "ready" through
signal kernels of one thread block (`c10d::symmetric_memory::put_signal_kernel`, `wait_signal_kernel`).

An all-reduce is a reduce-scatter then an all-gather. Here each hides behind down_proj's GEMMs of the same
forward. The tokens are cut into N blocks of rows, block d owned by rank d, and each block into `chunks` pieces:

1. Gate, up and GELU·mul on every token, as in plain: whole GEMMs.
2. down_proj on the other ranks' blocks first, piece by piece: this rank's partial sums of their rows, written into
   its symmetric buffer, each piece's owner signalled. Meanwhile each peer does the same for this rank's block, and
   a second stream pulls each piece of it (the reduce-scatter) while the next piece computes.
3. down_proj on the rank's own block, piece by piece, on top of the pulled sums (`addmm_`, β = 1: the last addition
   is the GEMM's epilogue; with more than two ranks one kernel first adds the N-1 partials). After each piece the
   rank signals every peer.
4. The all-gather, beside the next piece: each peer pulls the finished piece into its output. Only the last
   piece's pull has nothing left to hide behind.

What it costs: down_proj runs as N·chunks GEMMs of T/(N·chunks) rows instead of one of T (gate and up stay whole:
on 2 H100s at the 7B shape, GEMMs of half the rows took 9-15% longer per row), one barrier kernel per forward (a
rank must not overwrite its buffer before every peer has read the last forward's), and signal kernels. The output
is a fresh tensor: the rank's own rows are copied out of its symmetric buffer beside the pulls.

The transport (`SymmetricTransport` on GPUs) is a small interface: per-rank buffers, barrier, signal and wait, and a
second stream. The same schedule runs on CPU threads in the tests, with threading primitives in its place.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.profiler import record_function

from profiling_in_pytorch.parallel.sharded import DEFAULT_CHUNKS, ShardedGeGLUMLP, enable_symmetric_memory

# Signal channels: 0 is the barrier's; PARTIAL + k for piece k of a block's partial sums; PARTIAL + pieces + k for
# piece k of a block's final rows.
PARTIAL = 1
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
        self.streams = {name: torch.cuda.Stream(device) for name in ("pulls", "copies", "signals")}
        pad = getattr(self.handle, "signal_pad_size", None)  # bytes; one uint32 per (channel, peer)
        self.pieces_allowed = (pad // 4 // self.world - PARTIAL) // 2 if pad else 8

    def barrier(self) -> None:
        self.handle.barrier(channel=0)

    def signal(self, dst: int, channel: int) -> None:
        self.handle.put_signal(dst, channel)

    def wait(self, src: int, channel: int) -> None:
        self.handle.wait_signal(src, channel)

    def on(self, stream: str):
        """Inside: work goes to the side stream `stream` ("pulls": the copies from the peers and the waits for their
        signals; "copies": this rank's own rows into its output; "signals": this rank's signals, off the GEMMs'
        stream, where each cost ~4 µs and a launch gap between two GEMMs on 2 H100s)."""
        return torch.cuda.stream(self.streams[stream])

    def fork(self, stream: str) -> None:
        """The side stream `stream` waits for what the current stream has queued so far."""
        self.streams[stream].wait_stream(torch.cuda.current_stream())

    def mark(self, stream: str) -> torch.cuda.Event:
        """A point on the side stream `stream`: what it has queued so far."""
        event = torch.cuda.Event()
        event.record(self.streams[stream])
        return event

    def after(self, event: torch.cuda.Event) -> None:
        """The current stream waits for a point `mark` made."""
        torch.cuda.current_stream().wait_event(event)

    def join(self, *streams: str) -> None:
        """The current stream waits for everything queued on these side streams (only streams forked in this
        forward: inside a CUDA graph's capture, waiting on one that was not is an error)."""
        for name in streams:
            torch.cuda.current_stream().wait_stream(self.streams[name])


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

    def forward(self, x):
        t, r, n, pieces = self.transport, self.rank, self.world, self.chunks
        tokens = x.reshape(-1, x.shape[-1])
        if t is None or len(tokens) != self.tokens:
            raise ValueError(f"join() sized the symmetric buffers for {self.tokens} tokens; this x has {len(tokens)}")
        rows = self.tokens // n
        bounds = [rows * i // pieces for i in range(pieces + 1)]
        piece = [slice(a, b) for a, b in zip(bounds, bounds[1:])]  # within a block
        mine = t.buffers[r]  # [n, rows, dim] in symmetric memory: slot d, partial sums of rank d's rows; the peers read it
        down_t = self.down_proj.weight.t()

        # 1. Gate, up and GELU·mul on every token, whole GEMMs as in plain.
        g = self.gate_proj(tokens)
        u = self.up_proj(tokens)
        h = F.gelu(g, approximate="tanh")
        m = (h * u).view(n, rows, -1)  # block d: rank d's rows
        y = tokens.new_empty(n, rows, self.down_proj.out_features)
        # Every peer has pulled what it needed of this rank's buffer in the last forward. On the GEMMs' stream: on the
        # signals' stream it would spin beside gate's GEMM for as long as the ranks are apart (317 µs a step in one
        # profiled CUDA-graph loop on 2 H100s at 7B), and a kernel spinning beside a GEMM slows it.
        t.barrier()

        # 2. down_proj on the other ranks' blocks, the next owner's first, a piece at a time, each owner signalled;
        # and the reduce-scatter: rank r - step computes this rank's block at its own step `step`, at the same time,
        # so each piece of it is pulled just after this rank's own piece of that step. (The pulls' stream starts
        # waiting only then: a signal kernel waiting on an SM beside a GEMM slowed it by 20-45% on 2 H100s, a
        # 4,096-row gate GEMM 351 µs beside a 1 ms wait against 251 µs alone.)
        summed = []
        for step in range(1, n):
            owner, peer = (r + step) % n, (r - step) % n
            for k, rows_k in enumerate(piece):
                torch.mm(m[owner][rows_k], down_t, out=mine[owner][rows_k])
                t.fork("signals")
                with t.on("signals"):
                    t.signal(owner, PARTIAL + k)
                t.fork("pulls")
                with t.on("pulls"), record_function(REDUCE_SCATTER):
                    t.wait(peer, PARTIAL + k)
                    into = mine[r] if n == 2 else self.received[step - 1]
                    into[rows_k].copy_(t.buffers[peer][r][rows_k])
                    if step == n - 1:
                        if n > 2:
                            torch.sum(self.received[:, rows_k], dim=0, out=mine[r][rows_k])
                        summed.append(t.mark("pulls"))  # piece k of this rank's rows: every peer's partial in

        # 3. down_proj on this rank's own block on top of the sums (addmm_, β = 1: the last addition is the GEMM's
        # epilogue), a piece at a time; 4. the all-gather: each peer pulls the finished piece (and this rank copies
        # it out, on a stream of its own so that the pulls do not queue behind it) while the next one computes.
        for k, rows_k in enumerate(piece):
            if n == 1:  # nothing to add: one rank's sums are its own
                torch.mm(m[r][rows_k], down_t, out=mine[r][rows_k])
            else:
                t.after(summed[k])
                mine[r][rows_k].addmm_(m[r][rows_k], down_t)
            t.fork("signals")
            with t.on("signals"):
                for step in range(1, n):
                    t.signal((r + step) % n, PARTIAL + pieces + k)
            t.fork("copies")
            t.fork("pulls")
            with t.on("copies"), record_function(ALL_GATHER):
                y[r][rows_k].copy_(mine[r][rows_k])
            with t.on("pulls"), record_function(ALL_GATHER):
                for step in range(1, n):
                    peer = (r - step) % n
                    t.wait(peer, PARTIAL + pieces + k)
                    y[peer][rows_k].copy_(t.buffers[peer][peer][rows_k])
        t.join("pulls", "copies", "signals")
        return y.view(*x.shape[:-1], y.shape[-1])
