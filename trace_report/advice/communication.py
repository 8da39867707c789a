"""Collectives nothing overlaps: a data-parallel rank's all-reduces, all-gathers and reduce-scatters run with no
compute beside them.

A collective's kernel runs from when its GPU reaches it until every rank has sent its share: on a rank that got
there first its time is mostly waiting for the others (the ranks' skew), which no bucket size or overlap gives back.
One rank's trace cannot see the other ranks, but it can see a kernel that took many times what its bytes need on the
link: that time is waiting. The rule splits each exposed collective so, and says the skew when the waiting is most
of it; the transfer's part is what overlap could hide.
"""

from __future__ import annotations

from collections import Counter

from trace_report.advice.common import Reading, megabytes, source_of, times, us
from trace_report.advice.findings import Finding
from trace_report.communication import Collective, Communication, communication
from trace_report.timeline import union

NCCL = ("ncclDevKernel", "ncclKernel")  # NCCL's and RCCL's kernels, before and after NCCL 2.19
MIN_SHARE = 0.05  # exposed collective time under this share of the step: nothing to say
# A transfer's time at most: NCCL's latency plus the bytes at this share of the link's peak each way. NCCL reaches
# 60-90% of the link on large messages (nccl-tests on NVLink); a tenth of it is a transfer gone badly, so a kernel
# longer than that is waiting for a rank, not sending.
LINK_FLOOR = 0.1
LATENCY_US = 20.0
# What overlap hides of the exposed transfer, least: DDP's last bucket (the first layers' gradients) is ready only
# when the backward ends and stays exposed, and NCCL's kernels take SMs from the compute they run beside.
OVERLAP_LOW = 0.5
DATA_PARALLEL = ("DistributedDataParallel", "AccumulateGrad")  # DDP labels its forward, hooks AccumulateGrad
SHARDED = ("FullyShardedDataParallel", "FSDP")


def _transfer_us(c: Collective, comm: Communication) -> float | None:
    """The most a collective's transfer can take (see LINK_FLOOR); None where its bytes or the link are unknown."""
    link = comm.link
    factor = c.bus_factor
    if c.bytes is None or link is None or not factor:
        return None
    per_direction = link.per_direction_gbps(c.group_size or comm.group_size)
    return LATENCY_US + c.bytes * factor / (LINK_FLOOR * per_direction * 1e3)


def _kind(comm: Communication, trace) -> str | None:
    """"FSDP", "DDP", or None (tensor parallelism, a pipeline's sends: collectives in the forward's critical path)."""
    paths = [name for c in comm.collectives if c.work is not None for name in c.work.launch_path]
    labels = list(trace.labels) + paths
    if any(mark in name for name in labels for mark in SHARDED):
        return "FSDP"
    if any(mark in name for name in labels for mark in DATA_PARALLEL):
        return "DDP"
    return None


def exposed_communication(r: Reading) -> list[Finding]:
    """Collectives that run with nothing beside them: the step waits for the gradients' all-reduce (DDP) or the
    parameters' all-gather and the gradients' reduce-scatter (FSDP). Smaller buckets start the first all-reduce
    sooner in the backward; FSDP's prefetch issues the next all-gather while this layer computes. When the
    collectives' kernels take many times what their bytes need, the time is another rank arriving late (skew): the
    late rank is the one to fix, not the transfer.

    Sources: PyTorch's DDP notes (gradient bucketing, bucket_cap_mb, gradient_as_bucket_view), the FSDP
    documentation (forward and backward prefetch, reshard_after_forward), Holistic Trace Analysis (communication
    and computation overlap), Li et al., "PyTorch Distributed" (VLDB 2020)."""
    if not r.trace.has_gpu or not r.steps:
        return []
    if not any(w.kind == "kernel" and w.name.startswith(NCCL) for s in r.steps for w in s.gpu):
        return []  # reading the collectives costs 17-32 ms on the world's largest traces: only where NCCL ran
    comm = communication(r.trace)
    if comm is None or comm.where != "gpu":
        return []
    found = [c for c in comm.collectives if c.collective != "Barrier" and c.exposed_us > 0]
    exposed = sum(c.exposed_us for c in found) / r.n
    if exposed < MIN_SHARE * r.step_us:
        return []
    wait = transfer = 0.0
    for c in found:
        most = _transfer_us(c, comm)
        waited = max(0.0, c.dur - most) if most is not None else 0.0
        wait += c.exposed_us * waited / c.dur if c.dur > 0 else 0.0
    wait /= r.n
    transfer = exposed - wait
    kinds = Counter(c.collective for c in found)
    link = comm.link
    sized = [c for c in found if c.busbw_gbps is not None]
    speed = ""
    if sized and link is not None:
        busbw = sum(c.bytes * c.bus_factor for c in sized) / sum(c.dur for c in sized) / 1e3
        speed = f"; busbw {busbw:,.1f} GB/s against {link.describe(comm.group_size)}"
    nbytes = sum(c.bytes or 0 for c in found) / r.n
    size = f", {megabytes(nbytes)}" if nbytes else ""
    what = ", ".join(f"{name} {times(r.per_step(n))}" for name, n in kinds.most_common())
    evidence = (f"{what} a step{size}: {us(sum(c.dur for c in found) / r.n)} on the GPU, {us(exposed)} of it with "
                f"nothing beside it ({exposed / r.step_us:.0%} of the step){speed}")
    kind = _kind(comm, r.trace)
    if wait >= transfer:
        change = ("profile every rank (trace-report's ranks view) and even out the late one: its data loading, a "
                  "rank-0-only step (logging, checkpoints), uneven batches; buckets and overlap cannot hide a wait")
        basis = (f"of the exposed time, {us(wait)} a step is waiting: each kernel's time beyond its bytes at "
                 f"{LINK_FLOOR:.0%} of the link plus {LATENCY_US:g} µs; it goes only if the late rank catches up "
                 "(nothing from this rank's own change), hence the range from zero")
        return [Finding("exposed-communication", "collectives wait for a late rank (skew)",
                        evidence + f"; about {us(wait)} of it waiting for another rank", change, (0.0, wait),
                        r.step_us, basis, source_of(exposed_communication), count_per_step=r.per_step(len(found)))]
    if kind is None:
        # Tensor parallelism's collectives sit between its GEMMs: overlap means splitting them (async-TP). On the
        # H100 pair (h100x2 fixtures) the 4-chunk overlap on the copy engine took 1,911 µs a step against 1,829 µs
        # for the plain all-reduce: the split GEMMs cost more than the transfer hidden. No saving is promised.
        return []
    compute = _compute_us(r, comm)
    last = sum(max((c for c in found if c.step == s.step), key=lambda c: c.ts).exposed_us
               for s in comm.steps if any(c.step == s.step for c in found)) / r.n
    high = min(transfer, compute)
    low = min(high, max(0.0, transfer - last) * OVERLAP_LOW)
    if kind == "FSDP":
        change = ("fully_shard(model, reshard_after_forward=False) for the last blocks, and "
                  "FSDP(..., forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE)")
    else:
        change = ("DDP(model, bucket_cap_mb=..., gradient_as_bucket_view=True): smaller buckets (25 MB by default) "
                  "start the all-reduce earlier in the backward")
    basis = (f"the exposed transfer ({us(transfer)} a step), bounded by the compute there is to hide it behind "
             f"({us(compute)}); at least {OVERLAP_LOW:.0%} of it without the step's last collective, which nothing "
             "after it can hide")
    return [Finding("exposed-communication", f"{kind}'s collectives run with nothing beside them", evidence, change,
                    (low, high), r.step_us, basis, source_of(exposed_communication),
                    count_per_step=r.per_step(len(found)))]


def _compute_us(r: Reading, comm: Communication) -> float:
    """The step's GPU time with no collective running: what a collective could run beside, per step."""
    ids = {id(c.work) for c in comm.collectives if c.work is not None}
    total = 0.0
    for s in r.steps:
        busy = union((w.ts, w.end) for w in s.gpu if id(w) not in ids)
        total += sum(b - a for a, b in busy)
    return total / r.n


RULES = (exposed_communication,)
