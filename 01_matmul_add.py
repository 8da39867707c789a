"""Lesson 1: `torch.add(torch.matmul(x, w), b)`, two ops, two kernels.

The post starts from the smallest thing that does real work: a matmul, then a bias add, as two separate
PyTorch calls. Eagerly, each call is its own kernel launch: a GEMM, then an elementwise add that reads the
GEMM's output back from memory. That is the baseline every later lesson improves on.

    uv run 01_matmul_add.py --size 4096 --warmup     # the post's command
    uv run 01_matmul_add.py --size 4096 --compile    # Inductor folds the add into... does it?

`--warmup` runs three extra calls before the profiler starts: compare a cold and a warm trace to see
what the first calls pay for (cuBLAS handle creation, heuristics, the caching allocator filling up).
"""

import torch

from common.expect import (
    cpu_op_runs,
    expectations_by_run,
    gemms_launched_by,
    gemms_per_step,
    kernels_per_step,
    label_recorded,
    no_cpu_op,
    op_launches,
)
from common.lesson import run_lesson


def matmul_add(x, w, b):
    return torch.add(torch.matmul(x, w), b)


def build(args, device, dtype):
    x = torch.randn(args.size, args.size, device=device, dtype=dtype)
    w = torch.randn(args.size, args.size, device=device, dtype=dtype)
    b = torch.randn(args.size, device=device, dtype=dtype)
    return matmul_add, (x, w, b)


def add_warmup_flag(parser):
    parser.add_argument("--warmup", action="store_true", help="run 3 calls before profiling (a warm trace)")


if __name__ == "__main__":
    run_lesson(
        script=__file__,
        label="matmul_add",
        sizes={"size": 64},
        build=build,
        extra_flags=add_warmup_flag,
        warm_calls=lambda args: 3 if args.warmup else 0,
        tag=lambda args: [args.size, args.dtype, "warm" if args.warmup else "cold"],
        expect=expectations_by_run(
            gpu_eager=[kernels_per_step(2), gemms_launched_by("aten::mm"), op_launches("aten::add", kernels=1)],
            gpu_compiled=[gemms_per_step(1)],
            cpu_eager=[
                label_recorded("matmul_add", times=3),
                cpu_op_runs("aten::mm", per_step=1),
                cpu_op_runs("aten::add", per_step=1),
            ],
            cpu_compiled=[
                label_recorded("matmul_add", times=3),
                cpu_op_runs("aten::addmm", per_step=1),
                no_cpu_op("aten::add"),
            ],
        ),
        description=__doc__,
    )
