"""Where the post's hand-tuned MLP comes from: `LigerGEGLUMLP`, from the Hub, a local kernel repository or PyPI.

The post loads it from the Hugging Face Hub with the `kernels` library:

    from kernels import get_kernel
    liger = get_kernel("kernels-community/liger-kernels", version=1)
    mlp = liger.layers.LigerGEGLUMLP(Config())

Later versions of the repository dropped the `Config` constructor, so we stay on `v1`. The sources are tried as
`profiling_in_pytorch.hub_kernels` tries them for any Hub kernel: `--kernel_repo PATH`, then `LOCAL_KERNELS`
(`kernels-community/liger-kernels=PATH`), then the Hub (its cache when offline), then, when the Hub cannot be
reached, the `liger-kernel` package from PyPI, which ships the same `LigerGEGLUMLP` and the same Triton kernel.
A source can be forced (`hub`, `local`, `pypi`). Whatever is chosen, one line says which source and why.
Anything the user can fix (nothing reachable, a wrong path, no GPU) is a `UsageError`: one line, exit 2.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from profiling_in_pytorch import hub_kernels
from trace_report.errors import UsageError, first_line

LIGER = hub_kernels.HubKernel(
    repo_id="kernels-community/liger-kernels",
    version=1,  # v2 and later build the layer without a Config: the post's call breaks there
    what="LigerGEGLUMLP",
    fallback="pypi",
)
HUB_REPO, HUB_VERSION, SOURCES = LIGER.repo_id, LIGER.version, LIGER.sources
PYPI_MODULE = "liger_kernel.transformers.geglu"  # where liger-kernel keeps LigerGEGLUMLP


def add_source_flags(parser) -> None:
    """--kernel_source and --kernel_repo for a lesson whose `--variant liger` loads LigerGEGLUMLP as lesson 03 does."""
    parser.add_argument("--kernel_source", choices=SOURCES, default=None,
                        help="with --variant liger: where LigerGEGLUMLP comes from, as in 03_kernels_mlp.py")
    parser.add_argument("--kernel_repo", metavar="PATH", default=None,
                        help="with --variant liger: a local kernel repository, as in 03_kernels_mlp.py")


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
        """The source as a trace name's part (a local repository's adds its folder's name and a path hash)."""
        return hub_kernels.source_tag(self.source, self.path)

    @property
    def is_liger_triton_kernel(self) -> bool:
        """Hub and PyPI carry Liger's own Triton GPU kernel; a local repository may hold anything."""
        return self.source in ("hub", "pypi")

    def describe(self) -> str:
        return hub_kernels.KernelSource(self.source, self.origin, self.reason, self.path).describe()

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
    return hub_kernels.resolve(LIGER, source=source, kernel_repo=kernel_repo, adopt=_adopt, fallback=_from_pypi)


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


def _adopt(module, found: hub_kernels.KernelSource) -> ResolvedLayer:
    """The layer class of a loaded kernel module (the Hub's or a local repository's)."""
    where = str(found.path) if found.path is not None else LIGER.name
    layer_class = getattr(getattr(module, "layers", None), "LigerGEGLUMLP", None)
    if layer_class is None:
        raise UsageError(f"the kernel at {where} has no layers.LigerGEGLUMLP")
    return ResolvedLayer(layer_class, found.source, found.origin, found.reason, found.path)


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


def _interpreter_failure(err: BaseException) -> str:
    text = first_line(err)
    if "NoneType" in text:
        return "its tanh comes from Triton's libdevice, which the interpreter does not implement (the call returns None)"
    return f"{type(err).__name__}: {text}"
