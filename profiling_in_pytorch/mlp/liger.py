"""Where the post's hand-tuned MLP comes from: `LigerGEGLUMLP`, from the Hub, a local kernel repository or PyPI.

The post loads it from the Hugging Face Hub with the `kernels` library:

    from kernels import get_kernel
    liger = get_kernel("kernels-community/liger-kernels", version=1)
    mlp = liger.layers.LigerGEGLUMLP(Config())

`version=1` is not a file version: `kernels` lists the repository's branches, takes the one named `v1`, picks
the build under `build/<variant>/` that fits this machine (torch version, CUDA or not) and downloads only that
folder into the Hugging Face cache. Later versions of the repository dropped the `Config` constructor, so we
stay on `v1`. With `HF_HUB_OFFLINE=1`, `kernels` reads the branch and the build from the cache instead: a
copy fetched once online keeps working offline.

`resolve_liger_geglu_mlp` knows three sources:

1. the Hub, through `kernels` (the post's path);
2. a local kernel repository, through the same loader: `LOCAL_KERNELS=kernels-community/liger-kernels=PATH`
   or `--kernel_repo PATH`. PATH holds `build/<variant>/metadata.json` and the package
   (`build/torch-universal/liger_kernels/...`), or is such a variant folder itself. A repository named this
   way replaces the Hub, as LOCAL_KERNELS does inside `kernels` (it is read before the Hub);
3. when the Hub cannot be reached (no network, a firewall, `HF_HUB_OFFLINE=1` with nothing cached), the
   `liger-kernel` package from PyPI, which ships the same `LigerGEGLUMLP` and the same Triton kernel.

A source can be forced (`hub`, `local`, `pypi`). Whatever is chosen, one line says which source and why.
Anything the user can fix (nothing reachable, a wrong path, no GPU) is a `UsageError`: one line, exit 2.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from profiling_in_pytorch.errors import UsageError, first_line

HUB_REPO = "kernels-community/liger-kernels"
HUB_VERSION = 1  # v2 and later build the layer without a Config: the post's call breaks there
SOURCES = ("hub", "local", "pypi")
PYPI_MODULE = "liger_kernel.transformers.geglu"  # where liger-kernel keeps LigerGEGLUMLP

# Telling "the Hub is down" apart from "the Hub is slow" costs a timeout; a tutorial should not hang on a
# machine without network (DNS that never answers, a firewall that drops packets), so we ask once, briefly.
HUB_PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Config:
    """What `LigerGEGLUMLP.__init__` reads from a Hugging Face model config (Gemma's MLP)."""

    hidden_size: int
    intermediate_size: int
    hidden_act: str = "gelu_pytorch_tanh"  # GELU with the tanh approximation, the only one Liger implements


@dataclass(frozen=True)
class ResolvedLayer:
    """The `LigerGEGLUMLP` class we found, where it came from and why that source."""

    layer_class: type[nn.Module]
    source: str  # one of SOURCES
    origin: str  # what exactly was loaded
    reason: str  # why this source
    path: Path | None = None  # a local repository's folder

    @property
    def tag(self) -> str:
        """The source as a trace name's part: a local repository adds its folder's name and a hash of its path,
        so that two repositories never write the same trace."""
        if self.path is None:
            return self.source
        name = re.sub(r"[^A-Za-z0-9.-]+", "-", self.path.name).strip("-") or "repo"
        return f"{self.source}-{name}-{hashlib.sha1(str(self.path).encode()).hexdigest()[:6]}"

    @property
    def is_liger_triton_kernel(self) -> bool:
        """Hub and PyPI carry Liger's own Triton GPU kernel; a local repository may hold anything."""
        return self.source in ("hub", "pypi")

    def describe(self) -> str:
        return f"kernel source: {self.source} · {self.origin} · {self.reason}"

    def build(self, hidden_size: int, intermediate_size: int) -> nn.Module:
        """The layer, constructed as the post does: `LigerGEGLUMLP(Config(...))`, weights on the CPU."""
        return self.layer_class(Config(hidden_size=hidden_size, intermediate_size=intermediate_size))

    def build_holding(self, reference: nn.Module, hidden_size: int, intermediate_size: int) -> nn.Module:
        """The layer, built as the post does, holding `reference`'s weights (a SimpleGeGLUMLP's state dict, loaded
        strictly: gate_proj, up_proj, down_proj, nothing else); UsageError (one line) if it does not hold them."""
        layer = self.build(hidden_size, intermediate_size)
        try:
            layer.load_state_dict(reference.state_dict())
        except RuntimeError as err:
            raise UsageError(
                f"{self.origin}: its LigerGEGLUMLP does not hold SimpleGeGLUMLP's three weights "
                f"({str(err).splitlines()[0]})"
            ) from None
        return layer


def build_liger_geglu_mlp(
    hidden_size: int,
    intermediate_size: int,
    *,
    source: str | None = None,
    kernel_repo: str | os.PathLike | None = None,
) -> tuple[nn.Module, ResolvedLayer]:
    """`LigerGEGLUMLP(Config(hidden_size, intermediate_size))` from the first source that has it.

    Returns the layer (freshly initialised, on the CPU) and where it came from; `resolved.describe()` is
    the one line to show. Pair with `require_runnable(resolved, device)` before running it.
    """
    resolved = resolve_liger_geglu_mlp(source=source, kernel_repo=kernel_repo)
    return resolved.build(hidden_size, intermediate_size), resolved


def resolve_liger_geglu_mlp(
    *, source: str | None = None, kernel_repo: str | os.PathLike | None = None
) -> ResolvedLayer:
    """Find `LigerGEGLUMLP`: `--kernel_repo`, then `LOCAL_KERNELS`, then the Hub, then PyPI (or `source`)."""
    if source is not None and source not in SOURCES:
        raise UsageError(f"unknown kernel source {source!r}: use one of {', '.join(SOURCES)}")

    if kernel_repo is not None:
        if source in ("hub", "pypi"):
            raise UsageError(f"--kernel_repo loads a local kernel repository; it contradicts --kernel_source {source}")
        return _from_kernel_repo(Path(kernel_repo))

    override = _local_kernels_override()
    if source == "local" or (source is None and override is not None):
        if override is None:
            raise UsageError(
                f"--kernel_source local needs --kernel_repo PATH or LOCAL_KERNELS={HUB_REPO}=PATH"
            )
        return _from_local_kernels(override)

    if source == "pypi":
        return _from_pypi(reason="asked for with --kernel_source pypi")

    if override is not None:  # source == "hub"
        raise UsageError(
            f"LOCAL_KERNELS maps {HUB_REPO} to {override}, and kernels reads that before the Hub; "
            "unset it to load from the Hub"
        )
    try:
        return _from_hub()
    except HubUnavailable as hub_down:
        if source == "hub":
            raise UsageError(f"cannot load {HUB_REPO} v{HUB_VERSION} from the Hub: {hub_down}") from None
        try:
            return _from_pypi(reason=f"fallback, the Hub is unavailable: {hub_down}")
        except UsageError as no_pypi:
            raise UsageError(
                f"no LigerGEGLUMLP available: the Hub is unavailable ({hub_down}) and {no_pypi}; "
                "or pass --kernel_repo PATH for a local kernel repository"
            ) from None


def require_runnable(resolved: ResolvedLayer, device: torch.device) -> None:
    """Raise UsageError (one line) if the layer cannot run on `device`.

    Liger's kernel is a Triton GPU kernel. Without a GPU it can only run under Triton's CPU interpreter,
    which the user asks for with TRITON_INTERPRET=1 (read when Triton is first imported). Whether the
    interpreter can run it is decided by trying, on a tiny layer: with triton 3.9 it cannot, because the
    kernel's `tanh` comes from `libdevice`, which the interpreter does not implement (the call returns None).
    A local repository's layer is tried the same way on a CPU: it may well be plain PyTorch.
    """
    if device.type == "cuda":
        return
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    if resolved.is_liger_triton_kernel and not interpreted:
        where = "--device cpu was asked for" if torch.cuda.is_available() else "there is no CUDA GPU here"
        raise UsageError(
            f"Liger's GeGLU kernel is a Triton GPU kernel and {where} "
            f"(kernel source: {resolved.source}); run this on a GPU"
        )
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # leave the caller's seed sequence alone
            resolved.build(8, 16)(torch.randn(2, 8))
    except Exception as err:  # noqa: BLE001 - any failure means: cannot run here, and we say why
        if resolved.is_liger_triton_kernel:
            raise UsageError(
                "Triton's interpreter (TRITON_INTERPRET=1) cannot run Liger's GeGLU kernel: "
                f"{_interpreter_failure(err)}; run this on a CUDA GPU"
            ) from None
        raise UsageError(
            f"the local kernel's LigerGEGLUMLP does not run on {device.type}: {first_line(err)}"
        ) from None


class HubUnavailable(Exception):
    """The Hub could not give us the kernel; the message says why, in a few words."""


def _from_hub() -> ResolvedLayer:
    try:
        import kernels
        from huggingface_hub import constants
    except ImportError as err:
        raise HubUnavailable(f"the kernels package is not installed ({first_line(err)})") from None

    if not constants.HF_HUB_OFFLINE:
        unreachable = _hub_unreachable(constants.ENDPOINT)
        if unreachable:
            raise HubUnavailable(unreachable)
    try:
        with _quiet_kernels_log():
            module = kernels.get_kernel(HUB_REPO, version=HUB_VERSION)
    except Exception as err:  # noqa: BLE001 - network, cache, trust check, build variant: all say "not here"
        prefix = "HF_HUB_OFFLINE=1: " if constants.HF_HUB_OFFLINE else ""
        raise HubUnavailable(prefix + _first_sentence(err)) from None
    layer_class = _layer_class(module, where=f"{HUB_REPO} v{HUB_VERSION}")
    return ResolvedLayer(
        layer_class=layer_class,
        source="hub",
        origin=f"{HUB_REPO} v{HUB_VERSION} via kernels {kernels.__version__}",
        reason="the post's path" + (" (from the offline cache)" if constants.HF_HUB_OFFLINE else ""),
    )


def _hub_unreachable(endpoint: str) -> str | None:
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


def _local_kernels_override() -> Path | None:
    """The path LOCAL_KERNELS gives for the Liger repository, parsed as `kernels` parses it.

    Format: `repo_id=path`, several joined with `:` (`kernels-community/liger-kernels=/src/liger:org/x=/src/x`).
    """
    value = os.environ.get("LOCAL_KERNELS")
    if not value:
        return None
    overrides = {}
    for entry in value.split(":"):
        repo_id, sep, path = entry.partition("=")
        if not sep:
            raise UsageError(
                f"LOCAL_KERNELS entry {entry!r} is not repo_id=path (format: {HUB_REPO}=/path/to/repo)"
            )
        overrides[repo_id] = Path(path)
    return overrides.get(HUB_REPO)


def _from_local_kernels(path: Path) -> ResolvedLayer:
    """Through `get_kernel`, exactly as the post calls it: `kernels` finds the override before the Hub."""
    return _from_local(
        path,
        lambda kernels: kernels.get_kernel(HUB_REPO, version=HUB_VERSION),
        named_by="LOCAL_KERNELS",
        described=f"LOCAL_KERNELS maps {HUB_REPO} to {path}",
        reason=f"LOCAL_KERNELS maps {HUB_REPO} there",
    )


def _from_kernel_repo(path: Path) -> ResolvedLayer:
    """Through `get_local_kernel`, the same loader with the path given directly."""
    return _from_local(
        path,
        lambda kernels: kernels.get_local_kernel(path),
        named_by="--kernel_repo",
        described=f"--kernel_repo {path}",
        reason="asked for with --kernel_repo",
    )


def _from_local(path: Path, load, *, named_by: str, described: str, reason: str) -> ResolvedLayer:
    """A local kernel repository through `load(kernels)`; any failure is one line naming the path and the flag."""
    kernels = _import_kernels_for_local()
    _require_dir(path, described)
    try:
        with _quiet_kernels_log():
            module = load(kernels)
    except Exception as err:  # noqa: BLE001
        raise UsageError(f"cannot load the kernel repository {path} ({named_by}): {_local_failure(err)}") from None
    return ResolvedLayer(
        layer_class=_layer_class(module, where=str(path)),
        source="local",
        path=path.resolve(),
        origin=f"{path} via kernels {kernels.__version__}",
        reason=reason,
    )


def _from_pypi(reason: str) -> ResolvedLayer:
    try:
        module = importlib.import_module(PYPI_MODULE)
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] == "liger_kernel":
            raise UsageError("the liger-kernel package is not installed (pip install liger-kernel)") from None
        raise UsageError(f"cannot import {PYPI_MODULE}: {first_line(err)}") from None
    except Exception as err:  # noqa: BLE001 - e.g. no triton on this platform
        raise UsageError(f"cannot import {PYPI_MODULE}: {first_line(err)}") from None
    try:
        version = importlib.metadata.version("liger-kernel")
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    return ResolvedLayer(
        layer_class=module.LigerGEGLUMLP,
        source="pypi",
        origin=f"{PYPI_MODULE}.LigerGEGLUMLP from liger-kernel {version}",
        reason=reason,
    )


def _import_kernels_for_local():
    try:
        import kernels
    except ImportError:
        raise UsageError("loading a kernel repository needs the kernels package (pip install kernels)") from None
    return kernels


def _require_dir(path: Path, what: str) -> None:
    if path.is_file():
        raise UsageError(f"{what}: a file, not a kernel repository (a folder holding build/<variant>/)")
    if not path.is_dir():
        raise UsageError(f"{what}: no such folder")


def _layer_class(module, where: str) -> type[nn.Module]:
    layer_class = getattr(getattr(module, "layers", None), "LigerGEGLUMLP", None)
    if layer_class is None:
        raise UsageError(f"the kernel at {where} has no layers.LigerGEGLUMLP")
    return layer_class


@contextmanager
def _quiet_kernels_log():
    """`kernels` logs warnings we answer ourselves (v1 is not the newest; no trust check offline)."""
    logger = logging.getLogger("kernels")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _local_failure(err: BaseException) -> str:
    text = first_line(err).rstrip(":")
    if "Cannot find a build variant" in text:
        text += " (a kernel repository holds build/<variant>/metadata.json, e.g. build/torch-universal/)"
    return text


def _interpreter_failure(err: BaseException) -> str:
    text = first_line(err)
    if "NoneType" in text:
        return "its tanh comes from Triton's libdevice, which the interpreter does not implement (the call returns None)"
    return f"{type(err).__name__}: {text}"


def _first_sentence(err: BaseException) -> str:
    line = first_line(err)
    head, sep, _ = line.partition(". ")
    return head if sep else line.rstrip(".")
