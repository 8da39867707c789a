"""The FP8 MLP (lesson 10): the scaling maths in torch, our Triton FP8 kernels under the interpreter at tiny sizes,
the recipes' accuracy and what outlier tokens do to them, the checks that read an FP8 trace, the benchmark's FP8
rows, and the lesson on a CPU.

Triton picks its interpreter when it is imported, so the kernel cases run in one child process with
TRITON_INTERPRET=1 (`_interpreter_worker`); each test below checks one of its results. The interpreter's own cast
to e4m3 does not carry a rounded-up mantissa into the exponent: the kernels round in fp32 first under it
(`e4m3_rounded`), and these tests would see the difference.
"""

from __future__ import annotations

import importlib
import json
from types import SimpleNamespace

import pytest
import torch
from conftest import FIXTURES, interpreter_results_of, run_script, stderr_lines

from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.accuracy import relative_error
from profiling_in_pytorch.mlp.fp8_scaling import (
    E4M3_MAX,
    dequantize_blockwise,
    emulated_fp8_mlp,
    error_on_other_tokens,
    gelu_tanh_mul,
    quantize_blockwise,
    quantize_rowwise,
    quantize_tensorwise,
    quantize_tiles,
    with_outliers,
)

FP8_TOLERANCE = 0.08  # profiling_in_pytorch/lesson/fp8.py's; imported there with rich and the lesson plumbing


def _interpreter_worker() -> None:
    """Runs in the child process (TRITON_INTERPRET=1): every case, one JSON object on stdout."""
    from profiling_in_pytorch.mlp.fp8 import FusedFP8GeGLUMLP, _e4m3_interleave
    from profiling_in_pytorch.mlp.triton_ops.fp8_geglu import (
        fp8_blockscaled_gemm,
        fp8_geglu_gemm,
        group_size,
        quantize_rows,
    )
    from profiling_in_pytorch.mlp.triton_ops.geglu import interleave_gate_up

    results = {"group": group_size()}
    g = torch.Generator().manual_seed(0)
    # 37 tokens (partial row tiles of 16), K = 48 (three K steps), N = 80 (five groups of 16 columns); a zero token.
    m, k, n = 37, 48, 80
    x = torch.randn(m, k, generator=g).bfloat16()
    x[5] = 0
    xq, sx = quantize_rows(x)
    want_q, want_s = quantize_rowwise(x)
    results["rows"] = {"q_mismatch": int((xq.float() != want_q.float()).sum()),
                       "s_err": float((sx - want_s[:, 0]).abs().max()), "zero_row_finite": bool(sx.isfinite().all())}

    w_gate, w_up = torch.randn(n, k, generator=g) / 7, torch.randn(n, k, generator=g) / 7
    w_down = torch.randn(k, n, generator=g) / 9
    gq, sg = quantize_rowwise(w_gate)
    uq, su = quantize_rowwise(w_up)
    dq, sd = quantize_rowwise(w_down)
    mq, sm = fp8_geglu_gemm(xq, sx, _e4m3_interleave(gq, uq), interleave_gate_up(sg, su).reshape(-1).contiguous())
    x_deq = xq.float() * sx[:, None]
    m_ref = gelu_tanh_mul(x_deq @ (gq.float() * sg).T, x_deq @ (uq.float() * su).T)
    want_mq, want_sm = quantize_blockwise(m_ref, group_size())
    results["geglu"] = {"shape": list(mq.shape), "scales_shape": list(sm.shape),
                        "s_rel": float(((sm.T - want_sm).abs() / want_sm).max()),
                        "q_mismatch": int((mq.float() != want_mq.float()).sum()), "elements": mq.numel()}

    y = fp8_blockscaled_gemm(mq, sm, dq, sd.reshape(-1).contiguous())
    y_ref = dequantize_blockwise(mq, sm.T, group_size()) @ (dq.float() * sd).T
    results["down"] = {"rel": relative_error(y, y_ref), "dtype": str(y.dtype)}

    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(64, 256).bfloat16()
    fused = FusedFP8GeGLUMLP(reference)
    xs = torch.randn(2, 8, 64).bfloat16()
    with torch.no_grad():
        got, exact = fused(xs), SimpleGeGLUMLP(64, 256).float()
        exact.load_state_dict(reference.state_dict())
        want = exact(xs.float())
        emulated = emulated_fp8_mlp(xs.float(), *(w.float() for w in (reference.gate_proj.weight,
                                                                    reference.up_proj.weight,
                                                                    reference.down_proj.weight)), block=group_size())
    results["module"] = {"down": fused.down, "shape": list(got.shape), "dtype": str(got.dtype),
                         "rel": relative_error(got, want), "vs_emulated": relative_error(got, emulated)}
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreter_results():
    return interpreter_results_of("test_fp8_mlp")


# --- our kernels, under the interpreter -------------------------------------------------------------------


def test_row_quantizer_matches_the_torch_maths(interpreter_results):
    r = interpreter_results["rows"]
    assert r["q_mismatch"] == 0 and r["s_err"] == 0.0, r  # the same e4m3 values, bit for bit, and the same scales
    assert r["zero_row_finite"]  # an all-zero token gets a finite scale, not 0 / 0


def test_geglu_gemm_writes_m_in_e4m3_with_a_scale_per_row_and_group(interpreter_results):
    r = interpreter_results["geglu"]
    assert r["shape"] == [37, 80] and r["scales_shape"] == [80 // interpreter_results["group"], 37], r
    assert r["s_rel"] < 1e-5, r  # each group's amax, found in the epilogue
    # fp32 sums in another order can land a value on the other side of a rounding boundary, rarely
    assert r["q_mismatch"] <= 0.01 * r["elements"], r


def test_block_scaled_down_gemm_applies_each_blocks_scale(interpreter_results):
    r = interpreter_results["down"]
    assert r["dtype"] == "torch.bfloat16" and r["rel"] < 1e-2, r


def test_fused_fp8_module_matches_its_fp32_emulation_and_fp32(interpreter_results):
    r = interpreter_results["module"]
    assert r["down"] == "triton" and r["shape"] == [2, 8, 64] and r["dtype"] == "torch.bfloat16", r
    assert r["vs_emulated"] < 1e-2, r  # the kernels round where the emulation rounds
    assert r["rel"] <= FP8_TOLERANCE, r


# --- the scaling maths ----------------------------------------------------------------------------------


def test_rowwise_scale_maps_each_rows_amax_to_448():
    x = torch.randn(6, 40) * torch.logspace(-3, 3, 6)[:, None]  # rows six decades apart
    q, scale = quantize_rowwise(x)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (6, 1)
    assert torch.equal(q.float().abs().amax(dim=1), torch.full((6,), E4M3_MAX))
    back = q.float() * scale
    assert ((back - x).abs() <= x.abs() / 16 + scale * 2**-9).all()  # 3 mantissa bits: half an ulp, 1/16


def test_blockwise_and_tile_scales_cover_ragged_shapes():
    x = torch.randn(5, 300)
    q, scale = quantize_blockwise(x, 128)
    assert q.shape == (5, 300) and scale.shape == (5, 3)
    assert relative_error(dequantize_blockwise(q, scale, 128), x) < 0.05
    x[:, 256:] *= 1000  # the last group's values are its own: the first groups keep their precision
    q, scale = quantize_blockwise(x, 128)
    assert relative_error(dequantize_blockwise(q, scale, 128)[:, :256], x[:, :256]) < 0.05
    w = torch.randn(300, 200)
    q, scale = quantize_tiles(w, 128)
    assert q.shape == (300, 200) and scale.shape == (3, 2)
    assert scale[0, 0] == w[:128, :128].abs().amax() / E4M3_MAX


def _mlp_and_weights():
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(64, 256)
    return mlp, (mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach(), mlp.down_proj.weight.detach())


def test_fp8_error_is_e4m3s_not_bf16s():
    """Four tensors rounded to 3 mantissa bits in a chain: about 6% against fp32, far above bf16's 0.4%, within
    the 8% bound; a swapped weight is far outside it."""
    mlp, (w_gate, w_up, w_down) = _mlp_and_weights()
    x = torch.randn(64, 64)
    with torch.no_grad():
        want = mlp(x)
    error = relative_error(emulated_fp8_mlp(x, w_gate, w_up, w_down, block=64), want)
    assert 0.03 < error < FP8_TOLERANCE
    assert relative_error(emulated_fp8_mlp(x, w_up, w_gate, w_down, block=64), want) > 5 * FP8_TOLERANCE


def _tensorwise_forward(x, w_gate, w_up, w_down):
    """One scale per tensor; gate and up stacked into one weight (one GEMM), as ScaledMMGeGLUMLP holds them."""
    def rounded(t):
        q, scale = quantize_tensorwise(t)
        return q.float() * scale

    gate, up = (rounded(x) @ rounded(torch.cat([w_gate, w_up])).T).split(w_gate.shape[0], dim=-1)
    return rounded(gelu_tanh_mul(gate, up)) @ rounded(w_down).T


def test_outlier_tokens_break_a_tensorwise_scale_but_not_rowwise_or_blockwise():
    mlp, weights = _mlp_and_weights()
    x = with_outliers(torch.randn(64, 64))  # 4 tokens 100x larger
    with torch.no_grad():
        want = mlp(x)
    assert error_on_other_tokens(_tensorwise_forward(x, *weights), want) > 1.5 * FP8_TOLERANCE  # 0.155 measured
    assert error_on_other_tokens(emulated_fp8_mlp(x, *weights, block=64), want) < FP8_TOLERANCE


def test_scaled_mm_recipes_run_their_maths_on_a_cpu():
    from profiling_in_pytorch.mlp.fp8 import ScaledMMGeGLUMLP

    mlp, weights = _mlp_and_weights()
    x = torch.randn(2, 8, 64)
    with torch.no_grad():
        want = mlp(x)
        tensorwise = ScaledMMGeGLUMLP(mlp, "tensorwise")(x)
        rowwise = ScaledMMGeGLUMLP(mlp, "rowwise")(x)
    assert relative_error(tensorwise, _tensorwise_forward(x.view(16, 64), *weights).view(2, 8, 64)) < 1e-5
    assert relative_error(rowwise, want) < FP8_TOLERANCE and relative_error(tensorwise, want) < FP8_TOLERANCE
    with pytest.raises(ValueError):
        ScaledMMGeGLUMLP(mlp, "blockwise")


# --- reading an FP8 trace -------------------------------------------------------------------------------

# Kernels of one step of each recipe, as an H100 named them (torch 2.11, CUDA 13.0; docs/fp8.md).
FUSED_STEP = ["_quantize_rows_kernel", "_fp8_geglu_gemm_kernel",
              "nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_Ablk128_Bvec128_TNN"]
COMPILED_STEP = ["triton_per_fused__scaled_mm__to_copy_abs_amax_clamp_clamp_min_div_view_0",
                 "nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT",
                 "triton_red_fused__scaled_mm__to_copy_abs_amax_clamp_clamp_min_div_gelu_mul_split_1",
                 "nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT"]
EAGER_ACTIVATION = ["void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(...)>",
                    "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, "
                    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >"]


def _work(name):
    from trace_report.kernels import decode

    return SimpleNamespace(name=name, is_gemm=decode(name).is_gemm)


@pytest.mark.parametrize("step, gemms, scaling", [(FUSED_STEP, 2, 1), (COMPILED_STEP, 2, 2), (EAGER_ACTIVATION, 0, 0)])
def test_fp8_gemms_and_scaling_kernels_are_told_apart(step, gemms, scaling):
    from profiling_in_pytorch.checks.fp8 import is_fp8_gemm, is_scaling_kernel

    assert sum(is_fp8_gemm(name) for name in step) == gemms
    assert sum(is_scaling_kernel(_work(name)) for name in step) == scaling


# --- the benchmark's FP8 rows ---------------------------------------------------------------------------


def test_fp8_rows_are_judged_against_the_fp8_ceiling_and_goals():
    from profiling_in_pytorch.bench.goals import fp8_goal_lines
    from profiling_in_pytorch.bench.rows import Row, add_hardware_shares
    from profiling_in_pytorch.bench.shapes import Shape
    from profiling_in_pytorch.ceilings import Ceilings

    shape = Shape("post", 64, 128, 768, 3072)
    ceilings = Ceilings(800.0, 8192, 3000.0, 1 << 31).with_fp8_burst(1400.0)

    def row(variant, us, fp8):
        r = Row("post", 64, 128, 768, 3072, variant, fp8=fp8, time_us=us)
        r.tflops = shape.flops / (us * 1e6)
        return r

    rows = [row("fused", 172.0, False), row("fp8-rowwise-compile", 210.0, True), row("fused-fp8", 120.0, True)]
    add_hardware_shares(rows, [shape], ceilings, 2, train=False)
    assert rows[0].matmul_share == pytest.approx(rows[0].tflops / 800.0)
    assert rows[2].matmul_share == pytest.approx(rows[2].tflops / 1400.0)
    assert rows[2].roofline_share < 1  # its floor is at the FP8 rate, not bf16's
    lines = fp8_goal_lines(rows, "H100")
    assert "✓" in lines[1] and "1.43× fused bf16" in lines[1], lines
    rows[2].time_us = 150.0
    assert "✗" in fp8_goal_lines(rows, "H100")[1]


def test_fp8_variants_are_registered_and_skipped_without_a_gpu():
    import benchmark_mlp  # noqa: F401 - the registry

    fp8 = [v for v in benchmark_mlp.VARIANTS.values() if v.fp8]
    assert {v.name for v in fp8} >= {"fused-fp8", "fp8-rowwise", "fp8-rowwise-compile", "torchao-fp8-compile"}
    for variant in fp8:
        assert variant.tolerance == FP8_TOLERANCE and variant.inference_only
        assert variant.unavailable(torch.device("cpu"), torch.float32)


# --- the lesson on a CPU --------------------------------------------------------------------------------


def test_lesson_profiles_the_fused_recipes_maths_on_a_cpu(tmp_path):
    result = run_script("10_fp8_mlp.py", "--batch", "2", "--seq", "8", "--dim", "64", "--hidden", "256",
                        "--trace_dir", str(tmp_path), env={"TRITON_INTERPRET": "0"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert stderr_lines(result) == []
    assert "profiles the fused recipe's scaling maths in fp32" in result.stdout
    assert "✗" not in result.stdout.split("What we saw")[1]  # x's and m's amax, and the scaling ops, found
    assert "without the profiler: " in result.stdout
    assert '"unprofiled"' in (tmp_path / "10_fp8_mlp" / "fused_2_8_64_256_eager_fp32_cpu.json").read_text()[:4096]


def test_lesson_says_in_one_line_what_torchao_needs(tmp_path):
    result = run_script("10_fp8_mlp.py", "--variant", "torchao", "--batch", "2", "--seq", "8", "--dim", "64",
                        "--hidden", "256", "--trace_dir", str(tmp_path), env={"TRITON_INTERPRET": "0"})
    assert result.returncode == 2 and len(stderr_lines(result)) == 1, result.stderr
    assert "--variant rowwise" in result.stderr
    assert not (tmp_path / "10_fp8_mlp").exists() or not any((tmp_path / "10_fp8_mlp").iterdir())


# --- the lesson's checks on a real H100 trace (regenerate with `python3 10_fp8_mlp.py` on an H100) ---------

H100_FUSED = FIXTURES / "h100" / "traces" / "10_fp8_mlp" / "fused_64_128_768_3072_eager.json.gz"


def test_the_h100_trace_of_the_fused_recipe_shows_what_the_lesson_announces():
    from trace_report import read_trace

    lesson_10 = importlib.import_module("10_fp8_mlp")
    trace = read_trace(H100_FUSED)
    expected = lesson_10.expectations("fused", False, "cuda", "cublas-tiles", sizes=(64, 128, 768, 3072))
    seen = {e.title: e.check(trace) for e in expected}
    assert all(o.ok for o in seen.values()), {t: (o.evidence, o.reason) for t, o in seen.items() if not o.ok}
    rates = seen["2 GEMMs: gate/up + GeGLU 77.3 GFLOP, down 38.7 GFLOP: TFLOP/s and the share of this GPU's GEMM ceiling"]
    assert "(of 1,979 TFLOP/s, the datasheet)" in rates.evidence  # the H100's dense e4m3 rate
    # and what would be wrong: the Triton down GEMM announced, cuBLAS's found
    wrong = lesson_10.expectations("fused", False, "cuda", "triton")
    assert any(e.check(trace).ok is False for e in wrong if "down GEMM" in e.title)


def test_rounding_budget_splits_the_emulated_error_by_tensor():
    from profiling_in_pytorch.mlp.fp8_scaling import emulated_fp8_mlp, rounding_budget

    mlp, weights = _mlp_and_weights()
    x = torch.randn(2, 64, weights[0].shape[1], generator=torch.Generator().manual_seed(3))
    budget = rounding_budget(x, *weights)
    singles = [budget[k] for k in ("x", "W_gate, W_up", "m", "W_down")]
    assert all(0.005 < e < budget["all four"] for e in singles), budget
    # independent roundings add in quadrature: the four alone explain the whole within a fifth
    assert abs(sum(e * e for e in singles) ** 0.5 / budget["all four"] - 1) < 0.2, budget
    assert budget["all four"] == pytest.approx(relative_error(emulated_fp8_mlp(x, *weights).float(),
                                                              mlp.float()(x)), rel=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("down", [None, "triton"])
def test_fused_fp8_calls_after_the_first_launch_the_kept_kernels_and_replay_in_a_graph_on_gpu(down):
    from profiling_in_pytorch.mlp.fp8 import FusedFP8GeGLUMLP, fp8_unavailable

    if not torch.cuda.is_available() or fp8_unavailable(torch.device("cuda"), fused=True):
        pytest.skip("needs a GPU with FP8 tensor cores and TMA (sm_90+)")
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(768, 3072).to("cuda", torch.bfloat16)
    fused = FusedFP8GeGLUMLP(mlp, down=down)
    x = torch.randn(4, 256, 768, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        first = fused(x)  # tunes, compiles, keeps the three launches ready
        again = fused(x)
        other = torch.randn_like(x)
        error = relative_error(fused(other), mlp.float()(other.float()))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fused(x)
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(again, first) and torch.equal(captured, first)
    assert error <= 0.08


@pytest.mark.gpu
@pytest.mark.parametrize("hidden", [640, 1024])  # K / 128 = 5 (padded to 8 for cuBLAS) and 8 (no padding)
def test_cublas_reads_the_tile_scales_right_where_k_blocks_are_not_a_multiple_of_four_on_gpu(hidden):
    from profiling_in_pytorch.mlp.fp8 import (DOWN_AGREES, FusedFP8GeGLUMLP, cublas_blockwise_unavailable, down_error,
                                              fp8_unavailable)
    from profiling_in_pytorch.mlp.triton_ops.fp8_geglu import fp8_geglu_gemm, quantize_rows

    device = torch.device("cuda")
    if not torch.cuda.is_available() or fp8_unavailable(device, fused=True) or cublas_blockwise_unavailable(device):
        pytest.skip("needs a Hopper GPU with cuBLASLt's block scaling")
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(256, hidden).to("cuda", torch.bfloat16)
    with torch.no_grad():  # W_down's 128-column blocks 1x, 4x, 16x, 64x: a tile scale read from another block is far off
        blocks = torch.arange(hidden, device="cuda") // 128
        mlp.down_proj.weight.mul_((4.0 ** (blocks % 4)).to(torch.bfloat16))
    x = torch.randn(2, 128, 256, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        module = FusedFP8GeGLUMLP(mlp, down="cublas-tiles")
        tiles, kept = module(x).float(), module(x).float()  # step by step, then the kept forward
        triton = FusedFP8GeGLUMLP(mlp, down="triton")(x).float()
        error = relative_error(tiles, mlp.float()(x.float()))
        mq, sm = fp8_geglu_gemm(*quantize_rows(x.view(-1, 256)), module.w_gate_up, module.s_gate_up)
        args = [mq, sm, module.w_down, module.s_down, module.s_down_blocks, module.w_down_tiles, module.s_down_tiles,
                torch.bfloat16]
        right = down_error("cublas-tiles", *args)
        args[6] = module.s_down_tiles[:, : hidden // 128].contiguous()  # the scales unpadded, as torch checks them
        unpadded = down_error("cublas-tiles", *args)
    # the two down GEMMs differ only in how W_down was rounded (per tile, per channel), about 0.01 at this size
    assert relative_error(tiles, triton) < 3 * DOWN_AGREES
    assert torch.equal(kept, tiles) and error <= 0.08
    # the tuning's check: the padded scales agree with their own maths; unpadded, cuBLAS reads 5 blocks 8 apart
    assert right < DOWN_AGREES / 2
    assert unpadded > 10 * DOWN_AGREES if hidden % 512 else unpadded == right
