"""Convolutions and pooling windows: FLOPs = 2 · N · Cout · (output positions) · (Cin/groups) · (kernel positions), a multiply-add per
weight per output element, which is 2 · (output elements) · (weight elements per output channel); a backward computes
the input's gradient and the weight's, each as many FLOPs as the forward (output_mask says which it computes).
Bytes: the input, the weight (and bias) read once, the output written once.

A forward's output size needs the stride, padding and dilation: scalar arguments the trace keeps only among "Concrete
Inputs" (PyTorch 2.3 and later; the reader keeps them for convolutions). Without them the row says so and counts
nothing. A backward needs none: dO has the output's size.

    table: op -> index of (stride, padding, dilation, transposed, output_padding) among its arguments (-1: none)
"""

from __future__ import annotations

import math
from typing import NamedTuple

from trace_report.flops.cost import Cost, concrete, int_list, peak_dtype
from trace_report.model import CpuOp
from trace_report.op_bytes import tensor_inputs

CONVOLUTION = "convolution"
NOT_RECORDED = "stride and padding not recorded"


class Arguments(NamedTuple):
    stride: int
    padding: int
    dilation: int
    transposed: int = -1
    output_padding: int = -1


FORWARD = {
    "convolution": Arguments(3, 4, 5, 6, 7),
    "_convolution": Arguments(3, 4, 5, 6, 7),
    "conv1d": Arguments(3, 4, 5),
    "conv2d": Arguments(3, 4, 5),
    "conv3d": Arguments(3, 4, 5),
    "cudnn_convolution": Arguments(3, 2, 4),  # (self, weight, padding, stride, dilation, groups, ...): no bias
    "miopen_convolution": Arguments(4, 3, 5),  # (self, weight, bias, padding, stride, dilation, groups, ...)
    "miopen_depthwise_convolution": Arguments(4, 3, 5),
    "mkldnn_convolution": Arguments(4, 3, 5),
    "_nnpack_spatial_convolution": Arguments(4, 3, -1),
}


def forward(op: CpuOp) -> Cost:
    arguments = FORWARD[op.name.removeprefix("aten::")]
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs or len(inputs) < 2:
        return Cost(CONVOLUTION, None, None, dtype, "shapes not recorded")
    x, weight = inputs[0], inputs[1]
    spatial = len(x.shape) - 2
    stride, padding = _per_dim(op, arguments.stride, spatial), _padding(op, arguments.padding, spatial)
    dilation = _per_dim(op, arguments.dilation, spatial) if arguments.dilation >= 0 else (1,) * spatial
    if stride is None or padding is None or dilation is None or spatial < 1 or len(weight.shape) != spatial + 2:
        return Cost(CONVOLUTION, None, None, dtype, NOT_RECORDED)
    kernel = weight.shape[2:]
    transposed = arguments.transposed >= 0 and concrete(op, arguments.transposed) == "True"
    if transposed:  # weight [Cin, Cout/groups, k...]: each input element meets Cout/groups · k weights
        extra = _per_dim(op, arguments.output_padding, spatial) or (0,) * spatial
        out = [(i - 1) * s - 2 * p + d * (k - 1) + e + 1
               for i, s, p, d, k, e in zip(x.shape[2:], stride, padding, dilation, kernel, extra)]
        channels = weight.shape[1] * (x.shape[1] // weight.shape[0] if weight.shape[0] else 1)
        flops = 2 * math.prod(x.shape) * math.prod(weight.shape[1:])
    else:
        out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel)]
        channels = weight.shape[0]
        flops = 2 * x.shape[0] * math.prod(out) * math.prod(weight.shape)
    if min(out) < 1:
        return Cost(CONVOLUTION, None, None, dtype, "shapes do not make a convolution")
    written = x.shape[0] * channels * math.prod(out) * x.tensor.itemsize
    return Cost(CONVOLUTION, flops, sum(i.tensor.nbytes for i in inputs) + written, dtype)


def backward(op: CpuOp) -> Cost:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)."""
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs or len(inputs) < 3:
        return Cost(CONVOLUTION, None, None, dtype, "shapes not recorded")
    grad, x, weight = inputs[0], inputs[1], inputs[2]
    mask = _bools(concrete(op, 10))
    note = ""
    if mask is None:
        mask, note = (True, True, False), "output_mask not recorded: both gradients counted"
    source = x if concrete(op, 7) == "True" else grad  # transposed: the input holds the larger grid
    one = 2 * math.prod(source.shape) * math.prod(weight.shape[1:])
    flops = one * (int(mask[0]) + int(mask[1]))
    written = x.tensor.nbytes * mask[0] + weight.tensor.nbytes * mask[1] + (
        weight.shape[0] * grad.tensor.itemsize if len(mask) > 2 and mask[2] else 0)
    return Cost(CONVOLUTION, flops, grad.tensor.nbytes + x.tensor.nbytes + weight.tensor.nbytes + written, dtype, note)


def cudnn_backward_input(op: CpuOp) -> Cost:
    """Traces before 2021's convolution_backward: cudnn_convolution_backward_input(self_size, grad_output, weight, ...);
    the gradient's size is a list argument ("Concrete Inputs", which those traces do not keep)."""
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs or len(inputs) < 2:
        return Cost(CONVOLUTION, None, None, dtype, "shapes not recorded")
    grad, weight = inputs[0], inputs[1]
    flops = 2 * math.prod(grad.shape) * math.prod(weight.shape[1:])
    size = int_list(concrete(op, 0))
    if size is None:
        return Cost(CONVOLUTION, flops, None, dtype, "input size not recorded: bytes unknown")
    return Cost(CONVOLUTION, flops, grad.tensor.nbytes + weight.tensor.nbytes + math.prod(size) * grad.tensor.itemsize,
                dtype)


def cudnn_backward_weight(op: CpuOp) -> Cost:
    """cudnn_convolution_backward_weight(weight_size, grad_output, self, ...): the weight's size only as a list."""
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    size = int_list(concrete(op, 0))
    if not inputs or len(inputs) < 2 or size is None or len(size) < 3:
        return Cost(CONVOLUTION, None, None, dtype, "weight size not recorded")
    grad, x = inputs[0], inputs[1]
    flops = 2 * math.prod(grad.shape) * math.prod(size[1:])
    return Cost(CONVOLUTION, flops, grad.tensor.nbytes + x.tensor.nbytes + math.prod(size) * grad.tensor.itemsize, dtype)


POOLING = "pooling"
# max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode) and its kin: argument indices of
# (kernel_size, stride, padding, dilation); -1: none (avg_pool2d has no dilation).
POOLS = {"max_pool1d_with_indices": (1, 2, 3, 4), "max_pool2d_with_indices": (1, 2, 3, 4),
         "max_pool3d_with_indices": (1, 2, 3, 4), "max_pool2d": (1, 2, 3, 4), "avg_pool2d": (1, 2, 3, -1),
         "avg_pool3d": (1, 2, 3, -1)}


def pool(op: CpuOp) -> Cost:
    """A pooling window: one comparison or add per input element of each window, the output (and a max's indices,
    int64) written; the output's size from the kernel size, stride and padding ("Concrete Inputs")."""
    kernel_at, stride_at, padding_at, dilation_at = POOLS[op.name.removeprefix("aten::")]
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs:
        return Cost(POOLING, None, None, dtype, "shapes not recorded")
    x = inputs[0]
    spatial = len(x.shape) - 2
    kernel = _per_dim(op, kernel_at, spatial)
    stride = _per_dim(op, stride_at, spatial) or kernel  # stride=[] means the kernel size
    padding = _per_dim(op, padding_at, spatial)
    dilation = _per_dim(op, dilation_at, spatial) if dilation_at >= 0 else (1,) * spatial
    if kernel is None or stride is None or padding is None or dilation is None or spatial < 1:
        return Cost(POOLING, None, None, dtype, NOT_RECORDED)
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel)]
    outputs = math.prod(x.shape[:2]) * math.prod(out)
    indices = 8 * outputs if "max" in op.name else 0
    return Cost(POOLING, outputs * math.prod(kernel), x.tensor.nbytes + outputs * x.tensor.itemsize + indices, dtype)


def pool_backward(op: CpuOp) -> Cost:
    """max_pool2d_with_indices_backward(grad_output, self, ..., indices): dO and the indices read, dX (self's size)
    written, one add per dO element; avg_pool2d_backward(grad_output, self, ...) alike without indices."""
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    if not inputs or len(inputs) < 2:
        return Cost(POOLING, None, None, dtype, "shapes not recorded")
    grad, x = inputs[0], inputs[1]
    moved = sum(i.tensor.nbytes for i in inputs if i is not x) + x.tensor.nbytes
    return Cost(POOLING, grad.tensor.numel, moved, dtype)


def _per_dim(op: CpuOp, index: int, spatial: int) -> tuple[int, ...] | None:
    values = int_list(concrete(op, index)) if index >= 0 else None
    if values is None:
        return None
    return values * spatial if len(values) == 1 else values if len(values) == spatial else None


def _padding(op: CpuOp, index: int, spatial: int) -> tuple[int, ...] | None:
    text = concrete(op, index) if index >= 0 else None
    if text is not None and text.strip("'\"") == "valid":
        return (0,) * spatial
    return _per_dim(op, index, spatial)


def _bools(text: str | None) -> tuple[bool, ...] | None:
    if text is None:
        return None
    parts = [part.strip() for part in text.strip("[]() ").split(",") if part.strip()]
    if not parts or any(part not in ("True", "False", "1", "0") for part in parts):
        return None
    return tuple(part in ("True", "1") for part in parts)


FORMULAS = {
    **{name: forward for name in FORWARD},
    "convolution_backward": backward,
    "cudnn_convolution_backward_input": cudnn_backward_input,
    "cudnn_convolution_backward_weight": cudnn_backward_weight,
    **{name: pool for name in POOLS},
    **{name: pool_backward for name in ("max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
                                        "avg_pool2d_backward", "avg_pool3d_backward")},
}
