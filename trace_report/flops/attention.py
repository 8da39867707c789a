"""Attention: scaled_dot_product_attention and the ops it dispatches to (flash, memory-efficient, cuDNN), forward and
backward.

Per query head, a forward computes S = Q·Kᵀ and O = P·V: 2·Sq·Sk·D + 2·Sq·Sk·Dv FLOPs over every (query, key) pair
the mask keeps; the softmax is not counted (torch.utils.flop_counter's convention). A backward counts its four
products (dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q): twice the forward. Flash kernels also recompute S in the
backward (2.5×): not counted, the algorithm's FLOPs are what a faster kernel is measured against. With grouped-query
attention (fewer key/value heads), the FLOPs follow the query heads.

The causal mask is a scalar argument the trace keeps only among "Concrete Inputs" (PyTorch 2.3 and later; the reader
keeps them for attention ops): causal (`is_causal=True`, top-left aligned, PyTorch's documented meaning; the
memory-efficient ops' `custom_mask_type` 1 top-left, 2 bottom-right) counts the pairs the mask keeps,
Sq·(Sq+1)/2 for a square one. Where the trace does not record it, every pair is counted and the row says so.

Bytes: q, k, v (and a mask, the backward's dO, O, logsumexp) read once; O (forward) or dQ, dK, dV (backward) written.

    table: op -> (layout, index of is_causal / custom_mask_type among the arguments, backward)
    BHSD: q is [B, H, S, D] (any leading dims);  BSHD: q is [B, S, H, D] (the kernels' own ops; 3-D: packed variable
    lengths, whose per-sequence lengths the shapes do not give)
"""

from __future__ import annotations

import math
from typing import NamedTuple

from trace_report.flops.cost import Cost, concrete, peak_dtype
from trace_report.model import CpuOp
from trace_report.op_bytes import tensor_inputs

ATTENTION = "attention"
NOT_RECORDED = "mask not recorded: every pair counted"
MASK_TENSOR = "mask tensor: every pair counted"


class Signature(NamedTuple):
    layout: str  # "BHSD" or "BSHD"
    causal_arg: int  # index of is_causal (or custom_mask_type) among the op's arguments
    backward: bool
    mask_type: bool = False  # the argument is the memory-efficient ops' custom_mask_type (0 none, 1 top-left, 2 bottom-right)


SIGNATURES = {
    "scaled_dot_product_attention": Signature("BHSD", 5, False),
    "_scaled_dot_product_attention_math": Signature("BHSD", 5, False),
    "_scaled_dot_product_flash_attention": Signature("BHSD", 4, False),
    "_scaled_dot_product_flash_attention_backward": Signature("BHSD", 11, True),
    "_scaled_dot_product_efficient_attention": Signature("BHSD", 6, False),
    "_scaled_dot_product_efficient_attention_backward": Signature("BHSD", 11, True),
    "_scaled_dot_product_cudnn_attention": Signature("BHSD", 6, False),
    "_scaled_dot_product_cudnn_attention_backward": Signature("BHSD", 14, True),
    "_cudnn_attention_forward": Signature("BHSD", 10, False),
    "_cudnn_attention_backward": Signature("BHSD", 14, True),
    "_scaled_dot_product_fused_attention_overrideable": Signature("BHSD", 5, False),
    "_scaled_dot_product_fused_attention_overrideable_backward": Signature("BHSD", 13, True),
    "_flash_attention_forward": Signature("BSHD", 8, False),
    "_flash_attention_backward": Signature("BSHD", 11, True),
    "_efficient_attention_forward": Signature("BSHD", 9, False, mask_type=True),
    "_efficient_attention_backward": Signature("BSHD", 14, True, mask_type=True),
}


def causal_pairs(sq: int, sk: int, bottom_right: bool = False) -> int:
    """The (query, key) pairs a causal mask keeps: query i sees keys 0..i (top-left) or 0..i+Sk-Sq (bottom-right)."""
    shift = sk - sq if bottom_right else 0
    return sum(min(max(0, i + 1 + shift), sk) for i in range(sq))


def attention(op: CpuOp) -> Cost:
    signature = SIGNATURES[op.name.removeprefix("aten::")]
    inputs = tensor_inputs(op)
    dtype = peak_dtype(op.input_types)
    first = 1 if signature.backward else 0  # a backward's first tensor is dO
    if not inputs or len(inputs) < first + 3:
        return Cost(ATTENTION, None, None, dtype, "shapes not recorded")
    q, k, v = (i.shape for i in inputs[first:first + 3])
    if signature.layout == "BSHD":
        if len(q) != 4:
            return Cost(ATTENTION, None, None, dtype, "packed variable lengths: per-sequence lengths not recorded")
        heads, sq, sk = q[0] * q[2], q[1], k[1]
    else:
        if len(q) < 2:
            return Cost(ATTENTION, None, None, dtype, "shapes do not make an attention")
        heads, sq, sk = math.prod(q[:-2]), q[-2], k[-2]
    d, dv = q[-1], v[-1]
    flag = concrete(op, signature.causal_arg)
    mask_tensor = not signature.backward and len(inputs) > 3  # q, k, v and an attn_mask or attn_bias
    if flag is None:
        pairs, note = sq * sk, NOT_RECORDED
    elif signature.mask_type and flag in ("1", "2"):
        pairs, note = causal_pairs(sq, sk, bottom_right=flag == "2"), "causal" + (" (bottom-right)" if flag == "2" else "")
    elif flag == "True":
        pairs, note = causal_pairs(sq, sk), "causal"
    else:
        pairs, note = sq * sk, MASK_TENSOR if mask_tensor else "no mask"
    flops = 2 * heads * pairs * (d + dv) * (2 if signature.backward else 1)
    read = sum(i.tensor.nbytes for i in inputs)
    itemsize = inputs[first].tensor.itemsize
    if signature.backward:  # dQ, dK, dV: the sizes of q, k, v
        written = sum(i.tensor.nbytes for i in inputs[first:first + 3])
    else:  # O: q's rows, v's last dimension
        written = math.prod(q[:-1]) * dv * itemsize
    return Cost(ATTENTION, flops, read + written, dtype, note)


FORMULAS = {name: attention for name in SIGNATURES}
