"""What a collective's bytes over its time mean: nccl-tests' bandwidth convention, and the peak of the link between
the GPUs, by GPU name.

nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md) reports two figures per collective:

    algbw   bytes ÷ time, where bytes is the collective's whole buffer: an all-reduce's tensor, an all-gather's output
            (every rank's piece), a reduce-scatter's input, a broadcast's tensor, an all-to-all's whole send buffer
    busbw   algbw × a factor for what each rank's link must carry whatever the algorithm, so that one figure compares
            across collectives and rank counts with the link's own speed: all-reduce 2(n−1)/n (a reduce-scatter then
            an all-gather), all-gather, reduce-scatter and all-to-all (n−1)/n, broadcast, reduce and send/recv 1

busbw compares with the bandwidth of one direction of a GPU's links: in a ring each rank sends to the next and
receives from the one before at the same time, each direction of the link carrying busbw. Vendors print the sum of
both directions ("NVLink 900 GB/s" for an H100 SXM is 450 GB/s each way), so `Link.per_direction_gbps` is half
their figure. No collective reaches it (protocol overhead: NCCL's LL protocol sends 4 bytes of flag with every 4
of data), and a kernel that also waited for another rank to arrive shows less still (ranks.py takes the wait out).

Nothing here imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# c10's ScalarType names, as record_param_comms writes its `dtype` arg, and their bytes per element.
DTYPE_BYTES = {
    "Bool": 1, "Byte": 1, "Char": 1, "QInt8": 1, "QUInt8": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "Float8_e8m0fnu": 1, "Short": 2, "UInt16": 2, "Half": 2,
    "BFloat16": 2, "Int": 4, "UInt32": 4, "QInt32": 4, "Float": 4, "ComplexHalf": 4, "Long": 8, "UInt64": 8,
    "Double": 8, "ComplexFloat": 8, "ComplexDouble": 16,
}


def bus_factor(collective: str, ranks: int) -> float | None:
    """busbw ÷ algbw for `collective` among `ranks` ranks (nccl-tests' factors); None for a collective that moves no
    data (a barrier) or that nccl-tests gives no factor for."""
    if ranks < 1:
        return None
    if collective == "AllReduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("AllGather", "ReduceScatter", "AllToAll"):
        return (ranks - 1) / ranks
    if collective in ("Broadcast", "Reduce", "SendRecv"):
        return 1.0
    return None


def gbps(nbytes: float, us: float) -> float | None:
    """Bytes over microseconds, in GB/s (10⁹ bytes a second, as nccl-tests prints); None without time."""
    return nbytes / us / 1e3 if us > 0 else None


@dataclass(frozen=True)
class Link:
    """The link between a GPU and its peers, as its vendor states it."""

    name: str  # "NVLink 4 (18 links)"
    total_gbps: float  # both directions, all of the GPU's links: the figure on the datasheet
    # A full mesh (no switch: MI300X's Infinity Fabric) gives each peer one link of `peers`: fewer ranks, less of it.
    # None: a switch (NVSwitch, a PCIe switch) puts the whole bandwidth between any two GPUs.
    mesh_peers: int | None = None

    def per_direction_gbps(self, ranks: int | None = None) -> float:
        """What busbw compares with: one direction, the links `ranks` ranks can use (all of them without a mesh)."""
        each_way = self.total_gbps / 2
        if self.mesh_peers is None or ranks is None or ranks < 2:
            return each_way
        return each_way * min(ranks - 1, self.mesh_peers) / self.mesh_peers

    def describe(self, ranks: int | None = None) -> str:
        each_way = self.per_direction_gbps(ranks)
        text = f"{self.name}: {each_way:,.0f} GB/s each way"
        if self.mesh_peers is not None and ranks is not None and 2 <= ranks <= self.mesh_peers:
            return f"{text} ({min(ranks - 1, self.mesh_peers)} of its {self.mesh_peers} peer links; " \
                   f"{self.total_gbps:,.0f} GB/s both ways, all links)"
        return f"{text} ({self.total_gbps:,.0f} GB/s both ways)"


# GPU name (deviceProperties' `name`, searched in order, first match wins) -> its link. Figures from the vendors'
# datasheets, both directions summed as they print them:
#   V100 SXM2: NVLink 2, 300 GB/s (NVIDIA Tesla V100 datasheet); V100 PCIe: PCIe 3.0 x16, 32 GB/s
#   A100 SXM4: NVLink 3, 600 GB/s; A100 PCIe: PCIe 4.0 x16, 64 GB/s (NVIDIA A100 datasheet); A800: NVLink 3, 400 GB/s
#   H100 SXM5 and H200: NVLink 4, 900 GB/s; H100 NVL: NVLink bridge, 600 GB/s; H100 PCIe: PCIe 5.0 x16, 128 GB/s
#   (NVIDIA H100 and H200 datasheets); H800: NVLink 4, 400 GB/s (NVIDIA H800 product page); H20: 900 GB/s
#   B200, B300, GB200, GB300: NVLink 5, 1,800 GB/s (NVIDIA DGX B200 / GB200 NVL72 datasheets)
#   L4, L40, L40S, A10, A40 without its bridge, RTX cards: PCIe 4.0 x16, 64 GB/s; T4: PCIe 3.0 x16, 32 GB/s
#   MI300X and MI325X: AMD Infinity Fabric, 7 links of 128 GB/s to the 7 other GPUs of an 8-GPU platform, 896 GB/s
#   (AMD Instinct MI300X datasheet), a full mesh: two ranks use one link
# PCIe x16: 16 GT/s (4.0) carries 31.5 GB/s each way after encoding, 32 GT/s (5.0) 63: printed as 64 and 128 both ways.
LINKS: tuple[tuple[str, Link], ...] = (
    (r"H100 PCIe", Link("PCIe 5.0 x16", 128)),
    (r"H100 NVL", Link("NVLink 4 bridge", 600)),
    (r"H800", Link("NVLink 4 (8 links)", 400)),
    (r"GH200|H100|H200|H20\b", Link("NVLink 4 (18 links)", 900)),
    (r"A100.*PCIE", Link("PCIe 4.0 x16", 64)),
    (r"A800", Link("NVLink 3 (8 links)", 400)),
    (r"A100", Link("NVLink 3 (12 links)", 600)),
    (r"V100.*PCIE", Link("PCIe 3.0 x16", 32)),
    (r"V100.*SXM2", Link("NVLink 2 (6 links)", 300)),
    (r"\bG?B[23]00\b", Link("NVLink 5 (18 links)", 1800)),
    (r"\bT4\b", Link("PCIe 3.0 x16", 32)),
    (r"\bL4\b|\bL40S?\b|\bA10G?\b|\bA40\b|RTX", Link("PCIe 4.0 x16", 64)),
    (r"MI3(?:00|25)X", Link("Infinity Fabric (7 links)", 896, mesh_peers=7)),
)


def link_of(gpu_name: str | None) -> Link | None:
    """The link a GPU of this name talks to its peers over; None for a name the table does not hold (then no peak
    is claimed)."""
    if not gpu_name:
        return None
    for pattern, link in LINKS:
        if re.search(pattern, gpu_name, re.IGNORECASE):
            return link
    return None
