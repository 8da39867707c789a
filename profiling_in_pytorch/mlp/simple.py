"""The post's GeGLU MLP, as Part 2 writes it: the eager baseline every other variant is checked and timed against."""

import torch.nn.functional as F
from torch import nn

# The post's shape: 64 sequences of 128 tokens, a 768-wide model with a 3072-wide hidden layer.
POST_SIZES = {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072}


class SimpleGeGLUMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        g = self.gate_proj(x)
        u = self.up_proj(x)
        h = F.gelu(g, approximate="tanh")
        m = h * u
        y = self.down_proj(m)
        return y


def forward_elements(batch: int, seq: int, dim: int, hidden: int) -> int:
    """Elements one forward holds at its peak: the three weights, x and y, and g, u, h, m (each [tokens, hidden])."""
    tokens = batch * seq
    return 3 * dim * hidden + tokens * (2 * dim + 4 * hidden)
