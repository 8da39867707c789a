"""FLOPs and bytes per call of an op, from the shapes and types `record_shapes=True` writes: the roofline's inputs.

One module per family of ops, each a table from the op's name to its formula (cost.py: the Cost they return):

    gemm.py         mm, addmm, bmm, baddbmm, addbmm, linear, matmul, _scaled_mm, _grouped_mm, _int_mm
    attention.py    scaled_dot_product_attention and its flash, memory-efficient and cuDNN ops, forward and backward
    conv.py         convolutions (ATen's, cuDNN's, MIOpen's), forward and backward
    norm.py         layer norm, RMS norm, batch and group norm, forward and backward (and vLLM's fused RMS norms)
    elementwise.py  pointwise math, softmax and log-softmax, reductions, embedding and other lookups, copies and
                    fills, the optimizers' foreach ops, and the kernels Inductor generates (`triton_poi_fused_...`)

`op_cost(op)` -> Cost: the family, the FLOPs and bytes of one call (None where the shapes do not tell), the dtype the
peak is read for, and a note that says what a count assumes (a causal mask, a mask the trace did not record). None:
an op no table knows (a custom op such as `vllm::moe_forward`), whose numbers would be a guess.

Conventions, those of `torch.utils.flop_counter`: a multiply-add is 2 FLOPs, a GEMM's bias add and an attention's
softmax are not counted; a pointwise op's FLOPs are its output's elements times the operations per element (table in
elementwise.py). Bytes are the least a kernel must move: each input read once, each output written once
(`op_bytes`' model, whose home this is not: the GEMM, attention and convolution outputs are derived here from the
shapes, the rest read from op_bytes). Nothing here imports torch.
"""

from __future__ import annotations

from functools import lru_cache

from trace_report.flops import attention, conv, elementwise, gemm, norm
from trace_report.flops.cost import Cost
from trace_report.model import CpuOp

__all__ = ["Cost", "formula_for", "op_cost"]
_TABLES = (gemm.FORMULAS, attention.FORMULAS, conv.FORMULAS, norm.FORMULAS, elementwise.FORMULAS)


def op_cost(op: CpuOp) -> Cost | None:
    """The cost of one call of `op` (see the module's docstring); None for an op of no known family."""
    formula = formula_for(op.name)
    if formula is None:
        return None
    try:
        return _cached_cost(op.name, op.input_dims, op.input_types, op.concrete_inputs)
    except TypeError:  # a TensorList's shapes are lists: no cache can key on them
        return formula(op)


def formula_for(name: str):
    """The formula of the op named `name` (`aten::mm`, `_C::rms_norm`, `triton_poi_fused_mul_0`), or None."""
    base = name.removeprefix("aten::")
    for table in _TABLES:
        if base in table:
            return table[base]
    if name.startswith("aten::"):
        return elementwise.pointwise_formula(base)
    return elementwise.generated_formula(name)


@lru_cache(maxsize=8192)
def _cached_cost(name: str, dims: tuple, types: tuple, concrete: tuple) -> Cost | None:
    op = CpuOp(name, 0.0, 0.0, None, None, input_dims=dims, input_types=types, concrete_inputs=concrete)
    return formula_for(name)(op)
