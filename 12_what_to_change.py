"""Lesson 12: what to change. A training step written the way a first one usually is, its trace read by trace-report's
advice, and each change the advice names made and timed.

The lessons so far asked what a trace shows. This one asks what to do about it. The step below trains a stack of MLP
blocks (Linear → GELU → Linear, with a residual) in fp32 with AdamW, and it carries eight habits, each named after
the advice's rule that finds it:

    dataloader               a DataLoader with num_workers=0: each sample is made on the CPU, inside the step
    pageable-copy            x.to(device) from pageable memory: the CPU waits for every copy
    sync                     running_loss += loss.item(): the CPU waits for the GPU, every step
    fp32-matmul              fp32 GEMMs on the GPU's CUDA cores, not its tensor cores (TF32)
    single-tensor-optimizer  AdamW(foreach=False): a dozen small ops per weight tensor, tensor after tensor
    zero-grad                zero_grad(set_to_none=False): a write of every gradient, then the backward adds to it
    cpu-built-tensor         a position table built with torch on the CPU, copied to the GPU every step
    loop-kernels             the loss as a Python loop over the batch's rows: a few tiny kernels per row

`--fix NAME,NAME` (or `--fix all`) fixes some of them; the step shows each fix as a diff beside its habit. The lesson
guesses which rules the advice should find (the planted habits) and which it must not (the fixed ones), profiles five
steps as the posts do, prints the advice and checks the guesses. Then it does what the advice says, one change at a
time: for each finding it builds the step with that one fix added, times it without the profiler against the step
without it (every step once a round, a few rounds, the median of each kept, with its error), and weighs the saving
measured against the range the advice predicted (✓ inside it, or within 25% of its nearest end; ? where the miss is
within two standard errors of the timing, which cannot tell it from a ✓). The first finding should be
the change that saves the most alone. Last, every fix at once, beside the sum of the predictions: savings do not add
(a step that no longer waits on its data may now wait on its launches).

Not every textbook fix pays. On a GPU, at this lesson's sizes, two habits cost under 1% of the step, and the lesson
guesses that the advice stays silent on them: AdamW's loop over 16 weight tensors (four of them 16 MB, where a fused
step moves the same bytes) and zero_grad's fills (67 MB written, tens of µs). The advice weighed them so on H100 and
H200 traces of this step; measure before you claim. The host decides the position table's worth, and the lesson
does not guess it on a GPU: it says what the advice weighed it at. Its making (arange, exp, the outer product, sin,
cos, stack) took 0.8 ms of an H200 host's CPU a step (1.0% of the step: named), 0.5 ms of an H100 host's (0.7%: not
named) and 9 to 36 ms of two other H100 hosts', whose torch ops ran erratically slow on their 16 threads (sin on
256×512: 2.4 ms, against 0.075 ms on one thread). And the textbook fix for a DataLoader without workers is workers;
this step's batch is large tensor work that torch already spreads over every core, and the advice says to make it on
the GPU instead (workers made this step 30 ms slower on two 16-core hosts).

On a CPU the trace shows what a CPU does: the loss's loop and its ops row by row, the optimizer's loop over tensors,
zero_grad's fills, the batch made inside the step (the op table lists them all). The advice weighs fewer of them
there. A CPU trace has no copy between host and device, no GPU to wait for and no tensor cores, and what the advice
finds through those (pageable-copy, sync, fp32-matmul, cpu-built-tensor, and dataloader, which it weighs by replaying
the GPU's work against the CPU's) needs a GPU's trace. On a CPU the lesson guesses only what the advice finds in a CPU
trace, and says why not for the rest.

    uv run 12_what_to_change.py                            # the planted step, every finding fixed alone and timed
    uv run 12_what_to_change.py --fix all                  # the step as it should be written: the advice finds none
    uv run 12_what_to_change.py --fix dataloader,sync      # two fixed: the advice finds the others
    uv run 12_what_to_change.py --no_fix_check             # the advice only, nothing timed after the profile
"""

from trace_report.errors import UsageError, exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import argparse
import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import profile, record_function, schedule
from torch.utils.data import DataLoader, Dataset

import trace_report
from profiling_in_pytorch import checks as ex
from profiling_in_pytorch import lesson
from profiling_in_pytorch.checks import advice as ax
from profiling_in_pytorch.lesson import advice as lesson_advice
from trace_report.advice import print_advice
from trace_report.cli import positive_int
from trace_report.pace import _us

# Sizes: on a GPU, large enough that every habit's cost shows; on a CPU, small enough to run in seconds on 2 cores.
GPU_SIZES = {"batch": 32, "seq": 256, "dim": 1024, "hidden": 4096, "layers": 4}
CPU_SIZES = {"batch": 16, "seq": 16, "dim": 32, "hidden": 64, "layers": 2}
LABELS = ("data", "zero_grad", "forward", "backward", "optimizer")

# Each habit: what it is, its fix (in words), and the fix's part of the trace's file name.
HABITS = {
    "dataloader": ("DataLoader(num_workers=0): each batch made on the CPU inside the step",
                   "each batch made on the GPU, a batch at a time, from the data kept there", "gpu-batch"),
    "pageable-copy": ("x.to(device) from pageable memory", "pin_memory=True, .to(device, non_blocking=True)", "pinned"),
    "sync": ("running_loss += loss.item() every step", "running_loss += loss.detach()", "sync"),
    "fp32-matmul": ("fp32 GEMMs", "TF32 matmuls", "tf32"),
    "single-tensor-optimizer": ("AdamW(foreach=False): its ops tensor by tensor", "AdamW(fused=True)", "fused"),
    "zero-grad": ("zero_grad(set_to_none=False) writes zeros", "zero_grad(), set_to_none", "to-none"),
    "cpu-built-tensor": ("a position table built on the CPU every step", "built once, on the device", "table"),
    "loop-kernels": ("the loss as a loop over the batch's rows", "one expression over the batch", "vector"),
}
# The fix check's names for its two steps that are not one fix: the step as profiled (its baseline), every habit fixed
AS_PROFILED, EVERY_FIX = "as profiled", "every fix"
# On a GPU, at its sizes: the habits whose cost the advice should weigh under 1% of the step, and why (it weighed them
# so on an H100's trace of this step, and on an H200's of this version: textbook fixes, worth little here).
QUIET_ON_A_GPU = {
    "single-tensor-optimizer": "planted, but AdamW's loop over 16 weight tensors is little beside this step",
    "zero-grad": "planted, but its fills write 67 MB: tens of µs of the GPU",
}
# On a GPU, the habits whose worth the host decides, so that no guess holds on every GPU host: the lesson says what the
# advice weighed them at instead.
HOST_DECIDES_ON_A_GPU = {
    "cpu-built-tensor": "the table's making on the host's CPU: 0.8 ms a step on an H200 host (1.0% of its step, named), "
                        "0.5 ms on an H100 host (0.7%, not named), 9-36 ms on H100 hosts whose torch threads ran up "
                        "to 30x slower than one thread",
}
# Findings that no habit of this step plants, so that the fix check has no fix of its own to time for them: why. (An
# H100 host's trace of the planted step named compile-fusion, 1.3-2.3 ms: the GELUs and residual adds of fp32 blocks.)
NOT_PLANTED = {
    "compile-fusion": "its change is torch.compile, and this lesson's step stays eager on purpose (compiled, it would "
                      "hide the habits); 03_simple_mlp.py --compile shows what compiling an MLP gives",
}
# What the advice finds in the planted step's CPU trace (this lesson's, at its CPU sizes); the others, and why not.
SEEN_ON_A_CPU = ("single-tensor-optimizer", "loop-kernels")
NOT_ON_A_CPU = {
    "pageable-copy": "a CPU trace has no copy between host and device",
    "sync": "no GPU to wait for",
    "fp32-matmul": "no tensor cores",
    "cpu-built-tensor": "the advice finds it by its copy to the GPU",
    "dataloader": "the advice weighs it by replaying the GPU's work against the CPU's",
    "zero-grad": "its fills are about 1% of the profiled step here, at the edge of what the advice reports",
}


@dataclass(frozen=True)
class Fixed:
    """Which habits the step has fixed (a field per rule, - for _)."""

    dataloader: bool = False
    pageable_copy: bool = False
    sync: bool = False
    fp32_matmul: bool = False
    single_tensor_optimizer: bool = False
    zero_grad: bool = False
    cpu_built_tensor: bool = False
    loop_kernels: bool = False

    def has(self, rule: str) -> bool:
        return getattr(self, rule.replace("-", "_"))

    def adding(self, *rules: str) -> "Fixed":
        return replace(self, **{rule.replace("-", "_"): True for rule in rules})

    @property
    def rules(self) -> list[str]:
        return [f.name.replace("_", "-") for f in fields(self) if getattr(self, f.name)]

    @property
    def tag(self) -> str:
        """`planted`, `fixed-all` or `fix-sync-tf32`: every set of fixes its own file name."""
        if not self.rules:
            return "planted"
        return "fixed-all" if len(self.rules) == len(HABITS) else "fix-" + "-".join(HABITS[r][2] for r in self.rules)


def fixes_flag(text: str) -> tuple[str, ...]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if "all" in names:
        return tuple(HABITS)
    unknown = [name for name in names if name not in HABITS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown fix {', '.join(map(repr, unknown)) or repr(text)}: use all or "
                                         f"some of {','.join(HABITS)}")
    return tuple(names)


class Samples(Dataset):
    """Samples made when asked for, as a dataset that reads and augments makes them: one of a few stored inputs,
    shifted along the sequence and scaled (the augmentation), its target and the sample's weight in the loss. As good
    as endless: the lesson never reaches an epoch's end. Its roll, scaling, tanh and collate work on 256×1024 samples,
    which torch spreads over the loop thread's cores, so that workers would make the batch on the same cores (4 workers
    made the planted step slower on two 16-core hosts: 72 to 100 ms on an H200's, 79 to 110 ms on an H100's)."""

    STORED = 16

    def __init__(self, seq: int, dim: int):
        self.stored = torch.randn(self.STORED, seq, dim, generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return 1 << 30

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        shift = int(torch.randint(self.stored.shape[1], (), generator=generator))
        x = self.stored[index % self.STORED].roll(shift, dims=0) * (torch.rand((), generator=generator) + 0.5)
        return x, torch.tanh(x), torch.rand((), generator=generator) + 0.5


class BatchesOnDevice(Samples):
    """The dataloader's fix, as the advice says it for a batch of large tensor ops: the stored inputs kept on the device
    (the GPU), and each batch made there a batch at a time (DataLoader hands `__getitems__` a batch's indices): a
    gather for every sample's shift, a scale, a tanh, a few kernels and no copy of the batch each step. The same
    samples as `Samples` makes, drawn from the same generators."""

    def __init__(self, seq: int, dim: int, device: torch.device):
        super().__init__(seq, dim)
        self.stored = self.stored.to(device)

    def __getitems__(self, indices):
        draws = []  # each sample's stored input, shift, scale and weight, as Samples draws them
        for index in indices:
            generator = torch.Generator().manual_seed(index)
            shift = int(torch.randint(self.stored.shape[1], (), generator=generator))
            scale, weight = float(torch.rand((), generator=generator)), float(torch.rand((), generator=generator))
            draws.append((index % self.STORED, shift, scale + 0.5, weight + 0.5))
        device, seq = self.stored.device, self.stored.shape[1]
        # one small copy for the whole batch, pinned and asynchronous: no wait for the GPU inside the loader
        which, shifts, scales, weights = torch.tensor(draws, pin_memory=device.type == "cuda").to(
            device, non_blocking=True).unbind(1)
        rows = (torch.arange(seq, device=device)[None, :] - shifts.long()[:, None]) % seq  # roll: row s is s - shift
        x = self.stored[which.long()[:, None], rows] * scales[:, None, None]
        return [(x[i], y, weights[i]) for i, y in enumerate(torch.tanh(x))]


class Block(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


def position_table(seq: int, dim: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The sinusoidal positions of "Attention is all you need", [seq, dim]."""
    angle = torch.arange(seq, device=device)[:, None] * torch.exp(
        torch.arange(0, dim, 2, device=device) * (-math.log(10000.0) / dim))
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


@contextmanager
def tf32_matmuls():
    """The fp32-matmul fix, set for the fixed step and restored after it: this process times the planted step too.
    torch from 2.9 spells it fp32_precision = "tf32"; a process that sets both spellings gets a RuntimeError when the
    precision is read, so the older allow_tf32 only where the new one is missing."""
    matmul = torch.backends.cuda.matmul
    name, value = ("fp32_precision", "tf32") if hasattr(matmul, "fp32_precision") else ("allow_tf32", True)
    before = getattr(matmul, name)
    setattr(matmul, name, value)
    try:
        yield
    finally:
        setattr(matmul, name, before)


def adamw(params, fused: bool) -> torch.optim.Optimizer:
    if not fused:
        return torch.optim.AdamW(params, lr=1e-4, foreach=False)   # single-tensor-optimizer: tensor by tensor
    try:
        return torch.optim.AdamW(params, lr=1e-4, fused=True)      # fix: a few kernels over all the tensors
    except RuntimeError:  # a torch without fused AdamW on this device: foreach, a kernel per op over all the tensors
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)


class Training:
    """The training loop, one step per `step()` call, with the habits of `fixed` fixed."""

    def __init__(self, fixed: Fixed, args, device: torch.device):
        self.fixed, self.device, self.seq, self.dim = fixed, device, args.seq, args.dim
        torch.manual_seed(0)
        self.model = nn.Sequential(*[Block(args.dim, args.hidden) for _ in range(args.layers)]).to(device)
        self.optimizer = adamw(list(self.model.parameters()), fixed.single_tensor_optimizer)
        # dataloader: every sample made on the CPU inside the step; fix: each batch made on the device, a batch at a
        # time (nothing to pin then)
        samples = BatchesOnDevice(args.seq, args.dim, device) if fixed.dataloader else Samples(args.seq, args.dim)
        loader = DataLoader(samples, batch_size=args.batch,
                            pin_memory=fixed.pageable_copy and device.type == "cuda" and not fixed.dataloader)
        self.batches = iter(loader)
        # cpu-built-tensor's fix: the table made once, on the device
        self.positions = position_table(args.seq, args.dim, device) if fixed.cpu_built_tensor else None
        self.running_loss = 0.0

    def step(self):
        fixed, device = self.fixed, self.device
        with tf32_matmuls() if fixed.fp32_matmul else nullcontext():  # fp32-matmul: fp32 GEMMs; fix: TF32
            with record_function("data"):
                x, y, w = next(self.batches)
                if not fixed.pageable_copy:
                    x, y, w = x.to(device), y.to(device), w.to(device)  # pageable-copy: the CPU waits for each
                else:
                    x, y, w = (t.to(device, non_blocking=True) for t in (x, y, w))  # fix: pinned, asynchronous
                if not fixed.cpu_built_tensor:
                    positions = position_table(self.seq, self.dim).to(device)  # cpu-built-tensor: every step
                else:
                    positions = self.positions  # fix: made once, on the device
            with record_function("zero_grad"):
                self.optimizer.zero_grad(set_to_none=fixed.zero_grad)  # zero-grad: False writes zeros; fix: True
            with record_function("forward"):
                out = self.model(x + positions)
                if not fixed.loop_kernels:  # loop-kernels: a few ops per row, forward and backward
                    loss = 0.0
                    for i in range(len(out)):
                        loss = loss + w[i] * F.mse_loss(out[i], y[i])
                    loss = loss / len(out)
                else:  # fix: the same loss, one expression over the batch
                    loss = (w * (out - y).pow(2).mean(dim=(1, 2))).mean()
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                self.optimizer.step()
            if not fixed.sync:
                self.running_loss += loss.item()  # sync: the CPU waits here for the GPU to finish the step
            else:
                self.running_loss += loss.detach()  # fix: a tensor on the device, read once after the loop

    def close(self):
        """The step's tensors go now (the fix check holds a step of each fix at once)."""
        self.batches = self.model = self.optimizer = self.positions = None


def expectations(fixed: Fixed, device_type: str) -> list:
    shown = HABITS if device_type == "cuda" else SEEN_ON_A_CPU
    quiet = QUIET_ON_A_GPU if device_type == "cuda" else {}
    unguessed = HOST_DECIDES_ON_A_GPU if device_type == "cuda" else {}
    checks = [ex.profiler_steps(), ex.labels_per_step(*LABELS)]
    checks += [ax.rule_found(rule, HABITS[rule][0]) for rule in shown
               if not fixed.has(rule) and rule not in quiet and rule not in unguessed]
    checks += [ax.rule_silent(rule, quiet[rule]) for rule in shown if not fixed.has(rule) and rule in quiet]
    checks += [ax.rule_silent(rule, f"fixed ({HABITS[rule][1]})") for rule in shown if fixed.has(rule)]
    return checks


def untimed(advice) -> list[str]:
    """The advice's findings that the fix check does not time, each with why: no habit of this step plants them."""
    return [f"{f.rule}: {NOT_PLANTED.get(f.rule, 'no habit of this step plants it: the lesson has no fix to time')}"
            for f in advice.findings if f.rule not in HABITS]


def check_fixes(advice, training: Training, fixed: Fixed, args, device: torch.device) -> None:
    """Each finding the step planted, fixed alone, and every habit fixed at once: each timed against the step as
    profiled (no profiler), all in the same rounds (lesson_advice.measure_savings)."""
    for line in untimed(advice):
        lesson.console.print(f"\n[dim]not timed:[/dim] {line}", soft_wrap=True)
    findings = [f for f in advice.findings if f.rule in HABITS and not fixed.has(f.rule)]
    if not findings:
        lesson.console.print("\nno finding of the advice is a habit left to fix: nothing to time")
        return
    everything = Fixed().adding(*HABITS)
    variants = {f.rule: fixed.adding(f.rule) for f in findings}
    if fixed != everything:
        variants[EVERY_FIX] = everything
    rounds = lesson_advice.rounds_on(device)
    lesson.console.print(f"\n[bold]Each change alone[/bold] (the step as profiled, and that step with one more fix; "
                         f"the loop's period without the profiler, the median of {rounds} timings each, every step "
                         "timed once a round)")
    trainings = {rule: Training(variant, args, device) for rule, variant in variants.items()}
    steps = {AS_PROFILED: training.step, **{rule: t.step for rule, t in trainings.items()}}
    what = f"timing the step as profiled and {len(trainings)} fixed"
    with lesson.console.status(what) as status:
        def progress(done: int, total: int) -> None:
            status.update(f"{what}: round {done} of {total}")
            if not lesson.console.is_terminal:  # no spinner in a log: a line a round, tens of seconds apart on a GPU
                lesson.console.print(f"  [dim]timed round {done} of {total}[/dim]")

        timings = lesson_advice.measure_savings(steps, device, rounds, progress)
    for t in trainings.values():
        t.close()
    judged = [timings.judged(f.rule, *f.saving_us, baseline=AS_PROFILED) for f in findings]
    lesson_advice.print_judged(judged, "predicted saving per step against measured, each fix alone")
    drift = lesson_advice.drift_text(advice.step_us, timings.typical_us(AS_PROFILED))
    if drift:
        lesson.console.print(f"  [yellow]![/yellow] {drift}", soft_wrap=True)
    ok, text = lesson_advice.ranking(findings[0].rule, judged)
    mark = {True: "[green]✓[/green]", False: "[red]✗[/red]", None: "[dim]–[/dim]"}[ok]
    lesson.console.print(f"  {mark} the first finding saves the most alone: {text}", soft_wrap=True)

    if EVERY_FIX not in timings.samples_us:
        return
    before_us, after_us = timings.typical_us(AS_PROFILED), timings.typical_us(EVERY_FIX)
    low = sum(j.low_us for j in judged)
    high = sum(j.high_us for j in judged)
    saved = before_us - after_us
    saved_text = f"{_us(saved)} saved" if saved >= 0 else f"{_us(-saved)} slower"
    lesson.console.print(f"\nevery habit fixed: {_us(before_us)} → {_us(after_us)} a step, {saved_text}; the "
                         f"findings' predictions add up to {lesson_advice.range_text(low, high)}, but savings do not "
                         "add: a step that waits on one thing less waits longer on the next", soft_wrap=True)


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, dtypes=("fp32",))
    for name, gpu in GPU_SIZES.items():
        what = lesson.SIZE_HELP.get(name, "MLP blocks stacked, each Linear → GELU → Linear with a residual")
        parser.add_argument(f"--{name}", type=positive_int, default=None, metavar="N",
                            help=f"{what} (default: {gpu} on a GPU, {CPU_SIZES[name]} on a CPU)")
    parser.add_argument("--fix", type=fixes_flag, default=(), metavar="NAME,...|all",
                        help=f"the habits fixed: all, or some of {', '.join(HABITS)} (default: none)")
    parser.add_argument("--no_fix_check", action="store_true",
                        help="print the advice and check it, but time no fix after the profile")
    args = parser.parse_args(argv)
    if args.compile:
        raise UsageError("--compile: this lesson's step is the eager one a first training loop is; compiling it "
                         "would hide the habits the advice looks for")
    device = lesson.pick_device(args.device)
    if device.type == "cpu":
        # One thread: these ops are too small for a second one to help.
        # On 2 cores with other work running, the planted step took 1.3-1.4 ms a step with one thread, 1.7-250 ms
        # with two (their barriers wait for a thread the OS has put aside).
        torch.set_num_threads(1)
    for name, value in (GPU_SIZES if device.type == "cuda" else CPU_SIZES).items():
        setattr(args, name, getattr(args, name) or value)
    if args.dim % 2:
        raise UsageError(f"--dim {args.dim}: the position table pairs a sine and a cosine, so --dim must be even")
    fixed = Fixed().adding(*args.fix)
    tag = [args.batch, args.seq, args.dim, args.hidden, f"L{args.layers}", fixed.tag]
    what = f"fixed: {', '.join(fixed.rules)}" if fixed.rules else "every habit planted"
    run = lesson.setup(__file__, args, label=f"a first training step, {what}", tag=tag, dtypes=("fp32",))
    # The weights, their gradients and AdamW's two moments, the activations: twice, for the fix check's second step.
    params = args.layers * (2 * args.dim * args.hidden + args.dim + args.hidden)
    tokens = args.batch * args.seq
    lesson.require_memory(run, 2 * 4 * (4 * params + 4 * tokens * args.layers * (args.hidden + args.dim)),
                          "two training steps")

    training = Training(fixed, args, run.device)

    # Guess first, then look: the habits planted are found, the habits fixed are not.
    expected = expectations(fixed, run.device.type)
    lesson.announce(expected, run)
    if run.device.type != "cuda":
        why = "; ".join(f"{rule} ({reason})" for rule, reason in NOT_ON_A_CPU.items())
        lesson.console.print(f"[yellow]not guessed on a CPU:[/yellow] {why}", soft_wrap=True)
    host_decides = [rule for rule in HOST_DECIDES_ON_A_GPU if run.device.type == "cuda" and not fixed.has(rule)]
    for rule in host_decides:
        lesson.console.print(f"[yellow]not guessed, the host decides:[/yellow] {rule} ({HOST_DECIDES_ON_A_GPU[rule]})",
                             soft_wrap=True)

    # The step without the profiler first: what the profiled figures and the advice's savings are read against.
    baseline = lesson.time_unprofiled(training.step, run)

    # The profile, as the posts write it: five steps, the last three recorded. Shapes and stacks on: the advice reads
    # the GEMMs' dtypes from the shapes and names the line to change from the stacks.
    with profile(
        activities=run.activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=True,
        profile_memory=False,
        with_stack=True,
    ) as prof:
        for _ in range(5):
            training.step()
            prof.step()
    lesson.synchronize(run.device)

    lesson.save(prof, run, baseline)  # traces/12_what_to_change/<tag>.json, its op table and a picture of a step
    advice = trace_report.read(run.trace_path).advice
    lesson.console.print()
    print_advice(advice, lesson.console, rows=None)  # every finding whole: the lesson times each of them
    lesson.check(expected, run)
    for rule in host_decides:
        lesson.console.print(f"  [yellow]?[/yellow] {ax.weighed_text(advice, rule)}", soft_wrap=True)

    if not args.no_fix_check:
        check_fixes(advice, training, fixed, args, run.device)
    training.close()
    lesson.next_steps(run)
    return 0  # a ✗ is a result of the lesson, not a failure


if __name__ == "__main__":
    raise SystemExit(main())
