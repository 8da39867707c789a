"""Several ranks of one distributed run, read together: each rank's figures in a row, how far apart the ranks
reached each collective (skew), and the rank the others wait for (the straggler) with the reason its trace gives.

The traces are read as many at a time as there are cores (`--jobs`), here and in a pool of processes (parsing JSON
holds the GIL: threads would take turns), or by any concurrent.futures.Executor given; never a process per trace: 64
ranks would hold 64 parsed traces at once. What comes back from each trace is small, the figures this report prints
(`RankFigures`) and the trace's collectives: the parsed trace itself would cost as much to send back as to parse (a
30 MB trace: 1.5 s to read, 1.5 s to pickle and 1.2 s to unpickle on this project's 2-core CI machine; its figures
and collectives, 0.03 s and 1.6 MB). `per_rank`, a function, makes more of each rank where its trace is read (the
text `trace-report --ranks --json` prints of it, compressed); `keep_traces=True` (the DataFrames of every rank's
tables, `--png`'s ranks) reads the traces here, one after the other.

On one host the ranks share a clock, so the same collective's start on each rank can be compared. A collective's
kernel on one rank then splits in two: its wait, from its start to the last rank's arrival (the skew, which a late
rank causes), and its transfer, from that arrival to its end (what the link and the algorithm take). Its bandwidth
over the transfer alone is the link's figure; over the whole kernel a late rank and a slow link look alike. Nothing
here imports torch.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rich import box
from rich.markup import escape
from rich.table import Table

from trace_report.console import Console, clipped
from trace_report.errors import UsageError, note
from trace_report.files import file_size
from trace_report.attribution import rank_owner_rows
from trace_report.communication import Collective, Communication, KindRow, communication, distributed_info
from trace_report.communication import figure_text, size_text
from trace_report.kernels.collectives import decode_nccl
from trace_report.model import Trace, per_step_count
from trace_report.reader import read_trace

RANK_NAME = re.compile(r"^(?P<run>.+)_rank(?P<rank>\d+)\.json(?:\.gz)?$")


@dataclass
class RankFigures:
    """What the rank table, the skew and the straggler need of one rank's trace, small enough to send between
    processes."""

    name: str
    steps: int
    has_gpu: bool
    cpu_us_per_step: float
    gpu_busy_us_per_step: float | None
    window: tuple[float, float] | None  # first step's start to last step's end, on the CPU or the GPU
    op_self_us: Counter = field(default_factory=Counter)  # op name -> self µs per step
    compute_kernels: Counter = field(default_factory=Counter)  # kernel name -> µs per step, collectives left out
    owners: list[dict] = field(default_factory=list)  # per collective kind, unit and phase (attribution.py)
    queue_delay_us: float | None = None  # median, from a collective's launch call returning to its kernel's start

    @classmethod
    def of(cls, trace: Trace, comm: Communication | None, rank: int) -> "RankFigures":
        return cls(trace.name, len(trace.steps), trace.has_gpu, trace.cpu_us_per_step() if trace.steps else 0.0,
                   trace.gpu_busy_us_per_step() if trace.steps else None, _window(trace), _op_self_us(trace),
                   _compute_kernels(trace), rank_owner_rows(rank, trace, comm), _queue_delay(comm))


@dataclass
class RankTrace:
    rank: int
    comm: Communication | None
    figures: RankFigures
    host: str | None = None
    trace: Trace | None = None  # the parsed trace, where it was read in this process with keep_traces
    extra: Any = None  # what read_ranks' per_rank made of it, where it was read


@dataclass
class Skew:
    """The same collectives on every rank, matched by step and order: how far apart they started."""

    matched: int  # collectives found on every rank
    median_us: float
    max_us: float
    max_at: str  # "ProfilerStep#3, collective 1"
    waits_us_per_step: dict[int, float]  # rank -> per step, how long its collectives waited for the last rank to start
    last: Counter  # rank -> how often it started last

    def to_dict(self) -> dict:
        return {
            "matched": self.matched,
            "median_us": round(self.median_us, 3),
            "max_us": round(self.max_us, 3),
            "max_at": self.max_at,
            "waits_us_per_step": {str(rank): round(us, 3) for rank, us in self.waits_us_per_step.items()},
            "last_to_start": {str(rank): n for rank, n in self.last.items()},
        }


def is_rank_set(paths: Sequence[str | Path]) -> bool:
    """Two or more traces of one run, one per rank: `<run>_rank<r>.json`, the same <run>, each rank once."""
    found = [RANK_NAME.match(Path(p).name) for p in paths]
    if len(paths) < 2 or not all(found):
        return False
    return len({m["run"] for m in found}) == 1 and len({int(m["rank"]) for m in found}) == len(found)


def lowest_ranks(paths: Sequence[str | Path], n: int) -> list[str | Path]:
    """The `n` traces of the lowest ranks by their names (`<run>_rank<r>.json`), or the first `n` given where the names
    do not say."""
    found = [RANK_NAME.match(Path(p).name) for p in paths]
    if all(found):
        paths = [p for _, p in sorted(zip((int(m["rank"]) for m in found), paths), key=lambda pair: pair[0])]
    return list(paths[:n])


def read_ranks(paths: Sequence[str | Path], *, parallel: bool | None = None, keep_traces: bool = False,
               jobs: int | None = None, executor: concurrent.futures.Executor | None = None,
               skip_bad: bool = False, progress: Callable[[int, int], None] | None = None,
               per_rank: Callable[[RankTrace], Any] | None = None) -> list[RankTrace]:
    """Read each rank's trace; the rank comes from the trace's own `distributedInfo`, else from `_rank<r>` in its
    name, else from its place on the command line. Sorted by rank; the same rank twice is an error (one line).

    Each trace is reduced to its figures and collectives where it is read (`_read_rank`): only those come back. The
    traces are read `jobs` at a time (default: the cores), in a pool of that many processes, never one per trace; or
    by `executor`, any concurrent.futures.Executor (a process pool, a cluster's); one after the other when `parallel`
    is False, `keep_traces` asks for the parsed traces, or processes cannot start (a sandbox, no semaphores). A trace
    that cannot be read stops the run with one line that names it, unless `skip_bad`: then the others are read, and
    each one skipped is a note on stderr. `progress`, when given, is called as each trace is read, with the bytes of
    the traces read so far and of all of them (console.read_progress). `per_rank(rank)`, when given, is called where
    each trace is read, with its RankTrace, trace and collectives whole; what it returns (it must pickle: a function
    of a module's, not a lambda) comes back as the rank's `extra`."""
    todo = [(i, path, keep_traces, per_rank) for i, path in enumerate(paths)]
    workers = min(len(todo), jobs if jobs is not None else os.cpu_count() or 1)
    read = _Tally(paths, progress)
    results: list[RankTrace | str] | None = None
    if executor is not None and not keep_traces:
        results = [read(k, result) for k, result in enumerate(executor.map(_read_rank_or_why, todo))]
    elif (parallel if parallel is not None else True) and workers > 1 and not keep_traces:
        results = _read_in_processes(todo, workers, read)
    if results is None:
        read.done = 0  # from the start again, where the pool could not start or broke
        results = [read(k, _read_rank_or_why(job)) for k, job in enumerate(todo)]
    ranks = [r for r in results if isinstance(r, RankTrace)]
    bad = [why for why in results if isinstance(why, str)]
    if bad and not skip_bad:
        more = f" ({len(bad) - 1} more bad)" if len(bad) > 1 else ""
        rest = f"; --skip_bad reads the other {len(ranks)}" if ranks else ""
        raise UsageError(f"{bad[0]}{more}{rest}")
    for why in bad:
        note(f"skipped {why}")
    if not ranks:
        raise UsageError(f"none of the {len(todo)} traces could be read")
    seen = Counter(r.rank for r in ranks)
    if twice := [rank for rank, n in seen.items() if n > 1]:
        raise UsageError(f"rank {twice[0]} comes twice among the traces: give each rank's trace once")
    return sorted(ranks, key=lambda r: r.rank)


class _Tally:
    """The bytes of the traces read so far, told to `progress` as each one is read (its result passed through)."""

    def __init__(self, paths: Sequence[str | Path], progress: Callable[[int, int], None] | None):
        self.progress = progress
        self.sizes = [file_size(path) for path in paths] if progress is not None else []
        self.total = sum(self.sizes)
        self.done = 0

    def __call__(self, k: int, result: RankTrace | str) -> RankTrace | str:
        if self.progress is not None:
            self.done += self.sizes[k]
            self.progress(self.done, self.total)
        return result


def _read_rank_or_why(job: tuple) -> RankTrace | str:
    """The rank's figures, or the one line that says why its trace cannot be read (it names the file)."""
    try:
        return _read_rank(job)
    except UsageError as err:
        return str(err)


def _read_rank(job: tuple[int, str | Path, bool, Callable[[RankTrace], Any] | None]) -> RankTrace:
    i, path, keep, per_rank = job
    trace = read_trace(path)
    meta = trace.meta
    info = distributed_info(meta)
    named = RANK_NAME.match(Path(path).name)
    rank = info.get("rank") if isinstance(info.get("rank"), int) else int(named["rank"]) if named else i
    host = meta.get("host_name") if isinstance(meta.get("host_name"), str) else None
    comm = communication(trace)
    figures = RankFigures.of(trace, comm, rank)
    extra = per_rank(RankTrace(rank, comm, figures, host, trace)) if per_rank is not None else None
    if comm is not None and not keep:
        for c in comm.collectives:
            c.work = None  # its kernel, launch and launch path are in the figures now: 4× less to send back
    return RankTrace(rank, comm, figures, host, trace if keep else None, extra)


def _read_in_processes(todo: list, workers: int, read: _Tally) -> list[RankTrace | str] | None:
    """The traces read `workers` at a time: this process reads one as the pool's `workers - 1` processes read
    others, each taking the next trace as it finishes (a trace whole per task: what comes back is its figures).
    None where processes cannot start or die (the caller reads them all here then). Ctrl-C reaches the workers too
    (one process group): they ignore it, and the parent ends them, so that it alone says one line."""
    import multiprocessing
    import sys
    import threading

    try:
        # fork where this process runs one thread (trace-report): a worker starts in milliseconds, with everything
        # imported. Otherwise forkserver (fork copies other threads' locks badly: torch's, a lesson's), else spawn.
        methods = multiprocessing.get_all_start_methods()
        if sys.platform == "linux" and threading.active_count() == 1:
            method = "fork"
        else:
            method = "forkserver" if "forkserver" in methods else "spawn"
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([__name__])  # imported once, in the server: each worker forks from it
        pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers - 1, mp_context=context,
                                                      initializer=_ignore_interrupts)
    except (OSError, RuntimeError, ValueError):
        return None
    finished = False
    try:
        results: list[RankTrace | str | None] = [None] * len(todo)
        # The pool takes the traces from the end, this process from the start, until they meet: no trace waits for
        # a worker while this process idles, none is read twice.
        queue = list(range(len(todo)))
        running: dict[concurrent.futures.Future, int] = {}
        while queue or running:
            while queue and len(running) < workers - 1:
                k = queue.pop()
                running[pool.submit(_read_rank_or_why, todo[k])] = k
            if queue:
                k = queue.pop(0)
                results[k] = read(k, _read_rank_or_why(todo[k]))
            done, _ = concurrent.futures.wait(running, timeout=0 if queue else None,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                k = running.pop(future)
                results[k] = read(k, future.result())
        finished = True
        return results  # type: ignore[return-value]
    except (OSError, concurrent.futures.process.BrokenProcessPool):
        return None
    except BaseException:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
        raise
    finally:
        # Every trace read: the idle workers and the pool's manager thread are joined (milliseconds). Left running,
        # the thread closes its wake-up pipe as the interpreter's exit hook writes to it, and Python 3.11 prints
        # "Exception ignored ... OSError: [Errno 9] Bad file descriptor" after our last line (once, in a full test run
        # on 2 busy cores, the bad-rank test). On the way out of an error, the workers ended above: not waited for.
        pool.shutdown(wait=finished, cancel_futures=True)


def _ignore_interrupts() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def windows_overlap(ranks: Sequence[RankTrace]) -> bool:
    """Do the ranks' profiled windows overlap in time? They do for the ranks of one run on one host; traces of
    different runs, or from hosts whose clocks differ, do not. A window runs from its first step's start to its last
    step's end, on the CPU or the GPU, whichever is later: with a CUDA graph the CPU issues a step in tens of µs and
    runs far ahead, so one rank's CPU steps can all end before another's begin while their GPUs run side by side
    (lesson 08's --cuda_graph traces on 2 H100s: rank 1's CPU steps end 950 µs before rank 0's start, both GPUs
    end their work within 1 µs of each other)."""
    windows = [r.figures.window for r in ranks if r.figures.window is not None]
    return bool(windows) and max(a for a, _ in windows) <= min(b for _, b in windows)


def _window(trace: Trace) -> tuple[float, float] | None:
    if not trace.steps:
        return None
    first, last = trace.steps[0], trace.steps[-1]
    gpu = [w for s in trace.steps for w in s.gpu]
    return min([first.ts, *(w.ts for w in gpu)]), max([last.ts + last.dur, *(w.end for w in gpu)])


def skew(ranks: Sequence[RankTrace]) -> Skew | None:
    """Match each rank's collectives by (step, index) and compare their starts; None without any on every rank, or
    when the ranks' windows do not overlap in time (then their clocks cannot be compared). Each matched collective's
    `wait_us` and `transfer_us` are set on the way (split_wait)."""
    if not windows_overlap(ranks):
        return None
    by_rank = [{(c.step, c.index): c for c in r.comm.collectives} if r.comm else {} for r in ranks]
    keys = [k for k in by_rank[0] if all(k in other for other in by_rank[1:])] if by_rank else []
    if not keys:
        return None
    spreads, waits, last = [], Counter(), Counter()
    for key in keys:
        starts = {r.rank: found[key].ts for r, found in zip(ranks, by_rank)}
        latest = max(starts.values())
        split_wait([found[key] for found in by_rank], latest)
        spreads.append((latest - min(starts.values()), key))
        last[max(starts, key=starts.get)] += 1
        for rank, start in starts.items():
            waits[rank] += latest - start
    worst, (step, index) = max(spreads)
    steps = max(1, len({step for step, _ in keys}))
    return Skew(
        len(keys),
        statistics.median(s for s, _ in spreads),
        worst,
        f"{step}, collective {index}",
        {r.rank: waits[r.rank] / steps for r in ranks},
        last,
    )


def split_wait(matched: Sequence[Collective], arrival: float) -> None:
    """One collective on every rank, the last of them started at `arrival`: each rank's kernel waited from its start
    to then (no longer than it ran) and transferred from then to its end."""
    for c in matched:
        c.wait_us = min(c.dur, max(0.0, arrival - c.ts))
        c.transfer_us = c.dur - c.wait_us


@dataclass
class Straggler:
    """The rank the others wait for: the one that starts most collectives last, and what the traces say of why."""

    rank: int
    last: int  # collectives it started last
    matched: int
    reasons: list[str]

    def to_dict(self) -> dict:
        return {"rank": self.rank, "last": self.last, "matched": self.matched, "reasons": self.reasons}


QUEUED_US = 20.0  # a kernel that starts later than this after its launch returned had work ahead of it
SLOWER = 1.15  # a rank's CPU or GPU time this much above the others' median is a difference worth naming


def straggler(ranks: Sequence[RankTrace], lag: Skew | None = None) -> Straggler | None:
    """The rank that starts the majority of the matched collectives last, and why, where the traces say: more CPU
    time per step (every op slower alike: a slower or shared core; one op slower: that op), more GPU compute (the
    kernel that takes longer), or its collectives launched late (their kernels start as soon as the CPU launches
    them: the GPU was waiting for the CPU). None when no rank is last in most of them."""
    lag = lag if lag is not None else skew(ranks)
    if lag is None or len(ranks) < 2 or not lag.last:
        return None
    rank, n = lag.last.most_common(1)[0]
    if n * 2 <= lag.matched:
        return None
    slow = next(r for r in ranks if r.rank == rank)
    others = [r for r in ranks if r.rank != rank]
    reasons = [*_cpu_reason(slow, others), *_gpu_reason(slow, others), *_launch_reason(slow, others)]
    if not reasons:
        reasons = ["its CPU time, GPU compute and launches match the others': what delays it lies before the "
                   "profiled steps or outside the trace (data loading, another process on its GPU or core)"]
    return Straggler(rank, n, lag.matched, reasons)


def _op_self_us(trace: Trace) -> Counter:
    found: Counter = Counter()
    for step in trace.steps:
        for op in step.ops:
            found[op.name] += op.self_us / len(trace.steps)
    return found


def _compute_kernels(trace: Trace) -> Counter:
    found: Counter = Counter()
    for step in trace.steps:
        for w in step.gpu:
            if w.kind == "kernel":
                found[w.name] += w.dur / len(trace.steps)
    for name in [name for name in found if decode_nccl(name) is not None]:  # each distinct name decoded once
        del found[name]
    return found


def _cpu_reason(slow: RankTrace, others: Sequence[RankTrace]) -> list[str]:
    mine, theirs = slow.figures.cpu_us_per_step, statistics.median(r.figures.cpu_us_per_step for r in others)
    if theirs <= 0 or mine < SLOWER * theirs:
        return []
    if (delay := slow.figures.queue_delay_us) is not None and delay > QUEUED_US:
        return []  # its GPU had work queued when its collectives were launched: the CPU's pace did not hold it back
    text = f"its CPU spends {mine:,.0f} µs a step issuing it, the others {theirs:,.0f} ({mine / theirs:.2f}×)"
    own, base = slow.figures.op_self_us, others[0].figures.op_self_us
    top = [name for name, us in base.most_common(10) if us > 0 and name in own]
    ratios = sorted(own[name] / base[name] for name in top)
    if len(ratios) >= 3 and ratios[0] >= (1 + SLOWER) / 2:
        text += (f": every op slower alike (the {len(ratios)} costliest {ratios[0]:.1f}-{ratios[-1]:.1f}× rank "
                 f"{others[0].rank}'s self time, Python between them too): a slower or busier CPU core, not more work")
    elif top:
        extra = max(own, key=lambda name: own[name] - base.get(name, 0.0))
        text += f": most of the difference in {extra} (+{own[extra] - base.get(extra, 0.0):,.0f} µs)"
    return [text]


def _gpu_reason(slow: RankTrace, others: Sequence[RankTrace]) -> list[str]:
    if not slow.figures.has_gpu:
        return []
    own = slow.figures.compute_kernels
    bases = [r.figures.compute_kernels for r in others]
    mine, theirs = sum(own.values()), statistics.median(sum(b.values()) for b in bases)
    if theirs <= 0 or mine < SLOWER * theirs:
        return []
    base = bases[0]
    worst = max(own, key=lambda name: own[name] - base.get(name, 0.0))
    return [f"its GPU computes {mine:,.0f} µs a step, the others {theirs:,.0f}: {clipped(worst, 60)} takes "
            f"{own[worst] - base.get(worst, 0.0):+,.0f} µs"]


def _queue_delay(comm: Communication | None) -> float | None:
    """The median time from a collective's launch call returning to its kernel's start."""
    gaps = [c.ts - c.work.launch_end for c in (comm.collectives if comm else [])
            if c.work is not None and c.work.launch_end is not None]
    return statistics.median(gaps) if gaps else None


def _launch_reason(slow: RankTrace, others: Sequence[RankTrace]) -> list[str]:
    mine = slow.figures.queue_delay_us
    theirs = [r.figures.queue_delay_us for r in others if r.figures.queue_delay_us is not None]
    if mine is None or not theirs or mine > QUEUED_US or statistics.median(theirs) < 2 * max(mine, 5):
        return []
    return [f"its collectives' kernels start {mine:,.0f} µs after their launch returns (median; the others "
            f"{statistics.median(theirs):,.0f} µs): its GPU had nothing queued, it waited for the CPU's launch"]




# --- printing (trace-report) -----------------------------------------------------------------------------------


LISTED_RANKS = 4  # more ranks than this are named by their files' pattern, `RUN_rank{0..63}.json`, not one by one


def rank_files(ranks: Sequence[RankTrace]) -> str:
    """The ranks' files in a few words: each rank's (`rank 0: a.json, rank 1: b.json`), or, past LISTED_RANKS ranks
    whose files differ only by the rank's number, that pattern (`run_rank{0..63}.json`; a set with gaps lists its
    ranks, `run_rank{0,2,5}.json`)."""
    listed = ", ".join(f"rank {r.rank}: {r.figures.name}" for r in ranks)
    if len(ranks) <= LISTED_RANKS:
        return listed
    first = ranks[0].figures.name
    number = str(ranks[0].rank)
    at = first.rfind(number)
    while at >= 0:  # where the rank's number sits in the first name, tried from the right (`run7_rank7.json`)
        head, tail = first[:at], first[at + len(number):]
        if all(r.figures.name == f"{head}{r.rank}{tail}" for r in ranks):
            numbers = sorted(r.rank for r in ranks)
            contiguous = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            inner = f"{numbers[0]}..{numbers[-1]}" if contiguous else ",".join(map(str, numbers))
            return f"{head}{{{inner}}}{tail}"
        at = first.rfind(number, 0, at)
    return listed


def print_ranks(ranks: Sequence[RankTrace], console: Console) -> None:
    """One row per rank, then how far apart the ranks reached each collective."""
    console.print(f"[bold]{len(ranks)} ranks[/bold] · {escape(rank_files(ranks))}")
    lag = skew(ranks)
    steps = ", ".join(sorted({str(r.figures.steps) for r in ranks}))
    table = Table(title=f"per rank, per step (means over {steps} steps)")
    for name in ("rank", "CPU µs", "GPU busy µs", "collectives", "comm µs", "exposed µs", "waiting µs"):
        table.add_column(name, justify="right")
    for r in ranks:
        busy = r.figures.gpu_busy_us_per_step
        comm = r.comm
        timed = comm is not None and comm.where != "none"
        table.add_row(
            str(r.rank),
            f"{r.figures.cpu_us_per_step:,.1f}",
            "-" if busy is None else f"{busy:,.1f}",
            per_step_count(sum(comm.per_step()) / len(comm.steps)) if timed else "0",
            f"{comm.comm_us_per_step:,.1f}" if timed else "-",
            f"{comm.exposed_us_per_step:,.1f}" if timed else "-",
            f"{lag.waits_us_per_step[r.rank]:,.1f}" if lag else "-",
        )
    console.print(table)
    console.print(
        "  comm: collectives' time on the lane; exposed: the part with nothing else running; waiting: how long "
        "this rank's collectives started before the last rank's",
    )
    hosts = {r.host for r in ranks if r.host}
    if not windows_overlap(ranks):
        console.print(
            "skew: the ranks' profiled windows do not overlap in time: traces of different runs, or from hosts whose "
            "clocks differ, so their collectives cannot be compared",
        )
    elif lag is None:
        console.print("skew: no collective found on every rank, nothing to compare")
    else:
        last = ", ".join(f"rank {rank} ×{n}" for rank, n in lag.last.most_common())
        console.print(
            f"skew between ranks at each collective's start ({lag.matched} matched by step and order): median "
            f"{lag.median_us:,.1f} µs, max {lag.max_us:,.1f} µs ({escape(lag.max_at)}); last to start: {escape(last)}",
        )
        console.print(
            "  a collective ends once the last rank has joined it: the others wait for it, and on a GPU that wait "
            "is inside the NCCL kernel's duration",
        )
        slow = straggler(ranks, lag)
        if slow is not None:
            console.print(f"straggler: rank {slow.rank}, last to start {slow.last} of {slow.matched} collectives")
            for reason in slow.reasons:
                console.print(f"  {escape(reason)}")
        print_transfers(ranks, console)
    if len(hosts) > 1:
        console.print("[yellow]note:[/yellow] the traces come from different hosts, whose clocks differ: the skew "
                      "is not comparable")
    console.print()


def transfer_rows(ranks: Sequence[RankTrace]) -> list[tuple[int, KindRow]]:
    """Per rank and collective kind, the collectives matched on every rank (their wait and transfer set by skew):
    their mean kernel time, wait and transfer, and their busbw over each."""
    rows = []
    for r in ranks:
        kinds: dict[str, list[Collective]] = {}
        for c in (r.comm.collectives if r.comm else []):
            if c.transfer_us is not None:
                kinds.setdefault(c.collective, []).append(c)
        rows += [(r.rank, KindRow.of(found)) for found in kinds.values()]
    return rows


def print_transfers(ranks: Sequence[RankTrace], console: Console) -> None:
    """Each rank's collectives split into the wait for the last rank and the transfer after it."""
    rows = transfer_rows(ranks)
    if not rows:
        return
    table = Table(title="wait and transfer, per rank (means per collective)", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("rank", "collective"):
        table.add_column(name, no_wrap=True)
    for name in ("n", "size", "kernel µs", "wait µs", "transfer µs", "busbw GB/s", "on transfer"):
        table.add_column(name, justify="right", no_wrap=True)
    steps = max(1, max(r.figures.steps for r in ranks))
    for rank, k in rows:
        table.add_row(str(rank), k.collective, per_step_count(k.count / steps), size_text(k.bytes), f"{k.mean_us:,.1f}",
                      f"{k.wait_us:,.1f}", f"{k.transfer_us:,.1f}", figure_text(k.busbw_gbps),
                      figure_text(k.transfer_busbw_gbps))
    console.print(table)
    console.print("  n: per step; wait: the kernel ran before the last rank arrived; transfer: from then to its end; "
                  "busbw over the whole kernel, and on transfer alone (the link's figure: a late rank does not lower "
                  "it)", soft_wrap=False)
