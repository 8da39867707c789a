"""The optimizer's part of a step: one tensor at a time, and zero_grad writing zeros the backward then adds to.

torch labels every optimizer's step and zero_grad (`Optimizer.step#AdamW.step`, `Optimizer.zero_grad#AdamW.zero_grad`):
the rules read what ran inside those labels.
"""

from __future__ import annotations

from collections import Counter

from trace_report.advice.common import (OPTIMIZER_STEP, OPTIMIZER_ZERO_GRAD, Reading, cpu_only_saving, source_of, us,
                                        where_of)
from trace_report.advice.findings import Finding
from trace_report.advice.replay import cut_cpu, spans_of
from trace_report.model import CpuOp, Step

# A fused (or foreach) optimizer keeps this share of the single-tensor loop's CPU time, least and most: one op over all
# parameters instead of several per parameter (PyTorch's foreach/fused implementations, torch.optim's docs).
FUSED_CPU_KEEP = (0.05, 0.3)
# and of its GPU time: one kernel reading each tensor once instead of a kernel per op per tensor, each reading it.
FUSED_GPU_KEEP = (0.25, 0.7)
# On a trace without a GPU the fused step's own work runs on the same thread: its math, and the Python around it that
# fusing does not remove. Lesson 12 on 2 cores (16 small tensors): fused AdamW kept about half the loop's time (the
# loop 720 µs profiled, 1.9x the unprofiled step's pace; 139-175 µs saved in four timings).
FUSED_CPU_KEEP_ON_CPU = (0.05, 0.6)
MIN_PARAMETERS = 2  # a loop over fewer tensors is no loop


def _inside(step: Step, prefix: str) -> list[tuple[CpuOp, list[CpuOp]]]:
    """Each `prefix` label of the step with the ops that ran inside it on its thread."""
    boxes = [op for op in step.ops if op.name.startswith(prefix)]
    if not boxes:
        return []
    found = []
    for box in boxes:
        end = box.ts + box.dur
        found.append((box, [op for op in step.ops if box.ts <= op.ts <= end and op is not box and not op.is_label
                            and op.tid == box.tid and op.pid == box.pid]))
    return found


def _top(ops: list[CpuOp], box: CpuOp) -> list[CpuOp]:
    """The ops called from the label itself (or a Python frame in it), not from inside another op."""
    top = []
    for op in ops:
        inner = op.path[op.path.index(box.name) + 1:] if box.name in op.path else op.path
        if not any(name.startswith("aten::") for name in inner):
            top.append(op)
    return top


def single_tensor_optimizer(r: Reading) -> list[Finding]:
    """An optimizer that updates one parameter at a time (`foreach=False`, or a hand-written loop): several ops per
    parameter, each a launch and a kernel, where a foreach or fused implementation runs a few ops over all of them.

    Sources: torch.profiler's pattern matcher (OptimizerSingleTensorPattern), torch.optim's documentation (foreach and
    fused implementations), PyTorch's performance tuning guide."""
    if not r.names_starting(OPTIMIZER_STEP):
        return []  # no optimizer in the trace: no walk over its ops (a Mamba forward's 260k, 20 ms)
    steps = [(s, box, ops) for s in r.steps for box, ops in _inside(s, OPTIMIZER_STEP)]
    if not steps:
        return []
    names: Counter = Counter()
    for _, box, ops in steps:
        names.update(op.name for op in _top(ops, box))
    if any("_foreach_" in n or "_fused_" in n for n in names):
        return []
    per_param = [n for n in names if n.endswith("_") and n.startswith("aten::")]
    params = max((names[n] for n in per_param), default=0) / len(steps)
    if params < MIN_PARAMETERS:
        return []

    def spans(step: Step):
        return spans_of(box for box, _ in _inside(step, OPTIMIZER_STEP))

    if r.replay is not None:
        saving = r.replay.saving(cut_cpu(spans, FUSED_CPU_KEEP[1], FUSED_GPU_KEEP[1]),
                                 [cut_cpu(spans, FUSED_CPU_KEEP[0], FUSED_GPU_KEEP[0])])
    else:
        saving = cpu_only_saving(r, spans, FUSED_CPU_KEEP_ON_CPU)
    box = steps[0][1]
    spent = sum(b.dur for _, b, _ in steps) / len(steps)
    ops = sum(len(_top(o, b)) for _, b, o in steps) / len(steps)
    launches = sum(1 for s, b, _ in steps for c in s.runtime if b.ts <= c.ts <= b.ts + b.dur) / len(steps)
    optimizer = box.name.split("#", 1)[1].split(".")[0]
    evidence = (f"{box.name}: {ops:,.0f} ops a step over about {params:,.0f} parameters, one at a time "
                f"({', '.join(n for n, _ in names.most_common(3))}, ...), "
                f"{f'{launches:,.0f} launches, ' if launches else ''}{us(spent)}")
    change = f"torch.optim.{optimizer}(params, ..., fused=True) (or foreach=True where fused is not offered)"
    return [Finding("single-tensor-optimizer", "the optimizer updates one tensor at a time", evidence, change, saving,
                    r.step_us, r.basis(f"a fused step keeps {FUSED_CPU_KEEP[0]:.0%}-{FUSED_CPU_KEEP[1]:.0%} of the "
                                       f"loop's CPU time and {FUSED_GPU_KEEP[0]:.0%}-{FUSED_GPU_KEEP[1]:.0%} of its GPU "
                                       "time") if r.replay else
                    f"{_cpu_basis(r)}; a fused step keeps {FUSED_CPU_KEEP_ON_CPU[0]:.0%}-{FUSED_CPU_KEEP_ON_CPU[1]:.0%} "
                    "of the loop's time, its math and Python on the same thread",
                    source_of(single_tensor_optimizer), where=where_of([box]), count_per_step=ops)]


def zero_grad(r: Reading) -> list[Finding]:
    """`zero_grad(set_to_none=False)`: a kernel per parameter writing zeros that the backward then adds to. With the
    default (set_to_none=True since torch 2.0) the gradients are dropped and the backward writes them fresh.

    Sources: torch.profiler's pattern matcher (GradNotSetToNonePattern), PyTorch's performance tuning guide ("use
    parameter.grad = None instead of model.zero_grad()")."""
    if "aten::zero_" not in r.op_names or not r.names_starting(OPTIMIZER_ZERO_GRAD):
        return []
    found = [(s, box, [op for op in ops if op.name == "aten::zero_"]) for s in r.steps
             for box, ops in _inside(s, OPTIMIZER_ZERO_GRAD)]
    found = [(s, box, zeros) for s, box, zeros in found if zeros]
    if not found:
        return []

    def spans(step: Step):
        return spans_of(box for box, ops in _inside(step, OPTIMIZER_ZERO_GRAD) if any(o.name == "aten::zero_" for o in ops))

    if r.replay is not None:
        saving = r.replay.saving(cut_cpu(spans, 0.1, 0.0), [cut_cpu(spans, 0.0, 0.0)])
    else:
        saving = cpu_only_saving(r, spans, (0.0, 0.1))
    zeros = sum(len(z) for _, _, z in found) / r.n
    spent = sum(sum(o.dur for o in z) for _, _, z in found) / r.n
    evidence = (f"{found[0][1].name}: aten::zero_ {zeros:,.0f} times a step ({us(spent)} on the CPU), a fill per "
                "gradient")
    return [Finding("zero-grad", "zero_grad writes zeros instead of dropping the gradients", evidence,
                    "optimizer.zero_grad()  # set_to_none=True, the default since torch 2.0", saving, r.step_us,
                    r.basis("the fills and their launches removed") if r.replay else _cpu_basis(r),
                    source_of(zero_grad), where=where_of([found[0][1]]), count_per_step=zeros)]


def _cpu_basis(r: Reading) -> str:
    return (f"the CPU time the change removes, on a trace without a GPU lane (the step is the CPU's), at most as "
            f"recorded and at least {r.slowdown[1]:.1f}× less (the profiler's cost on steps recorded like this one)")


RULES = (single_tensor_optimizer, zero_grad)
