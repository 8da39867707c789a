"""Kernels with a better one beside them: an out-of-place op that copies before it writes, a convolution's bias
that batch norm cancels, attention on SDPA's math path, GEMM dimensions the tensor cores do not tile, memory-bound
kernels a compiler would fuse.

Each rule finds the GPU work the change removes or shortens and replays the step without it (replay.py): a kernel
the GPU no longer runs saves its time only where the GPU, not the CPU, paces the step.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from dataclasses import replace as dc_replace

from trace_report import fusion, peaks
from trace_report.advice.common import Reading, megabytes, source_of, times, us, where_of
from trace_report.advice.findings import Finding
from trace_report.advice.replay import Event, StepReplay, cut_cpu, edit_events
from trace_report.flops import op_cost
from trace_report.model import CpuOp, GpuWork, Step
from trace_report.op_bytes import ITEMSIZE

# --- an out-of-place op that copies first ---------------------------------------------------------------------

# Out-of-place ops ATen writes as a copy of the input and the in-place op on it (`masked_fill` = `clone` then
# `masked_fill_`): the copy is the whole difference. Any other `aten::X` whose trace shows `aten::clone` and then
# `aten::X_` inside it is found too; these name the usual ones in the evidence's words.
OUT_OF_PLACE = ("masked_fill", "index_put", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
                "index_fill", "masked_scatter", "put", "index_reduce")
CLONE = "aten::clone"


def _copy_inside(work: GpuWork) -> str | None:
    """The out-of-place op (`aten::masked_fill`) whose clone made this copy: a device-to-device memcpy, or a copy
    kernel of `aten::copy_`, launched under `aten::X` > `aten::clone`; None for any other work."""
    if work.kind == "memcpy":
        if "DtoD" not in work.name:
            return None
    elif work.kind != "kernel" or work.launched_by != "aten::copy_":
        return None
    path = work.launch_path
    for i in range(len(path) - 1, 0, -1):
        if path[i] == CLONE and path[i - 1].startswith("aten::") and not path[i - 1].endswith("_"):
            return path[i - 1]
    return None


def _twins_in(step: Step) -> set[str]:
    """The out-of-place ops of the step that ran their in-place twin inside themselves (`aten::masked_fill_` under
    `aten::masked_fill`): the ones a caller can swap for the twin."""
    return {op.path[-1] for op in step.ops if op.path and op.name == op.path[-1] + "_"}


def out_of_place_copy(r: Reading) -> list[Finding]:
    """An out-of-place op that copies its input before writing: `scores.masked_fill(mask, -inf)` is `clone` then
    `masked_fill_`, and the clone is a Memcpy DtoD of the whole tensor (Part 3 of the series: 134 MB, 127 µs of a
    1,063 µs attention forward on an H200). Where nothing else reads the input afterwards, the in-place op writes
    into it and the copy goes.

    Sources: Part 3 of the series (naive attention, then in-place ops), PyTorch's documentation of in-place
    operations (the trailing underscore) and of autograd's checks on them."""
    if r.replay is None or CLONE not in r.op_names:
        return []
    copies: list[tuple[GpuWork, str]] = []
    for step in r.steps:
        twins = None
        for w in step.gpu:
            op = _copy_inside(w)
            if op is None:
                continue
            twins = _twins_in(step) if twins is None else twins
            if op in twins:
                copies.append((w, op))
    if not copies:
        return []
    calls = {id(w.launch) for w, _ in copies if w.launch is not None}
    copy_ids = {id(w) for w, _ in copies}
    by_call: dict[int, list[GpuWork]] = {}
    clone_cpu: dict[int, float] = {}  # id(call) -> the clone's CPU time before the call: what goes with the copy
    for s in r.steps:
        clones = [op for op in s.ops if op.name == CLONE]
        for w in s.gpu:
            if w.launch is not None and id(w.launch) in calls:
                by_call.setdefault(id(w.launch), []).append(w)
                call = w.launch
                around = [op for op in clones if op.tid == call.tid and op.ts <= call.ts <= op.ts + op.dur]
                clone_cpu[id(call)] = max((call.ts - op.ts for op in around), default=0.0)

    def without_copy(drop_call: bool):
        def change(e):
            if e.call is None or id(e.call) not in calls:
                return e
            launched = by_call.get(id(e.call), ())
            kept = sum(w.dur for w in launched if id(w) not in copy_ids)
            if drop_call and all(id(w) in copy_ids for w in launched):
                # the launch and the clone's own CPU time go with the copy; the ops before the clone stay
                return replace(e, work=kept, own=0.0, gap=max(0.0, e.gap - clone_cpu.get(id(e.call), 0.0)))
            return replace(e, work=kept)
        return edit_events(change)

    saving = r.replay.saving(without_copy(False), [without_copy(True)])
    ops = Counter(op for _, op in copies)
    main = ops.most_common(1)[0][0]
    spent = sum(w.dur for w, _ in copies)
    nbytes = sum((w.comm_args or {}).get("bytes", 0) or 0 for w, _ in copies)
    size = f", {megabytes(r.per_step(nbytes))}" if nbytes else ""
    kinds = ", ".join(sorted({w.name if w.kind == "memcpy" else "a copy kernel" for w, _ in copies}))
    evidence = (f"{', '.join(ops)} copies its input before writing (aten::clone: {kinds}) "
                f"{times(r.per_step(len(copies)))} a step{size}, {us(r.per_step(spent))} on the GPU "
                f"({r.per_step(spent) / r.step_us:.0%} of the step), then runs {main}_ on the copy")
    short = main.removeprefix("aten::")
    if short == "masked_fill":
        change = ("x.masked_fill_(mask, value) in place of x = x.masked_fill(mask, value), where nothing else reads x "
                  "before the fill (Part 3's attention: scores.masked_fill_(mask, float('-inf')))")
    else:
        change = f"x.{short}_(...) in place of x = x.{short}(...), where nothing else reads x afterwards"
    launchers = [w.launch.launcher for w, _ in copies if w.launch is not None and w.launch.launcher is not None]
    basis = r.basis("the copy's GPU time removed, its launch and the clone's CPU time with it at the most (autograd "
                    "refuses the in-place op where the backward needs the input: then the copy stays)")
    return [Finding("out-of-place-copy", f"{short} copies its input before writing", evidence, change, saving,
                    r.step_us, basis, source_of(out_of_place_copy), where=where_of(launchers),
                    count_per_step=r.per_step(len(copies)))]


# --- attention on the math path -------------------------------------------------------------------------------

MATH = "aten::_scaled_dot_product_attention_math"
SOFTMAX = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
MATMUL = ("aten::matmul", "aten::bmm")
MASKS = ("aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::add", "aten::add_", "aten::tril")
# A fused kernel's share of the GPU's dense bf16 peak on the attention's FLOPs (the causal half when causal), least
# and most: on the H200 at 8×16×1024×64, causal, bf16 (Part 3's traces) the memory-efficient kernel took 180 µs, flash
# 95 µs, cuDNN 57.5 µs for 17.2 GFLOP: 10%, 18% and 30% of 989 TFLOP/s.
FUSED_SHARE = (0.10, 0.30)
# Without shapes, the share of the unfused attention's GPU time a fused kernel keeps, least and most: the same traces
# give 2-7% against the math path in fp32 (2,617 µs) and 5-17% against the bf16 matmul-softmax-matmul (1,063 µs);
# shorter sequences gain less (the scores matrix, the unfused path's cost, grows as the square of the length).
FUSED_KEEP = (0.05, 0.35)
FUSED_CPU_KEEP = (0.2, 0.6)  # one op and a launch or two instead of a dozen
MAX_HEAD_DIM = 256  # the fused kernels' largest head dimension (flash, cuDNN)


def _dims(op: CpuOp, i: int) -> tuple | None:
    if len(op.input_dims) <= i:
        return None
    dims = op.input_dims[i]
    return tuple(dims) if isinstance(dims, (tuple, list)) and all(isinstance(d, int) for d in dims) else None


def _naive(ops: list[CpuOp], i: int) -> tuple[CpuOp, CpuOp, int] | None:
    """(first matmul, second matmul, FLOPs) when the softmax at `ops[i]` sits between Q·Kᵀ and P·V, by their shapes:
    [.., L, d]·[.., d, S] -> softmax over [.., L, S] -> [.., L, S]·[.., S, dv]; None otherwise."""
    scores = _dims(ops[i], 0)
    if scores is None or len(scores) < 3:
        return None
    lq, sk = scores[-2], scores[-1]
    first = second = None
    for op in reversed(ops[max(0, i - 8):i]):
        if op.name in MATMUL:
            a, b = _dims(op, 0), _dims(op, 1)
            if a and b and len(a) >= 2 and len(b) >= 2 and a[-2] == lq and b[-1] == sk and a[-1] == b[-2]:
                first = op
            break
    for op in ops[i + 1:i + 5]:
        if op.name in MATMUL:
            a, b = _dims(op, 0), _dims(op, 1)
            if a and b and len(b) >= 2 and a[-2:] == (lq, sk) and b[-2] == sk:
                second = op
            break
    if first is None or second is None:
        return None
    d, dv = _dims(first, 0)[-1], _dims(second, 1)[-1]
    if d > MAX_HEAD_DIM or dv > MAX_HEAD_DIM:
        return None
    return first, second, 2 * math.prod(scores[:-2]) * lq * sk * (d + dv)


def _attention(step: Step) -> list[tuple[CpuOp, float, float, float | None, bool, str]]:
    """The step's unfused attentions: (op, start, end, FLOPs or None, causal or masked, what it is), the span on the
    op's thread that launches its work."""
    found = []
    by_thread: dict[tuple, list[CpuOp]] = {}
    for op in step.ops:
        if op.name == MATH and MATH not in op.path:
            cost = op_cost(op) if op.input_dims else None
            flops = cost.flops if cost is not None else None
            # is_causal, where the trace recorded the op's concrete inputs (record_shapes); None where it did not
            causal = op.concrete_inputs[5] == "True" if len(op.concrete_inputs) > 5 else None
            found.append((op, op.ts, op.ts + op.dur, flops, causal, "SDPA's math path"))
        elif op.input_dims and not op.is_label:
            by_thread.setdefault((op.pid, op.tid, op.path), []).append(op)
    for siblings in by_thread.values():
        if not any(op.name in SOFTMAX for op in siblings) or any(MATH in op.path for op in siblings[:1]):
            continue
        siblings.sort(key=lambda o: o.ts)
        for i, op in enumerate(siblings):
            if op.name in SOFTMAX and (chain := _naive(siblings, i)) is not None:
                first, second, flops = chain
                masked = any(o.name in MASKS for o in siblings if first.ts < o.ts < op.ts)
                found.append((first, first.ts, second.ts + second.dur, flops, masked, "matmul-softmax-matmul"))
    return found


def _launched_in(step: Step, op: CpuOp, start: float, end: float) -> list[GpuWork]:
    return [w for w in step.gpu if w.launch is not None and w.launch.tid == op.tid and w.launch.pid == op.pid
            and start <= w.launch.ts <= end]


def attention_math(r: Reading) -> list[Finding]:
    """Attention computed as separate kernels: SDPA's math path, or Q·Kᵀ, softmax and P·V written by hand. Each writes
    the [L, S] scores to memory and reads them back, several times; a fused kernel (FlashAttention, the
    memory-efficient kernel, cuDNN's) keeps them on chip and reads Q, K and V once.

    Sources: Part 3 of the series (naive attention, then SDPA's backends), PyTorch's scaled_dot_product_attention
    documentation (its backends and their constraints), Dao et al., "FlashAttention" (2022)."""
    if r.replay is None:
        return []
    found = peaks.find(r.trace)
    if found is None or not (found.peak.tflops.get("bf16") or found.peak.tflops.get("fp16")):
        return []  # no tensor cores for a fused kernel to run on
    peak = found.peak.tflops.get("bf16") or found.peak.tflops["fp16"]
    names = r.op_names
    if MATH not in names and names.isdisjoint(SOFTMAX):
        return []  # neither path nor softmax anywhere: no step need be walked (111 steps of a Mamba trace: 0.2 s)
    per_step = {id(s): [(a, _launched_in(s, a[0], a[1], a[2])) for a in _attention(s)] for s in r.steps}
    all_found = [(a, work) for items in per_step.values() for a, work in items if work]
    if not all_found:
        return []
    gpu = sum(w.dur for _, work in all_found for w in work)
    known_causal = all(a[5] == "SDPA's math path" for a, _ in all_found)  # is_causal read, not a mask guessed at
    if all(a[3] for a, _ in all_found):
        flops = sum(a[3] for a, _ in all_found)
        halved = sum(a[3] / 2 if a[4] else a[3] for a, _ in all_found)
        slow = (halved if known_causal else flops) / (FUSED_SHARE[0] * peak * 1e6)
        fast = halved / (FUSED_SHARE[1] * peak * 1e6)
        keep = (min(1.0, fast / gpu), min(1.0, slow / gpu))
        how = (f"a fused kernel at {FUSED_SHARE[0]:.0%}-{FUSED_SHARE[1]:.0%} of {found.peak.name}'s {peak:g} TFLOP/s "
               f"on the attention's {flops / 1e9 / r.n:,.1f} GFLOP a step (the causal half at the most), as the "
               "memory-efficient, flash and cuDNN kernels measured on an H200")
    else:
        keep = FUSED_KEEP
        how = (f"without shapes, a fused kernel keeping {FUSED_KEEP[0]:.0%}-{FUSED_KEEP[1]:.0%} of the unfused "
               "attention's GPU time (2-17% measured at 1,024 tokens on an H200; shorter sequences gain less)")

    def spans(step: Step):
        return [(a[1], a[2]) for a, _ in per_step.get(id(step), ())]

    saving = r.replay.saving(cut_cpu(spans, FUSED_CPU_KEEP[1], keep[1]), [cut_cpu(spans, FUSED_CPU_KEEP[0], keep[0])])
    kinds = Counter(a[5] for a, _ in all_found)
    fp32 = any(op.input_types[:1] == ("float",) for (op, *_), _ in all_found) or any(
        "f32f32" in w.name or "<float," in w.name for _, work in all_found for w in work if w.is_gemm)
    kernels = sum(len(work) for _, work in all_found)
    evidence = (f"{', '.join(kinds)} {times(r.per_step(len(all_found)))} a step: {kernels / r.n:,.0f} kernels, "
                f"{us(gpu / r.n)} on the GPU ({gpu / r.n / r.step_us:.0%} of the step)"
                f"{', in fp32' if fp32 else ''}; the [L, S] scores go through memory between them")
    cast = " on bf16 q, k, v (flash and cuDNN take fp16/bf16 only)" if fp32 else ""
    # the mask as the trace shows it: SDPA's is_causal, or a masked_fill between the scores and the softmax (causal
    # in Part 3; a padding mask goes in attn_mask); an encoder's attention has none
    masks = {a[4] for a, _ in all_found}
    args, note = "q, k, v, is_causal=...", " (is_causal as your attention's: record_shapes=True records it)"
    if masks == {True}:
        args, note = "q, k, v, is_causal=True", "" if known_causal else " (a padding mask: attn_mask=mask instead)"
    elif masks == {False}:
        args, note = "q, k, v", ""
    change = (f"out = F.scaled_dot_product_attention({args})  # fused: flash, efficient or cuDNN{cast}{note}; no "
              "math-only sdpa_kernel(SDPBackend.MATH) around it")
    basis = r.basis(f"{how}; the forward's only (a training step's backward gains as much again, not counted)")
    return [Finding("attention-math", "attention in separate kernels, not a fused one", evidence, change, saving,
                    r.step_us, basis, source_of(attention_math), where=where_of(a[0] for a, _ in all_found),
                    count_per_step=r.per_step(len(all_found)))]


# --- a convolution's bias before batch norm -------------------------------------------------------------------

CONVOLUTION = "aten::convolution"
BATCH_NORM = ("aten::batch_norm", "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::_batch_norm_impl_index",
              "aten::miopen_batch_norm")


def _bias(op: CpuOp) -> bool:
    """A convolution recorded with a bias tensor (its third input: `(256,)` and a dtype; absent: `()` and "")."""
    return len(op.input_dims) > 2 and bool(op.input_dims[2]) and len(op.input_types) > 2 and \
        op.input_types[2] in ITEMSIZE


def _conv_then_norm(step: Step) -> list[CpuOp]:
    """The step's convolutions with a bias whose output goes straight into batch norm: the next op that launches work
    on the thread, at the depth of the call (`aten::conv2d`'s), is a batch norm over as many channels."""
    siblings: dict[tuple, list[CpuOp]] = {}
    convs = []
    for op in step.ops:
        if op.is_label:
            continue
        if op.name == CONVOLUTION and op.input_dims and _bias(op) and CONVOLUTION not in op.path:
            convs.append(op)
        if op.launched:
            siblings.setdefault((op.pid, op.tid, op.path), []).append(op)
    found = []
    for conv in convs:
        around = conv.path[:-1] if conv.path[-1:] in (("aten::conv1d",), ("aten::conv2d",), ("aten::conv3d",)) \
            else conv.path
        end = conv.ts + conv.dur
        later = min((o for o in siblings.get((conv.pid, conv.tid, around), ()) if o.ts >= end), key=lambda o: o.ts,
                    default=None)
        if later is None or later.name not in BATCH_NORM:
            continue
        x, w = _dims(later, 0), _dims(conv, 1)
        if x and w and len(x) >= 2 and x[1] == w[0]:
            found.append(conv)
    return found


def conv_bias_bn(r: Reading) -> list[Finding]:
    """A convolution with a bias straight into batch norm: the norm subtracts the channel's mean, the bias with it,
    so the bias (its add over the whole output, its gradient's reduction in the backward, its optimizer update)
    computes nothing. PyTorch's convolution adds the bias in a kernel of its own (`aten::add_` after cuDNN's).

    Sources: Ioffe and Szegedy, "Batch Normalization" (2015: the bias "can be ignored"), torchvision's ResNet
    (bias=False before every BatchNorm2d), PyTorch's performance tuning guide ("disable bias for convolutions
    directly followed by a batch norm")."""
    if r.replay is None or not r.has_shapes or CONVOLUTION not in r.op_names or r.op_names.isdisjoint(BATCH_NORM):
        return []
    convs = [(s, op) for s in r.steps for op in _conv_then_norm(s)]
    if not convs:
        return []
    adds: list[GpuWork] = []
    for s, conv in convs:
        end = conv.ts + conv.dur
        adds += [w for w in s.gpu if w.launch is not None and w.launch.launcher is not None
                 and w.launch.launcher.name.startswith("aten::add") and conv.ts <= w.launch.ts <= end
                 and w.launch.tid == conv.tid and CONVOLUTION in w.launch_path]
    calls = {id(w.launch) for w in adds}

    def no_add(drop_call: bool):
        def change(e):
            if e.call is None or id(e.call) not in calls:
                return e
            return None if drop_call else replace(e, work=0.0)
        return edit_events(change)

    saving = r.replay.saving(no_add(False), [no_add(True)]) if adds else (0.0, 0.0)
    spent = sum(w.dur for w in adds)
    first = convs[0][1]
    shape = "×".join(map(str, _dims(first, 1) or ()))
    evidence = (f"aten::convolution with a bias (weight {shape}, bias {_dims(first, 2)}) straight into batch norm "
                f"{times(r.per_step(len(convs)))} a step; the bias adds take {us(r.per_step(spent))} on the GPU "
                f"({times(r.per_step(len(adds)))} aten::add_)")
    change = "nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)  # before nn.BatchNorm2d"
    basis = r.basis("the bias add's kernels removed (and their launches at the most); the backward's reduction for "
                    "the bias gradient goes too, not counted")
    return [Finding("conv-bias-bn", "a convolution's bias that batch norm cancels", evidence, change, saving,
                    r.step_us, basis, source_of(conv_bias_bn), where=where_of(op for _, op in convs),
                    count_per_step=r.per_step(len(convs)))]


# --- GEMM dimensions the tensor cores do not tile -------------------------------------------------------------

NARROW = {"c10::BFloat16": 2, "c10::Half": 2, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
          "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1}
ALIGN_BYTES = 16  # the tensor cores' loads: a leading dimension a multiple of 16 bytes
PAD_TO = 64  # what to pad to: nanoGPT's vocabulary, 50257 -> 50304
# The share of the dtype's peak a padded GEMM reaches, least and most: the rule fires below the upper one only (an
# aligned bf16 GEMM of a few GFLOP reaches 60-80% on an H100; the range stays below that, on purpose).
ALIGNED_SHARE = (0.35, 0.5)
OPERANDS = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::matmul": (0, 1), "aten::_scaled_mm": (0, 1),
            "aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::_addmm_activation": (1, 2),
            "aten::linear": (0, 1)}


def _mnk(op: CpuOp) -> tuple[int, int, int] | None:
    pair = OPERANDS.get(op.name)
    if pair is None:
        return None
    a, b = _dims(op, pair[0]), _dims(op, pair[1])
    if not a or not b or len(a) < 2 or len(b) < 2:
        return None
    if op.name == "aten::linear":  # weight [N, K]
        return math.prod(a[:-1]), b[0], a[-1]
    return a[-2], b[-1], a[-1]


def gemm_alignment(r: Reading) -> list[Finding]:
    """fp16, bf16 and fp8 GEMMs with a dimension that is not a multiple of 16 bytes (8 elements in 16 bits): the
    tensor cores load 16 bytes at a time, and cuBLAS falls back to kernels that load less (`align1`, `align2`) or
    pads each tile. Padding the dimension (a vocabulary of 50257 to 50304) costs a few FLOPs and gives the aligned
    kernels back. Said only of compute-bound GEMMs that run below half the dtype's peak: a GEMM near its peak has
    nothing to gain, and a memory-bound one gains bytes, not tiles.

    Sources: NVIDIA's Matrix Multiplication Background User's Guide ("Tensor Core requirements": multiples of 8 for
    fp16, 16 for int8/fp8), Karpathy's nanoGPT (vocab_size 50304, "nearest multiple of 64 for efficiency")."""
    if r.replay is None or not r.has_shapes:
        return []
    found = peaks.find(r.trace)
    if found is None:
        return []
    groups: dict[tuple, list[GpuWork]] = {}
    ops: dict[tuple, CpuOp] = {}
    for s in r.steps:
        for w in s.gpu:
            op = w.launch.launcher if w.launch is not None else None
            if op is None or op.name not in OPERANDS or len(op.input_types) <= OPERANDS[op.name][1]:
                continue
            if op.input_types[OPERANDS[op.name][0]] not in NARROW or not w.is_gemm:
                continue
            key = (op.name, repr(op.input_dims), op.input_types)
            groups.setdefault(key, []).append(w)
            ops.setdefault(key, op)
    rows = []
    for key, works in groups.items():
        op = ops[key]
        mnk = _mnk(op)
        size = NARROW[op.input_types[OPERANDS[op.name][0]]]
        unit = ALIGN_BYTES // size
        if mnk is None or not (off := [(n, d) for n, d in zip("MNK", mnk) if d % unit]):
            continue
        cost = op_cost(op)
        if cost is None or not cost.flops or not cost.bytes:
            continue
        dtype = "fp8" if size == 1 else cost.dtype
        top = found.peak.compute(dtype, True)
        if not top or cost.flops / cost.bytes < top / found.peak.tbps:
            continue  # memory-bound: padding saves no tiles
        calls = len({id(w.launch) for w in works})
        spent = sum(w.dur for w in works)
        share = cost.flops * calls / spent / 1e6 / top
        if share >= ALIGNED_SHARE[1]:
            continue
        padded = math.prod(-(-d // PAD_TO) * PAD_TO if (n, d) in off else d for n, d in zip("MNK", mnk))
        grown = padded / math.prod(mnk)
        keep = [min(1.0, cost.flops * grown * calls / (s * top * 1e6) / spent) for s in ALIGNED_SHARE]
        rows.append((op, works, off, share, spent, keep, top))
    if not rows:
        return []
    factor: dict[int, tuple[float, float]] = {id(w): (keep[1], keep[0]) for _, works, _, _, _, keep, _ in rows
                                              for w in works}
    splits = []
    for i in (0, 1):
        split: dict[int, list[float]] = {}
        for s in r.steps:
            for w in s.gpu:
                if w.launch is not None:
                    part = split.setdefault(id(w.launch), [0.0, 0.0])
                    part[1 if id(w) in factor else 0] += w.dur * (factor[id(w)][i] if id(w) in factor else 1.0)
        splits.append({call: part for call, part in split.items() if part[1] > 0})

    def padded(i: int):
        return scaled_work(splits[i], 1.0)

    saving = r.replay.saving(padded(0), [padded(1)])
    op, works, off, share, spent, _, top = max(rows, key=lambda row: row[4])
    m, n, k = _mnk(op)
    dims = ", ".join(f"{name} = {d:,}" for name, d in off)
    evidence = (f"{op.name} {'×'.join(map(str, _dims(op, OPERANDS[op.name][0])))} · "
                f"{'×'.join(map(str, _dims(op, OPERANDS[op.name][1])))} {op.input_types[0].removeprefix('c10::')}: "
                f"{dims} not a multiple of {ALIGN_BYTES} bytes; {us(r.per_step(spent))} a step at "
                f"{share:.0%} of {found.peak.name}'s {top:g} TFLOP/s"
                + (f" ({len(rows)} GEMM shapes so)" if len(rows) > 1 else ""))
    name, d = off[0]
    change = (f"pad {name} to a multiple of {PAD_TO}: {d:,} -> {-(-d // PAD_TO) * PAD_TO:,} (e.g. nn.Linear(d_model, "
              f"{-(-d // PAD_TO) * PAD_TO}) for a vocabulary of {d}, the extra logits masked or sliced off)")
    basis = r.basis(f"the padded GEMM at {ALIGNED_SHARE[0]:.0%}-{ALIGNED_SHARE[1]:.0%} of the peak (aligned GEMMs of "
                    "this size reach more: the range stays below), its extra FLOPs counted")
    return [Finding("gemm-alignment", "GEMM dimensions the tensor cores do not tile", evidence, change, saving,
                    r.step_us, basis, source_of(gemm_alignment), where=where_of(row[0] for row in rows),
                    count_per_step=r.per_step(sum(len({id(w.launch) for w in row[1]}) for row in rows)))]


# --- memory-bound kernels a compiler would fuse ---------------------------------------------------------------

COMPILED = ("Torch-Compiled Region", "CompiledFxGraph", "CompiledFunction")


def _compiled(r: Reading) -> bool:
    """The trace ran compiled code: torch.compile's regions, or Inductor's Triton kernels."""
    if any(any(mark in label for mark in COMPILED) for label in r.trace.labels):
        return True
    return any(w.kind == "kernel" and w.name.startswith("triton_") for s in r.steps for w in s.gpu)


INDUCTOR_SHARE = 0.7  # of the fusion section's predicted speed, what Inductor's fused kernel reached (measured below)


def compile_fusion(r: Reading) -> list[Finding]:
    """Chains of memory-bound kernels (elementwise ops, norms written as ops, casts) that each read their input from
    memory and write their output back: torch.compile's Inductor fuses each chain into one kernel that reads the
    chain's inputs once and writes its outputs once. The saving is the fusion section's own prediction (fusion.py):
    at most the fused bytes at the nominal bandwidth, at least at the rate the chain's kernels reached.

    Sources: Part 2 of the series (the eager MLP's GELU and mul, fused), PyTorch's torch.compile documentation,
    the PyTorch performance tuning guide ("fuse pointwise operations")."""
    if r.replay is None or not r.has_shapes or _compiled(r):
        return []
    # One step stands for all: the steps repeat, and the analysis costs per step (Mamba's 3 steps: 47 ms, its last
    # alone under 10 ms, the same chains and savings within 0.2%).
    f = fusion.analyze(r.trace if len(r.steps) == 1 else dc_replace(r.trace, steps=r.steps[-1:]), None)
    chains = [c for c in f.candidates if c.is_chain and c.saving_us_per_step]
    if not chains:
        return []
    # Inductor's fused kernel runs slower than the bytes at the chain's own rate: the post's gelu+mul on an H200,
    # 40.4 µs predicted, 56.0 µs measured (0.72); the low end gives it that margin.
    low = sum(max(0.0, c.measured_us_per_step - (c.predicted_us_per_step or 0.0) / INDUCTOR_SHARE) for c in chains)
    high = sum(max(0.0, c.measured_us - c.floor_us * c.count) / c.steps if c.floor_us is not None
               else c.saving_us_per_step for c in chains)
    # kernel name -> the ops of the chains that hold it: a kernel is touched when one of those launched it (a
    # chain's ops × kernels as pairs cost 19 ms of a 2021 ResNet step's 60 ms advice)
    launchers_of: dict[str, set[str]] = {}
    for c in chains:
        for kernel in set(c.kernels):
            launchers_of.setdefault(kernel, set()).update(c.ops)
    # One pass over the steps' GPU work (a 147 MB trace's 1.9M items): the touched kernels' time, and per launch
    # id(call) -> [its other work, its work a fused kernel would do]
    touched: list = []
    touched_us = 0.0
    split: dict[int, list[float]] = {}
    for s in r.steps:
        for w in s.gpu:
            call = w.launch
            if call is None:
                continue
            hit = (w.name in launchers_of and call.launcher is not None
                   and call.launcher.name in launchers_of[w.name])
            if hit:
                touched.append(w)
                touched_us += w.dur
            part = split.get(id(call))
            if part is None:
                part = split[id(call)] = [0.0, 0.0]
            part[hit] += w.dur
    total = touched_us / r.n
    if total <= 0:
        return []
    keep = (max(0.0, 1 - high / total), max(0.0, 1 - low / total))
    split = {call: part for call, part in split.items() if part[1] > 0}

    def fused(factor: float):
        return scaled_work(split, factor)

    saving = r.replay.saving(fused(keep[1]), [fused(keep[0])])
    kernels = sum(len(c.kernels) * c.count for c in chains) / r.n
    top = chains[0]
    evidence = (f"{len(chains)} chains of memory-bound kernels, {kernels:,.0f} kernels and {us(total)} a step; the "
                f"largest {top.label} ({top.shape}, {times(top.per_step)} a step): {us(top.measured_us_per_step)} "
                f"now, {us(top.predicted_us_per_step or 0)} fused")
    basis = r.basis(f"the fusion section's prediction: {us(low)}-{us(high)} of GPU time a step (each chain's fused "
                    f"bytes at {INDUCTOR_SHARE:.0%} of its kernels' own rate, as Inductor's kernel reached on an H200, "
                    "and at the nominal bandwidth); a training step's backward keeps "
                    "some intermediates in memory, which the prediction does not charge")
    return [Finding("compile-fusion", "memory-bound kernels a compiler would fuse", evidence,
                    "model = torch.compile(model)", saving, r.step_us, basis, source_of(compile_fusion),
                    where=where_of(w.launch.launcher for w in touched), count_per_step=kernels)]


def scaled_work(split: dict[int, list[float]], factor: float):
    """An edit that scales part of each listed call's GPU work by `factor` (`split`: id(call) -> [the work that
    stays, the work scaled]), each step's events edited once and reused (the replay runs every edit at two CPU
    speeds; mamba's 2,136 events a step, edited by dataclasses.replace each time, took 40 ms)."""
    done: dict[int, list[Event]] = {}

    def edit(s: StepReplay) -> tuple[list[Event], float]:
        events = done.get(id(s))
        if events is None:
            events = done[id(s)] = [
                e if e.call is None or (part := split.get(id(e.call))) is None else
                Event(e.call, e.gap, e.own, e.waits, part[0] + part[1] * factor, e.blocks_on_work, e.ts, e.end)
                for e in s.events]
        return events, s.tail

    return edit


RULES = (out_of_place_copy, attention_math, conv_bias_bn, gemm_alignment, compile_fusion)
