"""Files are written whole or not at all, into folders we proved writable before the long work began; a file's size,
for a read's progress."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from trace_report.errors import UsageError


PROBE_PREFIX = ".probe-"
SHOWN_PATH = 120  # longer paths are shown by their two ends in a one-line error


def file_size(path: str | Path) -> int:
    """The file's size in bytes, 0 where it cannot be seen (the read that follows says why): a read's progress."""
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def writable_dir(path: Path, what: str) -> Path:
    """Create `path` and prove we can write there, before spending minutes profiling or measuring."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=PROBE_PREFIX):
            pass
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [path, *path.parents] if p.exists() and not p.is_dir()), path)
        raise UsageError(f"cannot write {what} to {shown(path)}: {shown(blocker)} is a file, not a folder") from None
    except OSError as err:
        why = _why_not(err, path, path / f"{PROBE_PREFIX}{'x' * 8}", "with a file in it")
        raise UsageError(f"cannot write {what} to {shown(path)}: {why}") from None
    return path


def writable_file(path: Path, what: str) -> Path:
    """Prove that `path` itself can be written, the way write_atomically will write it (a temporary sibling, then a
    rename), before the long work: a folder in its place or a path too long for the file system fails here."""
    try:
        if path.is_dir():
            raise UsageError(f"cannot write {what} to {shown(path)}: a folder is there")
        temporary_sibling(path).unlink()
    except OSError as err:
        why = _why_not(err, path, _temporary_name(path), "as the temporary file it is written to first")
        raise UsageError(f"cannot write {what} to {shown(path)}: {why}") from None
    return path


def _why_not(err: OSError, path: Path, written: Path, how: str) -> str:
    return too_long(path, written, how) if err.errno == errno.ENAMETOOLONG else str(err.strerror or err)


def too_long(path: Path, written: Path, how: str) -> str:
    """Why the file system refused to write `written` for `path` (ENAMETOOLONG): one of the names, or the whole
    path, is longer than it takes, in the bytes its limits count. `how`: what `written` is to `path`."""
    existing = next((p for p in written.parents if _exists(p)), Path("/"))
    name_max, path_max = _limit(existing, "PC_NAME_MAX", 255), _limit(existing, "PC_PATH_MAX", 4096)
    for candidate, said in ((path, ""), (written, f" {how}")):
        longest = max(len(os.fsencode(part)) for part in candidate.parts)
        if longest > name_max:
            return f"a name in it is too long for this file system ({longest:,} bytes{said}; at most {name_max:,})"
    length = len(os.fsencode(os.path.abspath(written)))
    # PATH_MAX counts the terminating NUL byte.
    return f"its path is too long for this file system ({length:,} bytes {how}; at most {path_max - 1:,})"


def _temporary_name(path: Path) -> Path:
    """The name temporary_sibling gives a file written to `path`, its 8 random characters as x's."""
    return path.with_name(f".{path.stem}-{'x' * 8}{path.suffix}")


def shown(path: Path) -> str:
    """A path for a one-line message: whole, or its first and last characters when it is longer than a line."""
    text = str(path)
    return text if len(text) <= SHOWN_PATH else f"{text[:40]}…{text[-(SHOWN_PATH - 41):]}"


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _limit(path: Path, name: str, default: int) -> int:
    try:
        return os.pathconf(path, name)
    except (OSError, ValueError):
        return default


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
