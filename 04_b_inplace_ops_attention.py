"""Lesson 4b (Part 3): the same attention with the mask applied in place: one line, one copy less.

Lesson 04_a's trace has six GPU operations per forward where five were guessed: out-of-place `masked_fill`
copies the [batch, heads, seq, seq] scores before filling them. Here that line becomes `scores.masked_fill_(mask,
-inf)`, which writes -inf into the scores themselves. The trace has five GPU operations per forward, the
`Memcpy DtoD` is gone, and in the CPU lane the masking step is one `aten::masked_fill_` where 04_a's wrapped
`aten::clone`, `aten::empty_like`, `aten::copy_` and more. It also saves the copy's memory (268 MB at the post's
shape). In place is safe here only because nothing needs the unmasked scores afterwards: the forward runs under
`torch.no_grad()`, so autograd keeps nothing for a backward. Run 04_a first with the same sizes: one check and the
diff compare with its trace.

    uv run 04_a_naive_attention.py && uv run 04_b_inplace_ops_attention.py
    uv run 04_b_inplace_ops_attention.py --compile

The module, as the post changes it (it lives in profiling_in_pytorch/attention/naive.py beside 04_a's, whose
`__init__` it keeps: `self.scale = 1.0 / math.sqrt(head_dim)`; a test keeps this copy identical):

    class InPlaceCausalAttention(NaiveCausalAttention):
        def forward(self, q, k, v, mask):
            # q, k, v: [batch, heads, seq, head_dim]
            scores = torch.matmul(q, k.transpose(-2, -1))  # [batch, heads, seq, seq]
            scores = torch.mul(scores, self.scale)
            scores.masked_fill_(mask, float("-inf"))  # in place: no copy of the scores
            attn = torch.softmax(scores, dim=-1)
            out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]
            return out

Without a GPU the CPU shows the same difference in its ops: no `aten::clone`, no `aten::copy_` in the masking step.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.attention import POST_SIZES, InPlaceCausalAttention, forward_bytes
from profiling_in_pytorch.checks import attention as ac, attention_naive as na
from profiling_in_pytorch import checks as ex

LABEL = "attn_fwd"


def expectations(args, naive):
    """Part 3's claims for the in-place forward that this run's trace can show (numbered as in docs/claims.md);
    `naive` is 04_a's trace of the same sizes, compared with when it exists."""
    checks = [ex.profiler_steps()]
    if args.compile:  # the post profiles eager runs; compiled, we guess what Inductor does with the forward
        return checks + [
            ex.compiled_region_rows(),
            na.inductor_fuses(LABEL, ("mul", "masked_fill", "_softmax")),
            na.no_copy(LABEL),
        ]
    return checks + [
        na.forward_ops(LABEL, ("aten::matmul", "aten::mul", "aten::masked_fill_", "aten::softmax", "aten::matmul"), claim="P3-01"),
        na.operations_in_order(LABEL, ("GEMM", "mul", "masked_fill", "softmax", "GEMM"), claim="P3-03"),
        na.masking_step_against(naive, LABEL, missing="run 04_a_naive_attention.py with the same sizes first", claim="P3-03"),
        ac.operations_per_forward(LABEL, 5, claim="P3-17"),
    ]


@exits_cleanly
def main(argv=None):
    parser = lesson.parser(__file__, __doc__, **POST_SIZES)
    parser.add_argument(
        "--record_shapes", action="store_true", help="record each op's input shapes (where fusion would pay); costs CPU time per op"
    )
    args = parser.parse_args(argv)
    sizes = [args.batch, args.heads, args.seq, args.head_dim]
    tag = sizes + (["shapes"] if args.record_shapes else [])
    run = lesson.setup(__file__, args, label=LABEL, tag=tag)

    # The inputs, made once: q, k, v as [batch, heads, seq, head_dim]. The scores and their softmax are the
    # forward's peak: two [batch, heads, seq, seq] tensors.
    lesson.require_memory(run, forward_bytes(*sizes, itemsize=run.dtype.itemsize, scores=2), "q, k, v, the scores and their softmax")
    torch.manual_seed(0)
    q = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    k = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    v = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    # The causal mask, built once, outside the forward: True above the diagonal, where a token would see later ones.
    mask = torch.triu(torch.ones(args.seq, args.seq, device=run.device, dtype=torch.bool), diagonal=1)
    attention = InPlaceCausalAttention(args.head_dim).to(run.device, run.dtype).eval()
    if args.compile:
        attention = torch.compile(attention)

    def step():
        with torch.no_grad(), record_function(LABEL):
            return attention(q, k, v, mask)

    # Guess first, then look: what Part 3 says this trace shows. One claim compares with 04_a's trace.
    naive = lesson.trace_of(run, "04_a_naive_attention", tag, compiled=args.compile)
    expected = expectations(args, naive)
    lesson.announce(expected, run, compiled_already=True)  # the timing below compiles, if anything does

    # The step without the profiler first: what the profiled figures are read against (lesson/unprofiled.py).
    baseline = lesson.time_unprofiled(step, run)

    # The profile, as the post writes it: five steps, the last three recorded, no synchronize inside.
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

    lesson.save(prof, run, baseline)  # traces/04_b_inplace_ops_attention/<tag>.json and the op table beside it, <tag>.txt
    lesson.check(expected, run)
    if args.record_shapes:  # with shapes, trace-report can weigh each op's bytes
        lesson.fusion_candidates(run)  # the first rows of its "Where fusion would pay"
    # 04_a's trace (the Memcpy this one lacks) and 04_c's math backend (the one-liner's 20 kernels), when they exist.
    math = lesson.trace_of(run, "04_c_sdpa_attention", sizes + ["math"], compiled=args.compile)
    lesson.next_steps(run, compare_with=[naive, math])


if __name__ == "__main__":
    main()
