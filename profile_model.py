"""Now go profile something: the series' recipe on your own model.

The posts profiled one op, one layer, one MLP. This runs the same recipe on a model you name: a transformers causal
language model (a preset, a Hub id or a local folder) or any nn.Module a function of yours builds. One step under
`record_function` labels, five steps under `torch.profiler.profile` with the posts' schedule, the last three recorded;
then the trace, the op table, and `trace-report`'s summary of where the GPU's time goes: by kind of work, by module,
by kernel, and what the GPU waited on.

    uv run profile_model.py --model tiny-llama                     # a 2-layer Llama built here: no network
    uv run profile_model.py --model tiny-llama --train             # forward and loss, backward, AdamW's step
    uv run profile_model.py --model llama-1b --train               # Llama 3.2 1B's shape, 8 x 512 tokens (a GPU)
    uv run profile_model.py --model Qwen/Qwen3-0.6B --train        # a Hub model's config (or a local folder's)
    uv run profile_model.py --module my_model.py:build --train     # yours: build() returns (model, example_inputs)

A transformers model is built from its config with random weights (`AutoModelForCausalLM.from_config`): a dense
model runs the same kernels with trained weights, which `--pretrained` loads. Its input is `--batch` sequences of
`--seq` random token ids; training passes them as labels too, so the model computes its own loss. A `--module`
factory takes no arguments and returns `(model, example_inputs)`, the inputs a tuple of positional arguments or a
dict of keyword arguments; both are moved to `--device`, floating tensors to `--dtype`. Its loss is the model's own
where it returns one, else the mean of its output.

Which module ran each op: every module call runs inside a `record_function` range named `nn.Module: LlamaMLP`, and
every backward node inside one named by the modules its forward ran in (`nn.Module: ... > LlamaMLP > Linear.backward`)
(profiling_in_pytorch/model/ranges.py: torch.profiler's `with_modules=True` records nothing for eager models). They
cost CPU time per module call and per backward node, no GPU work; `--no_module_ranges` leaves them out. They are off
under --compile, whose kernels span modules.

`--record_shapes` (off, as in the posts) records each op's input shapes: it costs CPU time per op, which can make a
GPU-bound step look overhead-bound (docs/your-model.md has both costs, measured).
"""

from trace_report.errors import UsageError, exits_cleanly, first_line  # isort: skip  (first: Ctrl-C while torch loads is one line)
from contextlib import nullcontext

import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from trace_report.cli import positive_int
from profiling_in_pytorch.model import load
from profiling_in_pytorch.model.presets import PRESETS
from profiling_in_pytorch.model.ranges import ModuleRanges
from profiling_in_pytorch import checks as ex
from trace_report.summary import print_summary, summarize

FORWARD, BACKWARD, OPTIMIZER = "model_fwd", "model_bwd", "optimizer_step"
DEFAULT_BATCH, DEFAULT_SEQ = 8, 512  # a Hub or local model's input when no flag says otherwise


def expectations(args):
    """What any model's trace shows: the recorded steps, and in training the three labels and autograd's thread."""
    checks = [ex.profiler_steps()]
    if args.train:
        checks += [ex.labels_per_step(FORWARD, BACKWARD, OPTIMIZER), ex.backward_on_autograd_thread(BACKWARD)]
    else:
        checks.append(ex.labels_per_step(FORWARD))
    return checks


def build_parser():
    parser = lesson.parser(__file__, __doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="NAME",
                        help=f"a transformers model: a preset ({', '.join(PRESETS)}), a Hub id or a local folder")
    source.add_argument("--module", metavar="FILE.py:FACTORY",
                        help="your own: FILE.py:FACTORY or PACKAGE.MODULE:FACTORY, a function returning (model, example_inputs)")
    parser.add_argument("--pretrained", action="store_true", help="--model: load the trained weights (the Hub or its cache)")
    parser.add_argument("--batch", type=positive_int, default=None, metavar="N",
                        help=f"--model: sequences per step (default: the preset's, else {DEFAULT_BATCH})")
    parser.add_argument("--seq", type=positive_int, default=None, metavar="N",
                        help=f"--model: tokens per sequence (default: the preset's, else {DEFAULT_SEQ})")
    parser.add_argument("--train", action="store_true",
                        help="profile a training step: forward and loss, backward, torch.optim.AdamW's step")
    parser.add_argument("--record_shapes", action="store_true", help="record each op's input shapes; costs CPU time per op")
    parser.add_argument("--no_module_ranges", dest="module_ranges", action="store_false",
                        help="leave out the ranges that name each op's module (they are off under --compile anyway)")
    return parser


def require_valid(args):
    if args.module and (args.batch or args.seq or args.pretrained):
        raise UsageError("--batch, --seq and --pretrained go with --model; a --module factory makes its own inputs")
    if args.pretrained and args.model in PRESETS:
        raise UsageError(f"--pretrained: the preset {args.model} has no trained weights (it is a config written here)")


@exits_cleanly
def main(argv=None):
    args = build_parser().parse_args(argv)
    require_valid(args)
    try:
        return profile_model(args)
    except load.CannotRunHere as err:
        load.cannot_run_here(str(err))
    except torch.OutOfMemoryError as err:
        load.cannot_run_here(f"out of memory: {first_line(err)}")


def profile_model(args):
    # The model's name and the flags that change the trace make its file name.
    if args.model:
        config, name, origin = load.transformers_config(args.model)
        preset = PRESETS.get(args.model)
        args.batch = args.batch or (preset.batch if preset else DEFAULT_BATCH)
        args.seq = args.seq or (preset.seq if preset else DEFAULT_SEQ)
        tag = [name, args.batch, args.seq]
    else:
        factory, name = load.load_factory(args.module)
        tag = [name]
    ranges = args.module_ranges and not args.compile
    tag += (["train"] if args.train else []) + (["pretrained"] if args.pretrained else [])
    tag += (["shapes"] if args.record_shapes else []) + (["noranges"] if not args.module_ranges else [])
    labels = ", ".join([FORWARD, BACKWARD, OPTIMIZER] if args.train else [FORWARD])
    run = lesson.setup(__file__, args, label=f"{name}: {labels}", tag=tag)

    # The model and its input, made once.
    torch.manual_seed(0)
    if args.model:
        # The shapes alone first ("meta" tensors hold no memory): does it fit, before anything is allocated?
        skeleton = load.build_transformers(args.model, config, torch.device("meta"), run.dtype, pretrained=False)
        lesson.require_memory(run, load.training_bytes(skeleton, run.dtype, args.train), "the weights"
                              + (", their gradients and AdamW's state" if args.train else ""))
        model = load.build_transformers(args.model, config, run.device, run.dtype, args.pretrained)
        inputs = load.token_inputs(config, args.batch, args.seq, run.device, args.train)
        what = f"{origin}; {'trained weights' if args.pretrained else load.RANDOM_WEIGHTS_NOTE}"
    else:
        model, inputs = load.call_factory(factory, args.module)
        model, inputs = model.to(run.device, run.dtype), load.moved(inputs, run.device, run.dtype)
        what = f"{type(model).__name__} from {args.module}"
    params = load.parameter_count(model)
    lesson.console.print(f"model: {what} · {params / 1e6:,.1f} M parameters", soft_wrap=True, markup=False)
    model.train(args.train)
    target = load.ModelToProfile(torch.compile(model) if args.compile else model, inputs, name, what)
    optimizer = torch.optim.AdamW(model.parameters()) if args.train else None

    def step():
        if not args.train:
            with torch.no_grad(), record_function(FORWARD):
                return target()
        optimizer.zero_grad(set_to_none=True)
        with record_function(FORWARD):
            loss = load.loss_of(target())
        with record_function(BACKWARD):
            loss.backward()
        with record_function(OPTIMIZER):
            optimizer.step()

    with ModuleRanges(model) if ranges else nullcontext():
        # One step first: it compiles, allocates cuBLAS's workspace and AdamW's state, and shows a model that does
        # not run (or does not fit) before the profile starts.
        load.first_step(step, what)
        lesson.synchronize(run.device)

        # Guess first, then look.
        expected = expectations(args)
        lesson.announce(expected, run, compiled_already=True)

        # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
        baseline = lesson.time_unprofiled(step, run)

        # The profile, as the posts write it: five steps, the last three recorded, no synchronize inside.
        with profile(
            activities=run.activities,
            schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
            record_shapes=args.record_shapes,
            profile_memory=False,
            with_stack=False,
        ) as prof:
            for _ in range(5):
                step()
                prof.step()
        lesson.synchronize(run.device)

    lesson.save(prof, run, baseline)  # traces/profile_model/<tag>.json and the op table beside it, <tag>.txt
    lesson.check(expected, run)
    if args.record_shapes:  # with shapes, trace-report can weigh each op's bytes
        lesson.fusion_candidates(run)  # the first rows of its "Where fusion would pay"
    print_summary(summarize(run.trace_path), lesson.console)
    lesson.next_steps(run)


if __name__ == "__main__":
    raise SystemExit(main())
