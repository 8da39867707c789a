"""What a GPU kernel's name says, any vendor's, any library's: `decode(name)` -> KernelName (library, what it
computes, dtype, tile, ...), and `kind_of_kernel(name, ...)` -> the kind of work (GEMM, convolution, attention, ...).

One module per family of names (see decode.DECODERS for the order they are tried in):

    cublas.py       cuBLAS/cuBLASLt: nvjet (sm90, sm100), the arch-named kernels, xmma GEMMs, split-K helpers
    cutlass.py      CUTLASS 2 and 3, by name or instantiated in C++
    cudnn.py        cuDNN: convolutions, batch norm, layout transforms, generated kernels, its SDPA
    attention.py    FlashAttention 2 and 3, SDPA's memory-efficient (xformers' CUTLASS) kernels
    trtllm.py       TensorRT-LLM's generated GEMMs (`bmm_*`, `gemm_*`) and fused attention (`fmha*`, XQA)
    triton.py       Inductor's, Liger-Kernel's and this suite's Triton kernels
    aten.py         ATen's own kernels (eager PyTorch), their functors and foreach/fused optimizers
    collectives.py  NCCL/RCCL and PyTorch's symmetric-memory collectives
    amd.py          Tensile (rocBLAS/hipBLASLt), Composable Kernel, MIOpen, AITER, rocBLAS, rocPRIM
    libraries.py    vLLM, SGLang, FlashInfer, Transformer Engine, FBGEMM, DeepGEMM, CUB, ...: named by namespace
    demangle.py     Itanium C++ demangling, for traces that carry `_ZN...` symbols
    name.py         KernelName and the helpers every family shares
    ops.py          the op-name vocabulary (views, multi-word op names)
    kinds.py        the kinds of work, and the tables from op names and name words to them
    classify.py     kind_of_kernel, kind_of_op: the kind a kernel or CPU op does

Nothing here imports torch: the report must start fast, anywhere.
"""

from trace_report.kernels.amd import GFX, gfx_in_name, gfx_label
from trace_report.kernels.classify import in_optimizer, kind_of_kernel, kind_of_op
from trace_report.kernels.collectives import NcclKernel, decode_nccl
from trace_report.kernels.decode import decode, distinct_short_names, math_unit, short_name
from trace_report.kernels.demangle import demangle
from trace_report.kernels.kinds import (ATTENTION, COMMUNICATION, CONVOLUTION, COPY, ELEMENTWISE, GEMM,
                                                       INDEXING, KINDS, MEMORY_BOUND, MODULE_PREFIX, NORMALIZATION,
                                                       OPTIMIZER, OTHER, REDUCTION, ROUTING)
from trace_report.kernels.name import ARCHS, DTYPES, KernelName, arch_label, is_gemm
from trace_report.kernels.ops import METADATA_OPS, VIEW_OPS, split_fused_ops

__all__ = [
    "ARCHS", "ATTENTION", "COMMUNICATION", "CONVOLUTION", "COPY", "DTYPES", "ELEMENTWISE", "GEMM", "GFX", "INDEXING",
    "KINDS", "KernelName", "MEMORY_BOUND", "METADATA_OPS", "MODULE_PREFIX", "NORMALIZATION", "NcclKernel", "OPTIMIZER",
    "OTHER", "REDUCTION", "ROUTING", "VIEW_OPS", "arch_label", "decode", "decode_nccl", "demangle", "distinct_short_names", "gfx_in_name", "gfx_label",
    "in_optimizer", "is_gemm", "kind_of_kernel", "kind_of_op", "math_unit", "short_name", "split_fused_ops",
]
