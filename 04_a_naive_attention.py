"""Lesson 4a (Part 3): causal attention written out, one op per line, and a copy nobody asked for.

Part 3 starts where every attention implementation starts: the formula, softmax(q·kᵀ / √d + mask)·v, one
PyTorch call per step. Guess first: a GEMM for the scores, a mul for the scale, a masking kernel, a softmax, a GEMM
for the weighted sum of v. Five kernels. The trace shows six GPU operations per forward: between the mul and the
masking kernel sits a `Memcpy DtoD`. `scores.masked_fill(mask, -inf)` is out of place: it returns a new tensor,
so it copies the [batch, heads, seq, seq] scores first (268 MB in bf16 at the post's shape) and fills the copy.
In the CPU lane the copy is `aten::masked_fill` → `aten::clone` → `aten::copy_`. Lesson 04_b changes one line and
the copy is gone; lesson 04_c replaces the whole forward with one call.

    uv run 04_a_naive_attention.py                  # the post's shape: 8 × 16 heads × 1024 tokens × 64
    uv run 04_a_naive_attention.py --compile        # Inductor fuses scale, mask and softmax; no copy

The module, as the post writes it (it lives in profiling_in_pytorch/attention/naive.py, where lesson 04_d and the
tests import it; a test keeps this copy identical):

    class NaiveCausalAttention(nn.Module):
        def __init__(self, head_dim):
            super().__init__()
            self.scale = 1.0 / math.sqrt(head_dim)

        def forward(self, q, k, v, mask):
            # q, k, v: [batch, heads, seq, head_dim]
            scores = torch.matmul(q, k.transpose(-2, -1))  # [batch, heads, seq, seq]
            scores = torch.mul(scores, self.scale)
            scores = scores.masked_fill(mask, float("-inf"))
            attn = torch.softmax(scores, dim=-1)
            out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]
            return out

Without a GPU the same forward runs on the CPU: the copy is there too, as CPU ops, and the ops that compute
(`aten::bmm`, `aten::mul`, `aten::copy_`, `aten::masked_fill_`, `aten::_softmax`) stand in for the kernels.
Kernel names, memcpys and GPU time only a GPU shows.
"""

from trace_report.errors import exits_cleanly  # isort: skip  (first: Ctrl-C while torch loads is one line)
import torch
from torch.profiler import profile, record_function, schedule

from profiling_in_pytorch import lesson
from profiling_in_pytorch.attention import POST_SIZES, NaiveCausalAttention, forward_bytes
from profiling_in_pytorch.checks import attention as ac, attention_naive as na
from profiling_in_pytorch import checks as ex

LABEL = "attn_fwd"


def expectations(args):
    """Part 3's claims for the naive forward that this run's trace can show (numbered as in docs/claims.md)."""
    checks = [ex.profiler_steps()]
    if args.compile:  # the post profiles eager runs; compiled, we guess what Inductor does with the forward
        return checks + [
            ex.compiled_region_rows(),
            na.inductor_fuses(LABEL, ("mul", "masked_fill", "_softmax")),
            na.no_copy(LABEL),
        ]
    return checks + [
        na.forward_ops(LABEL, ("aten::matmul", "aten::mul", "aten::masked_fill", "aten::softmax", "aten::matmul"), claim="P3-01"),
        na.operations_in_order(LABEL, ("GEMM", "mul", "copy", "masked_fill", "softmax", "GEMM"), claim="P3-02"),
        na.copy_inside_masked_fill(LABEL, claim="P3-02"),
        ac.operations_per_forward(LABEL, 6, claim="P3-17"),
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

    # The inputs, made once: q, k, v as [batch, heads, seq, head_dim]. The scores and their masked copy are the
    # forward's peak: two [batch, heads, seq, seq] tensors.
    lesson.require_memory(run, forward_bytes(*sizes, itemsize=run.dtype.itemsize, scores=2), "q, k, v, the scores and their copy")
    torch.manual_seed(0)
    q = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    k = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    v = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=run.device, dtype=run.dtype)
    # The causal mask, built once, outside the forward: True above the diagonal, where a token would see later ones.
    mask = torch.triu(torch.ones(args.seq, args.seq, device=run.device, dtype=torch.bool), diagonal=1)
    attention = NaiveCausalAttention(args.head_dim).to(run.device, run.dtype).eval()
    if args.compile:
        attention = torch.compile(attention)

    def step():
        with torch.no_grad(), record_function(LABEL):
            return attention(q, k, v, mask)

    # Guess first, then look: what Part 3 says this trace shows.
    expected = expectations(args)
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

    lesson.save(prof, run, baseline)  # traces/04_a_naive_attention/<tag>.json and the op table beside it, <tag>.txt
    lesson.check(expected, run)
    if args.record_shapes:  # with shapes, trace-report can weigh each op's bytes
        lesson.fusion_candidates(run)  # the first rows of its "Where fusion would pay"
    # Lesson 04_b's trace of the same sizes, when it exists: the diff shows the Memcpy gone.
    lesson.next_steps(run, compare_with=[lesson.trace_of(run, "04_b_inplace_ops_attention", tag, compiled=args.compile)])


if __name__ == "__main__":
    main()
