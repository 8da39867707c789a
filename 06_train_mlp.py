"""Lesson 06: one training step of the post's MLP. Forward and loss, backward, and the optimizer, profiled.

The posts profile forwards under torch.no_grad(). Training adds the backward, and it is the bigger half. Each of the
three linear layers needs two GEMMs there instead of one: its input's gradient (dX = dY @ W) and its weight's
(dW = dYᵀ @ X). Six GEMMs to the forward's three, twice its FLOPs. Between them, the activation's derivatives, each
an elementwise kernel reading and writing [tokens, hidden] tensors: the multiply's (two muls, dh = dm * u and
du = dm * h), the GELU's (one gelu_backward), and the add that sums the two gradients of x (gate and up both read it).

The backward also needs what the forward computed, so the forward keeps it: autograd's saved tensors, memory held
from the forward to the backward. Before profiling, the lesson counts them as autograd saves them. Eagerly that is
x and four [tokens, hidden] tensors: g (for the GELU's backward), gelu(g) and u (for the multiply's) and m (for
down_proj's weight gradient). Compiled, Inductor keeps x, g, u and m and recomputes gelu(g) inside its fused
backward kernel: one tensor fewer. Liger's function keeps gate and up, and down_proj keeps h; the fused module keeps
x, the interleaved gate/up pre-activations and h: as much as Liger (recomputing h instead would keep one tensor
less and cost its backward kernel 34 us at the post's shape on an H200, docs/fused-mlp.md).

x requires grad, as the input of a layer inside a model does: the layers before it need its gradient. Without
that, autograd skips the two GEMMs of x's gradient and their add.

What to look for in the trace, per step: `mlp_fwd` (the forward and the loss), `mlp_bwd` (`loss.backward()`) and,
with --optimizer, `optimizer_step`. On a GPU autograd runs the backward on its own thread: in Perfetto the
backward's ops sit on another thread's row, under `autograd::engine::evaluate_function: MmBackward0` and the like,
not under `mlp_bwd`. `loss.backward()` returns once that thread has launched everything, so the label's box still
spans the backward in time: the checks give a kernel to `mlp_bwd` when its launch call starts inside that box.

    variant                 mlp_fwd                                   mlp_bwd
    eager                   3 GEMMs, gelu, mul                        6 GEMMs, gelu_backward, 2 mul, add
    --compile               3 GEMMs, one fused gelu+mul kernel        6 GEMMs, one fused kernel with gelu_backward
    --variant liger         3 GEMMs, _geglu_tanh_forward_kernel       6 GEMMs, _geglu_tanh_backward_kernel
    --variant fused         _geglu_gemm_* and 1 GEMM (2 GEMMs)        _geglu_backward_* and 4 GEMMs (5 GEMMs)

(the loss adds its own few kernels to both). The fused backward's four GEMMs are down_proj's weight gradient, both
projections' weight gradients in one GEMM, and x's gradient as two, the up half accumulating into the gate half's
output (docs/fused-mlp.md). With --optimizer adamw, torch's AdamW updates the weights: on a GPU
its default implementation runs `_foreach_*` ops over all three weights at once; `adamw-fused` is one
`_fused_adamw_` op.

    uv run 06_train_mlp.py                                  # the post's shape, eager
    uv run 06_train_mlp.py --compile                        # Inductor compiles forward and backward
    uv run 06_train_mlp.py --variant liger                  # Liger's GeGLU kernels, loaded as 03_kernels_mlp.py does
    uv run 06_train_mlp.py --variant fused                  # lesson 05's module, with its fused backward
    uv run 06_train_mlp.py --optimizer adamw                # and the optimizer step
"""

from trace_report.errors import UsageError, exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
import torch.nn.functional as F
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from trace_report.cli import DTYPE_NAMES
from profiling_in_pytorch.mlp import POST_SIZES, SimpleGeGLUMLP
from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP
from profiling_in_pytorch.mlp.fused import require_runnable as require_fused_runnable
from profiling_in_pytorch.mlp.liger import add_source_flags, require_runnable, resolve_liger_geglu_mlp
from profiling_in_pytorch.mlp.saved import saved_for_backward
from profiling_in_pytorch.mlp.simple import forward_elements
from profiling_in_pytorch import checks as ex

FORWARD, BACKWARD, OPTIMIZER = "mlp_fwd", "mlp_bwd", "optimizer_step"
VARIANTS = ("eager", "liger", "fused")
OPTIMIZERS = {"adamw": {}, "adamw-fused": {"fused": True}}  # torch.optim.AdamW's keyword arguments
FUSED_DTYPES = ("bf16", "fp16")


def require_valid(args):
    """The flags that do not go together, each one line (exit 2) before anything runs."""
    if args.compile and args.variant != "eager":
        raise UsageError(
            f"--compile compiles the post's eager module (the compiled variant); --variant {args.variant} brings its "
            "own kernels: drop one of the two"
        )
    if args.variant != "liger" and (args.kernel_source or args.kernel_repo):
        raise UsageError("--kernel_source and --kernel_repo pick Liger's layer: they go with --variant liger")
    if args.variant == "fused" and args.dtype not in (None, *FUSED_DTYPES):
        raise UsageError(f"--variant fused runs its Triton kernels in bf16 or fp16, not {args.dtype}")


def training_elements(batch, seq, dim, hidden, optimizer):
    """Elements a training step holds at its peak: a forward's (the weights, x, y, g, u, h, m), the weights'
    gradients (and AdamW's two moments per weight), the target, and the backward's dy, dm, dh, dg, du and dx."""
    tokens, weights = batch * seq, 3 * dim * hidden
    gradients_and_state = weights * (3 if optimizer else 1)
    return forward_elements(batch, seq, dim, hidden) + gradients_and_state + tokens * (3 * dim + 4 * hidden)


def saved_guess(args):
    """What the variant's code says its forward keeps for the backward: `SavedForBackward.describe()`'s form, and
    which tensors those are."""
    tokens, dim, hidden = args.batch * args.seq, args.dim, args.hidden
    x = f"x [{tokens}, {dim}]"
    if args.variant == "fused":
        return (f"{x} + [{tokens}, {2 * hidden}] + [{tokens}, {hidden}]",
                "x, the interleaved pre-activations g and u, and h for down_proj's weight gradient")
    if args.variant == "liger":
        return f"{x} + 3 × [{tokens}, {hidden}]", "x, Liger's gate and up, and h for down_proj"
    if args.compile:
        return f"{x} + 3 × [{tokens}, {hidden}]", "x, g, u and m; gelu(g) is recomputed in the fused backward"
    return f"{x} + 4 × [{tokens}, {hidden}]", "x once for both projections, g, gelu(g), u and m"


def expectations(args, device_type):
    """What one training step's trace shows, per variant. On a CPU the ATen ops stand in for kernels: aten::mm for a
    GEMM, aten::gelu_backward, Inductor's cpp_fused_... kernels; the backward runs on the calling thread there."""
    labels = (FORWARD, BACKWARD) + ((OPTIMIZER,) if args.optimizer else ())
    checks = [ex.profiler_steps(), ex.labels_per_step(*labels)]
    if args.variant == "fused":
        checks += [
            ex.phase_kernel_matching(
                FORWARD, r"^_geglu_gemm", text=f"in {FORWARD}: one gate/up GEMM with the GeGLU in its epilogue per step"
            ),
            ex.phase_kernels(FORWARD, {"GEMM": 2, "gelu": 0, "mul": 0}),  # that one and down_proj's
            ex.phase_kernel_matching(
                BACKWARD, r"^_geglu_backward",
                text=f"in {BACKWARD}: one dh GEMM with the GeGLU's derivative in its epilogue per step",
            ),
            ex.phase_kernels(BACKWARD, {"GEMM": 5, "gelu_backward": 0, "gelu": 0, "mul": 0}),  # that one and 4 more
        ]
    elif args.variant == "liger":
        checks += [
            ex.phase_kernel_matching(FORWARD, r"_geglu_tanh_forward_kernel"),
            ex.phase_kernels(FORWARD, {"GEMM": 3, "gelu": 0, "mul": 0}),
            ex.phase_kernel_matching(BACKWARD, r"_geglu_tanh_backward_kernel"),
            ex.phase_kernels(BACKWARD, {"GEMM": 6, "gelu_backward": 0, "mul": 0}),
        ]
    elif args.compile:
        checks += [
            ex.phase_kernels(FORWARD, {"GEMM": 3, "gelu": 0, "mul": 0}),
            ex.phase_fused_kernel(FORWARD, "gelu", "mul"),
            ex.phase_kernels(BACKWARD, {"GEMM": 6, "gelu_backward": 0, "mul": 0}),
            ex.phase_fused_kernel(BACKWARD, "gelu_backward", "mul"),
        ]
    else:
        checks += [
            ex.phase_kernels(FORWARD, {"GEMM": 3, "gelu": 1, "mul": 1}),
            ex.phase_kernels(BACKWARD, {"GEMM": 6, "gelu_backward": 1, "mul": 2, "add": 1}),
        ]
    checks.append(ex.backward_on_autograd_thread(BACKWARD))
    if args.optimizer == "adamw-fused":
        text = f"in {OPTIMIZER}: one aten::_fused_adamw_ updates the three weights, once per step"
        checks.append(ex.phase_ops(OPTIMIZER, r"^aten::_fused_adamw_$", 1, text=text))
    elif args.optimizer == "adamw" and device_type == "cuda":
        text = f"in {OPTIMIZER}: AdamW's default on a GPU, foreach: aten::_foreach_* ops, each over all three weights"
        checks.append(ex.phase_ops(OPTIMIZER, r"^aten::_foreach_", text=text))
    elif args.optimizer == "adamw":
        text = f"in {OPTIMIZER}: AdamW's default on a CPU, a loop over the weights: aten::addcdiv_ 3× per step"
        checks.append(ex.phase_ops(OPTIMIZER, r"^aten::addcdiv_$", 3, text=text))
    return checks


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument("--variant", choices=VARIANTS, default="eager",
                        help="the MLP: eager (the post's SimpleGeGLUMLP; with --compile, compiled), liger "
                        "(LigerGEGLUMLP) or fused (FusedGeGLUMLP, lesson 05's) (default: eager)")
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default=None,
                        help="add an optimizer step, torch.optim.AdamW: adamw (torch's default implementation) or "
                        "adamw-fused (fused=True) (default: none, forward and backward only)")
    add_source_flags(parser)
    args = parser.parse_args(argv)
    require_valid(args)
    sizes = [args.batch, args.seq, args.dim, args.hidden]

    # The trace's name says the variant when it is not the post's module, and the optimizer when there is one.
    liger = None
    if args.variant == "liger":
        with lesson.console.status("looking for LigerGEGLUMLP"):
            liger = resolve_liger_geglu_mlp(source=args.kernel_source, kernel_repo=args.kernel_repo)
    variant = {"eager": [], "liger": [f"liger-{liger.tag if liger else ''}"], "fused": ["fused"]}[args.variant]
    optimizer_tag = [args.optimizer] if args.optimizer else []
    labels = ", ".join([FORWARD, BACKWARD] + ([OPTIMIZER] if args.optimizer else []))
    name = {"eager": "SimpleGeGLUMLP", "liger": "LigerGEGLUMLP", "fused": "FusedGeGLUMLP"}[args.variant]
    name += ", compiled" if args.compile else ""
    run = lesson.setup(__file__, args, label=f"{name}: {labels}", tag=sizes + variant + optimizer_tag,
                       dtypes=FUSED_DTYPES if args.variant == "fused" else DTYPE_NAMES)
    if liger is not None:
        lesson.console.print(liger.describe(), soft_wrap=True, markup=False)
        require_runnable(liger, run.device)
    if args.variant == "fused":
        require_fused_runnable(*sizes, run.device)

    # Training holds the weights, their gradients, AdamW's state and the saved activations; the other variants add
    # an fp32 run of the same step for the check.
    checked = args.variant != "eager" or args.compile
    need = training_elements(*sizes, args.optimizer) * (run.dtype.itemsize + (4 if checked else 0))
    lesson.require_memory(run, need, "one training step" + (" and its fp32 check" if checked else ""))

    # The post's module and its input, made once. x requires grad: earlier layers would need its gradient.
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(args.dim, args.hidden).to(run.device, run.dtype)
    x = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype, requires_grad=True)
    target = torch.randn(args.batch, args.seq, args.dim, device=run.device, dtype=run.dtype)
    if args.variant == "liger":
        model = liger.build_holding(reference, args.dim, args.hidden).to(run.device, run.dtype)
    elif args.variant == "fused":
        model = FusedGeGLUMLP.from_module(reference)
        if not any(p.requires_grad for p in model.parameters()):
            raise UsageError("this FusedGeGLUMLP is forward-only (its parameters are frozen): it cannot train")
    elif args.compile:
        model = torch.compile(reference)
    else:
        model = reference

    # Another module than the post's must compute the same output and gradients: checked against fp32 first.
    trains_alike = True
    if model is not reference:
        dy = torch.randn_like(target)
        trains_alike = lesson.check_training(name, model, reference, x, dy)

    # One forward and backward first: it compiles both, tunes Triton's kernels and allocates cuBLAS's workspace, so
    # that neither the count below nor the profile pays for it.
    F.mse_loss(model(x), target).backward()
    model.zero_grad(set_to_none=True)
    x.grad = None
    lesson.synchronize(run.device)

    # What the forward keeps for the backward, counted as autograd saves it; on a GPU the allocator's view beside it.
    allocated_before = lesson.memory_allocated(run.device)
    out, saved = saved_for_backward(model, x, model)
    allocated = None
    if allocated_before is not None:
        allocated = lesson.memory_allocated(run.device) - allocated_before - out.untyped_storage().nbytes()
    del out
    lesson.check_saved(name, saved, *saved_guess(args), allocated=allocated)

    # AdamW makes its state (two moments per weight) in its first step: the profile's first, which it skips.
    optimizer = torch.optim.AdamW(model.parameters(), **OPTIMIZERS[args.optimizer]) if args.optimizer else None

    def step():
        # Fresh gradients every step, as a training loop's zero_grad: the backward writes them, adds to nothing.
        model.zero_grad(set_to_none=True)
        x.grad = None
        with record_function(FORWARD):
            loss = F.mse_loss(model(x), target)
        with record_function(BACKWARD):
            loss.backward()
        if optimizer is not None:
            with record_function(OPTIMIZER):
                optimizer.step()

    # Guess first, then look: what this training step's trace shows.
    expected = expectations(args, run.device.type)
    lesson.announce(expected, run, compiled_already=True)

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)

    # The profile, as the posts write it: five steps, the last three recorded, no synchronize inside.
    with profile(
        activities=run.activities,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
    ) as prof:
        for _ in range(5):
            step()
            prof.step()
    lesson.synchronize(run.device)

    lesson.save(prof, run, baseline)  # traces/06_train_mlp/<tag>.json, the op table <tag>.txt and a picture of a step <tag>.png
    lesson.check(expected, run)
    # Liger's and the fused module's steps compare with the post's module's, eager and compiled, at the same sizes.
    others = [] if args.variant == "eager" else [
        lesson.trace_of(run, "06_train_mlp", sizes + optimizer_tag, compiled=compiled) for compiled in (False, True)
    ]
    lesson.next_steps(run, compare_with=others)
    return 0 if trains_alike else 1  # the trace is written, but a module that computes something else fails


if __name__ == "__main__":
    raise SystemExit(main())
