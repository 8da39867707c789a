"""Lesson 4d (Part 3): FlashAttention-2 from the Hugging Face Hub, no compiler, no SDPA.

Lesson 04_c reaches FlashAttention-2 through SDPA's flash backend. The kernel also lives on the Hub, built for
each torch and CUDA version, and the `kernels` library loads it exactly as Part 2 loaded Liger's MLP:

    flash = get_kernel("kernels-community/flash-attn2", version=3)
    out = flash.flash_attn_func(q, k, v, causal=True)

`flash_attn_func` takes [batch, seq, heads, head_dim] inputs: seq and heads swapped against SDPA's layout, which
is the layout the kernel reads, so no transpose is needed on the way in. The post lists this script without
reading its trace; what to look for, per step under `flash_kernel_fwd`: one `flash_fwd_kernel`, the same
algorithm (and, built from the same source, the same tile and warps) as 04_c's `pytorch_flash::flash_fwd_kernel`.

    uv run 04_d_kernels_attention.py                                # the Hub, as in the post
    uv run 04_d_kernels_attention.py --kernel_repo ./flash-attn2    # a local kernel repository
    uv run 04_d_kernels_attention.py --kernel_source torch          # torch's own FlashAttention-2

Without `--kernel_source`, the sources are tried in order: `--kernel_repo`, `LOCAL_KERNELS`
(`kernels-community/flash-attn2=PATH`), the Hub (its cache when offline), and, when the Hub cannot give the
kernel, torch's FlashAttention-2 behind SDPA's flash backend, called with flash_attn_func's layout. One line says
which source ran and why; the source is part of the trace's name. Before profiling, the output is checked
against the naive attention run in fp32 on the same inputs. Run `04_c_sdpa_attention.py --backend flash` with
the same sizes first: one check compares with its trace.

Without a GPU only torch's source runs (the Hub's build is CUDA code): SDPA's flash backend is then torch's CPU
kernel, `_scaled_dot_product_flash_attention_for_cpu`, one op per forward. Kernel names, occupancy and GPU time
only a GPU shows.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.attention import POST_SIZES, NaiveCausalAttention, forward_bytes
from profiling_in_pytorch.attention.flash_kernel import SOURCES, output_of, require_runnable, resolve_flash_attn
from profiling_in_pytorch.lesson import attention as lesson_attention
from profiling_in_pytorch.checks import (
    attention as ac,
    attention_sdpa as sx,
    attention_occupancy as oc,
)
from profiling_in_pytorch import checks as ex

LABEL = "flash_kernel_fwd"


def expectations(source, device_type, sdpa_flash):
    """What this run's trace should show. The post reads no trace of this script: these are the suite's guesses,
    from what Part 3 says of FlashAttention-2 behind SDPA (P3-10, P3-11); `sdpa_flash` is 04_c's flash-backend
    trace of the same sizes. A local repository may hold anything: we guess only the steps there."""
    checks = [ex.profiler_steps()]
    if source == "local":
        return checks
    if device_type != "cuda":  # torch's source: SDPA's flash backend is a CPU kernel here
        return checks + [
            sx.backend_ran(LABEL, "flash", "torch's flash attention stands in for the Hub's kernel"),
            ac.operations_per_forward(LABEL, 1),
        ]
    return checks + [
        sx.one_attention_kernel(LABEL, "flash", "one FlashAttention-2 kernel per forward, flash_fwd_kernel (as P3-10 says of SDPA's)"),
        ac.operations_per_forward(LABEL, 1),
        oc.heavy_blocks(LABEL),
        sx.same_kernel_family_as(sdpa_flash, LABEL, "sdpa_fwd", missing="run 04_c_sdpa_attention.py --backend flash with the same sizes first"),
    ]


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument(
        "--kernel_source", choices=SOURCES, default=None,
        help="where flash_attn_func comes from (default: --kernel_repo, LOCAL_KERNELS, the Hub, then torch's own "
        "FlashAttention-2 if the Hub cannot give it)",
    )
    parser.add_argument(
        "--kernel_repo", metavar="PATH", default=None,
        help="a local kernel repository (build/<variant>/metadata.json + package), loaded through kernels",
    )
    args = parser.parse_args(argv)
    sizes = [args.batch, args.heads, args.seq, args.head_dim]

    # Find the kernel first, and say where from: the source is part of the trace's name.
    with lesson.console.status("looking for flash_attn_func"):
        flash = resolve_flash_attn(source=args.kernel_source, kernel_repo=args.kernel_repo)
    run = lesson.setup(__file__, args, label=LABEL, tag=sizes + [flash.tag, "flashattn"])
    lesson.console.print(flash.describe(), soft_wrap=True, markup=False)

    # The inputs, made once, in flash_attn_func's layout: [batch, seq, heads, head_dim]. Beside them, the check's
    # fp32 naive attention holds two [batch, heads, seq, seq] fp32 tensors.
    lesson.require_memory(run, forward_bytes(*sizes, itemsize=4, scores=2), "q, k, v and the fp32 check")
    torch.manual_seed(0)
    q = torch.randn(args.batch, args.seq, args.heads, args.head_dim, device=run.device, dtype=run.dtype)
    k = torch.randn(args.batch, args.seq, args.heads, args.head_dim, device=run.device, dtype=run.dtype)
    v = torch.randn(args.batch, args.seq, args.heads, args.head_dim, device=run.device, dtype=run.dtype)
    require_runnable(flash, q)  # one line and exit 2 if this kernel cannot run here

    # Does it compute the post's attention? Against NaiveCausalAttention in fp32, on the same inputs.
    mask = torch.triu(torch.ones(args.seq, args.seq, device=run.device, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        reference = NaiveCausalAttention(args.head_dim)(*(t.transpose(1, 2).float() for t in (q, k, v)), mask)
        got = output_of(flash.flash_attn_func(q, k, v, causal=True))
    outputs_agree = lesson_attention.check_attention_output("flash_attn_func", got, reference.transpose(1, 2), run.dtype)
    del reference, got, mask
    flash_attn_func = torch.compile(flash.flash_attn_func) if args.compile else flash.flash_attn_func

    def step():
        with torch.no_grad(), record_function(LABEL):
            return flash_attn_func(q, k, v, causal=True)

    # Guess first, then look. One guess compares with 04_c's flash backend of the same sizes.
    sdpa_flash = lesson.trace_of(run, "04_c_sdpa_attention", sizes + ["flash"], compiled=args.compile)
    expected = expectations(flash.source, run.device.type, sdpa_flash)
    lesson.announce(expected, run, compiled_already=True)  # the timing below compiles, if anything does

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)

    # The profile, as the post writes it: five steps, the last three recorded, no synchronize inside.
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

    lesson.save(prof, run, baseline)  # traces/04_d_kernels_attention/<tag>.json and the op table beside it, <tag>.txt
    lesson.check(expected, run)
    lesson.next_steps(run, compare_with=[sdpa_flash])
    return 0 if outputs_agree else 1  # the trace is written, but a kernel that computes something else fails


if __name__ == "__main__":
    raise SystemExit(main())
