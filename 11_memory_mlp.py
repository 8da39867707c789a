"""Lesson 11: where the memory goes. One training step's memory, profiled: its peak, when it happens, what it is made of.

A training step holds four kinds of bytes. The weights (P bytes) and, with AdamW, its two moments per weight (2P),
live from step to step. The gradients (P) are written by the backward and read by the optimizer. And the forward
keeps tensors for the backward (lesson 06 counted them): activations, per layer of the post's MLP eagerly x and four
[tokens, hidden] tensors (g, gelu(g), u, m); compiled, Liger's and the fused module's three. They pile up layer after
layer through the forward and are freed layer by layer through the backward, while the gradients grow: so the step
peaks early in the backward, where the activations of every layer meet the last layer's first gradients, unless the
optimizer's state and temporaries weigh more.

Activation checkpointing (`--checkpoint`, `torch.utils.checkpoint` around each layer, use_reentrant=False) keeps only
each layer's input and runs the layer's forward again inside the backward: memory for time. The lesson labels each
checkpointed call `checkpointed_layer`, so the trace shows the recompute under the backward, and its cost.

Which step: AdamW creates its state in its first step. The profile's schedule skips steps 0 and 1, so the recorded
ProfilerStep#2 already holds that state, as every step of a training run after the first does; it is the step the
lesson reads. On a GPU the lesson measures the first step too (torch.cuda.max_memory_allocated), and records the
caching allocator's history over it and the next for memory_viz.

    uv run 11_memory_mlp.py                              # the post's MLP ×2, eager, AdamW
    uv run 11_memory_mlp.py --checkpoint                 # the same, each layer checkpointed
    uv run 11_memory_mlp.py --compile                    # Inductor: one saved tensor fewer per layer
    uv run 11_memory_mlp.py --variant liger              # Liger's GeGLU kernels (a GPU)
    uv run 11_memory_mlp.py --variant fused              # lesson 05's fused module (a GPU)
    uv run 11_memory_mlp.py --model tiny-llama --batch 4 --seq 256   # a transformers preset, built from its config

How memory is read: torch's memory profiler (record_shapes, profile_memory and with_stack on) gives every tensor's
bytes a category over time, written into the trace (`memoryTimeline`) and drawn in `<tag>.memory.png`; the
profiler's own `[memory]` events, which `trace-report` reads in any trace recorded with profile_memory=True, give
each allocation and free with the allocator's totals.
"""

from trace_report.errors import UsageError, exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import os

# Read when torch loads: the CPU allocator warns (in C++, on stderr) of a block freed during the profile that it saw
# no allocation of, made before it started; a successful run's stderr holds only the lesson's lines.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
import torch
from torch import nn
from torch.profiler import profile, record_function, schedule
from torch.utils.checkpoint import checkpoint

from profiling_in_pytorch import lesson
from trace_report.cli import DTYPE_NAMES, positive_int
from trace_report.errors import readable_bytes
from profiling_in_pytorch.lesson import memory as mem
from profiling_in_pytorch.mlp import POST_SIZES
from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP
from profiling_in_pytorch.mlp.fused import require_runnable as require_fused_runnable
from profiling_in_pytorch.mlp.liger import add_source_flags, require_runnable, resolve_liger_geglu_mlp
from profiling_in_pytorch.mlp.saved import saved_for_backward
from profiling_in_pytorch.model.presets import PRESETS
from profiling_in_pytorch.parallel import data
from profiling_in_pytorch import checks as ex
from trace_report import read_trace
from profiling_in_pytorch.checks import memory as mx
from trace_report.memory import TIMELINE_KEY, CategoryTimeline
from trace_report.memory_picture import memory_picture_path, write_memory_picture

FORWARD, BACKWARD, OPTIMIZER, RECOMPUTE = "forward", "backward", "optimizer_step", "checkpointed_layer"
VARIANTS = ("eager", "liger", "fused")
OPTIMIZERS = {"adamw": {}, "adamw-fused": {"fused": True}, "none": None}  # torch.optim.AdamW's keyword arguments
DEFAULT_LAYERS = 2
SAVED_PER_LAYER = {"eager": 4, "compiled": 3, "liger": 3, "fused": 3}  # [tokens, hidden] tensors (lesson 06)


class Checkpointed(nn.Module):
    """A layer whose forward runs again in the backward: torch.utils.checkpoint keeps only its input. The range
    names each call, so the trace shows the recompute inside the backward."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def run(self, x):
        with record_function(RECOMPUTE):
            return self.layer(x)

    def forward(self, x):
        return checkpoint(self.run, x, use_reentrant=False)


def require_valid(args):
    """The flags that do not go together, each one line (exit 2) before anything runs."""
    if args.compile and args.variant != "eager":
        raise UsageError(f"--compile compiles the post's eager module; --variant {args.variant} brings its own "
                         "kernels: drop one of the two")
    if args.compile and args.checkpoint:
        raise UsageError("--checkpoint with --compile: Inductor recomputes inside its compiled backward, where no "
                         "range can mark it (torch.compile drops record_function): run them apart")
    if args.model != data.MLP and args.variant != "eager":
        raise UsageError(f"--variant {args.variant} replaces the post's MLP; a transformers preset has its own: "
                         "drop --variant or use --model mlp")
    if args.variant != "liger" and (args.kernel_source or args.kernel_repo):
        raise UsageError("--kernel_source and --kernel_repo pick Liger's layer: they go with --variant liger")
    if args.variant == "fused" and args.dtype not in (None, "bf16", "fp16"):
        raise UsageError(f"--variant fused runs its Triton kernels in bf16 or fp16, not {args.dtype}")


def variant_name(args) -> str:
    return "compiled" if args.compile else args.variant


def held_prediction(args, itemsize: int, loss_bytes: int, device: torch.device) -> tuple[int, str]:
    """What the forward leaves allocated for the backward, from the shapes: per layer its saved [tokens, hidden]
    tensors (none when checkpointed), the layers' outputs (x_1 … x_L, each the next layer's input and the last
    the loss's) and the loss itself: x and the target were there before the forward."""
    tokens, layers = args.batch * args.seq, args.layers
    per_layer = 0 if args.checkpoint else SAVED_PER_LAYER[variant_name(args)]
    held = (layers * per_layer * tokens * args.hidden + layers * tokens * args.dim) * itemsize + loss_bytes
    saved = f"{layers} × {per_layer} × [{tokens}, {args.hidden}] + " if per_layer else ""
    why = "each checkpoint keeps its layer's input only" if args.checkpoint else "what autograd saves per layer"
    rng = ""
    if args.checkpoint and device.type == "cpu":  # each checkpoint copies the RNG state, to replay dropout alike;
        state = torch.get_rng_state().nbytes  # on a GPU that copy is a CPU tensor, outside the GPU's timeline
        held += layers * state
        rng = f" + {layers} × the CPU's RNG state ({state:,} bytes)"
    return held, f"{saved}{layers} × [{tokens}, {args.dim}] + the loss, {loss_bytes:,} bytes{rng} ({why})"


def peak_guess(held: int, params: int, largest_param: int, args, gpu: bool, tokens_hidden: int
               ) -> tuple[str, tuple[str, ...], str]:
    """Where the step peaks, and its largest part, from a bytes budget: in the backward the weights, AdamW's state and
    what the forward held meet the last layer's gradient temporaries (a checkpointed layer first recomputes its
    activations, and by the first layer the gradients are all there); in the optimizer the weights, the gradients,
    the state and its temporaries: foreach (AdamW's default on a GPU) as large as all the weights, else as large as
    the largest."""
    state = 2 * params if args.optimizer != "none" else 0
    recomputed = SAVED_PER_LAYER[variant_name(args)] * tokens_hidden if args.checkpoint else 0
    activations = held + 3 * tokens_hidden + recomputed
    backward = params + state + activations + (params if args.checkpoint else 0)
    temporaries = params if gpu and args.optimizer == "adamw" else largest_param
    optimizer = 2 * params + state + temporaries if state else 0
    phase = BACKWARD if backward > optimizer else OPTIMIZER
    parts = {"activations": activations, "optimizer state": state, "parameters": params}
    largest = max(parts, key=parts.get)
    if args.checkpoint and largest == "activations":  # the layer recomputed inside the backward: torch's profiler
        largest = "autograd detail"  # files tensors the backward makes as autograd detail
    elif args.variant == "fused" and largest == "activations":
        # The fused module saves its pre-activations from inside its own autograd.Function, written by a custom op:
        # the memory profiler sees tensors no ATen op made and the backward reads, and files them as inputs (H100,
        # post's shape, 2 layers: inputs 226.5 MB, activations 125.8 MB at the peak).
        largest = "inputs"
    largest = (largest,)
    why = (f"the budget says {readable_bytes(backward)} in the backward against {readable_bytes(optimizer)} in the "
           "optimizer step")
    return phase, largest, why


def expectations(args, run, held, held_what, budget_held, params, largest_param, tokens_hidden, twin):
    labels = (FORWARD, BACKWARD) + ((OPTIMIZER,) if args.optimizer != "none" else ())
    gpu = run.device.type == "cuda"
    phase, largest, why = peak_guess(budget_held, params, largest_param, args, gpu, tokens_hidden)
    checks = [ex.profiler_steps(), ex.labels_per_step(*labels), mx.memory_events_recorded(),
              mx.state_held_from_the_start(args.optimizer != "none"),
              mx.peak_in_phase(phase, labels, why), mx.largest_at_peak(largest, forward=FORWARD)]
    if held is not None:
        checks.append(mx.activations_held(FORWARD, held, held_what))
    checks.append(mx.peak_matches_allocator())
    if args.optimizer != "none":
        checks.append(mx.steady_peak_not_below_first())
    if args.checkpoint and args.model == data.MLP:
        checks += [mx.recompute_in_backward(RECOMPUTE, BACKWARD, args.layers), mx.checkpointing_saves(twin)]
    return checks, labels


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument("--model", type=data.model_flag, default=data.MLP, metavar="NAME",
                        help=f"{data.MLP} (the post's MLP stacked --layers times, with residuals) or a transformers "
                        f"preset built from its config ({', '.join(PRESETS)}) (default: {data.MLP})")
    parser.add_argument("--layers", type=positive_int, default=DEFAULT_LAYERS, metavar="N",
                        help=f"with --model mlp: the MLPs stacked (default: {DEFAULT_LAYERS})")
    parser.add_argument("--variant", choices=VARIANTS, default="eager",
                        help="each layer: eager (the post's SimpleGeGLUMLP; with --compile, compiled), liger "
                        "(LigerGEGLUMLP) or fused (lesson 05's FusedGeGLUMLP) (default: eager)")
    parser.add_argument("--checkpoint", action="store_true",
                        help="checkpoint each layer (torch.utils.checkpoint, use_reentrant=False): its forward runs "
                        "again in the backward, only its input is kept")
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adamw",
                        help="torch.optim.AdamW (adamw: its default implementation; adamw-fused: fused=True) or none "
                        "(default: adamw)")
    add_source_flags(parser)
    args = parser.parse_args(argv)
    require_valid(args)

    # The trace's name: the model, the variant, checkpointing and the optimizer (the dtype and device trace_tag adds).
    liger = None
    if args.variant == "liger":
        with lesson.console.status("looking for LigerGEGLUMLP"):
            liger = resolve_liger_geglu_mlp(source=args.kernel_source, kernel_repo=args.kernel_repo)
    model_tag = ([args.batch, args.seq, args.dim, args.hidden, f"L{args.layers}"] if args.model == data.MLP
                 else [args.model, args.batch, args.seq])
    variant = {"eager": [], "liger": [f"liger-{liger.tag if liger else ''}"], "fused": ["fused"]}[args.variant]
    tag = model_tag + variant + (["ckpt"] if args.checkpoint else []) + [args.optimizer]
    run = lesson.setup(__file__, args, label=f"one training step's memory: {args.model}, {variant_name(args)}"
                       + (", checkpointed" if args.checkpoint else ""), tag=tag,
                       dtypes=("bf16", "fp16") if args.variant == "fused" else DTYPE_NAMES)
    if liger is not None:
        lesson.console.print(liger.describe(), soft_wrap=True, markup=False)
        require_runnable(liger, run.device)
    if args.variant == "fused":
        require_fused_runnable(args.batch, args.seq, args.dim, args.hidden, run.device)

    # The model and its batch (lesson 09's): the stacked MLP, each layer swapped for the variant's, or a preset.
    torch.manual_seed(0)
    if args.model == data.MLP:
        tokens = args.batch * args.seq
        need = (4 * 3 * args.dim * args.hidden + tokens * (5 * args.hidden + 3 * args.dim)) * args.layers
        lesson.require_memory(run, need * (2 if run.dtype_name != "fp32" else 4), "one training step")
        work = data.mlp_workload(args.batch, args.seq, args.dim, args.hidden, args.layers, run.device, run.dtype)
        for i, layer in enumerate(work.model.layers):
            if args.variant == "liger":
                layer = liger.build_holding(layer, args.dim, args.hidden).to(run.device, run.dtype)
            elif args.variant == "fused":
                layer = FusedGeGLUMLP.from_module(layer)
            work.model.layers[i] = Checkpointed(layer) if args.checkpoint else layer
    else:
        work = data.preset_workload(args.model, args.batch, args.seq, run.device, run.dtype)
        if args.checkpoint:  # each decoder layer under torch.utils.checkpoint (transformers' own switch, renamed in 5.x)
            if hasattr(work.model, "activation_checkpointing_enable"):
                work.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                work.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = torch.compile(work.model) if args.compile else work.model
    params = sum(p.numel() * p.element_size() for p in work.model.parameters())
    lesson.console.print(f"model: {work.what}, {params:,} bytes of parameters; {work.tokens:,} tokens", soft_wrap=True)

    # One forward and backward first: it compiles both and allocates cuBLAS's workspace, outside what is measured.
    work.loss(model).backward()
    model.zero_grad(set_to_none=True)
    lesson.synchronize(run.device)

    # What autograd saves for the backward (saved-tensor hooks, lesson 06's count), against the shapes' prediction.
    loss, saved = saved_for_backward(lambda _: work.loss(model), torch.empty(0), work.model)
    loss_bytes = loss.untyped_storage().nbytes()  # on a CPU mse_loss's scalar keeps its [tokens, dim] buffer
    del loss
    held, held_what = (held_prediction(args, run.dtype.itemsize, loss_bytes, run.device) if args.model == data.MLP else (None, ""))
    if held is None and not args.checkpoint:
        # a transformers model: no prediction from shapes here; what autograd saved is the guess (the batch is no input)
        held, held_what = saved.activation_bytes, "what the saved-tensor hooks counted before the profile"
    # The hooks see x and the target (saved, but there before the forward) and not the loss: the shapes' count of
    # the same is the held prediction plus two [tokens, dim], less the loss.
    hooks_guess = None
    if args.model == data.MLP and not args.checkpoint:
        hooks_guess = held - loss_bytes + 2 * work.tokens * args.dim * run.dtype.itemsize
    mem.print_saved(saved, hooks_guess, checkpointed=args.checkpoint)

    optimizer_args = OPTIMIZERS[args.optimizer]
    optimizer = torch.optim.AdamW(work.model.parameters(), **optimizer_args) if optimizer_args is not None else None

    def step():
        # Fresh gradients every step, as a training loop's zero_grad: the backward writes them, adds to nothing.
        model.zero_grad(set_to_none=True)
        with record_function(FORWARD):
            loss = work.loss(model)
        with record_function(BACKWARD):
            loss.backward()
        if optimizer is not None:
            with record_function(OPTIMIZER):
                optimizer.step()

    # Guess first, then look.
    tokens_hidden = work.tokens * (args.hidden if args.model == data.MLP else 0) * run.dtype.itemsize
    twin = run.trace_path.with_name(run.trace_path.name.replace("_ckpt", ""))
    largest_param = max(p.numel() * p.element_size() for p in work.model.parameters())
    budget_held = held if held is not None else saved.activation_bytes  # a checkpointed preset: what the hooks see
    expected, labels = expectations(args, run, held, held_what, budget_held, params, largest_param, tokens_hidden, twin)
    lesson.announce(expected, run, compiled_already=True)

    # On a GPU: the optimizer's first step (AdamW makes its state) and the next, the allocator's history recorded.
    snapshot = run.trace_path.with_name(run.trace_path.name.removesuffix(".json") + ".snapshot.pickle")
    first_steps = mem.record_snapshot(step, run.device, snapshot)
    mem.print_first_steps(first_steps, optimizer is not None)

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)

    # The profile: five steps, the last three recorded; shapes, memory and stacks on, as the memory profiler needs.
    before = mem.gpu_counters(run.device)
    if run.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(run.device)
    with profile(
        activities=run.activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(5):
            step()
            prof.step()
    lesson.synchronize(run.device)

    after = mem.gpu_counters(run.device)
    extras = {}
    if before:
        extras = {"allocated_before": before["memory_allocated"], "max_memory_allocated": after["max_memory_allocated"],
                  "max_memory_reserved": after["max_memory_reserved"]}
    if first_steps is not None:
        extras.update(first_step_peak=first_steps.first, second_step_peak=first_steps.second)
    timeline = mem.category_timeline(prof, run.device, extras)
    lesson.save(prof, run, baseline, extra={TIMELINE_KEY: timeline.to_dict()})  # the trace, op table, step picture
    trace = read_trace(run.trace_path)
    written = CategoryTimeline.of(trace)
    picture = memory_picture_path(run.trace_path)
    write_memory_picture(written, trace.steps[0], labels, picture, f"{trace.name}: {trace.steps[0].name}'s memory")
    mem.print_peak(written, trace, after)
    lesson.check(expected, run)

    lesson.next_steps(run)
    lesson.console.print(f"  memory:    {lesson.shown_path(picture)}   the step's bytes by category, its phases marked",
                         soft_wrap=True, markup=False)
    mem.print_snapshot_commands(first_steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
