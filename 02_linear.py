"""Lesson 2: `nn.Linear` with a bias: the same math as lesson 1, in one call.

`nn.Linear` computes `x @ W.T + b`. Under it, `aten::linear` transposes the weight (`aten::t`, a view:
it launches nothing) and calls `aten::addmm`, which hands cuBLAS the bias so the add happens in the GEMM's
epilogue: one kernel where lesson 1 had two.

    uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64
    uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64 --compile
"""

import torch
from torch import nn

from common.expect import (
    bias_in_gemm_epilogue,
    cpu_op_runs,
    expectations_by_run,
    kernels_per_step,
    label_recorded,
    launches_nothing,
    no_cpu_op,
    runtime_calls_per_gemm,
    same_gemm_kernels_as_eager,
)
from common.lesson import run_lesson


def build(args, device, dtype):
    linear = nn.Linear(args.in_dim, args.out_dim, bias=True).to(device, dtype)
    x = torch.randn(args.batch, args.in_dim, device=device, dtype=dtype)
    return linear, (x,)


if __name__ == "__main__":
    run_lesson(
        script=__file__,
        label="linear_fwd",
        sizes={"batch": 1024, "in_dim": 32, "out_dim": 64},
        build=build,
        expect=expectations_by_run(
            gpu_eager=[
                kernels_per_step(1),
                bias_in_gemm_epilogue(),
                launches_nothing("aten::t"),
                runtime_calls_per_gemm(),
            ],
            gpu_compiled=[kernels_per_step(1), bias_in_gemm_epilogue(), same_gemm_kernels_as_eager()],
            cpu_eager=[
                label_recorded("linear_fwd", times=3),
                cpu_op_runs("aten::addmm", per_step=1),
                cpu_op_runs("aten::t", per_step=1),
            ],
            cpu_compiled=[
                label_recorded("linear_fwd", times=3),
                cpu_op_runs("aten::addmm", per_step=1),
                no_cpu_op("aten::t"),
            ],
        ),
        description=__doc__,
    )
