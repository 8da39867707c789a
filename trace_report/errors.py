"""What a user meets when something goes wrong: one clear line on stderr and the right exit code, never a traceback.

    bad input (a flag, a file, a size this machine cannot hold)   one line, exit 2
    something this machine cannot do (fewer GPUs than ranks)      one line, exit 1
    Ctrl-C, anywhere (the imports included)                       "interrupted", exit 130
    output that cannot be written (a full disk, a closed stdout)  one line, exit 1
    memory that runs out all the same (a failed allocation)       one line naming the sizes, exit 1
    a reader that left (`| head`)                                 nothing, exit 0

A size check (`profiling_in_pytorch.device.require_fit`) compares a run's sizes with the free memory of the
machine or the GPU; a process can still be held to less (a `ulimit -v`, a container's limit, another process
taking the GPU's memory meanwhile). The check names what it admitted (`allocating`), so that when an allocation
fails after it, the one line says what was being allocated and how much.

Tracebacks are for our bugs. Importing this module first makes a Ctrl-C during the imports that follow (torch
takes seconds to load) end in one line too: every command imports it before anything heavy.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sys
import warnings
from typing import Callable, TypeVar

T = TypeVar("T")

EXIT_USAGE = 2
EXIT_WRITE = 1
EXIT_OUT_OF_MEMORY = 1
EXIT_CANNOT_RUN = 1
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Input the user can fix: bad flag, missing GPU, unreadable file, unreachable Hub, ..."""


class CannotRunHere(Exception):
    """A run this machine cannot do as asked (fewer GPUs than the ranks it was started with, ...): one line, exit 1."""


def first_line(err: BaseException) -> str:
    """An exception as one line: its message's first line, or its type's name when it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _prog() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "error"


def _say(line: str) -> None:
    """One line on stderr, whatever stderr's encoding can take."""
    stream = sys.stderr
    if stream is None:
        return
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        stream.write(line.encode(encoding, "replace").decode(encoding) + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass  # stderr itself is gone: the exit code still says it


def note(message: str) -> None:
    """One line on stderr that is no error: something the user should know, the run still a success."""
    _say(f"note: {message}")


def fail(message: str) -> None:
    """Print one line on stderr and exit 2."""
    _say(f"{_prog()}: error: {message}")
    raise SystemExit(EXIT_USAGE)


def _in_chain(err: BaseException, matches: Callable[[BaseException], bool]) -> BaseException | None:
    """`err`, or the error it was raised while handling (and so on back), that `matches`; None if none does.
    An error raised while unwinding from another (torch's profiler raises an AssertionError from its __exit__
    when a KeyboardInterrupt stops it mid-step) hides the first one, which is the one to report."""
    seen = set()
    while err is not None and id(err) not in seen:
        if matches(err):
            return err
        seen.add(id(err))
        err = err.__context__
    return None


def _interrupted(err: BaseException) -> bool:
    """Ctrl-C, or an error raised while unwinding from one."""
    return _in_chain(err, lambda e: isinstance(e, KeyboardInterrupt)) is not None


# --- memory that runs out --------------------------------------------------------------------------------------

_admitted: str | None = None  # what the last size check let through, with its size


def allocating(what: str) -> None:
    """Say what the command allocates from here on, with its size ("the weights and one forward's tensors in
    fp32 (8.6 GB in all)"): should an allocation fail, `exits_cleanly`'s one line names it."""
    global _admitted
    _admitted = what


def is_out_of_memory(err: BaseException) -> bool:
    """A failed allocation: torch's OutOfMemoryError (CUDA), its CPU allocator's RuntimeError ("DefaultCPUAllocator:
    can't allocate memory"), cuBLAS failing to get its workspace, or Python's own MemoryError. Read by type name
    and message: this module never imports torch (it loads before torch does)."""
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError":
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and any(
        sign in text for sign in ("can't allocate memory", "CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED")
    )


def readable_bytes(n: int) -> str:
    """A byte count as people read it: 8.6 GB, 512.0 MB, 4,096 bytes."""
    if n >= 1e18:
        return f"{n:.1e} bytes"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} bytes"


def out_of_memory_line(err: BaseException) -> str:
    """A failed allocation as one line: what the size check admitted, what torch could not get, what to try.

    torch says how much it tried to allocate: "you tried to allocate 2147483648 bytes" (its CPU allocator),
    "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free" (CUDA).
    """
    text = str(err)
    on_gpu = type(err).__name__ == "OutOfMemoryError" or "CUDA" in text or "CUBLAS" in text
    tried = re.search(r"tried to allocate (\d+) bytes", text, re.IGNORECASE)
    tried = readable_bytes(int(tried.group(1))) if tried else _torch_size(r"Tried to allocate ([\d.]+ \w+)", text)
    free = _torch_size(r"of which ([\d.]+ \w+) is free", text)
    what = f" allocating {_admitted}" if _admitted else ""
    could_not = f"{tried} more could not be had" if tried else "an allocation failed"
    if on_gpu:
        where = f" on the GPU ({free} free)" if free else " on the GPU"
        hint = "other processes may hold the GPU's memory: nvidia-smi lists them"
    else:
        where = ""
        hint = "this process may get less memory than the machine has free: a ulimit -v, a container's limit"
    return f"out of memory{what}: {could_not}{where}; try smaller sizes ({hint})"


def _torch_size(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text)
    return found.group(1) if found else None


# What our output says with symbols, for a terminal whose encoding cannot show them (LC_ALL=C): rich draws its
# tables in ASCII there by itself; anything else unencodable becomes "?".
ASCII = str.maketrans({
    "✓": "ok", "✗": "x", "·": "-", "•": "*", "→": "->", "×": "x", "µ": "u", "≫": ">>", "≥": ">=", "≤": "<=",
    "…": "...", "–": "-", "—": "-", "‖": "|", "Δ": "d", "’": "'", "³": "^3", "²": "^2",
})


# In a table's lines (rich's ASCII box: they start with "|" or "+"; a table without one pads its cells with spaces)
# each symbol keeps its one column: rich laid the table out for it, and "..." for "…" pushed a V100 report's rows
# 2-4 characters past an 80-column terminal.
ASCII_IN_TABLES = str.maketrans({
    "✓": "v", "✗": "x", "·": "-", "•": "*", "→": ">", "×": "x", "µ": "u", "≫": ">", "≥": ">", "≤": "<",
    "…": "~", "–": "-", "—": "-", "‖": "|", "Δ": "d", "’": "'", "³": "3", "²": "2",
})


def ascii_text(text: str) -> str:
    """`text` with our symbols in ASCII: spelt out (ASCII), but one character each in a table's lines."""
    return "\n".join(line.translate(ASCII_IN_TABLES if _laid_out(line) else ASCII) for line in text.split("\n"))


def _laid_out(line: str) -> bool:
    """A line of a table: a border first, or cells padded apart (two spaces inside it)."""
    return line[:1] in "|+" or "  " in line.strip()


class _AsciiStream:
    """A text stream that spells our symbols in ASCII before writing them to one that cannot encode them."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(ascii_text(text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _fit_streams() -> None:
    """Make stdout and stderr take anything we print; a closed stdout is a failed write (exit 1)."""
    if sys.stdout is None:
        _say(f"{_prog()}: error: cannot write the output: standard output is closed")
        raise SystemExit(EXIT_WRITE)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if stream is None or isinstance(stream, _AsciiStream) or encoding.startswith("utf"):
            continue
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass
        setattr(sys, name, _AsciiStream(stream))


def _quiet_stdout() -> None:
    """The reader left: send what is still buffered nowhere, so the exit flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def exits_cleanly(main: Callable[..., T]) -> Callable[..., T]:
    """Wrap a command's main: bad input, Ctrl-C, a reader that left, a failed write and a failed allocation each
    end as the table above says. The output is flushed inside, so that a write that fails at the end is caught here
    too."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            _fit_streams()
            result = main(*args, **kwargs)
            if sys.stdout is not None:
                sys.stdout.flush()
            return result
        except UsageError as err:
            fail(first_line(err))
        except CannotRunHere as err:
            _say(f"{_prog()}: error: {first_line(err)}")
            raise SystemExit(EXIT_CANNOT_RUN) from None
        except SystemExit:
            raise
        except BrokenPipeError:
            _quiet_stdout()
            raise SystemExit(0) from None
        except BaseException as err:
            if _interrupted(err):
                _say("interrupted")
                raise SystemExit(EXIT_INTERRUPTED) from None
            out_of_memory = _in_chain(err, is_out_of_memory)
            if out_of_memory is not None:
                _say(f"{_prog()}: error: {out_of_memory_line(out_of_memory)}")
                raise SystemExit(EXIT_OUT_OF_MEMORY) from None
            if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT):
                _say(f"{_prog()}: error: cannot write the output: {os.strerror(err.errno)}")
                raise SystemExit(EXIT_WRITE) from None
            raise

    return wrapper


def _interrupt_hook(kind, value, traceback, _default=sys.excepthook):
    """A Ctrl-C before a command's main runs (while torch loads): one line and exit 130, not a traceback."""
    if issubclass(kind, KeyboardInterrupt):
        _say("interrupted")
        os._exit(EXIT_INTERRUPTED)  # nothing is being written yet; skip the interpreter's SIGINT re-raise
    _default(kind, value, traceback)


sys.excepthook = _interrupt_hook

# A first backward on a GPU runs cuBLAS on autograd's own device thread, which has no CUDA context yet; torch
# says so once ("Attempting to run cuBLAS, but there was no current CUDA context! Attempting to set the primary
# context...") and sets it. Nothing is wrong, and the line would sit alone on a training run's stderr.
warnings.filterwarnings("ignore", message="Attempting to run cuBLAS, but there was no current CUDA context")
