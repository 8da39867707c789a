"""Collective communication kernels: NCCL's and RCCL's (AMD's port, same names), and PyTorch's symmetric-memory
collectives, which reduce through peer GPUs' memory with no library at all.

    NCCL (GPUs)   `ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)` (NCCL 2.19 on),
                  `ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)` (before),
                  or `ncclDevKernel_Generic_1(...)` for the combinations NCCL builds no kernel of its own for
    symmetric memory   `c10d::symmetric_memory::one_shot_all_reduce_kernel<...>`, `two_shot_all_reduce_kernel`,
                  `multimem_all_reduce_kernel` (NVLink multicast), `barrier_kernel`

An NCCL kernel's time includes waiting for the other ranks: it starts when its GPU reaches it and ends when every rank
has done its part, so a late rank makes everyone else's kernel long.

From NCCL 2.19 a kernel's name says the algorithm and protocol it is specialized for, not always the work it ran: NCCL
builds a few kernels and launches the one `best_kernel` picks for the collective and type (src/device/generate.py);
work of another algorithm or protocol runs in it through NCCL's table of device functions. Lesson 08's 64 MiB
all-reduce on 2 H100s ran in `ncclDevKernel_AllReduce_Sum_bf16_RING_LL` at 271 GB/s busbw, more than LL's 4 data
bytes in 8 could carry over NVLink's 450 GB/s each way: its chunks went by another protocol.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass

from trace_report.kernels.name import KernelName, base_function


COLLECTIVES = ("AllReduce", "ReduceScatter", "Reduce", "AllGather", "Broadcast", "AllToAll", "SendRecv", "Barrier")
_COLL = "|".join(COLLECTIVES)
_ALGO = "RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT"
_PROTO = "LL128|LL|SIMPLE"
# NCCL 2.19 on: ncclDevKernel_{collective}[_{op}_{type}]_{algorithm}_{protocol}; reductions carry op and type.
_DEV_KERNEL = re.compile(
    rf"^ncclDevKernel_(?P<coll>{_COLL})(?:_(?P<op>Sum|Prod|MinMax|Min|Max|PreMulSum|SumPostDiv)_(?P<type>[a-z0-9]+))?"
    rf"(?:_(?P<algo>{_ALGO}))?(?:_(?P<proto>{_PROTO}))?$"
)
# Before 2.19: ncclKernel_{collective}_{algorithm}_{protocol}_{op}_{C type} (every kernel carries an op and a type).
_OLD_KERNEL = re.compile(
    rf"^ncclKernel_(?P<coll>{_COLL})_(?P<algo>{_ALGO})_(?P<proto>{_PROTO})"
    r"_(?P<op>Sum|Prod|Min|Max|PreMulSum|SumPostDiv)_(?P<type>\w+)$"
)
_GENERIC = re.compile(r"^ncclDevKernel_Generic(?:_\d+)?$")
_ANY_NCCL = re.compile(r"^nccl(?:Dev)?Kernel_")

DTYPES = {
    "i8": "int8", "int8_t": "int8", "u8": "uint8", "uint8_t": "uint8", "i32": "int32", "int32_t": "int32",
    "u32": "uint32", "uint32_t": "uint32", "i64": "int64", "int64_t": "int64", "u64": "uint64", "uint64_t": "uint64",
    "f16": "fp16", "half": "fp16", "f32": "fp32", "float": "fp32", "f64": "fp64", "double": "fp64",
    "bf16": "bf16", "__nv_bfloat16": "bf16", "f8e4m3": "fp8 e4m3", "__nv_fp8_e4m3": "fp8 e4m3",
    "f8e5m2": "fp8 e5m2", "__nv_fp8_e5m2": "fp8 e5m2",
}
ALGORITHMS = {
    "RING": "ring: each rank passes chunks to the next, 2(N-1)/N of the data through every link",
    "TREE": "tree: reduce up a tree, broadcast back down",
    "NVLS": "NVLS: the NVSwitch reduces, through NVLink multicast",
    "NVLS_TREE": "NVLS tree: NVLink SHARP within a node, a tree between nodes",
    "COLLNET_DIRECT": "CollNet direct: the network reduces",
    "COLLNET_CHAIN": "CollNet chain: the network reduces",
    "PAT": "PAT: parallel aggregated trees",
}
PROTOCOLS = {
    "LL": "LL, low latency: 8-byte stores of 4 data bytes and a 4-byte flag, half the link's bandwidth, small messages",
    "LL128": "LL128: 128-byte lines carrying 8 bytes of flag, nearly the link's bandwidth at low latency",
    "SIMPLE": "Simple: large chunks and a fence per chunk, the link's full bandwidth, the highest latency",
}
GENERIC_NOTE = (
    "NCCL's generic kernel: collective, type and protocol are picked at run time from a table, so the name does not "
    "say them; the op that launched it does"
)


@dataclass(frozen=True)
class NcclKernel:
    """What an NCCL kernel's name says; fields it does not say are None (all of them for the generic kernel)."""

    name: str  # as in the trace, arguments left out
    collective: str | None
    op: str | None = None
    dtype: str | None = None  # the trace's spelling: bf16, f32, float, __nv_bfloat16, ...
    algorithm: str | None = None
    protocol: str | None = None

    @property
    def generic(self) -> bool:
        return self.collective is None

    def describe(self) -> str:
        if self.generic:
            return GENERIC_NOTE
        parts = [f"NCCL {self.collective}"]
        if self.op:
            parts.append(f"op {self.op}")
        if self.dtype:
            parts.append(DTYPES.get(self.dtype, self.dtype))
        if self.algorithm:
            parts.append(ALGORITHMS.get(self.algorithm, self.algorithm))
        if self.protocol:
            parts.append(f"protocol {PROTOCOLS.get(self.protocol, self.protocol)}")
        return "; ".join(parts)


def decode_nccl(name: str) -> NcclKernel | None:
    """An NCCL (or RCCL) kernel's name read into its fields; None for any other kernel."""
    base = name.split("(", 1)[0].strip()
    if not _ANY_NCCL.match(base):
        return None
    if _GENERIC.match(base):
        return NcclKernel(base, None)
    found = _DEV_KERNEL.match(base) or _OLD_KERNEL.match(base)
    if found is None:  # a kernel of NCCL's that follows neither pattern: its collective is its second word
        word = base.split("_")[1] if base.count("_") else base
        return NcclKernel(base, word if word in COLLECTIVES else None)
    return NcclKernel(base, found["coll"], found["op"], found["type"], found["algo"], found["proto"])


_SYMMETRIC_MEMORY = re.compile(r"symmetric_memory::|\b(?:one_shot|two_shot|multimem)_\w*(?:all_reduce|all_gather|"
                               r"reduce_scatter)\w*_kernel")


@lru_cache(maxsize=8192)  # a trace repeats a few hundred kernel names tens of thousands of times
def is_symmetric_memory_kernel(name: str) -> bool:
    """PyTorch's symmetric-memory kernels (`c10d::symmetric_memory::barrier_kernel`, `one_shot_all_reduce_kernel`,
    ...): the ranks' barriers and signals, or a collective run through peer GPUs' memory."""
    return _SYMMETRIC_MEMORY.search(name) is not None


def decode_collective(name: str, core: str) -> KernelName | None:
    """An NCCL/RCCL or symmetric-memory kernel as a KernelName (communication), else None."""
    kernel = decode_nccl(name)
    if kernel is not None:
        details: list[tuple[str, str]] = []
        if kernel.generic:
            details.append(("collective", "picked at run time (NCCL's generic kernel): the launching op says which"))
        else:
            details.append(("collective", kernel.collective))
            if kernel.op:
                details.append(("op", kernel.op))
            if kernel.dtype:
                details.append(("dtype", DTYPES.get(kernel.dtype, kernel.dtype)))
            if kernel.algorithm:
                details.append(("algorithm", kernel.algorithm))
            if kernel.protocol:
                details.append(("protocol", kernel.protocol))
        short = kernel.name if len(kernel.name) <= 64 else f"NCCL {kernel.collective or 'generic'}"
        return KernelName(name, short, "NCCL/RCCL", False, (kernel.collective or "collective",), tuple(details),
                          work="communication")
    core = core.replace("(anonymous namespace)::", "")
    if "symmetric_memory" in core or re.match(r"(?:\w+::)*(?:one_shot|two_shot|multimem)_\w*(?:all_reduce|all_gather|"
                                              r"reduce_scatter)\w*_kernel", core):
        base = base_function(core)
        return KernelName(name, base, "PyTorch symmetric memory", False, (base.replace("_kernel", ""),),
                          (("collective", base.replace("_kernel", "")),
                           ("how", "loads and stores to peer GPUs' memory, no NCCL")), work="communication")
    return None
