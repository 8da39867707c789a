"""The MLPs the lessons profile and the benchmark times, and their kernels.

`simple` is the post's `SimpleGeGLUMLP` (the eager baseline), `fused` our `FusedGeGLUMLP` (gate/up GEMM with the
GeGLU in its epilogue), `fp8` the FP8 recipes of lesson 10 and our `FusedFP8GeGLUMLP` (`fp8_scaling`: their maths in
plain torch), `liger` finds Liger's `LigerGEGLUMLP` (the Hub, a local kernel repository, or the
liger-kernel package), and `triton_ops` holds the Triton kernels apart from the modules that call them. This
package may import torch, triton and `trace_report.errors`; nothing that profiles, reports or times.
"""

from profiling_in_pytorch.mlp.simple import POST_SIZES, SimpleGeGLUMLP

__all__ = ["POST_SIZES", "SimpleGeGLUMLP"]
