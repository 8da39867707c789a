"""Matrix multiplies: FLOPs = 2·M·N·K per product (a multiply and an add), times the batch; bytes = each operand read
once and the product written once, at the operands' own element sizes. A bias or `C` (addmm, baddbmm) is read once and
its add not counted, as torch.utils.flop_counter counts it.

    op                 tensor inputs (shapes)                   product
    mm                 [M,K] [K,N]                              [M,N]
    addmm              C [M,N] or [N], [M,K] [K,N]              [M,N]
    _addmm_activation  as addmm                                 [M,N]
    bmm                [B,M,K] [B,K,N]                          [B,M,N]
    baddbmm            C, [B,M,K] [B,K,N]                       [B,M,N]
    addbmm             C [M,N], [B,M,K] [B,K,N]                 [M,N]     (the B products summed)
    linear             x [...,K], W [N,K], bias [N]             [...,N]
    matmul             NumPy's rules: vectors, matrices, broadcast batches
    _int_mm            int8 [M,K] [K,N]                         int32 [M,N]
    _scaled_mm         fp8 [M,K] [K,N], scales, bias            [M,N] in out_dtype (bf16 unless told: the row says so)
    _grouped_mm        [ΣM,K] x [G,K,N] (offs on M)             [ΣM,N]    one product per group, their rows summed
    _scaled_grouped_mm [G,M,K] x [G,K,N]                        [G,M,N]
                       [M,ΣK] x [ΣK,N] (offs on K)              [G,M,N]
                       [G,M,K] x [K,ΣN] (offs on N)             [M,ΣN]
"""

from __future__ import annotations

import math

from trace_report.flops.cost import Cost, peak_dtype
from trace_report.model import CpuOp
from trace_report.op_bytes import tensor_inputs

GEMM = "GEMM"
OUT_DTYPE_NOT_RECORDED = "output taken as bf16 (out_dtype not recorded)"


def _cost(op: CpuOp, flops: int, out_numel: int, out_itemsize: int, operands: int | None = None,
          note: str = "") -> Cost:
    """`operands`: how many tensors the op reads; a tensor after them is its `out=` buffer (Inductor calls
    `mm(a, b, out=buf)`), written, not read. None: every tensor is read."""
    inputs = tensor_inputs(op) or ()
    read = sum(i.tensor.nbytes for i in (inputs if operands is None else inputs[:operands]))
    return Cost(GEMM, flops, read + out_numel * out_itemsize, peak_dtype(op.input_types), note)


def _unknown(op: CpuOp, why: str = "shapes do not make a matrix product") -> Cost:
    return Cost(GEMM, None, None, peak_dtype(op.input_types), why)


def _operands(op: CpuOp, left: int, right: int):
    inputs = tensor_inputs(op)
    if not inputs or len(inputs) <= right:
        return None
    return inputs[left], inputs[right]


def mm(op: CpuOp, left: int = 0, right: int = 1) -> Cost:
    pair = _operands(op, left, right)
    if pair is None or len(pair[0].shape) != 2 or len(pair[1].shape) != 2:
        return _unknown(op)
    (m, k), (_, n) = pair[0].shape, pair[1].shape
    return _cost(op, 2 * m * n * k, m * n, pair[0].tensor.itemsize, operands=right + 1)


def addmm(op: CpuOp) -> Cost:
    return mm(op, 1, 2)


def bmm(op: CpuOp, left: int = 0, right: int = 1, summed: bool = False) -> Cost:
    pair = _operands(op, left, right)
    if pair is None or len(pair[0].shape) != 3 or len(pair[1].shape) != 3:
        return _unknown(op)
    (b, m, k), (_, _, n) = pair[0].shape, pair[1].shape
    return _cost(op, 2 * b * m * n * k, m * n * (1 if summed else b), pair[0].tensor.itemsize, operands=right + 1)


def baddbmm(op: CpuOp) -> Cost:
    return bmm(op, 1, 2)


def addbmm(op: CpuOp) -> Cost:
    return bmm(op, 1, 2, summed=True)


def linear(op: CpuOp) -> Cost:
    pair = _operands(op, 0, 1)
    if pair is None or len(pair[1].shape) != 2 or not pair[0].shape:
        return _unknown(op)
    x, weight = pair
    rows, (n, k) = math.prod(x.shape[:-1]), weight.shape
    return _cost(op, 2 * rows * n * k, rows * n, x.tensor.itemsize)


def matmul(op: CpuOp) -> Cost:
    """torch.matmul's rules: a 1-D operand is a vector (its dimension dropped from the product), leading dimensions
    broadcast as a batch."""
    pair = _operands(op, 0, 1)
    if pair is None:
        return _unknown(op)
    a, b = (list(i.shape) for i in pair)
    a_vector, b_vector = len(a) == 1, len(b) == 1
    a = [1, *a] if a_vector else a
    b = [*b, 1] if b_vector else b
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return _unknown(op)
    batch_a, batch_b = a[:-2], b[:-2]
    rank = max(len(batch_a), len(batch_b))
    batch = [max(x, y) for x, y in zip([1] * (rank - len(batch_a)) + batch_a, [1] * (rank - len(batch_b)) + batch_b)]
    m, k, n = a[-2], a[-1], b[-1]
    batches = math.prod(batch)
    return _cost(op, 2 * batches * m * n * k, batches * m * n, pair[0].tensor.itemsize, operands=2)


def int_mm(op: CpuOp) -> Cost:
    pair = _operands(op, 0, 1)
    if pair is None or len(pair[0].shape) != 2 or len(pair[1].shape) != 2:
        return _unknown(op)
    (m, k), (_, n) = pair[0].shape, pair[1].shape
    return _cost(op, 2 * m * n * k, m * n, 4, operands=2)  # int32 out


def scaled_mm(op: CpuOp) -> Cost:
    """_scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum): the product is written
    in out_dtype, a scalar the trace keeps only among "Concrete Inputs" as an enum's number: bf16's 2 bytes assumed,
    and the row says so."""
    pair = _operands(op, 0, 1)
    if pair is None or len(pair[0].shape) != 2 or len(pair[1].shape) != 2:
        return _unknown(op)
    (m, k), (_, n) = pair[0].shape, pair[1].shape
    return _cost(op, 2 * m * n * k, m * n, 2, note=OUT_DTYPE_NOT_RECORDED)


def grouped_mm(op: CpuOp) -> Cost:
    """_grouped_mm(mat_a, mat_b, offs, bias, out_dtype) and _scaled_grouped_mm (scales between): the four layouts of
    the module's table; each row of the stacked operand belongs to one group, so the FLOPs are those of one product
    of the stacked sizes."""
    pair = _operands(op, 0, 1)
    if pair is None:
        return _unknown(op)
    a, b = pair[0].shape, pair[1].shape
    out_itemsize = 2 if pair[0].tensor.itemsize == 1 else pair[0].tensor.itemsize  # fp8 in, bf16 out
    inputs = tensor_inputs(op) or ()
    groups = next((i.shape[0] for i in inputs[2:] if len(i.shape) == 1 and i.type in ("int", "long int")), None)
    if len(a) == 2 and len(b) == 3:  # [ΣM,K] x [G,K,N]
        flops, out = 2 * a[0] * a[1] * b[2], a[0] * b[2]
    elif len(a) == 3 and len(b) == 3:  # [G,M,K] x [G,K,N]
        flops, out = 2 * a[0] * a[1] * a[2] * b[2], a[0] * a[1] * b[2]
    elif len(a) == 2 and len(b) == 2 and groups is not None:  # [M,ΣK] x [ΣK,N] -> [G,M,N]
        flops, out = 2 * a[0] * a[1] * b[1], groups * a[0] * b[1]
    elif len(a) == 3 and len(b) == 2:  # [G,M,K] x [K,ΣN] -> [M,ΣN]
        flops, out = 2 * a[1] * a[2] * b[1], a[1] * b[1]
    else:
        return _unknown(op)
    return _cost(op, flops, out, out_itemsize)


FORMULAS = {
    "mm": mm, "addmm": addmm, "_addmm_activation": addmm, "bmm": bmm, "baddbmm": baddbmm, "addbmm": addbmm,
    "linear": linear, "matmul": matmul, "_int_mm": int_mm, "_scaled_mm": scaled_mm, "_grouped_mm": grouped_mm,
    "_scaled_grouped_mm": grouped_mm,
}
