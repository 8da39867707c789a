"""Where a kernel from the Hugging Face Hub comes from: the Hub, a local kernel repository, or a fallback.

The posts load hand-written kernels with the `kernels` library:

    from kernels import get_kernel
    liger = get_kernel("kernels-community/liger-kernels", version=1)      # Part 2
    flash = get_kernel("kernels-community/flash-attn2", version=3)        # Part 3

`version=N` is not a file version: `kernels` lists the repository's branches, takes the one named `vN`, picks the
build under `build/<variant>/` that fits this machine (torch version, CUDA or not) and downloads only that folder
into the Hugging Face cache. With `HF_HUB_OFFLINE=1`, `kernels` reads the branch and the build from the cache
instead: a copy fetched once online keeps working offline.

`resolve` tries, in order (or the one `source` forces):

1. a local kernel repository named with `--kernel_repo PATH`, or with `LOCAL_KERNELS=<repo_id>=PATH`, which
   `kernels` itself reads before the Hub. PATH holds `build/<variant>/metadata.json` and the package, or is such
   a variant folder itself;
2. the Hub, through `kernels.get_kernel` (the posts' path), from the cache when offline;
3. when the Hub cannot give us the kernel (no network, a firewall, `HF_HUB_OFFLINE=1` with nothing cached, no
   build for this machine), the caller's fallback: the same kernel from another place (liger-kernel from PyPI),
   or the same algorithm in PyTorch itself (SDPA's FlashAttention-2 backend).

Whatever is chosen, one line says which source and why (`KernelSource.describe`). Anything the user can fix
(nothing reachable, a wrong path, a malformed LOCAL_KERNELS) is a `UsageError`: one line, exit 2.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from trace_report.errors import UsageError, first_line

T = TypeVar("T")

# Telling "the Hub is down" apart from "the Hub is slow" costs a timeout; a tutorial should not hang on a
# machine without network (DNS that never answers, a firewall that drops packets), so we ask once, briefly.
HUB_PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HubKernel:
    """A kernel repository on the Hub, as a post loads it, and the name of the source tried when it cannot.

    what: what the caller takes from the module, for messages (`LigerGEGLUMLP`, `flash_attn_func`).
    fallback: the last source's name (`pypi`, `torch`).
    """

    repo_id: str
    version: int
    what: str
    fallback: str

    @property
    def sources(self) -> tuple[str, ...]:
        return ("hub", "local", self.fallback)

    @property
    def name(self) -> str:
        return f"{self.repo_id} v{self.version}"


@dataclass(frozen=True)
class KernelSource:
    """Where a kernel was found: the source (`hub`, `local` or the fallback), what exactly, and why that one."""

    source: str
    origin: str
    reason: str
    path: Path | None = None  # a local repository's folder

    @property
    def tag(self) -> str:
        return source_tag(self.source, self.path)

    def describe(self) -> str:
        return f"kernel source: {self.source} · {self.origin} · {self.reason}"


class HubUnavailable(Exception):
    """The Hub could not give us the kernel; the message says why, in a few words."""


def source_tag(source: str, path: Path | None) -> str:
    """The source as a trace name's part: a local repository adds its folder's name and a hash of its path, so
    that two repositories never write the same trace."""
    if path is None:
        return source
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", path.name).strip("-") or "repo"
    return f"{source}-{name}-{hashlib.sha1(str(path).encode()).hexdigest()[:6]}"


def resolve(
    kernel: HubKernel,
    *,
    source: str | None,
    kernel_repo: str | os.PathLike | None,
    adopt: Callable[[Any, KernelSource], T],
    fallback: Callable[[str], T],
) -> T:
    """The kernel from `--kernel_repo`, then `LOCAL_KERNELS`, then the Hub, then `fallback` (or from `source`).

    adopt(module, found): what the caller takes from a loaded kernel module (a UsageError if it lacks it);
    fallback(reason): the last source, with the reason it was chosen (a UsageError if it is not available).
    """
    if source is not None and source not in kernel.sources:
        raise UsageError(f"unknown kernel source {source!r}: use one of {', '.join(kernel.sources)}")

    if kernel_repo is not None:
        if source in ("hub", kernel.fallback):
            raise UsageError(f"--kernel_repo loads a local kernel repository; it contradicts --kernel_source {source}")
        path = Path(kernel_repo)
        module, found = _load_local(
            path,
            lambda kernels: kernels.get_local_kernel(path),
            named_by="--kernel_repo",
            described=f"--kernel_repo {path}",
            reason="asked for with --kernel_repo",
        )
        return adopt(module, found)

    override = local_kernels_override(kernel.repo_id)
    if source == "local" or (source is None and override is not None):
        if override is None:
            raise UsageError(f"--kernel_source local needs --kernel_repo PATH or LOCAL_KERNELS={kernel.repo_id}=PATH")
        module, found = _load_local(
            override,
            lambda kernels: kernels.get_kernel(kernel.repo_id, version=kernel.version),
            named_by="LOCAL_KERNELS",
            described=f"LOCAL_KERNELS maps {kernel.repo_id} to {override}",
            reason=f"LOCAL_KERNELS maps {kernel.repo_id} there",
        )
        return adopt(module, found)

    if source == kernel.fallback:
        return fallback(f"asked for with --kernel_source {source}")

    if override is not None:  # source == "hub"
        raise UsageError(
            f"LOCAL_KERNELS maps {kernel.repo_id} to {override}, and kernels reads that before the Hub; "
            "unset it to load from the Hub"
        )
    try:
        module, found = load_from_hub(kernel)
    except HubUnavailable as hub_down:
        if source == "hub":
            raise UsageError(f"cannot load {kernel.name} from the Hub: {hub_down}") from None
        try:
            return fallback(f"fallback, the Hub is unavailable: {hub_down}")
        except UsageError as no_fallback:
            raise UsageError(
                f"no {kernel.what} available: the Hub is unavailable ({hub_down}) and {no_fallback}; "
                "or pass --kernel_repo PATH for a local kernel repository"
            ) from None
    return adopt(module, found)


def load_from_hub(kernel: HubKernel) -> tuple[Any, KernelSource]:
    """`kernels.get_kernel(repo_id, version=...)`, as the posts call it; HubUnavailable (a few words) if not here."""
    try:
        import kernels
        from huggingface_hub import constants
    except ImportError as err:
        raise HubUnavailable(f"the kernels package is not installed ({first_line(err)})") from None

    if not constants.HF_HUB_OFFLINE:
        unreachable = hub_unreachable(constants.ENDPOINT)
        if unreachable:
            raise HubUnavailable(unreachable)
    try:
        with quiet_kernels_log():
            module = kernels.get_kernel(kernel.repo_id, version=kernel.version)
    except Exception as err:  # noqa: BLE001 - network, cache, trust check, build variant: all say "not here"
        prefix = "HF_HUB_OFFLINE=1: " if constants.HF_HUB_OFFLINE else ""
        raise HubUnavailable(prefix + _first_sentence(err)) from None
    found = KernelSource(
        source="hub",
        origin=f"{kernel.name} via kernels {kernels.__version__}",
        reason="the post's path" + (" (from the offline cache)" if constants.HF_HUB_OFFLINE else ""),
    )
    return module, found


def hub_unreachable(endpoint: str) -> str | None:
    """None if the Hub answers a HEAD request within HUB_PROBE_TIMEOUT_S, else why not.

    Through huggingface_hub's own HTTP session, so proxies and certificates are the ones `kernels` will use.
    In a thread, because a DNS lookup that never answers ignores every timeout we could pass.
    """
    outcome: dict[str, BaseException] = {}

    def probe():
        try:
            from huggingface_hub.utils import get_session

            get_session().head(endpoint, timeout=HUB_PROBE_TIMEOUT_S)
        except BaseException as err:  # noqa: BLE001 - reported below
            outcome["error"] = err

    thread = threading.Thread(target=probe, name="hub-probe", daemon=True)
    thread.start()
    thread.join(HUB_PROBE_TIMEOUT_S + 1.0)
    if thread.is_alive():
        return f"{endpoint} did not answer within {HUB_PROBE_TIMEOUT_S:.0f} s"
    if "error" in outcome:
        return f"cannot reach {endpoint} ({first_line(outcome['error'])})"
    return None


def local_kernels_override(repo_id: str) -> Path | None:
    """The path LOCAL_KERNELS gives for `repo_id`, parsed as `kernels` parses it.

    Format: `repo_id=path`, several joined with `:` (`kernels-community/liger-kernels=/src/liger:org/x=/src/x`).
    """
    value = os.environ.get("LOCAL_KERNELS")
    if not value:
        return None
    overrides = {}
    for entry in value.split(":"):
        name, sep, path = entry.partition("=")
        if not sep:
            raise UsageError(f"LOCAL_KERNELS entry {entry!r} is not repo_id=path (format: {repo_id}=/path/to/repo)")
        overrides[name] = Path(path)
    return overrides.get(repo_id)


@contextmanager
def quiet_kernels_log():
    """`kernels` logs warnings we answer ourselves (an older version than the newest; no trust check offline)."""
    logger = logging.getLogger("kernels")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _load_local(path: Path, load, *, named_by: str, described: str, reason: str) -> tuple[Any, KernelSource]:
    """A local kernel repository through `load(kernels)`; any failure is one line naming the path and the flag."""
    try:
        import kernels
    except ImportError:
        raise UsageError("loading a kernel repository needs the kernels package (pip install kernels)") from None
    if path.is_file():
        raise UsageError(f"{described}: a file, not a kernel repository (a folder holding build/<variant>/)")
    if not path.is_dir():
        raise UsageError(f"{described}: no such folder")
    try:
        with quiet_kernels_log():
            module = load(kernels)
    except Exception as err:  # noqa: BLE001
        raise UsageError(f"cannot load the kernel repository {path} ({named_by}): {_local_failure(err)}") from None
    found = KernelSource(source="local", origin=f"{path} via kernels {kernels.__version__}", reason=reason, path=path.resolve())
    return module, found


def _local_failure(err: BaseException) -> str:
    text = first_line(err).rstrip(":")
    if "Cannot find a build variant" in text:
        text += " (a kernel repository holds build/<variant>/metadata.json, e.g. build/torch-universal/)"
    return text


def _first_sentence(err: BaseException) -> str:
    line = first_line(err)
    head, sep, _ = line.partition(". ")
    return head if sep else line.rstrip(".")
