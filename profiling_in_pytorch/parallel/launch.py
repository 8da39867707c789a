"""Joining the run torchrun started: one process per rank, each with its GPU (or a CPU), one process group.

torchrun starts N copies of the lesson and tells each who it is through the environment (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). `process_group` reads it, picks the backend (NCCL between
GPUs, gloo between CPU processes), gives rank r the GPU r of its host, and creates the process group; leaving the
block destroys it, as torch asks before a process exits.

Every rank runs the same code and computes the same things; rank 0 alone prints (`one_voice`): the others' console
is quiet, and their one-line errors end silently with the same exit code, so the user reads each line once. torchrun
then adds its own report of the failed workers (and exits 1 whatever their code was).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import shlex
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

import torch
import torch.distributed as dist

from profiling_in_pytorch import lesson
from trace_report.errors import EXIT_CANNOT_RUN, EXIT_INTERRUPTED, EXIT_USAGE, CannotRunHere, UsageError
from profiling_in_pytorch.device import pick_device

T = TypeVar("T")

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")

# NVLink multicast (NVLS: the NVSwitch reducing for NCCL; the multimem ops of torch's symmetric memory and NVSHMEM)
# stays off on the GPU hosts these lessons run on: forced, since a value already in the environment must not turn it
# back on. Nothing here uses symmetric memory or multimem ops either: NCCL's ring or tree over NVLink does the work.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass
class Ranks:
    """This process's place in the run: its rank among `world`, its GPU (or the CPU), the backend between them."""

    rank: int
    world: int
    local_rank: int
    device: torch.device  # `cuda` means this rank's GPU: torch.cuda.set_device(local_rank) made it the current one
    backend: str

    @property
    def leader(self) -> bool:
        """Rank 0: the one that prints, and reads every rank's trace once all are written."""
        return self.rank == 0

    @cached_property
    def mesh(self):
        """The 1-D DeviceMesh of all ranks, for DTensor: made on first use, over the process group already there."""
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(self.device.type, (self.world,))

    def describe(self) -> str:
        return f"rank {self.rank} of {self.world}, {self.backend}"


def env_rank() -> int | None:
    """RANK as torchrun set it; None outside torchrun."""
    value = os.environ.get("RANK", "")
    return int(value) if value.isdigit() else None


def launch_command(script: str, argv: Sequence[str] | None = None, nproc: int = 2) -> str:
    """The command that starts `script` with these arguments under torchrun, as it can be typed here."""
    args = list(sys.argv[1:] if argv is None else argv)
    torchrun = lesson._command("torchrun", "torch.distributed.run")
    return " ".join([torchrun, "--nproc-per-node", str(nproc), Path(script).name, *map(shlex.quote, args)])


def require_torchrun(script: str, argv: Sequence[str] | None = None) -> None:
    """Outside torchrun: one line with the command that starts this run under it (exit 2)."""
    missing = [name for name in TORCHRUN_VARIABLES if name not in os.environ]
    if missing:
        raise UsageError(
            f"this lesson runs as one process per GPU (or per CPU process), which torchrun starts ({missing[0]} is "
            f"not set): {launch_command(script, argv)}"
        )


def parse_on_every_rank(parser, argv: Sequence[str] | None):
    """parse_args on each rank; a bad flag is one line from rank 0, the other ranks exit with the same code silently,
    a moment after rank 0 (torchrun stops the run at the first rank that fails: leaving at once, rank 1 ended
    `--variant bogus` on 2 CPU processes before rank 0 had printed why, in 5 of 8 runs)."""
    if env_rank() in (None, 0):
        return parser.parse_args(argv)
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            return parser.parse_args(argv)
        except SystemExit as bad_flag:
            if bad_flag.code:  # --help exits 0 at once
                _after_rank_0()
            raise


def one_voice(main: Callable[..., T]) -> Callable[..., T]:
    """Rank 0 speaks for all: on the other ranks the lesson's console is quiet, and a one-line error or Ctrl-C ends
    with its exit code and no line (rank 0 prints it). Bugs keep their traceback on every rank."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        if env_rank() in (None, 0):
            return main(*args, **kwargs)
        lesson.console.quiet = True
        try:
            return main(*args, **kwargs)
        except UsageError:
            _after_rank_0()
            raise SystemExit(EXIT_USAGE) from None
        except CannotRunHere:
            _after_rank_0()
            raise SystemExit(EXIT_CANNOT_RUN) from None
        except KeyboardInterrupt:
            raise SystemExit(EXIT_INTERRUPTED) from None

    return wrapper


def _after_rank_0(seconds: float = 3.0) -> None:
    """A silent rank that fails the same check as rank 0 leaves a moment later: torchrun stops every other rank as
    soon as one fails, and on 2 H100s a rank without a GPU left first and rank 0 was stopped before its line."""
    time.sleep(seconds)


def leaves_at_once(main: Callable[..., int | None]) -> Callable[..., int | None]:
    """Under torchrun, a rank that is done exits with its code and its output flushed, skipping the interpreter's
    teardown (outside torchrun, main runs as it is).

    Why: gloo runs each collective on a worker thread of its process group, which drops the collective's tensors
    after the caller's wait() returns. When something still holds the group past destroy_process_group (a DeviceMesh
    in DTensor's caches; torch._dynamo imported after the group was made, as the profiler does), those threads outlive
    it, and one that drops a tensor once the interpreter has begun to shut down needs the GIL it can no longer take:
    the rank aborts ("terminate called without an active exception") and torchrun fails the run. On 2 cores, lesson
    08's CPU run (dtensor,plain,overlap --bench) did so in 3 of 18 tries, and a script whose ranks leave after 200
    all-reduces in 18 of 65; with this exit, 0 of 30 and 0 of 40 (torch 2.15). Every trace and table is written by
    then, and destroy_process_group has run.
    """

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        if env_rank() is None:
            return main(*args, **kwargs)
        try:
            code = main(*args, **kwargs)
        except SystemExit as done:
            code = done.code
        if not isinstance(code, int):  # as Python's own exit: a message goes to stderr and the code is 1
            if code is not None:
                print(code, file=sys.stderr)
            code = 0 if code is None else 1
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
        os._exit(code)

    return wrapper


@contextmanager
def process_group(device_name: str | None, nccl_channels: int | None = None) -> Iterator[Ranks]:
    """Join the run: NCCL between GPUs (rank r on its host's GPU r), gloo between CPU processes; destroyed on leaving.
    `nccl_channels`: NCCL's communicators get exactly that many channels (one thread block, so one SM, each).

    Fewer GPUs on this host than the ranks torchrun started on it is one line and exit 1, before anything starts.
    """
    os.environ.update(NO_MULTICAST)  # first: nothing below may create a communicator with multicast on
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    device = pick_device(device_name)
    if device.type == "cuda":
        gpus = torch.cuda.device_count()
        if gpus < local_world:
            raise CannotRunHere(
                f"{local_world} ranks on this host need a GPU each, and PyTorch sees {gpus}: start fewer "
                f"(--nproc-per-node {gpus}) or run on the CPU (--device cpu)"
            )
        torch.cuda.set_device(local_rank)
    # NCCL's streams at high priority: an all-reduce running beside compute (the overlapped variant) gets the SMs as
    # they free up, instead of waiting behind every block of the next GEMM. Alone on the GPU it changes nothing.
    os.environ.setdefault("TORCH_NCCL_HIGH_PRIORITY", "1")
    if nccl_channels:  # read when the communicator is made, below
        os.environ.update(NCCL_MIN_NCHANNELS=str(nccl_channels), NCCL_MAX_NCHANNELS=str(nccl_channels))
    backend = "nccl" if device.type == "cuda" else "gloo"
    # device_id binds NCCL's communicator to this rank's GPU now (and spares torch from guessing it at the first
    # barrier, with a warning).
    dist.init_process_group(backend, device_id=torch.device("cuda", local_rank) if backend == "nccl" else None)
    try:
        yield Ranks(rank, world, local_rank, device, backend)
    finally:
        dist.destroy_process_group()
