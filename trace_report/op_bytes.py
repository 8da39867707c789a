"""What an op reads from the GPU's memory and writes back, estimated from the input shapes and types its trace event
records (`record_shapes=True`): the byte model under `fusion`.

    read     every tensor input, numel x itemsize; a broadcast input (a `[3072]` bias, a `[1, 1, S, S]` mask) counts
             its own size, as a kernel that keeps it in cache reads it
    written  elementwise ops: the inputs' broadcast shape, in the widest input type (bool for comparisons);
             in-place ops (`aten::add_`, `aten::masked_fill_`: the name ends with `_`): their first input, which they
             read too; `aten::copy_` and the fills (`fill_`, `zero_`): their first input, the destination, not read;
             copies (`clone`, `contiguous`, `_to_copy`): the input's size and type (a cast's new type is not recorded:
             `aten::to` launches through `aten::copy_`, whose destination has it);
             softmax, the norms and the scans: the largest input's size (the same shape; a norm's per-row mean and
             rstd are left out);
             reductions (`sum`, `mean`, `amax`, ...): the largest input with its last dimension reduced away, the
             usual `dim=-1` (the trace records the dims only as "Concrete Inputs", which the reader does not keep);
             lookups (`gather`, `index_select`, `embedding`): what they pick, one element of the source per index
             (`gather`) or one row of it per index (the others, along dim 0), and they read the indices and only
             what they pick, not the whole source (an embedding table of 128,256 rows is not read per token)
    0 bytes  a Scalar, a 0-dim tensor, an input with no shape (an optional input left out)

A type the table does not know (a TensorList, a complex or quantized type) makes the whole op's traffic unknown:
None, never a guess. Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from trace_report.model import CpuOp

# The profiler's names for tensor element types ("Input type"), and their sizes in bytes.
ITEMSIZE = {
    "double": 8, "float": 4, "c10::BFloat16": 2, "c10::Half": 2,
    "long int": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16,
}
# What the profiler writes for arguments that are no tensor: they cost no bytes.
NOT_TENSORS = {"", "Scalar", "ScalarList", "GenericList", "None", "Device", "Layout", "ScalarType", "MemoryFormat"}
DTYPE_NAMES = {"double": "fp64", "float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "long int": "int64",
               "int": "int32", "bool": "bool"}

SAME_SHAPE = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax", "_softmax_backward_data",
              "_log_softmax_backward_data", "layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm",
              "group_norm", "native_group_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
              "cumsum", "cumprod", "logcumsumexp", "native_layer_norm_backward"}
LAST_DIM_REDUCED = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
                    "logsumexp", "all", "any", "argmax", "argmin", "norm", "linalg_vector_norm", "nansum"}
GATHERS = {"gather", "take_along_dim"}  # (source, index): one source element per index
ROW_LOOKUPS = {"index_select": (0, 1), "embedding": (0, 1)}  # (source, index) among the tensor inputs: one row each
COPIES = {"clone", "contiguous", "_to_copy", "to", "_copy_from", "_copy_from_and_resize"}
WRITE_ONLY = {"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "isneginf", "isposinf", "isinf", "isnan", "isfinite",
               "logical_and", "logical_or", "logical_not", "logical_xor"}
_NOT_POINTWISE = SAME_SHAPE | LAST_DIM_REDUCED | GATHERS | set(ROW_LOOKUPS) | COPIES
# Matrix multiplies: (index of the left operand, index of the right one) among the tensor inputs.
GEMM_OPERANDS = {"mm": (0, 1), "bmm": (0, 1), "matmul": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2),
                 "_addmm_activation": (1, 2), "addbmm": (1, 2)}


@dataclass(frozen=True, slots=True)
class Tensor:
    """A tensor as the byte model sees it: how many elements, of how many bytes. Two tensors of the same numel and
    type are the same to `fusion`'s heuristic (the trace has no tensor identities)."""

    numel: int
    itemsize: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


class Input(NamedTuple):
    """A tensor input of an op: its shape, its size and its type's name as the trace writes it."""

    shape: tuple
    tensor: Tensor
    type: str


@dataclass(frozen=True, slots=True)
class Traffic:
    """One op's traffic: the tensors it reads, each with whether it is broadcast (smaller than the output), and the
    one it writes."""

    reads: tuple[tuple[Tensor, bool], ...]
    output: Tensor

    @property
    def read(self) -> int:
        return sum(tensor.nbytes for tensor, _ in self.reads)

    @property
    def written(self) -> int:
        return self.output.nbytes

    def reads_tensor(self, tensor: Tensor) -> bool:
        return any(read == tensor for read, _ in self.reads)


def op_traffic(op: CpuOp) -> Traffic | None:
    """The bytes `op` reads and writes, as the module's docstring estimates them; None when its shapes or types do not
    say (no shapes recorded, a TensorList, a type not in ITEMSIZE)."""
    return _traffic(op.name, op.input_dims, op.input_types) if _weighable(op) else None


def tensor_inputs(op: CpuOp) -> tuple[Input, ...] | None:
    """The op's tensor inputs, in order (scalars and absent inputs left out); None when a type is unknown."""
    return _inputs(op.input_dims, op.input_types) if _weighable(op) else None


def compute_output(op: CpuOp) -> Tensor | None:
    """What a GEMM or attention op writes: `[M, K] x [K, N]` -> `[M, N]` (batched alike), `linear(x, W)` ->
    x[:-1] + W[0], attention(q, k, v) -> q[:-1] + v[-1]; None for other ops or unknown shapes."""
    return _compute_output(op.name, op.input_dims, op.input_types) if _weighable(op) else None


def pointwise_output(op: CpuOp) -> Input | None:
    """What a plain pointwise op writes, with its shape and type: the inputs' broadcast shape in the widest input
    type (bool for a comparison), its first input for an in-place op (`aten::mul_`); None for any other op (a copy,
    a fill, a norm, a reduction, a lookup: their outputs are not the broadcast shape) or unknown shapes. The widest
    type is a guess where PyTorch promotes (an int tensor times 0.5 is a float): a wrong guess names another type."""
    return _pointwise_output(op.name, op.input_dims, op.input_types) if _weighable(op) else None


def shape_text(op: CpuOp) -> str:
    """The op's largest tensor input as a table shows it: `64×128×3072 bf16`; "" without shapes."""
    inputs = tensor_inputs(op)
    if not inputs:
        return ""
    largest = max(inputs, key=lambda i: i.tensor.numel)
    return "×".join(map(str, largest.shape)) + " " + DTYPE_NAMES.get(largest.type, largest.type)


def _weighable(op: CpuOp) -> bool:
    """Shapes recorded, none of them a TensorList's (a list of shapes, which no cache can key on)."""
    if not op.input_dims:
        return False
    try:
        hash(op.input_dims)
    except TypeError:
        return False
    return True


# A model repeats a few hundred (op, shapes, types): each is weighed once.
@lru_cache(maxsize=8192)
def _compute_output(name: str, dims: tuple, types: tuple) -> Tensor | None:
    inputs = _inputs(dims, types)
    if not inputs:
        return None
    base = name.removeprefix("aten::")
    shapes = [i.shape for i in inputs]
    if base in GEMM_OPERANDS:
        left, right = GEMM_OPERANDS[base]
        if len(shapes) <= right or len(shapes[left]) < 2 or len(shapes[right]) < 2:
            return None
        return Tensor(math.prod(shapes[left][:-1]) * shapes[right][-1], inputs[left].tensor.itemsize)
    if base == "linear" and len(shapes) >= 2 and len(shapes[1]) == 2:
        return Tensor(math.prod(shapes[0][:-1]) * shapes[1][0], inputs[0].tensor.itemsize)
    if "attention" in base and len(shapes) >= 3:
        return Tensor(math.prod(shapes[0][:-1]) * shapes[2][-1], inputs[0].tensor.itemsize)
    return None


@lru_cache(maxsize=8192)
def _traffic(name: str, dims: tuple, types: tuple) -> Traffic | None:
    inputs = _inputs(dims, types)
    if not inputs:
        return None
    base = name.removeprefix("aten::")
    shapes = [i.shape for i in inputs]
    sizes = [i.tensor for i in inputs]
    if (base in GATHERS or base in ROW_LOOKUPS) and len(sizes) >= 2:
        source, index = (0, 1) if base in GATHERS else ROW_LOOKUPS[base]
        rows = 1 if base in GATHERS else math.prod(shapes[source][1:])
        output = Tensor(sizes[index].numel * rows, sizes[source].itemsize)
        return Traffic(((output, False), (sizes[index], False)), output)  # the picked elements, and the indices
    if base in WRITE_ONLY:
        output, read = sizes[0], sizes[1:]  # the destination is written, not read
    elif base.endswith("_") and not base.endswith("__"):
        output, read = sizes[0], sizes  # in place: the first input is read and written
    elif base in COPIES:
        output, read = sizes[0], sizes[:1]
    elif base in SAME_SHAPE:
        output, read = max(sizes, key=lambda t: t.numel), sizes
    elif base in LAST_DIM_REDUCED:
        i = max(range(len(sizes)), key=lambda k: sizes[k].numel)
        output, read = Tensor(sizes[i].numel // max(1, shapes[i][-1]), sizes[i].itemsize), sizes
    else:
        shape = _broadcast(shapes)
        wide = max((t.itemsize for t in sizes if t.itemsize > 1), default=1)
        output, read = Tensor(math.prod(shape), 1 if base in COMPARISONS else wide), sizes
    return Traffic(tuple((t, t.numel < output.numel) for t in read), output)


@lru_cache(maxsize=8192)
def _pointwise_output(name: str, dims: tuple, types: tuple) -> Input | None:
    inputs = _inputs(dims, types)
    base = name.removeprefix("aten::")
    if not inputs or base.rstrip("_") in _NOT_POINTWISE or base in WRITE_ONLY:
        return None
    if base.endswith("_") and not base.endswith("__"):
        return inputs[0]
    shape = _broadcast([i.shape for i in inputs])
    if base in COMPARISONS:
        return Input(shape, Tensor(math.prod(shape), 1), "bool")
    widest = max(inputs, key=lambda i: i.tensor.itemsize)  # the first of the widest: max keeps the first
    return Input(shape, Tensor(math.prod(shape), widest.tensor.itemsize), widest.type)


@lru_cache(maxsize=8192)
def _inputs(dims: tuple, types: tuple) -> tuple[Input, ...] | None:
    if len(types) < len(dims):
        return None  # shapes without types: the bytes cannot be told
    inputs = []
    for shape, kind in zip(dims, types):
        if not shape or kind in NOT_TENSORS:
            continue
        itemsize = ITEMSIZE.get(kind)
        if itemsize is None:
            return None
        inputs.append(Input(tuple(shape), Tensor(math.prod(shape), itemsize), kind))
    return tuple(inputs)


def _broadcast(shapes: list[tuple]) -> tuple:
    """NumPy's rule, aligned on the last dimension: each dimension the largest of the inputs'."""
    rank = max(len(shape) for shape in shapes)
    padded = [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]
    return tuple(max(column) for column in zip(*padded))
