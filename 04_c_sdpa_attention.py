"""Lesson 4c (Part 3): `F.scaled_dot_product_attention`, one call, and the backends behind it.

Lessons 04_a and 04_b write attention out op by op. PyTorch has it as one call, SDPA, with `is_causal=True`
instead of a mask. One call is not one implementation: SDPA picks a backend, and `sdpa_kernel(backend)` pins it.
The post profiles each backend in turn:

- math: SDPA's reference decomposition. 20 kernels per forward against 04_b's 5, ~3.7× its GPU time on the
  post's A100: it computes in fp32 (its GEMMs are FP32 CUDA-core kernels, `sgemm`-style, where 04_b's use 16-bit
  tensor cores), rebuilds the causal mask on every call (`aten::ones` → `aten::tril`, `aten::where`) and calls
  `aten::_safe_softmax`, whose guard keeps a fully masked row at 0 instead of NaN.
- efficient: one kernel, `fmha_cutlassF_bf16_aligned_64x64_rf_sm80`, xformers' CUTLASS attention.
- flash: one kernel, `pytorch_flash::flash_fwd_kernel`, FlashAttention-2: it walks k and v in tiles with an online
  softmax and never writes the [seq, seq] scores to memory. Each block is heavy (255 registers × 128 threads), so
  few fit on an SM: its estimated occupancy is ~13%, by design.
- cudnn: one generated kernel (`cudnn_generated_fort_native_sdpa_..._flash_fprop_...`), no `aten::transpose` on
  the CPU lane, launched through the driver API (`cuLaunchKernelEx`), for which CUPTI reports 0% occupancy.

With one kernel per forward the GPU's time drops by 10-50×, and the CPU's time per forward is now of the same
order: the cost moved to the CPU, where cuDNN spends the most, in its own op. After the checks, when other
backends' traces of the same sizes exist, a table puts them side by side (the post's per-backend numbers).

    uv run 04_c_sdpa_attention.py --backend math        # the post runs each backend in turn
    uv run 04_c_sdpa_attention.py --backend flash
    uv run 04_c_sdpa_attention.py --backend efficient
    uv run 04_c_sdpa_attention.py --backend cudnn
    uv run 04_c_sdpa_attention.py                       # --backend auto: no sdpa_kernel, SDPA chooses

The default is `auto`: the post's command lines name a backend each time, so a default only decides what a bare run
shows, and the call a model makes never pins one. Which backend ran is read from the kernel's name in the trace,
and printed before profiling as torch itself answers it (an H200 with torch 2.11 picks cuDNN). Run 04_b with the
same sizes first: the math backend's checks compare with its trace.

The post's table of backends, and its call (they live in profiling_in_pytorch/attention/sdpa.py; a test keeps this
copy identical):

    backends = {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
    }

    def attention(q, k, v):
        # is_causal=True: SDPA applies the causal mask itself; we never build a [seq, seq] mask
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

Without a GPU SDPA has two backends: math, and flash as torch's own CPU kernel
(`_scaled_dot_product_flash_attention_for_cpu`: tiles and an online softmax in C++); efficient and cudnn exit with
one line. A CPU shows math's decomposition (the mask rebuilt, `_safe_softmax`) and one op for flash; kernel names,
occupancy, launch calls and GPU time only a GPU shows.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.nn.attention import sdpa_kernel
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.attention import POST_SIZES, forward_bytes, sdpa
from profiling_in_pytorch.attention.sdpa import attention, backends
from profiling_in_pytorch.lesson import attention as lesson_attention
from profiling_in_pytorch.checks import (
    attention as ac,
    attention_sdpa as sx,
    attention_occupancy as oc,
)
from profiling_in_pytorch import checks as ex

LABEL = "sdpa_fwd"
SCRIPT = "04_c_sdpa_attention"


def expectations(args, runs, why, paths):
    """Part 3's claims for the backend that runs (pinned, or SDPA's own choice), numbered as in docs/claims.md.

    runs: the backend expected to run; why: why that one; paths: this lesson's traces of the same sizes by backend,
    and 04_b's ("in-place"), compared with when they exist."""
    missing = "run 04_b_inplace_ops_attention.py with the same sizes first"
    checks = [ex.profiler_steps()]
    if runs in ac.FUSED or not args.compile:
        checks.append(sx.backend_ran(LABEL, runs, why, claim="P3-16" if args.backend == sdpa.AUTO else ""))
    if args.compile:  # the post profiles eager runs; compiled, the fused backends keep their one kernel
        checks.append(ex.compiled_region_rows())
        if runs in ac.FUSED:
            checks.append(sx.one_attention_kernel(LABEL, runs, f"one {runs} attention kernel per forward, compiled too"))
        return checks
    if runs == "math":
        inplace = paths["in-place"]
        return checks + [
            sx.gpu_time_against(inplace, LABEL, "attn_fwd", at_least=2.0, missing=missing, claim="P3-04"),
            ac.operations_per_forward(LABEL, 20, cpu_reason=sx.CPU_MATH_COUNT, claim="P3-05"),
            sx.more_operations_than(inplace, LABEL, "attn_fwd", missing=missing, claim="P3-05"),
            sx.gemms_on(LABEL, "CUDA cores", "the GEMMs run in fp32 on CUDA cores (ffma, sgemm): the math backend upcasts", claim="P3-06"),
            sx.gemms_against(inplace, LABEL, "attn_fwd", "tensor cores", missing=missing, claim="P3-06"),
            sx.mask_rebuilt(LABEL, claim="P3-07"),
            sx.safe_softmax(LABEL, claim="P3-08"),
        ]
    if runs == "efficient":
        checks += [
            sx.one_attention_kernel(LABEL, "efficient", "one kernel per forward, fmha_cutlassF_bf16_aligned_64x64_rf_sm80 (xformers' CUTLASS attention)", claim="P3-09"),
            sx.transposes(LABEL, 4, claim="P3-13"),
        ]
    elif runs == "flash":
        checks += [
            sx.one_attention_kernel(LABEL, "flash", "one kernel per forward, pytorch_flash::flash_fwd_kernel (FlashAttention-2)", claim="P3-10"),
            oc.heavy_blocks(LABEL, claim="P3-11"),
            sx.transposes(LABEL, 4, cpu_reason=sx.CPU_FLASH_TRANSPOSES, claim="P3-13"),
        ]
    elif runs == "cudnn":
        checks += [
            sx.one_attention_kernel(LABEL, "cudnn", "one generated cuDNN kernel per forward, cudnn_generated_..._sdpa_..._flash_fprop_...", claim="P3-12"),
            sx.transposes(LABEL, 0, claim="P3-13"),
            sx.own_op_allocates_and_launches(LABEL, "aten::_cudnn_attention_forward", claim="P3-13"),
            sx.launched_through(LABEL, "cuLaunchKernelEx", claim="P3-14"),
            oc.occupancy_gap(LABEL, claim="P3-15"),
            sx.own_op_costs_most_cpu(LABEL, "aten::_cudnn_attention_forward", claim="P3-16"),
        ]
    checks.append(ac.operations_per_forward(LABEL, 1, claim="P3-17"))
    fused = {backend: paths[backend] for backend in ac.FUSED}
    missing_backend = lambda backend: f"run {SCRIPT}.py --backend {backend} with the same sizes first"  # noqa: E731
    checks += [
        sx.fastest_on_gpu(LABEL, fused, "flash", missing_backend, claim="P3-16"),
        sx.most_cpu_in_own_op(LABEL, fused, "cudnn", missing_backend, claim="P3-16"),
    ]
    if runs == "cudnn":
        checks.append(sx.pinning_costs_cpu(LABEL, paths["cudnn"], paths[sdpa.AUTO], missing_backend, claim="P3-16"))
    return checks


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument(
        "--backend", choices=sdpa.CHOICES, default=sdpa.AUTO,
        help="the SDPA backend to pin with sdpa_kernel (default: auto, no pin: SDPA chooses, as in a model)",
    )
    args = parser.parse_args(argv)
    sizes = [args.batch, args.heads, args.seq, args.head_dim]
    run = lesson.setup(__file__, args, label=LABEL, tag=sizes + [args.backend])

    # The inputs, made once: q, k, v as [batch, heads, seq, head_dim]. The math backend holds the scores in fp32
    # (three [batch, heads, seq, seq] tensors at its peak); the fused backends never write them.
    scores = 3 if args.backend in ("math", sdpa.AUTO) else 0
    lesson.require_memory(run, forward_bytes(*sizes, itemsize=run.dtype.itemsize, scores=scores, score_itemsize=4), "q, k, v and the forward")
    torch.manual_seed(0)
    q = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    k = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    v = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    sdpa.require_backend(args.backend, q)  # one line and exit 2 if this machine cannot run it

    # Which backend will run: the pinned one, or the one SDPA picks for these inputs here (torch answers it).
    if args.backend == sdpa.AUTO:
        runs = sdpa.chosen_backend(q, k, v)
        why = f"SDPA's own choice here: {sdpa.why_chosen(runs, run.device)}"
        lesson.console.print(f"backend: auto, no sdpa_kernel · torch says SDPA will run {runs}: {sdpa.why_chosen(runs, run.device)}", soft_wrap=True)
    else:
        runs, why = args.backend, f"pinned with sdpa_kernel({backends[args.backend]})"
    fwd = torch.compile(attention) if args.compile else attention

    def step():
        with torch.no_grad(), record_function(LABEL):
            if args.backend == sdpa.AUTO:
                return fwd(q, k, v)
            with sdpa_kernel(backends[args.backend]):
                return fwd(q, k, v)

    # Guess first, then look: what Part 3 says this backend's trace shows. Some claims compare with 04_b's trace
    # and with the other backends' traces of the same sizes.
    paths = {backend: lesson.trace_of(run, SCRIPT, sizes + [backend], compiled=args.compile) for backend in sdpa.CHOICES}
    paths["in-place"] = lesson.trace_of(run, "04_b_inplace_ops_attention", sizes, compiled=args.compile)
    expected = expectations(args, runs, why, paths)
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

    lesson.save(prof, run, baseline)  # traces/04_c_sdpa_attention/<tag>.json and the op table beside it, <tag>.txt
    lesson.check(expected, run)
    naive = lesson.trace_of(run, "04_a_naive_attention", sizes, compiled=args.compile)
    variants = {"naive (04_a)": (naive, "attn_fwd"), "in-place (04_b)": (paths["in-place"], "attn_fwd")}
    variants.update({f"sdpa {backend}": (paths[backend], LABEL) for backend in sdpa.CHOICES})
    lesson_attention.print_side_by_side(variants, run.trace_path)
    others = [paths["in-place"]] if args.backend == "math" else [paths[b] for b in sdpa.CHOICES if b not in ("math", args.backend)]
    lesson.next_steps(run, compare_with=others)


if __name__ == "__main__":
    main()
