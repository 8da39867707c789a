"""Which kind of work (kinds.KINDS) a kernel or a CPU op does.

`kind_of_kernel(name, in_optimizer, launched_by)` reads, in order: what the decoded name commits to (a family's
decoder sets it), the ops the name lists, and last the op that launched it, for names that say nothing
(`void (anonymous namespace)::elementwise_kernel_with_index<...>`; vLLM's `_C::fused_add_rms_norm` launches a
normalization whatever its kernel is called). A library's helper kernel (KernelName.helper_work: cuDNN's
`compute_dot_do_o_specialized`, run by `aten::_cudnn_attention_backward`) is its launching op's kind too; its
library's usual kind only where that op says nothing. No torch here.
"""

from __future__ import annotations

import re
from functools import lru_cache

from trace_report.kernels.decode import decode
from trace_report.kernels.kinds import (ATTENTION, COMMUNICATION, CONVOLUTION, COPY, ELEMENTWISE, GEMM,
                                                       INDEXING, MODULE_PREFIX,
                                                       NORMALIZATION, OPTIMIZER, OTHER, REDUCTION, ROUTING, kind_of_ops,
                                                       kind_of_words)

_COMMUNICATION = re.compile(r"nccl|rccl|c10d::|gloo|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast_"
                            r"|symmetric_memory|_c10d_functional", re.I)
_OPTIMIZER_RANGES = ("Optimizer.step#", "Optimizer.zero_grad#")


@lru_cache(maxsize=8192)  # a model's trace repeats a few hundred names; their regexes cost 70 µs a call
def kind_of_kernel(name: str, in_optimizer: bool = False, launched_by: str | None = None) -> str:
    """A kernel's kind of work: from its decoded name, the ops it lists, whether it ran inside the optimizer's step,
    and last the op that launched it."""
    decoded = decode(name)
    if decoded.work == COMMUNICATION or (not decoded.family and _COMMUNICATION.search(name)):
        return COMMUNICATION
    ops = decoded.compute_ops or decoded.ops
    if in_optimizer or any(op.startswith(("_foreach_", "_fused_")) and not op.startswith("_foreach_copy") for op in ops):
        return OPTIMIZER  # `_foreach_copy_` copies (CUDA graph trees' inputs into their buffers), it updates nothing
    if decoded.work:
        return decoded.work
    if decoded.is_gemm:
        return GEMM
    if decoded.family.startswith("Inductor"):
        return _inductor_kind(decoded.inductor_kind, ops)
    found = kind_of_ops(ops)
    if found:
        return found
    if launched_by:
        by_op = _kind_of_op(launched_by, False)
        if by_op != OTHER:
            return by_op
    if decoded.helper_work:
        return decoded.helper_work
    # A kernel of no known family, launched from no op that says (a Triton kernel a library wrote, `sage_fwd`,
    # `kernel_unified_attention_2d`): its name's words, as for the libraries' kernels.
    return kind_of_words(decoded.short.split("<", 1)[0]) or kind_of_words(decoded.name.split("<", 1)[0]) or OTHER


def _inductor_kind(loop: str, ops: tuple[str, ...]) -> str:
    """An Inductor kernel's kind: its loop (pointwise, reduction, foreach) and the ops its name lists. The ops of a
    GEMM, a convolution or an attention in a pointwise kernel's name are the ones it follows, not what it does
    (`triton_poi_fused_addmm_gelu_15`: the bias add and GELU after an addmm), so a pointwise kernel is elementwise
    unless every op it lists moves data (a copy) or looks data up (indexing)."""
    kinds = {kind_of_ops((op,)) for op in ops}
    if loop == "foreach":
        return OPTIMIZER
    if "reduction" in loop:
        if NORMALIZATION in kinds or ("rsqrt" in ops and {"mean", "var_mean", "var", "sum"} & set(ops)):
            return NORMALIZATION  # x * rsqrt(mean(x²) + eps): an RMSNorm or LayerNorm, fused
        return ROUTING if ROUTING in kinds else REDUCTION
    kinds -= {GEMM, CONVOLUTION, ATTENTION, ROUTING, None}
    if kinds and kinds <= {COPY, INDEXING}:
        return INDEXING if INDEXING in kinds else COPY
    return ELEMENTWISE


@lru_cache(maxsize=8192)
def _kind_of_op(name: str, in_optimizer: bool) -> str:
    """A CPU op's kind: by its name (`aten::mm` a GEMM, `aten::add_` elementwise, `_C::rms_norm` a normalization)."""
    if name.startswith(MODULE_PREFIX):
        return OTHER  # a module range's own time: Python between the ops (`nn.Module: LlamaAttention` is no attention)
    if _COMMUNICATION.search(name):
        return COMMUNICATION
    if in_optimizer or name.startswith(_OPTIMIZER_RANGES) or (
            name.startswith(("aten::_foreach_", "aten::_fused_adam", "aten::_fused_sgd"))
            and not name.startswith("aten::_foreach_copy")):
        return OPTIMIZER
    if name.startswith("cpp_fused_") or name.startswith("triton_"):  # Inductor's kernels in a CPU trace
        return kind_of_kernel(name.replace("cpp_fused_", "triton_poi_fused_"), in_optimizer)
    if "::" not in name:
        return OTHER  # labels' and autograd's own boxes, module ranges: the framework's time between ops
    namespace, op_name = name.split("::", 1)
    if namespace in ("autograd", "torch", "profiler") or op_name.startswith("engine::"):
        return OTHER
    op_name = op_name.rsplit("::", 1)[-1]
    return kind_of_ops((op_name.rstrip("_") if not op_name.startswith("_") else op_name,)) or OTHER


def kind_of_op(name: str, in_optimizer: bool = False) -> str:
    """A CPU op's kind by its name (`aten::mm` a GEMM, `aten::gelu` elementwise); inside an optimizer's step, the
    optimizer's. What the CPU summary and `fusion` ask of an op."""
    return _kind_of_op(name, in_optimizer)


def in_optimizer(path: tuple[str, ...]) -> bool:
    """Whether a box's path runs inside torch.optim's `Optimizer.step#...` range."""
    return any(name.startswith(_OPTIMIZER_RANGES) for name in path)
