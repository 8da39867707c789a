"""Everything memory-bound that ATen names: pointwise math, softmax, reductions, lookups, copies and fills, the
optimizers' foreach ops; and the kernels Inductor generates, which the trace names as ops (`triton_poi_fused_...`).

FLOPs: a pointwise op's output elements times its operations per element (FLOPS_PER_ELEMENT; an add, a multiply, an
exp or a comparison each 1, an activation the operations of its formula: silu x/(1+e⁻ˣ) is 4); a reduction's input
elements times its own (sum 1, variance 3, a norm 2); softmax 5 (max, subtract, exp, sum, divide), its backward 3;
copies, fills and lookups none. Bytes: op_bytes' model (each input read once, the output written once; an in-place op
reads and writes its first input; a lookup reads what it picks).

    foreach ops    `_foreach_mul_(TensorList, ...)`: the trace writes a TensorList's shapes but not its element type:
                   their FLOPs are counted, their bytes are not (the row says so)
    Inductor       `triton_poi_` (pointwise), `triton_red_`/`triton_per_` (reductions): the recorded arguments are the
                   kernel's buffers, inputs and outputs alike, each moved once: their bytes; the FLOPs of the fused
                   ops are not in the trace
    vLLM           its fp8 quantization (2 per element) and its KV-cache writes (bytes only), CUSTOM below
"""

from __future__ import annotations

import math

from trace_report.flops.cost import Cost, peak_dtype
from trace_report.model import CpuOp
from trace_report.op_bytes import ITEMSIZE, op_traffic, tensor_inputs

ELEMENTWISE, SOFTMAX, REDUCTION, LOOKUP, COPY, FOREACH, INDUCTOR = (
    "elementwise", "softmax", "reduction", "lookup", "copy", "foreach", "Inductor kernel")
TENSORLIST = "bytes unknown: a TensorList's element type is not recorded"

# Operations per output element; every name here is a pointwise op (its in-place `_` form too).
FLOPS_PER_ELEMENT = {
    **dict.fromkeys(("add", "sub", "rsub", "mul", "div", "neg", "abs", "exp", "exp2", "expm1", "log", "log1p", "log2",
                     "log10", "sqrt", "rsqrt", "reciprocal", "pow", "sin", "cos", "tan", "tanh", "erf", "erfinv",
                     "relu", "clamp", "clamp_min", "clamp_max", "threshold", "hardtanh", "sign", "sgn", "floor", "ceil",
                     "round", "trunc", "frac", "fmod", "remainder", "maximum", "minimum", "square", "where",
                     "masked_fill", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not",
                     "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "isnan", "isinf",
                     "isfinite", "isneginf", "isposinf", "nan_to_num", "threshold_backward", "leaky_relu", "atan",
                     "atan2", "asin", "acos", "sinh", "cosh", "xlogy", "copysign", "heaviside", "float_power"), 1),
    **{"addcmul": 2, "addcdiv": 2, "lerp": 3, "sigmoid": 4, "silu": 4, "gelu": 8, "mish": 6, "elu": 3,
       "softplus": 3, "hardswish": 4, "hardsigmoid": 3, "sigmoid_backward": 2, "tanh_backward": 2,
       "silu_backward": 7, "gelu_backward": 12, "hardswish_backward": 4, "leaky_relu_backward": 1,
       "hardtanh_backward": 1, "elu_backward": 3, "mse_loss_backward": 3, "native_dropout": 2,
       "native_dropout_backward": 2, "_masked_scale": 2},
}
SOFTMAX_FLOPS = {"softmax": 5, "_softmax": 5, "_safe_softmax": 5, "log_softmax": 5, "_log_softmax": 5,
                 "_softmax_backward_data": 3, "_log_softmax_backward_data": 3}
# Operations per input element.
REDUCTION_FLOPS = {"sum": 1, "mean": 1, "nansum": 1, "prod": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "argmax": 1,
                   "argmin": 1, "all": 1, "any": 1, "cumsum": 1, "cumprod": 1, "var": 3, "std": 3, "var_mean": 3,
                   "std_mean": 3, "norm": 2, "linalg_vector_norm": 2, "logsumexp": 3, "mse_loss": 3}
LOOKUPS = {"embedding", "index_select", "gather", "take_along_dim", "index", "nll_loss_forward", "nll_loss2d_forward",
           "embedding_dense_backward", "index_add", "index_put", "_index_put_impl", "scatter", "scatter_add",
           "index_copy", "nll_loss_backward", "nll_loss2d_backward", "masked_select", "nonzero"}
COPIES = {"copy_", "clone", "contiguous", "_to_copy", "to", "_copy_from", "_copy_from_and_resize", "fill_", "zero_",
          "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
          "normal_", "uniform_", "random_", "bernoulli_", "exponential_", "cat", "stack", "constant_pad_nd",
          "repeat", "flip", "roll", "tril", "triu", "arange", "linspace", "_local_scalar_dense", "item", "sort",
          "topk", "repeat_interleave", "masked_scatter", "_unsafe_index", "index_fill_", "gather_backward"}
# The foreach ops' per-element FLOPs: their pointwise op's; the fused optimizers' by their update (AdamW: the two
# moments 7, bias corrections, square root, divide and step 5, weight decay 1).
FOREACH_FLOPS = {"_fused_adamw_": 13, "_fused_adam_": 12, "_fused_sgd_": 3, "_fused_adagrad_": 6}
INDUCTOR_PREFIXES = ("triton_poi_", "triton_red_", "triton_per_", "triton_tem_")


def pointwise_formula(base: str):
    """The formula of an ATen op of this module's families (base: the name without `aten::`), or None."""
    bare = base[:-1] if base.endswith("_") and not base.endswith("__") else base
    if base.startswith("_foreach_"):
        return foreach
    if base in FOREACH_FLOPS:
        return foreach
    if bare in FLOPS_PER_ELEMENT:
        return pointwise
    if base in SOFTMAX_FLOPS:
        return softmax
    if bare in REDUCTION_FLOPS:
        return reduction
    if bare in LOOKUPS:
        return lookup
    if base in COPIES or bare in COPIES:
        return copy
    return None


def generated_formula(name: str):
    """Inductor's kernels, which the trace names as ops: their bytes; vLLM's cache writes and fp8 quantization."""
    if name in CUSTOM:
        return CUSTOM[name]
    return inductor if name.startswith(INDUCTOR_PREFIXES) else None


def fp8_quant(op: CpuOp) -> Cost:
    """vLLM's `_C::static_scaled_fp8_quant(out, input, scale)`: each element scaled and clamped (2), read once, written
    once at out's 1 byte."""
    inputs = tensor_inputs(op)
    if not inputs or len(inputs) < 2:
        return Cost(ELEMENTWISE, None, None, "", _why(op))
    out, x = inputs[0], inputs[1]
    return Cost(ELEMENTWISE, 2 * x.tensor.numel, x.tensor.nbytes + out.tensor.nbytes, peak_dtype(op.input_types[1:]))


def cache_write(op: CpuOp) -> Cost:
    """vLLM's `_C_cache_ops::reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, ...)`: the new
    keys and values read and written into their slots at the caches' element size, the slots read."""
    inputs = tensor_inputs(op)
    if not inputs or len(inputs) < 5:
        return Cost(COPY, None, None, "", _why(op))
    key, value, key_cache, value_cache, slots = inputs[:5]
    written = key.tensor.numel * key_cache.tensor.itemsize + value.tensor.numel * value_cache.tensor.itemsize
    return Cost(COPY, 0, key.tensor.nbytes + value.tensor.nbytes + slots.tensor.nbytes + written,
                peak_dtype(op.input_types))


CUSTOM = {"_C::static_scaled_fp8_quant": fp8_quant, "_C::dynamic_scaled_fp8_quant": fp8_quant,
          "_C_cache_ops::reshape_and_cache_flash": cache_write, "_C_cache_ops::reshape_and_cache": cache_write}


def _bytes(op: CpuOp) -> int | None:
    traffic = op_traffic(op)
    return None if traffic is None else traffic.read + traffic.written


def _bare(op: CpuOp) -> str:
    base = op.name.removeprefix("aten::")
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


def pointwise(op: CpuOp) -> Cost:
    traffic = op_traffic(op)
    dtype = peak_dtype(op.input_types)
    if traffic is None:
        scalars = [ITEMSIZE[kind] for dims, kind in zip(op.input_dims, op.input_types) if dims == () and kind in ITEMSIZE]
        if scalars and not any(dims for dims in op.input_dims):  # 0-dim tensors (a step counter): one element each
            return Cost(ELEMENTWISE, FLOPS_PER_ELEMENT[_bare(op)], sum(scalars) + max(scalars), dtype)
        return Cost(ELEMENTWISE, None, None, dtype, _why(op))
    return Cost(ELEMENTWISE, FLOPS_PER_ELEMENT[_bare(op)] * traffic.output.numel, traffic.read + traffic.written, dtype)


def softmax(op: CpuOp) -> Cost:
    inputs = tensor_inputs(op)
    moved = _bytes(op)
    dtype = peak_dtype(op.input_types)
    if not inputs or moved is None:
        return Cost(SOFTMAX, None, None, dtype, _why(op))
    elements = max(i.tensor.numel for i in inputs)
    return Cost(SOFTMAX, SOFTMAX_FLOPS[op.name.removeprefix("aten::")] * elements, moved, dtype)


def reduction(op: CpuOp) -> Cost:
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs:
        return Cost(REDUCTION, None, None, dtype, _why(op))
    bare = _bare(op)
    elements = max(i.tensor.numel for i in inputs)
    if bare == "mse_loss":  # (input, target, reduction): both read, a scalar written (mean or sum)
        return Cost(REDUCTION, 3 * elements, sum(i.tensor.nbytes for i in inputs), dtype)
    moved = _bytes(op)
    return Cost(REDUCTION, REDUCTION_FLOPS[bare] * elements, moved, dtype, "" if moved is not None else _why(op))


def lookup(op: CpuOp) -> Cost:
    """Lookups move what they pick; `index` with a list of index tensors (recorded without shapes) and the losses'
    picks by target are weighed by what their recorded tensors say."""
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs:
        return Cost(LOOKUP, 0, None, dtype, _why(op))
    bare = _bare(op)
    if bare in ("embedding", "index_select", "gather", "take_along_dim"):
        return Cost(LOOKUP, 0, _bytes(op), dtype)
    if bare in ("nll_loss_forward", "nll_loss2d_forward") and len(inputs) >= 2:  # one pick per target, a sum
        picks = inputs[1].tensor.numel
        return Cost(LOOKUP, picks, inputs[1].tensor.nbytes + picks * inputs[0].tensor.itemsize, dtype)
    if bare in ("nll_loss_backward", "nll_loss2d_backward") and len(inputs) >= 3:  # the gradient written whole
        return Cost(LOOKUP, inputs[2].tensor.numel, inputs[2].tensor.nbytes + inputs[1].tensor.nbytes, dtype)
    if bare == "embedding_dense_backward" and len(inputs) >= 2:  # dO's rows added into the rows they came from
        grad, indices = inputs[0], inputs[1]
        return Cost(LOOKUP, grad.tensor.numel, 2 * grad.tensor.nbytes + indices.tensor.nbytes, dtype)
    if len(inputs) >= 2:  # index_put, scatter, index_add: the values read, as many written, the indices read
        values = inputs[-1]
        return Cost(LOOKUP, 0, 2 * values.tensor.nbytes + sum(i.tensor.nbytes for i in inputs[1:-1]), dtype)
    return Cost(LOOKUP, 0, None, dtype, "indices not recorded: bytes unknown")


def copy(op: CpuOp) -> Cost:
    dtype = peak_dtype(op.input_types)
    if any(kind == "TensorList" for kind in op.input_types):
        return Cost(COPY, 0, None, dtype, TENSORLIST)
    moved = _bytes(op)
    return Cost(COPY, 0, moved, dtype, "" if moved is not None else _why(op))


def foreach(op: CpuOp) -> Cost:
    """`_foreach_mul_(self: TensorList, other)`: the first list's elements times the op's FLOPs per element."""
    base = op.name.removeprefix("aten::")
    lists = [dims for dims, kind in zip(op.input_dims, op.input_types) if kind == "TensorList"]
    if not lists:
        return Cost(FOREACH, None, None, "", "shapes not recorded")
    elements = sum(math.prod(shape) for shape in lists[0] if isinstance(shape, (list, tuple)))
    inner = base.removeprefix("_foreach_").rstrip("_")
    per_element = FOREACH_FLOPS.get(base, FLOPS_PER_ELEMENT.get(inner, REDUCTION_FLOPS.get(inner, 1)))
    if inner in ("copy", "zero"):
        per_element = 0
    return Cost(FOREACH, per_element * elements, None, "", TENSORLIST)


def inductor(op: CpuOp) -> Cost:
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs:
        return Cost(INDUCTOR, None, None, dtype, _why(op))
    return Cost(INDUCTOR, None, sum(i.tensor.nbytes for i in inputs), dtype, "generated kernel: bytes only")


def _why(op: CpuOp) -> str:
    if not op.input_dims:
        return "shapes not recorded"
    if any(kind not in ITEMSIZE and kind for kind, dims in zip(op.input_types, op.input_dims) if dims):
        return "an input type of unknown size"
    return "shapes do not say"


FORMULAS: dict = {}  # this module's ops are recognised by name (pointwise_formula): too many for one table
