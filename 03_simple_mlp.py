"""Lesson 3: the post's GeGLU MLP, eager and compiled.

The feed-forward block of Gemma-style transformers: two projections up to the hidden size, a tanh GELU on
one of them as a gate, their product, and a projection back down.

Eagerly that is five kernels per forward: three GEMMs (gate, up, down), one for the GELU and one for the
multiply. The GELU and the multiply each read and write the whole [tokens, hidden] tensor: pure memory
traffic. `torch.compile` keeps the three GEMMs as they are (same cuBLAS kernels, byte-identical names) and
fuses GELU and multiply into one Triton kernel, `triton_poi_fused_..._gelu_mul_...`.

    uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072
    uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile
"""

import torch
import torch.nn.functional as F
from torch import nn

from common.expect import (
    cpu_op_runs,
    expectations_by_run,
    fused_pointwise_kernel,
    gemms_launched_by,
    gemms_per_step,
    kernels_per_step,
    label_recorded,
    launches_nothing,
    no_cpu_op,
    no_separate_kernel_for,
    same_gemm_kernels_as_eager,
)
from common.lesson import run_lesson


class SimpleGeGLUMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


MLP_SIZES = {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072}


def build(args, device, dtype):
    mlp = SimpleGeGLUMLP(args.dim, args.hidden).to(device, dtype)
    x = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)
    return mlp, (x,)


if __name__ == "__main__":
    run_lesson(
        script=__file__,
        label="mlp_fwd",
        sizes=MLP_SIZES,
        build=build,
        expect=expectations_by_run(
            gpu_eager=[kernels_per_step(5), gemms_per_step(3), gemms_launched_by("aten::mm"), launches_nothing("aten::t")],
            gpu_compiled=[
                kernels_per_step(4),
                fused_pointwise_kernel("gelu", "mul"),
                no_separate_kernel_for("gelu", "mul"),
                same_gemm_kernels_as_eager(),
            ],
            cpu_eager=[
                label_recorded("mlp_fwd", times=3),
                cpu_op_runs("aten::mm", per_step=3),
                cpu_op_runs("aten::gelu", per_step=1),
                cpu_op_runs("aten::mul", per_step=1),
            ],
            cpu_compiled=[
                label_recorded("mlp_fwd", times=3),
                cpu_op_runs("aten::mm", per_step=3),
                no_cpu_op("aten::gelu", "aten::mul"),
            ],
        ),
        description=__doc__,
    )
