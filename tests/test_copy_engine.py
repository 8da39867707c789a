"""overlap-ce's schedule on a CPU: N ranks as N threads of this process, sharing their "symmetric" buffers.

On GPUs the transport is PyTorch's symmetric memory (a buffer per rank mapped into every rank, signal kernels, a
second stream). Here each rank is a thread, the buffers are shared tensors, a signal is a semaphore and the barrier
a threading.Barrier: the same forward runs, every block, pull and sum in its order, and each rank's y must be the
single-process module's.
"""

from __future__ import annotations

import contextlib
import threading

import pytest
import torch
from conftest import FIXTURES, run_script

from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.parallel.copy_engine import CopyEngineGeGLUMLP
from profiling_in_pytorch.parallel.variants import require_shardable
from trace_report.errors import UsageError
from profiling_in_pytorch.checks import communication as cx
from trace_report.communication import communication
from trace_report.reader import read_trace


class Threads:
    """The ranks' shared state: a buffer each, a semaphore per (from, to, channel), one barrier."""

    def __init__(self, world: int, shape, dtype):
        self.world = world
        self.buffers = [torch.full(shape, float("nan"), dtype=dtype) for _ in range(world)]  # NaN: a missed write shows
        self.barrier = threading.Barrier(world, timeout=30)
        self.signals: dict[tuple[int, int, int], threading.Semaphore] = {}
        self.lock = threading.Lock()
        self.log: list[tuple] = []  # (rank, what, peer, channel), in the order they happened

    def semaphore(self, src: int, dst: int, channel: int) -> threading.Semaphore:
        with self.lock:
            return self.signals.setdefault((src, dst, channel), threading.Semaphore(0))


class ThreadTransport:
    """One rank's view of `Threads`: the interface CopyEngineGeGLUMLP asks of SymmetricTransport."""

    def __init__(self, shared: Threads, rank: int):
        self.shared, self.rank, self.world = shared, rank, shared.world
        self.buffers = shared.buffers

    def barrier(self):
        self.shared.barrier.wait()

    def signal(self, dst, channel):
        self.shared.log.append((self.rank, "signal", dst, channel))
        self.shared.semaphore(self.rank, dst, channel).release()

    def wait(self, src, channel):
        assert self.shared.semaphore(src, self.rank, channel).acquire(timeout=30), (self.rank, src, channel)
        self.shared.log.append((self.rank, "wait", src, channel))

    def on(self, stream):
        return contextlib.nullcontext()  # one thread per rank: its "streams" run in program order

    def fork(self, stream):
        pass

    def mark(self, stream):
        return stream

    def after(self, mark):
        assert mark in ("pulls", "signals")

    def join(self, *streams):
        assert set(streams) <= {"pulls", "copies", "signals"}


def run_ranks(world: int, chunks: int, tokens: int = 12, dim: int = 8, hidden: int = 24, forwards: int = 2):
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(dim, hidden).eval()
    xs = [torch.randn(tokens, dim) for _ in range(forwards)]
    shared = Threads(world, (world, tokens // world, dim), torch.float32)
    outputs, errors = {}, []

    def rank(r):
        try:
            model = CopyEngineGeGLUMLP.from_module(reference, r, world, chunks=chunks)
            model.join(xs[0], ThreadTransport(shared, r))
            with torch.no_grad():
                outputs[r] = [model(x).clone() for x in xs]
        except BaseException as error:  # noqa: BLE001 - reported by the test, with the rank
            errors.append((r, error))
            shared.barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    with torch.no_grad():
        wants = [reference(x) for x in xs]
    return outputs, wants, shared.log


@pytest.mark.parametrize("world,chunks", [(1, 2), (2, 4), (3, 2), (4, 1)])
def test_every_rank_returns_the_modules_output_forward_after_forward(world, chunks):
    outputs, wants, _ = run_ranks(world, chunks)
    for r in range(world):
        for got, want in zip(outputs[r], wants):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_each_rank_signals_every_peer_once_per_block_and_per_piece():
    world, chunks = 3, 2
    _, _, log = run_ranks(world, chunks, forwards=1)
    for r in range(world):
        sent = sorted((peer, channel) for who, what, peer, channel in log if who == r and what == "signal")
        peers = [p for p in range(world) if p != r]
        want = sorted([(p, 1 + k) for p in peers for k in range(2 * chunks)])  # partial sums, then final rows
        assert sent == want, (r, sent)


def test_the_other_ranks_blocks_come_before_its_own():
    """Rank r sends rank r+1's block first, then r+2's, piece by piece, and only then its own rows; it pulls its own
    block's pieces from rank r-1 first (which computed it at its first step)."""
    _, _, log = run_ranks(4, 2, forwards=1)
    for r in range(4):
        sent = [(peer, channel) for who, what, peer, channel in log if who == r and what == "signal"]
        owners = [(r + 1) % 4, (r + 2) % 4, (r + 3) % 4]
        assert sent[:6] == [(owner, 1 + k) for owner in owners for k in range(2)]
        assert sorted(sent[6:]) == sorted((owner, 3 + k) for owner in owners for k in range(2))
        pulled = [(peer, channel) for who, what, peer, channel in log if who == r and what == "wait" and channel < 3]
        assert pulled == [((r - step) % 4, 1 + k) for step in (1, 2, 3) for k in range(2)]


def test_sizes_the_blocks_cannot_take_are_refused():
    with pytest.raises(UsageError, match="tokens/2 of the 7 tokens"):
        require_shardable(32, 2, 7, 1, ("overlap-ce",))
    with pytest.raises(UsageError, match="more pieces than rows"):
        require_shardable(32, 2, 8, 5, ("overlap-ce",))
    model = CopyEngineGeGLUMLP.from_module(SimpleGeGLUMLP(8, 24), 0, 2, chunks=4)
    with pytest.raises(ValueError, match="do not split into 2 blocks"):
        model.join(torch.randn(6, 8), transport=object())


# --- the lesson's traces on 2 H100s (trace_report/tests/fixtures/h100x2): 7B shape, 4 pieces -----------------------------------

H100X2 = FIXTURES / "h100x2"
RUN = "16_512_4096_11008_tp2_{}_rank{}.json.gz"


def test_eagerly_each_pull_is_named_for_its_collective_and_no_nccl_runs():
    trace = read_trace(H100X2 / RUN.format("overlapce4_eager", 0))
    found = communication(trace)
    assert found.per_step("ReduceScatter") == [4, 4, 4]  # a pull per piece of the peer's partial sums
    assert found.per_step("AllGather") == [8, 8, 8]  # per piece: the peer's rows pulled, this rank's copied out
    assert cx.no_nccl_kernel().check(trace).ok
    assert cx.collectives_per_step(4, "ReduceScatter", others_ok=True).check(trace).ok


def test_in_a_cuda_graph_the_pulls_are_peer_copies_and_expose_less_than_plains_all_reduce():
    exposed = {}
    for rank in (0, 1):
        trace = read_trace(H100X2 / RUN.format("overlapce4_graph_eager", rank))
        found = communication(trace)
        assert found.per_step("PeerCopy") == [8, 8, 8]  # 4 pieces: a pull of partial sums and one of rows each
        plain = H100X2 / RUN.format("plain_graph_eager", rank)
        outcome = cx.less_exposed_than(plain, "plain").check(trace)
        assert outcome.ok, outcome.evidence
        exposed[rank] = (found, communication(read_trace(plain)).exposed_us_per_step)
    # rank 1, the slower GPU in this launch (gate and up 560 µs against rank 0's 510): the last piece's pull and the
    # signals, against plain's all-reduce (~248 µs, all of it exposed)
    slow, plain_us = exposed[1]
    assert slow.exposed_us_per_step < 0.5 * plain_us
    # rank 0 waits for it: most of its exposed time is the barrier kernel spinning until rank 1 arrives
    fast, _ = exposed[0]
    barrier = sum(c.exposed_us for c in fast.collectives if "barrier_kernel" in c.name) / len(fast.steps)
    assert barrier > 0.5 * (fast.exposed_us_per_step - slow.exposed_us_per_step)
    assert not cx.less_exposed_than(H100X2 / RUN.format("overlapce4_graph_eager", 0), "itself").check(
        read_trace(H100X2 / RUN.format("overlapce4_graph_eager", 0))).ok


def test_trace_report_reads_the_graph_pair_as_two_ranks_without_nccl():
    paths = [H100X2 / RUN.format("overlapce4_graph_eager", r) for r in (0, 1)]
    result = run_script("-m", "trace_report.report", *map(str, paths), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "2 ranks" in result.stdout and "PeerCopy" in result.stdout and "ncclDevKernel" not in result.stdout
