"""Files are written whole or not at all, into folders we proved writable before the long work began."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from profiling_in_pytorch.errors import UsageError


def writable_dir(path: Path, what: str) -> Path:
    """Create `path` and prove we can write there, before spending minutes profiling or measuring."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [path, *path.parents] if p.exists() and not p.is_dir()), path)
        raise UsageError(f"cannot write {what} to {path}: {blocker} is a file, not a folder") from None
    except OSError as err:
        raise UsageError(f"cannot write {what} to {path}: {err.strerror or err}") from None
    return path


def writable_file(path: Path, what: str) -> Path:
    """Prove that `path` itself can be written, the way write_atomically will write it (a temporary sibling, then a
    rename), before the long work: a folder in its place or a name too long for the file system fails here."""
    if path.is_dir():
        raise UsageError(f"cannot write {what} to {path}: a folder is there")
    try:
        temporary_sibling(path).unlink()
    except OSError as err:
        why = "the file name is too long for this file system" if err.errno == errno.ENAMETOOLONG else err.strerror or err
        raise UsageError(f"cannot write {what} to {path}: {why}") from None
    return path


def temporary_sibling(path: Path) -> Path:
    """An empty file beside `path` (same folder, so the final rename is atomic), hidden by its leading dot."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    os.close(fd)
    return Path(tmp)


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write a temporary file beside `path`, then rename it over `path`: readers see the old file or the new."""
    tmp = temporary_sibling(path)
    try:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600 files; traces and results are no secret
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def twin_trace(path: Path, mode: str) -> Path:
    """The same run's trace in the other mode: `mode` "eager" or "compile" replaces the last `_eager`/`_compile`
    part of the lessons' file names (`64_128_768_3072_compile.json` -> `64_128_768_3072_eager.json`); the suffix,
    `.json` or `.json.gz`, stays."""
    stem, dot, suffix = path.name.partition(".")
    parts = stem.split("_")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("eager", "compile"):
            parts[i] = mode
            break
    return path.with_name("_".join(parts) + dot + suffix)
