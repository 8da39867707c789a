"""Normalizations: FLOPs = the input's elements times the operations each costs (the table below, an add, a multiply
or a square root each 1), bytes as op_bytes weighs them (every input read once, the normalized tensor written once;
the per-row statistics are small beside it).

    layer / batch / group norm, forward   8 per element: mean (1), variance (3: subtract, square, add), normalize
                                          (2: subtract, multiply by 1/σ), affine (2)
    their backward                        13 per element: x̂ again (2), dx̂ = dy·γ (1), the two row sums (3), dx (4),
                                          dγ and dβ (3)
    RMS norm, forward                     4 per element: square and add (2), multiply by 1/rms (1), by γ (1)
    its backward                          9 per element: x̂ (1), dx̂ (1), the row sum of dx̂·x̂ (2), dx (3), dγ (2)
    vLLM's fused_add_rms_norm             5 per element: the residual add, then an RMS norm; in place, input and
                                          residual read and written
"""

from __future__ import annotations

from trace_report.flops.cost import Cost, peak_dtype
from trace_report.model import CpuOp
from trace_report.op_bytes import op_traffic, tensor_inputs

NORMALIZATION = "normalization"
FLOPS_PER_ELEMENT = {
    "layer_norm": 8, "native_layer_norm": 8, "group_norm": 8, "native_group_norm": 8, "batch_norm": 8,
    "native_batch_norm": 8, "_native_batch_norm_legit": 8, "_native_batch_norm_legit_no_training": 8,
    "cudnn_batch_norm": 8, "miopen_batch_norm": 8, "_batch_norm_with_update": 8, "_batch_norm_no_update": 8,
    "native_layer_norm_backward": 13, "native_group_norm_backward": 13, "native_batch_norm_backward": 13,
    "cudnn_batch_norm_backward": 13, "miopen_batch_norm_backward": 13, "batch_norm_backward": 13,
    "rms_norm": 4, "_fused_rms_norm": 4, "_fused_rms_norm_backward": 9,
}
# vLLM's and SGLang's custom ops: (FLOPs per element, indices of the tensors written: in place or `out`)
CUSTOM = {"_C::rms_norm": (4, (0,)), "_C::fused_add_rms_norm": (5, (0, 1)), "sgl_kernel::rmsnorm": (4, (0,)),
          "sgl_kernel::fused_add_rmsnorm": (5, (0, 1))}


def normalization(op: CpuOp) -> Cost:
    dtype = peak_dtype(op.input_types)
    inputs = tensor_inputs(op)
    traffic = op_traffic(op)
    if not inputs or traffic is None:
        return Cost(NORMALIZATION, None, None, dtype, "shapes not recorded")
    elements = max(i.tensor.numel for i in inputs)
    per_element = FLOPS_PER_ELEMENT[op.name.removeprefix("aten::")]
    return Cost(NORMALIZATION, per_element * elements, traffic.read + traffic.written, dtype)


def custom(op: CpuOp) -> Cost:
    """vLLM's `_C::rms_norm(out, input, weight, eps)`, `_C::fused_add_rms_norm(input, residual, weight, eps)`."""
    dtype = peak_dtype(op.input_types)
    inputs = tensor_inputs(op)
    if not inputs or len(inputs) < 2:
        return Cost(NORMALIZATION, None, None, dtype, "shapes not recorded")
    per_element, written = CUSTOM[op.name]
    out_param = op.name.endswith("::rms_norm") or op.name.endswith("::rmsnorm")  # the output tensor comes first
    reads = inputs[1:] if out_param else inputs
    elements = max(i.tensor.numel for i in inputs)
    moved = sum(i.tensor.nbytes for i in reads) + sum(inputs[k].tensor.nbytes for k in written if k < len(inputs))
    return Cost(NORMALIZATION, per_element * elements, moved, dtype)


FORMULAS = {**{name: normalization for name in FLOPS_PER_ELEMENT}, **{name: custom for name in CUSTOM}}
