"""One clear line and exit code 2 for anything the user can fix; tracebacks are for our bugs."""

from __future__ import annotations

import functools
import os
import sys
from typing import Callable, TypeVar

T = TypeVar("T")

EXIT_USAGE = 2


class UsageError(Exception):
    """Input the user can fix: bad flag, missing GPU, unreadable file, unreachable Hub, ..."""


def first_line(err: BaseException) -> str:
    """An exception as one line: its message's first line, or its type's name when it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def fail(message: str) -> None:
    """Print one line on stderr and exit 2."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "error"
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def exits_cleanly(main: Callable[..., T]) -> Callable[..., T]:
    """Wrap a command's main so a UsageError becomes one line on stderr and exit code 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UsageError as err:
            fail(first_line(err))
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            raise SystemExit(130)

    return wrapper
