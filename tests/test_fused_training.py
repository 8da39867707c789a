"""FusedGeGLUMLP trains: its backward kernel and its gradients against fp64, under Triton's interpreter on the CPU
(tiny ragged shapes) and on a GPU (the benchmark's shapes), and what its forward keeps for the backward.

As in test_fused_mlp.py, the interpreter cases run in one child process with TRITON_INTERPRET=1.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import interpreter_results_of, requires_cuda

from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.accuracy import check_output, relative_error

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# (tokens, hidden K, intermediate N): partial tiles at every edge (tiles are 16 under the interpreter), K and N
# odd (no TMA), one token, several tiles per persistent program.
SHAPES = [(37, 40, 48), (5, 33, 17), (1, 24, 40), (40, 48, 56)]
GRADS = ["y", "dx", "d_gate", "d_up", "d_down"]


def _exact_backward_pieces(dy, w_down, gate_up):
    """fp64 dgate_up ([dg | du]) and h from the output gradient and the pre-activations (interleaved)."""
    dy, w_down, gate_up = dy.double(), w_down.double(), gate_up.double()
    g = gate_up[:, 0::2].clone().requires_grad_(True)
    u = gate_up[:, 1::2].clone().requires_grad_(True)
    h = F.gelu(g, approximate="tanh") * u
    h.backward(dy @ w_down)
    return torch.cat([g.grad, u.grad], dim=1), h.detach()


def _train_once(module, x, dy):
    """(y, dx, d_gate, d_up, d_down) of one forward and backward."""
    for p in module.parameters():
        p.grad = None
    x = x.clone().requires_grad_(True)
    y = module(x)
    y.backward(dy)
    return [y.detach(), x.grad, module.gate_proj.weight.grad, module.up_proj.weight.grad, module.down_proj.weight.grad]


def _interpreter_worker() -> None:
    """Runs in the child process (TRITON_INTERPRET=1): every case, one JSON object on stdout."""
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP
    from profiling_in_pytorch.mlp.saved import saved_for_backward
    from profiling_in_pytorch.mlp.triton_ops import backward_uses_tma, geglu_gemm, geglu_gemm_backward, interleave_gate_up
    from profiling_in_pytorch.mlp.triton_ops.geglu_backward import INTERPRETER_TMA_CONFIGS

    results = {}
    for dtype_name, dtype in DTYPES.items():
        for m, k, n in SHAPES:
            g = torch.Generator().manual_seed(m * 1000 + k * 10 + n)
            reference = SimpleGeGLUMLP(k, n)
            with torch.no_grad():
                for p in reference.parameters():
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            reference = reference.to(dtype)
            exact = SimpleGeGLUMLP(k, n).double()
            exact.load_state_dict(reference.state_dict())
            x = torch.randn(m, k, generator=g).to(dtype)
            dy = torch.randn(m, k, generator=g).to(dtype)
            want = _train_once(exact, x.double(), dy.double())
            eager = _train_once(reference, x, dy)
            for recompute_h in (False, True):
                fused = FusedGeGLUMLP.from_module(reference)
                fused.recompute_h = recompute_h
                got = _train_once(fused, x, dy)
                results[f"module/{dtype_name}/{m}x{k}x{n}/recompute_h={recompute_h}"] = {
                    name: {"ok": check_output(a, w, dtype).ok, "rel": relative_error(a, w),
                           "eager_rel": relative_error(e, w), "nan": bool(a.isnan().any())}
                    for name, a, e, w in zip(GRADS, got, eager, want)
                }
            # The kernels alone: the pre-activations the forward keeps, and each backward kernel and epilogue.
            w = interleave_gate_up(reference.gate_proj.weight, reference.up_proj.weight).detach()
            gate_up = torch.full((m, 2 * n), float("nan"), dtype=dtype)
            geglu_gemm(x, w, gate_up_out=gate_up)
            want_gate_up = x.double() @ w.double().T
            results[f"gate_up/{dtype_name}/{m}x{k}x{n}"] = {
                "nan": bool(gate_up.isnan().any()), "ok": check_output(gate_up, want_gate_up, dtype).ok}
            w_down = reference.down_proj.weight.detach()
            want_dgate_up, want_h = _exact_backward_pieces(dy, w_down, gate_up)
            kernels = [("pointer", False, None)]
            if backward_uses_tma(dy, w_down):
                kernels += [(f"tma{i}", True, c) for i, c in enumerate(INTERPRETER_TMA_CONFIGS)]
            for kernel, use_tma, config in kernels:
                dgate_up, h = geglu_gemm_backward(dy, w_down, gate_up, use_tma=use_tma, config=config)
                results[f"backward/{kernel}/{dtype_name}/{m}x{k}x{n}"] = {
                    "nan": bool(dgate_up.isnan().any() or h.isnan().any()),
                    "dgate_up_ok": check_output(dgate_up, want_dgate_up, dtype).ok,
                    "h_ok": check_output(h, want_h, dtype).ok,
                }
        # What the forward keeps for the backward, and that a no-grad forward keeps nothing.
        fused = FusedGeGLUMLP.from_module(SimpleGeGLUMLP(40, 24).to(dtype))
        x = torch.randn(2, 3, 40, dtype=dtype)
        for recompute_h in (False, True):
            fused.recompute_h = recompute_h
            y, saved = saved_for_backward(fused, x.clone().requires_grad_(True), fused)
            results[f"saved/{dtype_name}/recompute_h={recompute_h}"] = {
                "describe": saved.describe(), "bytes": saved.activation_bytes}
        with torch.no_grad():
            results[f"no_grad/{dtype_name}"] = {"grad_fn": fused(x.clone().requires_grad_(True)).grad_fn is not None}
        # A second training call launches the kept kernels (launch.py's ReadyLaunch): the same output and gradients.
        dy = torch.randn(2, 3, 40, dtype=dtype)
        for recompute_h in (False, True):
            fused.recompute_h = recompute_h
            first, again = _train_once(fused, x, dy), _train_once(fused, x, dy)
            results[f"repeat/{dtype_name}/recompute_h={recompute_h}"] = {
                "equal": all(torch.equal(a, b) for a, b in zip(first, again))}
    print(json.dumps(results))


@pytest.fixture(scope="module")
def interpreter_results():
    return interpreter_results_of("test_fused_training")


def _cases(prefix):
    return [f"{prefix}/{d}/{m}x{k}x{n}" for d in DTYPES for m, k, n in SHAPES]


@pytest.mark.parametrize("recompute_h", [False, True])
@pytest.mark.parametrize("case", _cases("module"))
def test_gradients_match_fp64_no_worse_than_eager(interpreter_results, case, recompute_h):
    r = interpreter_results[f"{case}/recompute_h={recompute_h}"]
    for name in GRADS:
        assert not r[name]["nan"], (name, r[name])
        assert r[name]["ok"], (name, r[name])  # the project's correctness rule
        # and no further from fp64 than eager: each gradient is rounded once where eager rounds two to four
        # times. At these sizes (one token: 40 values of dg) rounding noise alone moves the ratio by ~10%; the GPU
        # test below holds it strictly at real sizes.
        assert r[name]["rel"] <= 1.1 * r[name]["eager_rel"], (name, r[name])


@pytest.mark.parametrize("case", _cases("gate_up"))
def test_forward_keeps_the_rounded_pre_activations(interpreter_results, case):
    r = interpreter_results[case]
    assert not r["nan"] and r["ok"], r


def _backward_cases():
    from profiling_in_pytorch.mlp.triton_ops.geglu_backward import INTERPRETER_TMA_CONFIGS

    for d in DTYPES:
        for m, k, n in SHAPES:
            yield f"backward/pointer/{d}/{m}x{k}x{n}"
            if not (k * 2 % 16 or n * 2 % 16):  # TMA reads rows that start on 16-byte boundaries
                yield from (f"backward/tma{i}/{d}/{m}x{k}x{n}" for i in range(len(INTERPRETER_TMA_CONFIGS)))


def test_every_backward_kernel_ran_where_it_can(interpreter_results):
    ran = {key for key in interpreter_results if key.startswith("backward/")}
    assert ran == set(_backward_cases()), sorted(ran ^ set(_backward_cases()))


@pytest.mark.parametrize("case", list(_backward_cases()))
def test_backward_kernel_matches_fp64(interpreter_results, case):
    r = interpreter_results[case]
    assert not r["nan"] and r["dgate_up_ok"] and r["h_ok"], r


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_the_forward_keeps_x_the_pre_activations_and_h(interpreter_results, dtype_name):
    kept = interpreter_results[f"saved/{dtype_name}/recompute_h=False"]
    recomputed = interpreter_results[f"saved/{dtype_name}/recompute_h=True"]
    assert kept["describe"] == "x [6, 40] + [6, 48] + [6, 24]", kept
    assert recomputed["describe"] == "x [6, 40] + [6, 48]", recomputed
    assert kept["bytes"] - recomputed["bytes"] == 6 * 24 * 2


@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_a_no_grad_forward_builds_no_graph(interpreter_results, dtype_name):
    assert interpreter_results[f"no_grad/{dtype_name}"] == {"grad_fn": False}


# --- on a GPU ------------------------------------------------------------------------------------------------

# (tokens, dim, hidden): the post's shape, a Llama-7B-sized MLP, ragged sizes (no TMA for 1000 x 776 -> 1030).
GPU_SHAPES = [(8192, 768, 3072), (8192, 4096, 11008), (1000, 776, 1032), (300, 64, 96), (37, 200, 300)]


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("recompute_h", [False, True])
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_fp32_no_worse_than_eager_on_gpu(shape, dtype_name, recompute_h):
    from profiling_in_pytorch.mlp.fused import FusedGeGLUMLP

    tokens, dim, hidden = shape
    dtype = DTYPES[dtype_name]
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(dim, hidden).to("cuda", dtype)
    exact = SimpleGeGLUMLP(dim, hidden).to("cuda")
    exact.load_state_dict(reference.state_dict())
    fused = FusedGeGLUMLP.from_module(reference)
    fused.recompute_h = recompute_h
    x = torch.randn(tokens, dim, device="cuda", dtype=dtype)
    dy = torch.randn(tokens, dim, device="cuda", dtype=dtype)
    want = _train_once(exact, x.float(), dy.float())
    eager = _train_once(reference, x, dy)
    got = _train_once(fused, x, dy)
    for name, a, e, w in zip(GRADS, got, eager, want):
        assert a.dtype == dtype and a.shape == w.shape, name
        assert check_output(a, w, dtype).ok, name
        assert relative_error(a, w) <= relative_error(e, w), (name, relative_error(a, w), relative_error(e, w))


@pytest.mark.parametrize("recompute_h", [False, True])
@pytest.mark.parametrize("dtype_name", list(DTYPES))
def test_a_second_training_call_launches_the_kept_kernels_alike(interpreter_results, dtype_name, recompute_h):
    assert interpreter_results[f"repeat/{dtype_name}/recompute_h={recompute_h}"]["equal"]
