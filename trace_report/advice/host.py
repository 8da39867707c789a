"""The host's side of a step: copies from pageable memory, synchronisations, batches made on the step's thread,
tensors built on the CPU and copied every step, and stretches where the host launches nothing at all. Each is the GPU
waiting for the CPU, and each has a one-line fix.

The rules read the runtime calls (`cudaMemcpyAsync`, `cudaStreamSynchronize`) and the ops around them; their savings
come from the step's replay (replay.py), so that a sync which the GPU's own work would hide anyway is not promised.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import replace

from trace_report.advice.common import (DATALOADER, MULTI_PROCESS_LOADER, SINGLE_PROCESS_LOADER, Reading, in_loader,
                                        loader_next, megabytes, source_of, times, us, where_of)
from trace_report.advice.findings import Finding
from trace_report.advice.launches import LOOP_MIN
from trace_report.kernels import METADATA_OPS
from trace_report.peaks import architecture
from trace_report.advice.replay import cut_cpu, edit_events, spans_of
from trace_report.model import CpuOp, RuntimeCall, Step

# A copy from pinned memory runs at this share of the host link's peak, least and most (PCIe's own overheads; a
# pageable copy first goes through CUDA's staging buffer, at about half of it).
PINNED_SHARE = (0.55, 0.85)
# Host-to-GPU link by architecture, GB/s one way: PCIe 3 (Volta), 4 (Ampere, Ada), 5 (Hopper, Blackwell, MI300).
LINK_GBS = {"sm70": 15.75, "sm75": 15.75, "sm80": 31.5, "sm86": 31.5, "sm89": 31.5, "sm90": 63.0, "sm100": 63.0,
            "sm103": 63.0, "gfx90a": 31.5, "gfx942": 63.0, "gfx950": 63.0}
DEFAULT_LINK_GBS = 31.5
# Pinning on the training loop's thread (a DataLoader without workers pins there; so does x.pin_memory()) copies the
# bytes once more on the CPU, as CUDA's staging did for the pageable copy: this share of that copy's time stays on the
# thread, least and most (lesson 12 on an H100: 68 MB a step from pageable memory in 10.7 ms; pinned on the loop's
# thread the step got 1.1 ms faster).
PIN_ON_THREAD_KEEP = (0.5, 1.0)

# Ops that read a GPU tensor's value on the host (each waits for the GPU): `.item()`, `if t:`, `float(t)`, ...
SCALAR_READS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal")
# Ops whose output's size hangs on the data: the host must wait for the count first.
DATA_DEPENDENT = ("aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique", "aten::repeat_interleave",
                  "aten::bincount", "aten::histc")
# Ops that build a tensor from nothing or from the host's values: a constant in the making.
FACTORY = ("aten::arange", "aten::ones", "aten::zeros", "aten::full", "aten::tril", "aten::triu", "aten::linspace",
           "aten::eye", "aten::rand", "aten::randn", "aten::randint", "aten::lift_fresh", "aten::sin",
           "aten::cos", "aten::exp", "aten::pow", "aten::outer", "aten::ones_like", "aten::zeros_like",
           "aten::scalar_tensor")


# torch.tensor(data) and torch.as_tensor(array): a step's input from Python or NumPy where it is large (a TimeSformer
# benchmark's 38.5 MB of frames a step in TraceLens' tests), which no device makes: the copy stays, pageable-copy's
FROM_DATA = ("aten::lift_fresh",)
USER_CALL = {"aten::lift_fresh": "tensor", "aten::scalar_tensor": "tensor"}  # the Python call an aten op comes from
DATA_BYTES = 1 << 20
RANDOM = ("aten::rand", "aten::randn", "aten::randint")  # new values each step: made on the device, not made once


def _link_gbs(trace) -> float:
    return LINK_GBS.get(architecture(trace) or "", DEFAULT_LINK_GBS)


def _copy_syncs(step: Step) -> dict[int, list[RuntimeCall]]:
    """id(op) -> the synchronize calls made inside it: a copy with non_blocking=False waits for its stream."""
    found: dict[int, list[RuntimeCall]] = {}
    for call in step.runtime:
        if call.is_sync and call.launcher is not None:
            found.setdefault(id(call.launcher), []).append(call)
    return found


# --- pageable copies --------------------------------------------------------------------------------------------


def pageable_copy(r: Reading) -> list[Finding]:
    """Host↔device copies from pageable memory: CUDA waits for the stream, stages the bytes through a pinned buffer of
    its own, and the CPU waits for the copy; a copy with non_blocking=False then synchronizes again. From pinned
    memory with non_blocking=True the copy runs at the link's speed and the CPU goes on issuing.

    Sources: torch.profiler's pattern matcher had no rule for it, Nsight Systems' expert rules do ("CUDA Async Memcpy
    with Pageable Memory"); the fix is PyTorch's "pin_memory" and "non_blocking" (CUDA semantics notes)."""
    copies = [w for s in r.steps for w in s.gpu if w.is_pageable_copy]
    if not copies or r.replay is None:
        return []
    link = _link_gbs(r.trace)
    nbytes = sum((w.comm_args or {}).get("bytes", 0) or 0 for w in copies)
    dur = sum(w.dur for w in copies)
    measured_gbs = nbytes / dur / 1e3 if dur > 0 and nbytes else None
    # A pinned copy's time, least and most: the link at PINNED_SHARE, never slower than the pageable copy was.
    factors = [1.0, 1.0]
    if measured_gbs:
        factors = [min(1.0, measured_gbs / (link * PINNED_SHARE[1])), min(1.0, measured_gbs / (link * PINNED_SHARE[0]))]
    copy_calls = {id(w.launch) for w in copies if w.launch is not None}
    ops = {id(w.launch.launcher): w.launch.launcher for w in copies if w.launch is not None and w.launch.launcher}
    reads = {id(w.launch) for w in copies if w.launch is not None and "DtoH" in w.name}
    uploads = {id(w.launch.launcher) for w in copies if w.launch is not None and w.launch.launcher is not None
               and "HtoD" in w.name}
    syncs = {id(c) for s in r.steps for key, calls in _copy_syncs(s).items() if key in uploads for c in calls}
    # A DataLoader with workers pins in a thread of its own, beside the step; without workers, on the loop's thread.
    on_thread = not any(loader_next(s, MULTI_PROCESS_LOADER) for s in r.steps)
    pin_keeps = PIN_ON_THREAD_KEEP if on_thread else (0.0, 0.0)

    def pinned(factor: float, pin_keep: float):
        def change(e):
            if e.call is None:
                return e
            if id(e.call) in copy_calls:
                work = e.work * factor
                if id(e.call) in reads:  # the host reads what it copies back: it still waits, for less
                    return replace(e, work=work)
                # the pinning copy, on the loop's thread where no DataLoader worker makes it
                return replace(e, waits=False, blocks_on_work=False, own=min(e.own, 10.0) + e.work * pin_keep, work=work)
            if id(e.call) in syncs:
                return replace(e, waits=False)
            return e
        return edit_events(change)

    saving = r.replay.saving(pinned(factors[0], pin_keeps[0]), [pinned(factors[1], pin_keeps[1])])
    h2d = sum(1 for w in copies if "HtoD" in w.name)
    d2h = len(copies) - h2d
    launchers = Counter(w.launched_by or "?" for w in copies)
    direction = ", ".join(p for p in (f"HtoD {times(r.per_step(h2d))}" if h2d else "",
                                      f"DtoH {times(r.per_step(d2h))}" if d2h else "") if p)
    speed = f" at {measured_gbs:,.1f} GB/s" if measured_gbs else ""
    sync_note = ("; each followed by a cudaStreamSynchronize (non_blocking=False)" if syncs else "")
    evidence = (f"Memcpy (Pageable) {direction} a step, {megabytes(r.per_step(nbytes))}{speed} in "
                f"{us(r.per_step(dur))}, launched by {', '.join(launchers)}{sync_note}")
    if not h2d:
        change = ("copy into a pinned buffer: out = torch.empty(..., pin_memory=True); out.copy_(x, non_blocking=True), "
                  "then wait on an event only where the values are read")
    elif on_thread:
        change = ("DataLoader(..., pin_memory=True), then x.to('cuda', non_blocking=True); without workers the loop's "
                  "thread makes the pinned copy itself, with num_workers > 0 a thread beside the step does")
    else:
        change = "DataLoader(..., pin_memory=True), then x.to('cuda', non_blocking=True)"
    pinning = (f"; pinning on the loop's thread (no DataLoader workers) keeps {PIN_ON_THREAD_KEEP[0]:.0%}-"
               f"{PIN_ON_THREAD_KEEP[1]:.0%} of the copy's time there, a copy on the CPU as CUDA's staging was"
               if on_thread and h2d else "")
    basis = r.basis(f"a pinned copy at {PINNED_SHARE[0]:.0%}-{PINNED_SHARE[1]:.0%} of the host link "
                    f"({link:g} GB/s for this GPU), the CPU no longer waiting for it{pinning}")
    return [Finding("pageable-copy", "copies from pageable host memory", evidence, change, saving, r.step_us, basis,
                    source_of(pageable_copy),
                    where=where_of(op for op in ops.values()), count_per_step=r.per_step(len(copies)))]


# --- synchronisations -------------------------------------------------------------------------------------------


def _sync_kind(call: RuntimeCall, step_copies: set[int]) -> str | None:
    """What made a synchronize call, as a reader fixes it; None for one the reader cannot remove by a line (a library's
    own wait) or one another rule owns (a pageable copy's)."""
    chain = call.launch_path
    if any(op in chain for op in SCALAR_READS):
        return "a scalar read on the host (.item(), float(t), `if t:`)"
    if any(op in chain for op in DATA_DEPENDENT) or "aten::index" in chain and "aten::nonzero" in chain:
        return "an op whose output size hangs on the data (nonzero, a boolean mask, unique)"
    if call.launcher is not None and call.launcher.name in ("aten::copy_", "aten::_to_copy", "aten::to"):
        if id(call.launcher) in step_copies:
            return None  # a pageable copy: pageable_copy's
        return "a copy with non_blocking=False (.to(), .cpu(), .tolist())"
    if call.launched_by is None or (call.launcher is not None and call.launcher.is_label):
        if "Device" in call.name or "Stream" in call.name:
            return "an explicit torch.cuda.synchronize() in the step"
    return None


CHANGES = {
    "a scalar read on the host (.item(), float(t), `if t:`)":
        "keep it on the GPU: total += loss.detach() (read total.item() once, after the loop or every N steps)",
    "an op whose output size hangs on the data (nonzero, a boolean mask, unique)":
        "a fixed-size op instead: torch.where(mask, x, 0) for x[mask]; pass output_size= to repeat_interleave",
    "a copy with non_blocking=False (.to(), .cpu(), .tolist())":
        "x.to('cuda', non_blocking=True) from pinned memory; read GPU results once, after the loop",
    "an explicit torch.cuda.synchronize() in the step":
        "drop torch.cuda.synchronize() from the step; time with torch.cuda.Event(enable_timing=True) instead",
}


def sync(r: Reading) -> list[Finding]:
    """Synchronisations inside the step: the CPU stops issuing until the GPU has drained its queue, then the GPU waits
    for the CPU's next launch. `.item()` on a loss, a Python `if` on a GPU tensor, a boolean mask, `.cpu()`.

    Sources: torch.profiler's pattern matcher (SynchronizedDataLoaderPattern, ExtraCUDACopyPattern), Nsight Systems'
    expert rule for synchronous API calls, PyTorch's performance tuning guide ("avoid unnecessary CPU-GPU
    synchronization")."""
    if r.replay is None:
        return []
    found: dict[str, list[RuntimeCall]] = {}
    for s in r.steps:
        pageable = {id(w.launch.launcher) for w in s.gpu if w.is_pageable_copy
                    and w.launch is not None and w.launch.launcher is not None}
        for call in s.runtime:
            if call.is_sync:
                kind = _sync_kind(call, pageable)
                if kind is not None:
                    found.setdefault(kind, []).append(call)
    if not found:
        return []
    removed = {id(c) for calls in found.values() for c in calls}

    def no_wait(e):
        return replace(e, waits=False, blocks_on_work=False) if e.call is not None and id(e.call) in removed else e

    saving = r.replay.saving(edit_events(no_wait))
    main = max(found, key=lambda k: sum(c.dur for c in found[k]))
    parts = []
    for kind, calls in sorted(found.items(), key=lambda kv: -sum(c.dur for c in kv[1])):
        ops = Counter(c.launch_path[0] if c.launch_path else c.launched_by for c in calls)
        top = ", ".join(op for op, _ in ops.most_common(2) if op)
        inside = f" (in {top})" if top else ""  # outside any op: the kind says "in the step"
        parts.append(f"{times(r.per_step(len(calls)))} {kind}{inside}, waiting {us(r.per_step(sum(c.dur for c in calls)))}")
    evidence = "synchronize calls a step: " + "; ".join(parts)
    launchers = [c.launcher for calls in found.values() for c in calls if c.launcher is not None]
    return [Finding("sync", "the CPU waits for the GPU inside the step", evidence, CHANGES[main], saving, r.step_us,
                    r.basis("the waits removed, the CPU issuing ahead"),
                    source_of(sync), where=where_of(launchers),
                    count_per_step=r.per_step(sum(len(c) for c in found.values())))]


# --- data loading -----------------------------------------------------------------------------------------------

# With workers, the main process still receives each batch (its tensors rebuilt from shared memory): this share of
# the single-process loader's time, least and most.
WORKER_KEEP = (0.03, 0.2)
# The workers the change names. They make batches no faster together than WORKERS times the loop's thread at best, and
# at worst no faster than it did alone, where the batch's ops are small: each runs on one thread either way.
WORKERS = 4
# torch spreads an op that touches this many elements or more over its intra-op threads, one per core by default
# (at::internal::GRAIN_SIZE). Where ops that large (views left out) are this share of the loader's time or more
# (lesson 12's batch: 36-44% on five hosts' traces; a 2021 ResNet-50's, its images decoded by PIL in Python: 16%; a
# HF OWLv2 benchmark's: under 1%), the loop's thread made the batch on every core already, and workers would make it
# on the same cores: lesson 12's batch (tanh, mul, roll and collate on 256×1024 samples, 68 MB a step) took the planted
# step from 79 to 110 ms on a 16-core H100 host with 4 workers of 4 threads each, and from 72 to 100 ms on a 16-core
# H200 host with workers of one thread (one H100 host of three saved 36 ms of a 145 ms step). Such a batch is tensor
# work: the change then makes it on the GPU, where its ops take microseconds, from data kept there (no copy of the
# batch each step).
GRAIN_SIZE = 32768
SPREAD_SHARE = 0.3
# Ops on a large tensor that do no work on it: views (a sample indexed out of a stored tensor, a batch unbound)
NO_WORK = METADATA_OPS | {"unbind", "split", "chunk", "narrow", "detach", "view_as", "expand_as"}
# A batch made on the GPU keeps this share of the loader's CPU time, least and most: a few launches a sample where the
# CPU ran the ops (lesson 12: 5 ops a sample, 32 samples a batch).
GPU_BATCH_KEEP = (0.03, 0.15)
# A batch made on the GPU a sample at a time, made a batch at a time: each op's CPU time a step is one call's instead of
# one per sample (32 in lesson 12), least and most kept: a batch's op costs a sample's and more (its indices).
SAMPLE_OPS_KEEP = (0.05, 0.2)


def _largest_input(op: CpuOp) -> int:
    """The most elements of any one tensor among the op's inputs (a TensorList's tensors each), 0 without shapes."""
    largest = 0
    for dims in op.input_dims:
        shapes = dims if dims and not isinstance(dims[0], int) else (dims,)  # a TensorList: a list of shapes
        for shape in shapes:
            n = 1
            for d in shape or (0,):
                n *= d if isinstance(d, int) else 0
            largest = max(largest, n)
    return largest


def _making_batch(op: CpuOp) -> bool:
    """An op inside the single-process loader's `__next__`: the batch being made on the loop's thread."""
    return any(SINGLE_PROCESS_LOADER in box for box in op.path)


def _batch_ops(steps: list[Step], loader_us: float) -> tuple[float, Counter, float]:
    """The share of the loader's time (`loader_us`, its `__next__` boxes whole: the Python between the ops counts, a
    PIL image's decoding) in ops on the CPU that torch spreads over its threads (GRAIN_SIZE), those ops' own time by
    name, and the share of the large ops' own time in ops that launched GPU work (a batch made on the GPU already)."""
    spread: Counter = Counter()
    on_gpu = 0.0
    for s in steps:
        for op in s.ops:
            if not op.is_label and op.name.removeprefix("aten::") not in NO_WORK and \
                    _largest_input(op) >= GRAIN_SIZE and _making_batch(op):
                if op.launched:
                    on_gpu += op.self_us
                else:
                    spread[op.name] += op.self_us
    large = on_gpu + sum(spread.values())
    return (sum(spread.values()) / loader_us if loader_us > 0 else 0.0), spread, (on_gpu / large if large else 0.0)


def _batch_copies(step: Step) -> set[int]:
    """id() of the step's runtime calls that move its batch to the GPU: the host-to-device copies launched after the
    loader's last `__next__` returned and before the step's first kernel, and the synchronize calls inside their ops
    (non_blocking=False)."""
    loads = loader_next(step, SINGLE_PROCESS_LOADER)
    if not loads:
        return set()
    after = max(op.ts + op.dur for op in loads)
    first_kernel = min((w.launch.ts for w in step.gpu if w.kind == "kernel" and w.launch is not None
                        and w.launch.ts >= after), default=step.ts + step.dur)
    calls = {id(w.launch): w.launch for w in step.gpu if w.kind == "memcpy" and "HtoD" in w.name
             and w.launch is not None and after <= w.launch.ts < first_kernel}
    syncs = _copy_syncs(step)
    ops = {id(call.launcher) for call in calls.values() if call.launcher is not None}
    return set(calls) | {id(c) for op in ops for c in syncs.get(op, ())}


def dataloader(r: Reading) -> list[Finding]:
    """A DataLoader without workers: the batch is made on the training loop's thread, between two steps' work, and the
    GPU waits for it (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`). Where the batch is made of small
    ops (samples read, decoded, indexed: one thread each), workers make it beside the step; where it is made of large
    tensor ops that torch already spread over the cores (SPREAD_SHARE), workers would share those cores, and the batch
    is made on the GPU instead.

    Sources: torch.profiler's pattern matcher (SynchronizedDataLoaderPattern: num_workers=0), the TensorBoard
    profiler plugin's recommendation (DataLoader over 5% of a step), PyTorch's performance tuning guide
    ("enable async data loading"); NVIDIA DALI and torchvision's transforms v2 on tensors (augmentation on the GPU)."""
    loads = [op for s in r.steps for op in loader_next(s, SINGLE_PROCESS_LOADER)]
    if not loads or r.replay is None:
        return []

    def loader_spans(step: Step):
        return spans_of(loader_next(step, SINGLE_PROCESS_LOADER))

    spent = sum(op.dur for op in loads)
    made = r.per_step(spent)
    share, spread_ops, gpu_share = _batch_ops(r.steps, spent)
    evidence = (f"{loads[0].name}: {us(made)} a step on the training loop's thread, "
                f"{made / r.step_us:.0%} of the step")
    if gpu_share >= 0.5:
        # The batch is made on the GPU already: workers cannot take CUDA work off the loop; what can go is a launch
        # per sample and op
        return _samples_on_gpu(r, loads, evidence)
    if share >= SPREAD_SHARE:
        return [_batch_on_gpu(r, loads, loader_spans, evidence, share, spread_ops)]
    low, high = r.replay.saving(cut_cpu(loader_spans, WORKER_KEEP[1]), [cut_cpu(loader_spans, WORKER_KEEP[0])])
    # The loop waits for the workers when they are slower than the rest of its step
    saving = (max(0.0, min(low, r.step_us - made)), max(0.0, min(high, r.step_us - made / WORKERS)))
    change = (f"DataLoader(dataset, batch_size=..., num_workers={WORKERS}, pin_memory=True, persistent_workers=True, "
              "prefetch_factor=2)")
    basis = r.basis(f"workers make the batches beside the step; the loop keeps {WORKER_KEEP[0]:.0%}-"
                    f"{WORKER_KEEP[1]:.0%} of the loading to receive them, and waits for {WORKERS} workers that make "
                    f"a batch {WORKERS} times as fast as its thread did at best, no faster at worst (a worker runs on "
                    "one thread, as the batch's small ops did on the loop's)")
    return [Finding("dataloader", "batches made on the training loop's thread", evidence, change, saving, r.step_us,
                    basis, source_of(dataloader), where=where_of(loads), count_per_step=r.per_step(len(loads)))]


def _samples_on_gpu(r: Reading, loads: list[CpuOp], evidence: str) -> list[Finding]:
    """The dataloader finding for a batch made on the GPU a sample at a time: the dataset's ops that launch GPU work,
    called once per sample (LOOP_MIN times a step or more), made once per batch instead; [] for a batch made a batch
    at a time."""
    per_sample: dict[str, list[CpuOp]] = {}
    for s in r.steps:
        for op in s.ops:
            if op.launched and not op.is_label and _top_level(op) and _making_batch(op):
                per_sample.setdefault(op.name, []).append(op)
    repeated = {name: ops for name, ops in per_sample.items() if r.per_step(len(ops)) >= LOOP_MIN}
    if not repeated:
        return []
    ops = [op for found in repeated.values() for op in found]

    def launching_spans(step: Step):
        return spans_of(op for op in ops if step.ts <= op.ts <= step.ts + step.dur)

    saving = r.replay.saving(cut_cpu(launching_spans, SAMPLE_OPS_KEEP[1]), [cut_cpu(launching_spans,
                                                                                  SAMPLE_OPS_KEEP[0])])
    names = ", ".join(f"{name.removeprefix('aten::')} ×{r.per_step(len(found)):,.0f}"
                      for name, found in sorted(repeated.items(), key=lambda kv: -len(kv[1]))[:4])
    launches = r.per_step(sum(op.launched for op in ops))
    evidence += (f"; made on the GPU a sample at a time: {names} a step, {launches:,.0f} launches and "
                 f"{us(r.per_step(sum(op.dur for op in ops)))} of CPU a step in them")
    change = ("make each batch in a few ops over all its samples: a Dataset's __getitems__(indices), which DataLoader "
              "hands a batch's indices, indexing the data with all of them at once")
    basis = r.basis(f"one op a batch for each op a sample, keeping {SAMPLE_OPS_KEEP[0]:.0%}-{SAMPLE_OPS_KEEP[1]:.0%} "
                    "of those ops' CPU time; the samples' own Python (their indices, their random draws) stays")
    return [Finding("dataloader", "batches made on the GPU a sample at a time", evidence, change, saving, r.step_us,
                    basis, source_of(dataloader), where=where_of(ops), count_per_step=r.per_step(len(loads)))]


def _batch_on_gpu(r: Reading, loads: list[CpuOp], loader_spans, evidence: str, share: float,
                  spread_ops: Counter) -> Finding:
    """The dataloader finding for a batch made of large tensor ops: made on the GPU, from data kept there."""
    copies: dict[int, set[int]] = {}  # per replayed step, found once: each edit asks again

    def on_gpu(keep: float, without_copies: bool):
        cut = cut_cpu(loader_spans, keep)

        def edit(s):
            events, tail = cut(s)
            if without_copies:
                gone = copies.get(id(s.step))
                if gone is None:
                    gone = copies[id(s.step)] = _batch_copies(s.step)
                events = [e for e in events if e.call is None or id(e.call) not in gone]
            return events, tail
        return edit

    saving = r.replay.saving(on_gpu(GPU_BATCH_KEEP[1], False), [on_gpu(GPU_BATCH_KEEP[0], True)])
    names = ", ".join(name.removeprefix("aten::") for name, _ in spread_ops.most_common(3))
    change = (f"make the batch on the GPU: keep the dataset's tensors there (data = data.to('cuda'), once) and run its "
              f"{names} there over all of a batch's samples at once (Dataset.__getitems__(indices)), a few kernels "
              "and no copy of the batch each step; workers would make it on the cores torch already spreads these "
              "ops over")
    basis = r.basis(f"{share:.0%} of the loader's time is in ops on {GRAIN_SIZE:,} elements or more, which torch spread "
                    f"over the loop's cores; on the GPU the loop keeps {GPU_BATCH_KEEP[0]:.0%}-"
                    f"{GPU_BATCH_KEEP[1]:.0%} of the loading's CPU time to launch them, and the batch's copies to the "
                    "GPU go at most (they stay where the data is too large to keep there)")
    return Finding("dataloader", "batches made on the training loop's thread", evidence, change, saving, r.step_us,
                   basis, source_of(dataloader), where=where_of(loads), count_per_step=r.per_step(len(loads)))


def dataloader_workers(r: Reading) -> list[Finding]:
    """A DataLoader with workers that do not keep up: the loop's `__next__` (`_MultiProcessingDataLoaderIter`) waits
    for the next batch, and the GPU with it. More workers help where the host has cores to spare for them, a cheaper
    `__getitem__` (decoding or augmenting on the GPU) everywhere. How much the host can spare no trace says: the range
    starts at nothing.

    Sources: the TensorBoard profiler plugin's recommendation (DataLoader over 5% of a step), PyTorch's performance
    tuning guide ("enable async data loading"); lesson 12 on an H100, every habit fixed: the loop waited 205 ms for
    its 4 workers in one recorded step of three, and the step took 60 ms without the profiler against 8 ms of GPU
    work."""
    waits = [op for s in r.steps for op in loader_next(s, MULTI_PROCESS_LOADER)]
    if not waits or r.replay is None:
        return []

    def wait_spans(step: Step):
        return spans_of(loader_next(step, MULTI_PROCESS_LOADER))

    _, high = r.replay.saving(cut_cpu(wait_spans, WORKER_KEEP[0]))
    spent = sum(op.dur for op in waits)
    longest = max(waits, key=lambda op: op.dur)
    evidence = (f"{longest.name}: {us(r.per_step(spent))} a step on the training loop's thread, waiting for the "
                f"workers' next batch ({us(longest.dur)} the longest wait)")
    change = ("more DataLoader workers (num_workers=, as many as the host's cores can spare), persistent_workers=True, "
              "a larger prefetch_factor; or a cheaper __getitem__ (decode and augment on the GPU)")
    basis = r.basis(f"the waits gone but for {WORKER_KEEP[0]:.0%} of them to receive each batch, at most; nothing at "
                    "least (workers already on every core the host has make batches no faster)")
    return [Finding("dataloader-workers", "the loop waits for the DataLoader's workers", evidence, change,
                    (0.0, high), r.step_us, basis, source_of(dataloader_workers),
                    where=where_of(waits), count_per_step=r.per_step(len(waits)))]


# --- tensors built on the CPU every step -----------------------------------------------------------------------


def _top_level(op: CpuOp) -> bool:
    """An op called from Python, not from inside another op (its path holds labels and Python frames only)."""
    return not any(box.startswith("aten::") for box in op.path)


def _built_on_cpu(step: Step) -> list[tuple[CpuOp, list[CpuOp]]]:
    """Each host-to-device copy of the step whose source the step built on the CPU just before, from factory ops called
    from Python (`torch.arange(...)`, `torch.ones(...)`, then `.to('cuda')`), with the ops that made it: the factory
    ops and those after them (`* freqs`, `torch.stack`). The batch a DataLoader made is no such tensor: the walk back
    stops at the loader, as at any op that launched GPU work; nor is a megabyte or more of the host's data turned into
    a tensor (FROM_DATA)."""
    copies = []
    nbytes: Counter = Counter()  # per copying op: the bytes it copied to the GPU
    for w in step.gpu:
        if w.kind == "memcpy" and "HtoD" in w.name and w.launch is not None and w.launch.launcher is not None:
            copies.append(w.launch.launcher)
            nbytes[id(w.launch.launcher)] += (w.comm_args or {}).get("bytes", 0) or 0
    if not copies:
        return []
    by_thread: dict[tuple, list[CpuOp]] = {}
    for op in step.ops:
        if not op.is_label and _top_level(op):
            by_thread.setdefault((op.pid, op.tid), []).append(op)
    for ops in by_thread.values():
        ops.sort(key=lambda o: o.ts)
    found = []
    for op in copies:
        if in_loader(op):
            continue
        thread = by_thread.get((op.pid, op.tid), [])
        starts = [o.ts for o in thread]
        # the copy's own top-level op (`aten::to`), then the ones before it, latest first
        i = bisect.bisect_right(starts, op.ts) - 1
        made = []
        earlier = []  # each op back from the copy, up to the first factory op: the tensor's making (`* freqs`, stack)
        for o in reversed(thread[max(0, i - 64):max(0, i)]):
            if o.launched or in_loader(o) or DATALOADER in o.name:
                break
            earlier.append(o)
            if o.name in FACTORY:
                made.extend(earlier)
                earlier = []
        if made and not (all(o.name in FROM_DATA for o in made if o.name in FACTORY) and nbytes[id(op)] >= DATA_BYTES):
            found.append((op, made))
    return found


def cpu_built_tensor(r: Reading) -> list[Finding]:
    """A tensor built on the CPU and copied to the GPU every step: a mask, positions, a constant. Its making costs the
    CPU each step, its copy a launch (and, from pageable memory, a wait). Built once on the device, it costs nothing.

    Sources: PyTorch's performance tuning guide ("create tensors directly on the target device"); torch.profiler's
    pattern matcher (ExtraCUDACopyPattern)."""
    if r.replay is None:
        return []
    per_step = [(s, _built_on_cpu(s)) for s in r.steps]
    found = [(op, made) for _, pairs in per_step for op, made in pairs]
    if not found:
        return []
    copy_ops = {id(op) for op, _ in found}

    def spans(step: Step):
        items = [o for op, made in _built_on_cpu(step) for o in (op, *made)]
        return spans_of(items)

    def drop(keep: float):
        cut = cut_cpu(spans, keep, gpu_keep=0.0)

        def edit(s):
            # The copy's calls cost nothing and wait for nothing; the CPU time before them stays but for the making
            # and the copy's op, which `cut` took out: a gap holds what else the thread did since its last call (4 ms
            # of the data step's Python in lesson 12, not the table's 0.2 ms)
            events, tail = cut(s)
            return [e if e.call is None or e.call.launcher is None or id(e.call.launcher) not in copy_ops
                    else replace(e, own=0.0, waits=False, work=0.0, blocks_on_work=False) for e in events], tail
        return edit

    saving = r.replay.saving(drop(0.0), [drop(0.1)])
    makers = Counter(o.name for _, made in found for o in made if o.name in FACTORY)
    copied = [w for s in r.steps for w in s.gpu if w.kind == "memcpy" and w.launch is not None
              and w.launch.launcher is not None and id(w.launch.launcher) in copy_ops]
    nbytes = sum((w.comm_args or {}).get("bytes", 0) or 0 for w in copied)
    size = f" ({megabytes(r.per_step(nbytes))} a step)" if nbytes else ""
    making = r.per_step(sum(o.dur for _, made in found for o in made))  # what the host spends: hosts differ 200×
    evidence = (f"{times(r.per_step(len(found)))} a step a tensor made on the CPU by "
                f"{', '.join(n for n, _ in makers.most_common(4))} ({us(making)} a step) and copied to the GPU{size}")
    change = _device_change(makers)
    return [Finding("cpu-built-tensor", "tensors built on the CPU and copied every step", evidence, change, saving,
                    r.step_us, r.basis("the making, its copy and any wait for the copy removed"),
                    source_of(cpu_built_tensor),
                    where=where_of(op for op, _ in found), count_per_step=r.per_step(len(found)))]


def _device_change(makers: Counter) -> str:
    """The change for the tensors its makers build: random ones are made on the device each step (a constant would
    change what the script does); the others once, before the loop."""
    maker = makers.most_common(1)[0][0]
    call = f"torch.{USER_CALL.get(maker, maker.removeprefix('aten::'))}(..., device='cuda')"
    if all(name in RANDOM for name in makers):
        return f"make it on the GPU, with no copy: {call}"
    return f"build it once, on the GPU, before the loop: {call} (or keep it as a module's buffer)"


# --- the launching thread's other work ------------------------------------------------------------------------


def host_gaps(r: Reading) -> list[Finding]:
    """The GPU idles while the host launches nothing for 10 ms or more at a time (pace.HOST_WORK_US): metrics
    computed on the CPU, logging, a scheduler's Python, a first call's setup. Not the launches' cost: no CUDA graph
    takes it away. The finding names what the thread that launched next ran in those stretches (its ops, and the time
    the profiler recorded nothing: Python, or code without ops) and promises nothing at least, as no trace says whether
    that work can move.

    Sources: HTA's critical path (the CPU's own work against launch overhead), Nsight Systems' expert rule for GPU
    gaps."""
    if r.verdict.kind == "CUDA graph capture":
        return []  # a window that captures a graph launches nothing to the GPU while it records (vLLM's capture traces)
    stretches = [s for s in r.verdict.idle_stretches if s.cause == "host work"]  # each ended by a launched work
    if not stretches:
        return []
    idle = sum(s.end - s.start for s in stretches)
    # the quiet windows (the last launch's return to the next launch), with the thread that launched next; they do
    # not overlap one another
    windows = sorted((s.quiet_from, s.work.launch.ts, (s.work.launch.pid, s.work.launch.tid)) for s in stretches)
    quiet_us = sum(end - begin for begin, end, _ in windows)
    ran: Counter = Counter()  # op name -> µs of it inside the quiet windows
    seen: list[CpuOp] = []
    for step in r.steps:  # only the steps a window crosses, and only those windows
        k = bisect.bisect_right(windows, (step.ts + step.dur,))
        crossing = [w for w in windows[max(0, k - 2):k] if w[1] > step.ts]
        if not crossing:
            continue
        for op in step.ops:
            start, end = op.ts, op.ts + op.dur
            inside = 0.0
            for begin, stop, thread in crossing:
                if begin < end and stop > start and thread == (op.pid, op.tid):
                    inside += min(stop, end) - max(begin, start)
            if inside > 0 and not op.is_label and _top_level(op):
                ran[op.name] += inside
                seen.append(op)
    recorded = sum(ran.values())
    parts = [f"{name} {us(r.per_step(t))}" for name, t in ran.most_common(3)]
    unrecorded = max(0.0, quiet_us - recorded)
    if unrecorded > 0.05 * quiet_us:
        parts.append(f"{us(r.per_step(unrecorded))} in nothing the profiler records (Python, code without ops)")
    evidence = (f"the GPU idled {us(r.per_step(idle))} a step in {times(r.per_step(len(stretches)))} stretches of "
                f"{us(idle / len(stretches))} on average, no thread launching for {us(r.per_step(quiet_us))} a step; "
                "the thread that launched next ran: " + "; ".join(parts))
    change = ("see what that thread did there (with_stack=True names the Python lines) and take it off the step's "
              "path: every N steps instead of each, in a worker or a thread of its own")
    if not r.trace.from_profiler_steps:  # a recording with no schedule may hold a first call's setup
        change += ("; a trace without ProfilerStep may hold first calls' setup (cuDNN's algorithm search, lazy "
                   "loading): record after a warmup step, schedule(wait=1, warmup=1, active=3)")
    basis = ("the GPU's idle stretches with no launch from the host, at most; nothing at least (no trace says "
             "whether that work can move)")
    return [Finding("host-gaps", "the GPU waits while the host launches nothing", evidence, change,
                    (0.0, min(r.step_us, r.per_step(idle))), r.step_us, basis, source_of(host_gaps),
                    where=where_of(seen), count_per_step=r.per_step(len(stretches)))]


RULES = (pageable_copy, sync, dataloader, dataloader_workers, cpu_built_tensor, host_gaps)
