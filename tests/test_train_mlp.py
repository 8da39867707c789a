"""Lesson 06, a training step: the lesson run as a user runs it on the CPU, its checks on CPU traces and on GPU-shaped
traces built here (autograd's backward on its own thread), the gradient check, and every variant on a GPU."""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shlex
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, lesson_marks, requires_cuda, run_script

import profiling_in_pytorch.mlp.fused
from profiling_in_pytorch import lesson
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.accuracy import TOLERANCES, check_backward
from profiling_in_pytorch.mlp.saved import saved_for_backward
from profiling_in_pytorch import checks as ex
from trace_report import read_trace

SCRIPT = "06_train_mlp.py"
LESSON = importlib.import_module("06_train_mlp")
TINY = "--batch 2 --seq 4 --dim 32 --hidden 64"
FORWARD, BACKWARD, OPTIMIZER = LESSON.FORWARD, LESSON.BACKWARD, LESSON.OPTIMIZER

# One run each, into one folder: the compiled run after its eager twin (one torch.compile on a CPU: tens of seconds).
CPU_RUNS = {
    "eager": TINY,
    "adamw": f"{TINY} --optimizer adamw",
    "compile": f"{TINY} --compile",
}
TRACES = {
    "eager": "2_4_32_64_eager_fp32_cpu.json",
    "adamw": "2_4_32_64_adamw_eager_fp32_cpu.json",
    "compile": "2_4_32_64_compile_fp32_cpu.json",
}


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    results = {name: run_script(SCRIPT, *shlex.split(args), "--device", "cpu", "--trace_dir", str(folder), cwd=folder)
               for name, args in CPU_RUNS.items()}
    return folder / "06_train_mlp", results


def known_reasons(stdout: str) -> list[str]:
    return re.findall(r"known reason: (.+)$", stdout, flags=re.MULTILINE)


# --- the lesson on a CPU --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CPU_RUNS))
def test_a_cpu_run_writes_its_trace_and_checks_the_training_step(cpu_runs, name):
    folder, results = cpu_runs
    result = results[name]
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    trace = read_trace(folder / TRACES[name])
    assert [s.name for s in trace.steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert (folder / TRACES[name]).with_suffix(".txt").is_file()
    assert not list(folder.glob(".*")), "temporary files left behind"

    seen = lesson_marks(result.stdout)
    labels = "mlp_fwd, mlp_bwd and optimizer_step" if name == "adamw" else "mlp_fwd and mlp_bwd"
    assert seen[f"{labels} once per step, in this order"] == "✓"
    # The one ✗ a CPU shows: its backward runs on the calling thread, and the lesson says so.
    assert [t for t, m in seen.items() if m != "✓"] == [
        "the backward's GEMMs are launched from autograd's own thread, not the one that opened mlp_bwd"
    ]
    reasons = known_reasons(result.stdout)
    assert len(reasons) == 1 and ex.CPU_BACKWARD_THREAD.startswith(reasons[0].strip()), reasons


@pytest.mark.slow
def test_eager_on_a_cpu_shows_the_six_gemms_and_the_activations_derivatives(cpu_runs):
    _, results = cpu_runs
    seen = lesson_marks(results["eager"].stdout)
    assert seen["per step in mlp_fwd: 3 GEMMs, 1 gelu, 1 mul"] == "✓"
    assert seen["per step in mlp_bwd: 6 GEMMs, 1 gelu_backward, 2 mul, 1 add"] == "✓"
    assert "mlp_bwd's math ops (the CPU's kernels) per step: GEMM ×6, mul ×2, gelu_backward, add" in results["eager"].stdout


@pytest.mark.slow
def test_the_saved_tensors_are_counted_before_profiling(cpu_runs):
    _, results = cpu_runs
    eager, compiled = results["eager"].stdout, results["compile"].stdout
    # eager: x, then g, gelu(g), u and m ([tokens, hidden] each); compiled: gelu(g) is recomputed in the backward
    assert "✓ SimpleGeGLUMLP: x [8, 32] + 4 × [8, 64]" in eager
    assert "saved: x [8, 32] + 4 × [8, 64] = 9,216 bytes" in eager
    assert "✓ SimpleGeGLUMLP, compiled: x [8, 32] + 3 × [8, 64]" in compiled
    assert "saved: x [8, 32] + 3 × [8, 64] = 7,168 bytes" in compiled
    assert eager.index("What the forward keeps") < eager.index("What we expect to see")


@pytest.mark.slow
def test_compile_on_a_cpu_fuses_the_backwards_pointwise_work_and_is_checked_first(cpu_runs):
    _, results = cpu_runs
    out = results["compile"].stdout
    seen = lesson_marks(out)
    assert seen["per step in mlp_bwd: 6 GEMMs; no gelu_backward or mul kernel on its own"] == "✓"
    assert seen["in mlp_bwd: one fused Inductor kernel computes gelu_backward and mul"] == "✓"
    assert seen["in mlp_fwd: one fused Inductor kernel computes gelu and mul"] == "✓"
    assert re.search(r"cpp_fused_\w*gelu_backward\w*mul\w* in every step's mlp_bwd", out), out
    check = next(line for line in out.splitlines() if line.startswith("output and gradient check against fp32"))
    assert check.endswith("✓") and "dx" in check and "d down_proj.weight" in check, check
    assert "diff it:" in out and TRACES["eager"] in out.split("diff it:", 1)[1].splitlines()[0]
    # The step ran once before the profile: its first step compiles nothing, and the lesson does not say it does.
    assert "profiling 5 steps: the last 3 are recorded" in out, out


@pytest.mark.slow
def test_the_optimizer_step_has_its_own_label_and_the_tag_names_it(cpu_runs):
    folder, results = cpu_runs
    seen = lesson_marks(results["adamw"].stdout)
    title = "in optimizer_step: AdamW's default on a CPU, a loop over the weights: aten::addcdiv_ 3× per step"
    assert seen[title] == "✓"
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(TRACES.values())


@pytest.mark.slow
def test_a_cpu_backward_runs_on_the_calling_thread_inside_its_label(cpu_runs):
    folder, _ = cpu_runs
    trace = read_trace(folder / TRACES["eager"])
    for step in trace.steps:
        forward, backward = step.phase(FORWARD), step.phase(BACKWARD)
        assert forward.end <= backward.ts
        assert {(op.pid, op.tid) for op in backward.ops} == {backward.thread}
        assert sum(op.name == "aten::mm" for op in forward.ops) == 3
        assert sum(op.name == "aten::mm" for op in backward.ops) == 6
        assert all("MmBackward0" in op.path for op in backward.ops if op.name == "aten::mm")
        assert step.phase(OPTIMIZER) is None


# --- bad flags: one line, exit 2, before anything long runs ----------------------------------------------------

BAD_FLAGS = [
    ("--compile --variant fused", "--compile compiles the post's eager module"),
    ("--compile --variant liger", "--variant liger brings its own kernels"),
    ("--variant liger --kernel_source pypi", "Liger's GeGLU kernel is a Triton GPU kernel"),
    ("--kernel_source pypi", "they go with --variant liger"),
    ("--variant fused --dtype fp32", "bf16 or fp16, not fp32"),
    ("--variant fused", "it needs a CUDA GPU, or TRITON_INTERPRET=1"),
]


@pytest.mark.parametrize("flags,says", BAD_FLAGS, ids=[f for f, _ in BAD_FLAGS])
def test_flags_that_do_not_go_together_are_one_line_and_exit_2(flags, says, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    # read when Triton's module loads: this process's may differ
    monkeypatch.setattr(profiling_in_pytorch.mlp.fused, "INTERPRETING", False)
    with pytest.raises(SystemExit) as stop:
        LESSON.main([*shlex.split(TINY), *shlex.split(flags), "--device", "cpu", "--trace_dir", str(tmp_path)])
    assert stop.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], lines
    assert not list(tmp_path.rglob("*.json"))


# --- the gradient check and the saved-tensor check ------------------------------------------------------------


def tiny_mlp(dtype=torch.bfloat16):
    torch.manual_seed(0)
    return SimpleGeGLUMLP(16, 32).to(dtype), torch.randn(2, 4, 16, dtype=dtype), torch.randn(2, 4, 16, dtype=dtype)


def test_check_backward_judges_output_and_every_gradient_against_fp32():
    mlp, x, dy = tiny_mlp()
    copy = SimpleGeGLUMLP(16, 32).to(torch.bfloat16)
    copy.load_state_dict(mlp.state_dict())
    result = check_backward(copy, mlp, x, dy)
    assert list(result) == ["output", "x", "gate_proj.weight", "up_proj.weight", "down_proj.weight"]
    assert all(a.ok and 0 < a.error < TOLERANCES[torch.bfloat16] for a in result.values()), result
    assert all(p.grad is None for p in copy.parameters()) and x.grad is None  # left as found


def test_check_backward_catches_a_wrong_gradient_and_a_missing_one():
    mlp, x, dy = tiny_mlp(torch.float32)

    class SwappedBackward(torch.autograd.Function):
        """The right forward, the gate's gradient sent to up and back: only a gradient check sees it."""

        @staticmethod
        def forward(ctx, g, u):
            return g, u

        @staticmethod
        def backward(ctx, dg, du):
            return du, dg

    class Swapped(SimpleGeGLUMLP):
        def forward(self, x):
            g, u = SwappedBackward.apply(self.gate_proj(x), self.up_proj(x))
            return self.down_proj(torch.nn.functional.gelu(g, approximate="tanh") * u)

    swapped = Swapped(16, 32)
    swapped.load_state_dict(mlp.state_dict())
    result = check_backward(swapped, mlp, x, dy)
    assert result["output"].ok
    assert not result["gate_proj.weight"].ok and not result["up_proj.weight"].ok and not result["x"].ok

    frozen = SimpleGeGLUMLP(16, 32)
    frozen.load_state_dict(mlp.state_dict())
    frozen.down_proj.weight.requires_grad_(False)
    result = check_backward(frozen, mlp, x, dy)
    assert result["down_proj.weight"].problem == "no gradient reached it" and result["x"].ok


def test_check_training_prints_one_line_and_fails_a_wrong_module(capsys):
    mlp, x, dy = tiny_mlp(torch.float32)
    assert lesson.check_training("a copy", mlp, mlp, x, dy) is True
    wrong = SimpleGeGLUMLP(16, 32)  # other weights
    assert lesson.check_training("other weights", wrong, mlp, x, dy) is False
    out = capsys.readouterr().out
    assert out.count("output and gradient check against fp32") == 2 and "✓" in out and "✗" in out
    assert "over the torch.float32 tolerance" in out


def test_check_saved_compares_what_autograd_saved_with_the_guess(capsys):
    mlp, x, _ = tiny_mlp(torch.float32)
    _, saved = saved_for_backward(mlp, x.requires_grad_(), mlp)
    args = argparse.Namespace(batch=2, seq=4, dim=16, hidden=32, variant="eager", compile=False)
    assert lesson.check_saved("SimpleGeGLUMLP", saved, *LESSON.saved_guess(args)) is True
    assert lesson.check_saved("SimpleGeGLUMLP", saved, *LESSON.saved_guess(argparse.Namespace(**{**vars(args), "compile": True}))) is False
    out = capsys.readouterr().out
    assert "✓ SimpleGeGLUMLP: x [8, 16] + 4 × [8, 32]" in out and "✗ SimpleGeGLUMLP: x [8, 16] + 3 × [8, 32]" in out


# --- the checks on GPU-shaped traces: the backward's launches on autograd's thread ---------------------------

MAIN, AUTOGRAD = 408, 409
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<8, at::native::{}, std::array<char*, 3ul> >(int, ...)"
GELU = ELEMENTWISE.format("GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda(c10::BFloat16)#1}")
GELU_BACKWARD = ELEMENTWISE.format("GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}")
MUL = ELEMENTWISE.format("BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >")
ADD = ELEMENTWISE.format("CUDAFunctor_add<c10::BFloat16>")
FILL = ELEMENTWISE.format("FillFunctor<c10::BFloat16>")
MSE = ELEMENTWISE.format("mse_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}")
MSE_BACKWARD = ELEMENTWISE.format("mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}")

# (launching op, kernel) in launch order, as each variant's step launches them on an H200 (names as the reader knows
# them); the loss adds its kernels to both phases, the seed gradient's fill comes from the thread that calls backward.
GEMM = ("aten::mm", NVJET)
LOSS = [("aten::mse_loss", MSE), ("aten::mean", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, float>, unsigned int, c10::BFloat16, 4> >(...)")]
LOSS_BACKWARD = [("aten::mse_loss_backward", MSE_BACKWARD)]
GPU_STEPS = {
    "eager": (
        [GEMM, GEMM, ("aten::gelu", GELU), ("aten::mul", MUL), GEMM, *LOSS],
        [*LOSS_BACKWARD, GEMM, GEMM, ("aten::mul", MUL), ("aten::mul", MUL), ("aten::gelu_backward", GELU_BACKWARD),
         GEMM, GEMM, GEMM, GEMM, ("aten::add", ADD)],
    ),
    "compile": (
        [GEMM, GEMM, ("## Call CompiledFxGraph", "triton_poi_fused__unsafe_view_gelu_mul_0"), GEMM, *LOSS],
        [*LOSS_BACKWARD, GEMM, GEMM, ("## Call CompiledFxGraph", "triton_poi_fused__unsafe_view_gelu_gelu_backward_mul_view_0"),
         GEMM, GEMM, GEMM, GEMM, ("## Call CompiledFxGraph", "triton_poi_fused_add_view_1")],
    ),
    "liger": (
        [GEMM, GEMM, ("LigerGELUMulFunction", "_geglu_tanh_forward_kernel"), GEMM, *LOSS],
        [*LOSS_BACKWARD, GEMM, GEMM, ("LigerGELUMulFunctionBackward", "_geglu_tanh_backward_kernel"),
         GEMM, GEMM, GEMM, GEMM, ("aten::add", ADD)],
    ),
    "fused": (
        [("GeGLUMLPFunction", "_geglu_gemm_tma_kernel"), GEMM, *LOSS],
        [*LOSS_BACKWARD, ("GeGLUMLPFunctionBackward", "_geglu_backward_tma_kernel"), GEMM, GEMM, GEMM, GEMM],
    ),
}


def gpu_training_trace(path: Path, forward, backward, *, backward_thread=AUTOGRAD, gpu_lag_us=0.0, optimizer=False) -> Path:
    """Three steps of a training step as a GPU trace shows them: on the main thread each ProfilerStep holds mlp_fwd
    (its ops launch the forward's kernels), then mlp_bwd, whose box spans the backward launched from
    `backward_thread` (autograd's device thread on a GPU) after the seed gradient's fill from the main thread;
    optionally an optimizer_step of two foreach ops. Each kernel runs `gpu_lag_us` after its launch."""
    events, corr, t = [], 0, 0.0

    def box(cat, name, ts, dur, tid, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": MAIN, "tid": tid, "args": args})

    def launch(op, kernel, ts, tid):
        nonlocal corr
        corr += 1
        box("cpu_op", op, ts, 8.0, tid)
        box("cuda_runtime", "cudaLaunchKernel", ts + 2.0, 5.0, tid, correlation=corr)
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": ts + 9.0 + gpu_lag_us, "dur": 20.0,
                       "pid": 0, "tid": 7, "args": {"correlation": corr}})

    for number in (2, 3, 4):
        start = t
        box("cpu_op", "aten::zero_", t + 1.0, 1.0, MAIN)
        t += 5.0
        box("user_annotation", FORWARD, t, 10.0 * len(forward) + 2.0, MAIN)
        for i, (op, kernel) in enumerate(forward):
            launch(op, kernel, t + 1.0 + 10.0 * i, MAIN)
        t += 10.0 * len(forward) + 5.0
        box("user_annotation", BACKWARD, t, 10.0 * len(backward) + 25.0, MAIN)
        launch("aten::ones_like", FILL, t + 1.0, MAIN)
        engine = t + 15.0
        box("cpu_op", "autograd::engine::evaluate_function: MmBackward0", engine, 10.0 * len(backward), backward_thread)
        for i, (op, kernel) in enumerate(backward):
            launch(op, kernel, engine + 1.0 + 10.0 * i, backward_thread)
        t += 10.0 * len(backward) + 30.0
        if optimizer:
            box("user_annotation", OPTIMIZER, t, 22.0, MAIN)
            launch("aten::_foreach_lerp_", ELEMENTWISE.format("multi_tensor_apply_kernel"), t + 1.0, MAIN)
            launch("aten::_foreach_addcdiv_", ELEMENTWISE.format("multi_tensor_apply_kernel"), t + 11.0, MAIN)
            t += 25.0
        box("user_annotation", f"ProfilerStep#{number}", start, t - start, MAIN)
        t += 10.0
    box("cuda_runtime", "cudaDeviceSynchronize", t, 100.0 + gpu_lag_us, MAIN, correlation=corr + 1)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def flags(**given) -> argparse.Namespace:
    defaults = {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072, "variant": "eager", "compile": False, "optimizer": None}
    return argparse.Namespace(**{**defaults, **given})


VARIANT_FLAGS = {"eager": flags(), "compile": flags(compile=True), "liger": flags(variant="liger"), "fused": flags(variant="fused")}


@pytest.mark.parametrize("variant", list(GPU_STEPS))
def test_each_variants_gpu_expectations_hold_on_its_gpu_shaped_trace(variant, tmp_path):
    forward, backward = GPU_STEPS[variant]
    trace = read_trace(gpu_training_trace(tmp_path / f"{variant}.json", forward, backward, gpu_lag_us=500.0))
    outcomes = {e.title: e.check(trace) for e in LESSON.expectations(VARIANT_FLAGS[variant], "cuda")}
    assert all(o.ok for o in outcomes.values()), {t: o.evidence for t, o in outcomes.items() if not o.ok}


@pytest.mark.parametrize("variant", ["compile", "liger", "fused"])
def test_the_eager_trace_fails_the_other_variants_backward_checks(variant, tmp_path):
    trace = read_trace(gpu_training_trace(tmp_path / "eager.json", *GPU_STEPS["eager"]))
    failed = [e.title for e in LESSON.expectations(VARIANT_FLAGS[variant], "cuda") if not e.check(trace).ok]
    assert any(BACKWARD in title for title in failed), failed


def test_a_kernel_belongs_to_the_label_whose_box_holds_its_launch_whatever_its_thread(tmp_path):
    """The backward's kernels run on the GPU long after mlp_bwd closed, launched from another thread: still mlp_bwd's."""
    trace = read_trace(gpu_training_trace(tmp_path / "late.json", *GPU_STEPS["eager"], gpu_lag_us=5000.0))
    step = trace.steps[0]
    backward = step.phase(BACKWARD)
    assert len(backward.gemms) == 6 and all(w.ts > backward.end for w in backward.gpu)
    assert {w.launch.tid for w in backward.gemms} == {AUTOGRAD} and backward.thread == (MAIN, MAIN)
    assert all(BACKWARD not in w.launch_path for w in backward.gemms)  # not nested under the label: another thread
    assert len(step.phase(FORWARD).gemms) == 3 and step.phase(OPTIMIZER) is None


def test_backward_on_autograd_thread_fails_when_the_backward_stays_on_the_main_thread(tmp_path):
    check = ex.backward_on_autograd_thread(BACKWARD)
    trace = read_trace(gpu_training_trace(tmp_path / "autograd.json", *GPU_STEPS["eager"]))
    outcome = check.check(trace)
    assert outcome.ok is True
    assert f"launched from thread {AUTOGRAD} ×18" in outcome.evidence and f"thread {MAIN} (the label's) ×1" in outcome.evidence
    same = read_trace(gpu_training_trace(tmp_path / "main.json", *GPU_STEPS["eager"], backward_thread=MAIN))
    outcome = check.check(same)
    assert outcome.ok is False and outcome.reason is None


def test_labels_and_the_optimizer_ops_per_step(tmp_path):
    trace = read_trace(gpu_training_trace(tmp_path / "opt.json", *GPU_STEPS["eager"], optimizer=True))
    assert ex.labels_per_step(FORWARD, BACKWARD, OPTIMIZER).check(trace).ok is True
    assert ex.labels_per_step(BACKWARD, FORWARD).check(trace).ok is False
    foreach = [e for e in LESSON.expectations(flags(optimizer="adamw"), "cuda") if OPTIMIZER in e.text and "foreach" in e.text]
    assert len(foreach) == 1 and foreach[0].check(trace).ok is True
    outcome = ex.phase_ops(OPTIMIZER, r"^aten::_fused_adamw_$", 1).check(trace)
    assert outcome.ok is False and "aten::_foreach_lerp_" in outcome.evidence
    without = read_trace(gpu_training_trace(tmp_path / "no_opt.json", *GPU_STEPS["eager"]))
    outcome = ex.labels_per_step(FORWARD, BACKWARD, OPTIMIZER).check(without)
    assert outcome.ok is False and "ProfilerStep#2: mlp_fwd → mlp_bwd;" in outcome.evidence
    outcome = ex.phase_ops(OPTIMIZER, r"^aten::_foreach_").check(without)
    assert outcome.ok is False and "no optimizer_step in ProfilerStep#2" in outcome.evidence


def test_phase_kernels_counts_roles_and_lists_the_rest(tmp_path):
    trace = read_trace(gpu_training_trace(tmp_path / "eager.json", *GPU_STEPS["eager"]))
    outcome = ex.phase_kernels(BACKWARD, {"GEMM": 6, "gelu_backward": 1, "mul": 2, "add": 1}).check(trace)
    assert outcome.ok is True and "fill" in outcome.evidence  # the seed gradient, listed, not counted
    assert ex.phase_kernels(BACKWARD, {"gelu": 0}).check(trace).ok is True  # the forward's gelu is not the backward's
    assert ex.phase_kernels(FORWARD, {"gelu": 0}).check(trace).ok is False
    assert ex.phase_kernels(BACKWARD, {"GEMM": 3}).check(trace).ok is False


def test_the_gpu_only_claim_on_a_cpu_trace_says_why(cpu_trace):
    """The conftest's CPU trace labels its forward mlp_fwd: the thread claim reads it as a CPU trace."""
    outcome = ex.backward_on_autograd_thread("mlp_fwd").check(read_trace(cpu_trace))
    assert outcome.ok is False and outcome.reason == ex.CPU_BACKWARD_THREAD


# --- on a GPU: every variant at the post's shape ---------------------------------------------------------------

GPU_VARIANTS = {
    "eager": [],
    "compile": ["--compile"],
    "liger": ["--variant", "liger", "--kernel_source", "pypi"],
    "fused": ["--variant", "fused"],
    "eager adamw": ["--optimizer", "adamw"],
    "fused adamw-fused": ["--variant", "fused", "--optimizer", "adamw-fused"],
}


@pytest.fixture(scope="module")
def gpu_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train_gpu")
    return {name: run_script(SCRIPT, *args, "--trace_dir", str(folder), cwd=folder) for name, args in GPU_VARIANTS.items()}


@pytest.mark.gpu
@requires_cuda
@pytest.mark.parametrize("name", list(GPU_VARIANTS))
def test_every_variant_trains_on_a_gpu_and_each_miss_is_explained(gpu_runs, name):
    result = gpu_runs[name]
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    misses = len(re.findall(r"^  ✗ ", result.stdout, flags=re.MULTILINE))
    assert misses == len(known_reasons(result.stdout)), result.stdout
    assert "What the forward keeps for the backward" in result.stdout and "allocator:" in result.stdout
    if name != "eager" and name != "eager adamw":
        check = next(line for line in result.stdout.splitlines() if line.startswith("output and gradient check"))
        assert check.endswith("✓"), check


# --- the same checks on real H200 traces (torch 2.11, CUDA 13, bf16, the post's shape) -------------------------

H200_TRACES = FIXTURES / "h200" / "traces" / "06_train_mlp"
H200_RUNS = {  # file: the flags that made it
    "64_128_768_3072_eager.json.gz": flags(),
    "64_128_768_3072_compile.json.gz": flags(compile=True),
    "64_128_768_3072_liger-pypi_eager.json.gz": flags(variant="liger", kernel_source="pypi"),
    "64_128_768_3072_fused_eager.json.gz": flags(variant="fused"),
    "64_128_768_3072_adamw_eager.json.gz": flags(optimizer="adamw"),
    "64_128_768_3072_fused_adamw-fused_eager.json.gz": flags(variant="fused", optimizer="adamw-fused"),
}


def test_every_h200_trace_is_covered():
    assert {p.name for p in H200_TRACES.glob("*.json.gz")} == set(H200_RUNS)


@pytest.mark.parametrize("name", list(H200_RUNS))
def test_every_gpu_expectation_holds_on_the_h200_trace(name):
    trace = read_trace(H200_TRACES / name)
    outcomes = {e.title: e.check(trace) for e in LESSON.expectations(H200_RUNS[name], "cuda")}
    assert outcomes and all(o.ok for o in outcomes.values()), {t: o.evidence for t, o in outcomes.items() if not o.ok}
