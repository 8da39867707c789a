"""The fused GeGLU GEMM and FusedGeGLUMLP: correct on the CPU through Triton's interpreter, on the GPU at the
benchmark's shapes, and the lesson's behaviour without a GPU.

Triton picks its interpreter when it is imported, so the interpreter cases run in one child process with
TRITON_INTERPRET=1 (`_interpreter_results`); each test below checks one of its results.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import interpreter_results_of, load_trace, requires_cuda, run_script, stderr_lines

from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.accuracy import check_output, relative_error

# (tokens, hidden K, intermediate N): one token; K and N odd (no TMA: rows not 16-byte aligned); K = 40 with
# BLOCK_K 16 (a partial K tile) and M = 37 (partial row tiles); tiles that fit exactly; 9 tiles over the 2
# persistent programs the interpreter launches.
GEMM_SHAPES = [(1, 24, 40), (5, 33, 17), (37, 40, 48), (16, 64, 64), (3, 7, 5), (40, 48, 56)]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _reference_h(x, w_gate, w_up):
    x, w_gate, w_up = x.double(), w_gate.double(), w_up.double()
    return F.gelu(x @ w_gate.T, approximate="tanh") * (x @ w_up.T)


def _interpreter_worker() -> None:
    """Runs in the child process (TRITON_INTERPRET=1): every case, one JSON object on stdout."""
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP
    from profiling_in_pytorch.mlp.triton_ops import geglu_gemm, interleave_gate_up, uses_tma

    results = {}
    for dtype_name, dtype in DTYPES.items():
        for m, k, n in GEMM_SHAPES:
            g = torch.Generator().manual_seed(m * 1000 + k * 10 + n)
            x = torch.randn(m, k, generator=g).to(dtype)
            w_gate = (torch.randn(n, k, generator=g) / math.sqrt(k)).to(dtype)
            w_up = (torch.randn(n, k, generator=g) / math.sqrt(k)).to(dtype)
            w = interleave_gate_up(w_gate, w_up)
            want = _reference_h(x, w_gate, w_up)
            # the eager module's way: each GEMM rounded to the dtype, then gelu and mul in the dtype
            eager = F.gelu(x @ w_gate.T, approximate="tanh") * (x @ w_up.T)
            for kernel, use_tma in (("tma", True), ("pointer", False)):
                if use_tma and not uses_tma(x, w):
                    continue
                out = torch.full((m, n), float("nan"), dtype=dtype)  # every element must be written
                geglu_gemm(x, w, out=out, use_tma=use_tma)
                results[f"gemm/{kernel}/{dtype_name}/{m}x{k}x{n}"] = {
                    "nan": bool(out.isnan().any()),
                    "ok": check_output(out, want, dtype).ok,
                    "rel": relative_error(out, want),
                    "eager_rel": relative_error(eager, want),
                }
        torch.manual_seed(0)
        reference = SimpleGeGLUMLP(40, 24).to(dtype)
        fused = FusedGeGLUMLP.from_module(reference)
        x = torch.randn(2, 3, 40, dtype=dtype)
        exact = SimpleGeGLUMLP(40, 24)
        exact.load_state_dict(reference.state_dict())
        with torch.inference_mode():
            y, want, eager = fused(x), exact(x.float()), reference(x)
        results[f"module/{dtype_name}"] = {
            "ok": check_output(y, want, dtype).ok,
            "shape": list(y.shape),
            "dtype": str(y.dtype),
            "rel": relative_error(y, want),
            "eager_rel": relative_error(eager, want),
        }
        # Calls after the first launch through the kept ReadyLaunch (launch.py): the same output for the same x,
        # and for another x what a launch that bypasses it (use_tma pinned) computes.
        from profiling_in_pytorch.mlp.triton_ops import geglu as ops

        with torch.inference_mode():
            y_again = fused(x)
            x_other = torch.randn_like(x)
            x2d = x_other.reshape(-1, 40)
            h_ready, h_direct = geglu_gemm(x2d, fused.gate_up_weight), geglu_gemm(x2d, fused.gate_up_weight, use_tma=True)
        results[f"ready/{dtype_name}"] = {
            "kept": ops._ready_key(x2d, fused.gate_up_weight) in ops._ready_launches,
            "repeat_equal": torch.equal(y_again, y),
            "other_equal": torch.equal(h_ready, h_direct),
        }
        # Edit a weight in place, as a training step or a loaded checkpoint would: the next forward must use it.
        with torch.no_grad():
            fused.up_proj.weight.mul_(3)
        exact.load_state_dict(fused.state_dict())
        with torch.inference_mode():
            y_edited, want_edited = fused(x), exact(x.float())
        results[f"edited/{dtype_name}"] = {
            "ok": check_output(y_edited, want_edited, dtype).ok,
            "stale_ok": check_output(y, want_edited, dtype).ok,  # the output before the edit, against the new weights
        }
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreter_results():
    return interpreter_results_of("test_fused_mlp")


def _gemm_cases():
    for dtype_name in DTYPES:
        for m, k, n in GEMM_SHAPES:
            for kernel in ("tma", "pointer"):
                if kernel == "tma" and (k * 2 % 16 or n * 2 % 16):
                    continue  # rows not 16-byte aligned: TMA cannot read them, the pointer kernel does
                yield f"gemm/{kernel}/{dtype_name}/{m}x{k}x{n}"


@pytest.mark.parametrize("case", list(_gemm_cases()))
def test_geglu_gemm_matches_fp64_under_the_interpreter(interpreter_results, case):
    assert case in interpreter_results, sorted(interpreter_results)
    r = interpreter_results[case]
    assert not r["nan"], "some outputs were never written"
    assert r["ok"], r  # the project's correctness rule (profiling_in_pytorch.mlp.accuracy)
    # and a property of rounding h once from fp32, where the eager way rounds four times: no further from fp64 than
    # eager, plus slack
    assert r["rel"] <= max(1.5 * r["eager_rel"], 1e-3), r


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_fused_module_matches_the_eager_module_under_the_interpreter(interpreter_results, dtype_name):
    r = interpreter_results[f"module/{dtype_name}"]
    assert r["shape"] == [2, 3, 40] and r["dtype"] == str(DTYPES[dtype_name])
    assert r["ok"], r
    assert r["rel"] <= max(2 * r["eager_rel"], 1e-3), r


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_calls_after_the_first_launch_the_kept_kernel_under_the_interpreter(interpreter_results, dtype_name):
    r = interpreter_results[f"ready/{dtype_name}"]
    assert r["kept"] and r["repeat_equal"] and r["other_equal"], r


# --- the module's contract (no kernel runs) ---------------------------------------------------------------


def test_fused_module_has_the_simple_modules_parameters():
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    simple = SimpleGeGLUMLP(8, 16)
    fused = FusedGeGLUMLP.from_module(simple)
    assert fused.state_dict().keys() == simple.state_dict().keys()
    for name, tensor in simple.state_dict().items():
        assert torch.equal(fused.state_dict()[name], tensor), name
    w = fused.gate_up_weight  # the interleaved copy the kernel reads: gate row j at 2j, up row j at 2j + 1
    assert torch.equal(w[0::2], simple.gate_proj.weight) and torch.equal(w[1::2], simple.up_proj.weight)
    assert all(p.requires_grad for p in fused.parameters())  # trains, as SimpleGeGLUMLP's do
    assert not fused.gate_up_weight.requires_grad  # a copy the kernels read; gradients go to the two weights


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_a_weight_edited_in_place_reaches_the_next_forward(interpreter_results, dtype_name):
    r = interpreter_results[f"edited/{dtype_name}"]
    assert r["ok"], r  # the forward rebuilt its interleaved gate/up copy from the edited weight
    assert not r["stale_ok"], r  # and the edit mattered: the old output is wrong for the new weights


def test_fused_module_refuses_fp32():
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    fused = FusedGeGLUMLP(8, 16)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        fused(torch.randn(2, 8))
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        fused(torch.randn(2, 8, requires_grad=True))


# --- the lesson without a GPU --------------------------------------------------------------------------------

TINY = ["--batch", "2", "--seq", "3", "--dim", "40", "--hidden", "24"]
NO_INTERPRETER = {"TRITON_INTERPRET": "0"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gets")
def test_lesson_without_gpu_or_interpreter_says_so_in_one_line(tmp_path):
    result = run_script("05_fused_mlp.py", *TINY, "--trace_dir", str(tmp_path), env=NO_INTERPRETER)
    lines = stderr_lines(result)
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "GPU" in lines[0] and "TRITON_INTERPRET=1" in lines[0]


def test_lesson_refuses_fp32_in_one_line(tmp_path):
    result = run_script("05_fused_mlp.py", *TINY, "--dtype", "fp32", "--trace_dir", str(tmp_path),
                        env={"TRITON_INTERPRET": "1"})
    lines = stderr_lines(result)
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "'fp32'" in lines[0] and "'bf16', 'fp16'" in lines[0]


def test_lesson_runs_under_the_interpreter(tmp_path):
    result = run_script("05_fused_mlp.py", *TINY, "--device", "cpu", "--trace_dir", str(tmp_path),
                        env={"TRITON_INTERPRET": "1"})  # bf16, the first dtype the kernel runs in
    assert result.returncode == 0, result.stderr
    trace = load_trace(tmp_path / "05_fused_mlp" / "2_3_40_24_eager_cpu.json")
    names = [e["name"] for e in trace["traceEvents"]]
    assert names.count("fused_mlp_fwd") == 3
    assert "aten::gelu" not in names and "aten::mul" not in names  # the activation is inside the kernel
    assert names.count("aten::mm") == 3  # down_proj, once per active step
    assert "output check against fp32" in result.stdout and "✗" not in result.stdout


# --- GPU: the benchmark's shapes ----------------------------------------------------------------------------

# (batch, seq, dim, hidden): decode, the post's shape, and a Llama-7B-sized MLP (3-D and flat input).
GPU_SHAPES = [(8, 1, 768, 3072), (64, 128, 768, 3072), (16, 512, 4096, 11008), (8192, None, 4096, 11008)]


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(str(v) for v in s if v))
def test_fused_module_matches_eager_on_gpu(shape, dtype_name):
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    batch, seq, dim, hidden = shape
    dtype = DTYPES[dtype_name]
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(dim, hidden).to("cuda", dtype)
    fused = FusedGeGLUMLP.from_module(reference)
    exact = SimpleGeGLUMLP(dim, hidden).to("cuda")
    exact.load_state_dict(reference.state_dict())
    x = torch.randn(*([batch, seq] if seq else [batch]), dim, device="cuda", dtype=dtype)
    with torch.inference_mode():
        y, want, eager = fused(x), exact(x.float()), reference(x)
    assert y.shape == x.shape and y.dtype == dtype
    assert check_output(y, want, dtype).ok
    assert relative_error(y, want) <= 1.5 * relative_error(eager, want)


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("kernel", ["tma", "pointer"])
@pytest.mark.parametrize("mkn", [(1000, 776, 1032), (37, 200, 300), (1, 768, 3072), (300, 64, 96)])
def test_both_kernels_on_ragged_shapes_on_gpu(kernel, mkn):
    from profiling_in_pytorch.mlp.triton_ops import geglu_gemm, interleave_gate_up

    m, k, n = mkn
    if kernel == "tma" and (torch.cuda.get_device_capability()[0] < 9 or k % 8 or n % 8):
        pytest.skip("TMA needs Hopper and 16-byte aligned rows")
    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w_gate, w_up = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k) for _ in range(2))
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    geglu_gemm(x, interleave_gate_up(w_gate, w_up), out=out, use_tma=kernel == "tma")
    eager = F.gelu(x @ w_gate.T, approximate="tanh") * (x @ w_up.T)
    want = _reference_h(x, w_gate, w_up)
    assert not out.isnan().any()
    assert check_output(out, want, torch.bfloat16).ok
    assert relative_error(out, want) <= max(1.5 * relative_error(eager, want), 1e-3)


@pytest.mark.gpu
@requires_cuda
def test_compiled_fused_module_matches_eager_fused_on_gpu():
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    torch.manual_seed(0)
    fused = FusedGeGLUMLP(768, 3072, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 64, 768, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        torch.testing.assert_close(torch.compile(fused)(x), fused(x), rtol=0, atol=0)


@pytest.mark.gpu
@requires_cuda
def test_decode_calls_launch_the_kept_kernel_and_match_the_first_call_on_gpu():
    from profiling_in_pytorch.mlp.triton_ops import geglu as ops
    from profiling_in_pytorch.mlp.triton_ops import geglu_gemm, interleave_gate_up
    torch.manual_seed(0)
    x = torch.randn(8, 768, device="cuda", dtype=torch.bfloat16)
    w = interleave_gate_up(*(torch.randn(3072, 768, device="cuda", dtype=torch.bfloat16) / 28 for _ in range(2)))
    first = geglu_gemm(x, w)  # tuned, compiled through kernel[grid], kept ready
    assert ops._ready_key(x, w) in ops._ready_launches
    torch.testing.assert_close(geglu_gemm(x, w), first, rtol=0, atol=0)
    # Same shape, but x starts 2 bytes off a 16-byte boundary: another specialization, so not the kept launch.
    shifted = torch.empty(8 * 768 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(8, 768).copy_(x)
    assert ops._ready_key(shifted, w) != ops._ready_key(x, w)
    torch.testing.assert_close(geglu_gemm(shifted, w), first, rtol=0, atol=0)
    torch.testing.assert_close(geglu_gemm(shifted, w), first, rtol=0, atol=0)


@pytest.mark.gpu
@requires_cuda
def test_kept_launches_match_the_first_replay_in_a_cuda_graph_and_honour_launch_hooks_on_gpu():
    from triton import knobs

    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    torch.manual_seed(0)
    fused = FusedGeGLUMLP(768, 3072, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4, 256, 768, device="cuda", dtype=torch.bfloat16)  # 1024 tokens: the TMA kernel
    with torch.inference_mode():
        first = fused(x)  # tuned, compiled, kept ready
        again = fused(x)  # the kept launch, its CUtensorMaps encoded once per address
        other = torch.randn_like(x)
        want_other = SimpleGeGLUMLP(768, 3072).to("cuda", torch.bfloat16)
        want_other.load_state_dict(fused.state_dict())
        assert check_output(fused(other), want_other(other).float(), torch.bfloat16).ok
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fused(x)
        graph.replay()
        launched = []  # a profiler hooked on Triton's launches (Proton does this) still sees each one
        hook = knobs.runtime.launch_enter_hook
        hook.add(launched.append) if hasattr(hook, "add") else pytest.skip("no launch hook chain in this Triton")
        try:
            hooked = fused(x)
        finally:
            hook.remove(launched.append)
    torch.cuda.synchronize()
    assert torch.equal(again, first) and torch.equal(captured, first) and torch.equal(hooked, first)
    assert len(launched) == 1
