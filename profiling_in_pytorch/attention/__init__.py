"""The attention variants Part 3 profiles: the post's naive module and its in-place twin, SDPA's backends, and
FlashAttention-2 from the Hub.

`naive` holds `NaiveCausalAttention` (lesson 04_a) and `InPlaceCausalAttention` (04_b, one line changed); `sdpa`
the post's table of SDPA backends and the one-line call (04_c); `flash_kernel` finds `flash_attn_func` (04_d): a
local kernel repository, the Hub, or torch's own FlashAttention-2 behind SDPA. This package may import torch and
`trace_report.errors`, `hub_kernels`; nothing that profiles, reports or times.
"""

from profiling_in_pytorch.attention.naive import InPlaceCausalAttention, NaiveCausalAttention, forward_bytes

# The post's shape: 8 sequences of 1024 tokens, 16 heads of 64 dimensions.
POST_SIZES = {"batch": 8, "heads": 16, "seq": 1024, "head_dim": 64}

__all__ = ["POST_SIZES", "InPlaceCausalAttention", "NaiveCausalAttention", "forward_bytes"]
