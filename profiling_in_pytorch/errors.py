"""What a user meets when something goes wrong: one clear line on stderr and the right exit code, never a traceback.

    bad input (a flag, a file, a size this machine cannot hold)   one line, exit 2
    something this machine cannot do (fewer GPUs than ranks)      one line, exit 1
    Ctrl-C, anywhere (the imports included)                       "interrupted", exit 130
    output that cannot be written (a full disk, a closed stdout)  one line, exit 1
    a reader that left (`| head`)                                 nothing, exit 0

Tracebacks are for our bugs. Importing this module first makes a Ctrl-C during the imports that follow (torch
takes seconds to load) end in one line too: every command imports it before anything heavy.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import warnings
from typing import Callable, TypeVar

T = TypeVar("T")

EXIT_USAGE = 2
EXIT_WRITE = 1
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


def fail(message: str) -> None:
    """Print one line on stderr and exit 2."""
    _say(f"{_prog()}: error: {message}")
    raise SystemExit(EXIT_USAGE)


def _interrupted(err: BaseException) -> bool:
    """Ctrl-C, or an error raised while unwinding from one (torch's profiler raises an AssertionError from its
    __exit__ when a KeyboardInterrupt stops it mid-step)."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__context__
    return False


# What our output says with symbols, for a terminal whose encoding cannot show them (LC_ALL=C): rich draws its
# tables in ASCII there by itself; anything else unencodable becomes "?".
ASCII = str.maketrans({
    "✓": "ok", "✗": "x", "·": "-", "•": "*", "→": "->", "×": "x", "µ": "u", "≫": ">>", "≥": ">=", "≤": "<=",
    "…": "...", "–": "-", "—": "-", "‖": "|", "Δ": "d", "’": "'", "³": "^3", "²": "^2",
})


class _AsciiStream:
    """A text stream that spells our symbols in ASCII before writing them to one that cannot encode them."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text.translate(ASCII))

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
    """Wrap a command's main: bad input, Ctrl-C, a reader that left and a failed write each end as the table above
    says. The output is flushed inside, so that a write that fails at the end is caught here too."""

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
