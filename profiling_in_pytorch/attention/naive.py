"""The post's attention, written out: scores, scale, causal mask, softmax, weighted sum, one op each.

`NaiveCausalAttention` is lesson 04_a's module as the post writes it; `InPlaceCausalAttention` is lesson 04_b's,
the same forward with the mask applied in place (`masked_fill_`): the one line the post changes.
"""

import math

import torch
from torch import nn


class NaiveCausalAttention(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k, v, mask):
        # q, k, v: [batch, heads, seq, head_dim]
        scores = torch.matmul(q, k.transpose(-2, -1))  # [batch, heads, seq, seq]
        scores = torch.mul(scores, self.scale)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]
        return out


class InPlaceCausalAttention(NaiveCausalAttention):
    def forward(self, q, k, v, mask):
        # q, k, v: [batch, heads, seq, head_dim]
        scores = torch.matmul(q, k.transpose(-2, -1))  # [batch, heads, seq, seq]
        scores = torch.mul(scores, self.scale)
        scores.masked_fill_(mask, float("-inf"))  # in place: no copy of the scores
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]
        return out


def forward_bytes(batch: int, heads: int, seq: int, head_dim: int, *, itemsize: int, scores: int, score_itemsize: int | None = None) -> int:
    """Bytes one forward holds at its peak: q, k, v and the output, the [seq, seq] mask, and `scores` tensors of
    [batch, heads, seq, seq] (2 for the naive forward: the scores and their masked copy, or the softmax beside
    them; 0 for a fused kernel, which never writes them) of `score_itemsize` bytes (SDPA's math backend: fp32)."""
    vectors = 4 * batch * heads * seq * head_dim * itemsize
    return vectors + seq * seq + scores * batch * heads * seq * seq * (score_itemsize or itemsize)
