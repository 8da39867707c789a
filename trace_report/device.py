"""Which GPU a trace ran on, named the way its vendor names it: NVIDIA by compute capability (`sm90 (Hopper)`), AMD by
its gfx architecture (`gfx942 (CDNA3, MI300X/MI325X)`). AMD has no "sm": ROCm's device properties report a compute
capability of 9.4 for gfx942, 9.0 for both gfx908 and gfx90a.

From the trace's `deviceProperties` where it has them; else from the kernels' names (`nvjet_sm90_...`, `sm80_xmma_...`,
`cutlass_80_...`, Tensile's `..._ISA942_...`) and the runtime's calls (`cudaLaunchKernel`, `hipLaunchKernel`), said to
be inferred. A trace that holds GPU work never reads "no GPU".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from trace_report.kernels import ARCHS, gfx_in_name, gfx_label

# ROCm's (major, minor) and a product name's words -> the gfx architecture, where the properties carry no gcnArchName.
AMD_BY_CAPABILITY = {(9, 4): "gfx942", (9, 5): "gfx950", (9, 6): "gfx950", (12, 0): "gfx1201", (11, 0): "gfx1100"}
AMD_BY_PRODUCT = [(r"MI3[05]5", "gfx950"), (r"MI3\d\d", "gfx942"), (r"MI2[15]0", "gfx90a"), (r"MI100", "gfx908"),
                  (r"MI50|MI60", "gfx906")]
_NVIDIA_TAG = re.compile(r"(?:^|_)sm_?(\d{2,3})[af]?(?:_|$)|^cutlass(?:3x)?_(?:sm)?(\d{2,3})_|^(maxwell|pascal|volta|turing"
                         r"|ampere|ada|hopper)_")
_FAMILY_SM = {"maxwell": "50", "pascal": "60", "volta": "70", "turing": "75", "ampere": "80", "ada": "89", "hopper": "90"}


def is_amd(properties: dict, runtime_names: Iterable[str] = ()) -> bool:
    name = properties.get("name") if isinstance(properties.get("name"), str) else ""
    if re.search(r"AMD|Radeon|Instinct", name) or "gcnArchName" in properties:
        return True
    if properties.get("warpSize") == 64:  # AMD's wavefronts are 64 wide; NVIDIA's warps 32
        return True
    return any(call.startswith("hip") for call in runtime_names)


def gpu_label(properties: dict, kernel_names: Iterable[str], runtime_names: Iterable[str]) -> str | None:
    """`NVIDIA H100 80GB HBM3 (sm90)`, `AMD Instinct MI300X (gfx942, CDNA3)`, `a GPU (sm90, inferred from kernel
    names)`; None when the trace holds no GPU work and no device properties."""
    kernel_names = list(kernel_names)
    runtime_names = list(runtime_names)
    name = properties.get("name") if isinstance(properties.get("name"), str) else ""
    if not properties and not kernel_names:
        return None
    amd = is_amd(properties, runtime_names) or any(gfx_in_name(k) for k in kernel_names[:200])
    if amd:
        gfx, how = _amd_arch(properties, name, kernel_names)
        label = gfx_label(gfx) if gfx else ""
        if how == "names":
            label += ", inferred from kernel names"
        return f"{name or 'an AMD GPU'} ({label})" if label else (name or "an AMD GPU")
    major, minor = properties.get("computeMajor"), properties.get("computeMinor")
    if isinstance(major, int):
        return f"{name or 'an NVIDIA GPU'} (sm{major}{minor or 0})"
    sm = nvidia_sm_in_names(kernel_names)
    if name:
        return f"{name} (sm{sm}, inferred from kernel names)" if sm else name
    if sm:
        family = ARCHS.get(sm)
        return f"an NVIDIA GPU (sm{sm}{' ' + family if family else ''}, inferred from kernel names)"
    vendor = "an NVIDIA GPU" if any(call.startswith("cu") for call in runtime_names) else "a GPU"
    return f"{vendor} (no device properties; its kernels do not name an architecture)"


def nvidia_sm_in_names(kernel_names: Iterable[str]) -> str | None:
    """The compute capability most kernel names that carry one were built for (`nvjet_sm90_...` -> "90")."""
    votes: Counter = Counter()
    for kernel in kernel_names:
        m = _NVIDIA_TAG.search(kernel)
        if m:
            votes[m.group(1) or m.group(2) or _FAMILY_SM[m.group(3)]] += 1
    return votes.most_common(1)[0][0] if votes else None


def _amd_arch(properties: dict, name: str, kernel_names: list[str]) -> tuple[str | None, str]:
    """The gfx architecture, and how it was found: "properties", "product" (the GPU's name) or "names"."""
    gcn = properties.get("gcnArchName")
    if isinstance(gcn, str) and gcn.startswith("gfx"):
        return gcn.split(":", 1)[0], "properties"
    for pattern, gfx in AMD_BY_PRODUCT:
        if re.search(pattern, name):
            return gfx, "product"
    major, minor = properties.get("computeMajor"), properties.get("computeMinor")
    if (major, minor) in AMD_BY_CAPABILITY:
        return AMD_BY_CAPABILITY[(major, minor)], "properties"
    votes = Counter(g for g in (gfx_in_name(k) for k in kernel_names) if g)
    if votes:
        return votes.most_common(1)[0][0], "names"
    return None, ""
