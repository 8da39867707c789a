"""`trace-report`'s summary (trace_report.summary) on real H200 training traces (AdamW's foreach
kernels, autograd's thread) and on GPU-shaped traces written here with module ranges: the kinds add up, every kernel
has its launching op, the modules add up, the idle time splits; and what the report prints around it."""

from __future__ import annotations

import json
import math

import pytest
from trace_report.tests.support import FIXTURES, run_report
from trace_report.tests.synthetic_traces import LAYER_FORWARD, training_trace

from trace_report import read_trace
from trace_report.kernels import decode
from trace_report.pace import verdict as judge
from trace_report.kernels import KINDS, kind_of_kernel
from trace_report.summary import summarize

TRAIN = FIXTURES / "h200" / "traces" / "06_train_mlp"
ADAMW = TRAIN / "64_128_768_3072_adamw_eager.json.gz"
ADAMW_FUSED = TRAIN / "64_128_768_3072_fused_adamw-fused_eager.json.gz"
COMPILED = TRAIN / "64_128_768_3072_compile.json.gz"


def _report(*args: str):
    return run_report(*args)


@pytest.fixture(scope="module")
def adamw():
    return read_trace(ADAMW)


@pytest.mark.parametrize("path", [ADAMW, ADAMW_FUSED, COMPILED, TRAIN / "64_128_768_3072_liger-pypi_eager.json.gz"])
def test_on_h200_training_traces_the_kinds_add_up_to_the_steps_gpu_time(path):
    trace = read_trace(path)
    summary = summarize(trace)
    steps_gpu_time = sum(w.dur for w in trace.gpu_work())
    assert math.isclose(sum(k.us for k in summary.kinds), steps_gpu_time, rel_tol=1e-9)
    assert math.isclose(summary.total_us, steps_gpu_time, rel_tol=1e-9)
    assert {k.kind for k in summary.kinds} <= set(KINDS)
    assert summary.kinds[0].kind == "GEMM"  # the MLP's nine GEMMs per step come first


def test_adamw_s_foreach_kernels_are_the_optimizer_and_each_has_its_foreach_op(adamw):
    summary = summarize(adamw)
    kinds = {k.kind: k for k in summary.kinds}
    foreach = [w for w in adamw.gpu_work() if "multi_tensor_apply_kernel" in w.name]
    assert len(foreach) == 8 * 3  # eight foreach ops per step launch a kernel each
    assert kinds["optimizer"].count == len(foreach)
    assert math.isclose(kinds["optimizer"].us, sum(w.dur for w in foreach), rel_tol=1e-9)
    for work in foreach:
        assert work.launched_by.startswith("aten::_foreach_"), work.launched_by
        assert decode(work.name).ops == (work.launched_by.removeprefix("aten::"),)  # the name says the op
        assert kind_of_kernel(work.name) == "optimizer"  # by its name alone too, outside Optimizer.step


def test_every_kernel_of_the_training_traces_has_its_launching_op_the_backward_s_included(adamw):
    summary = summarize(adamw)
    assert summary.not_linked == 0
    assert all(row.launched_by != "-" for row in summary.top)
    backward = adamw.steps[0].phase("mlp_bwd")
    autograd_thread = {(w.launch.pid, w.launch.tid) for w in backward.gemms} - {backward.thread}
    assert autograd_thread, "the backward's GEMMs come from autograd's own thread"
    assert all(w.launched_by == "aten::mm" for w in backward.gemms)


def test_no_kernel_of_any_h200_fixture_reads_as_a_bare_namespace():
    names = set()
    for path in (FIXTURES / "h200").rglob("*.json.gz"):
        names |= {w.name for w in read_trace(path).gpu_work() if w.kind == "kernel"}
    for name in names:
        short = decode(name).short
        assert not short.startswith(("at::native::", "at::")), (short, name)
        if "at::native::" in name:
            assert decode(name).ops, f"no op read from {name}"


def test_the_fused_optimizer_is_one_kernel_named_for_it():
    summary = summarize(read_trace(ADAMW_FUSED))
    top = {row.short: row for row in summary.top}
    fused = top["multi_tensor_apply_kernel<_fused_adamw_>"]
    assert (fused.kind, fused.launched_by, fused.count) == ("optimizer", "aten::_fused_adamw_", 3)


def test_the_idle_split_adds_up_and_sees_the_small_steps_wait_on_launches(adamw):
    summary = summarize(adamw)
    idle = summary.idle
    assert idle.launch_us + idle.sync_us + idle.other_us == pytest.approx(idle.idle_us)
    verdict = judge(adamw)
    assert idle.launch_us == pytest.approx(verdict.launch_wait_us)  # the verdict's own count of launch waits
    assert idle.launch_us > 0.5 * idle.window_us
    assert summary.verdict.startswith("overhead-bound")


# --- module ranges: traces written here ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_like(tmp_path_factory):
    return read_trace(training_trace(tmp_path_factory.mktemp("synthetic") / "llama.json", layers=3, chunks=4))


def test_the_modules_add_up_and_the_backward_counts_for_the_module_that_made_it(llama_like):
    summary = summarize(llama_like)
    n = summary.steps
    rows = {row.module: row for row in summary.modules}
    assert math.isclose(sum(row.self_us for row in summary.modules), summary.total_us, rel_tol=1e-9)
    forward_us = 3 * sum(us for *_, us in LAYER_FORWARD)  # per step: 3 layers; the backward runs 2x as long
    assert rows["LlamaDecoderLayer"].total_us / n == pytest.approx(3 * forward_us)
    assert rows["LlamaDecoderLayer"].backward_us / n == pytest.approx(2 * forward_us)
    assert rows["LlamaDecoderLayer"].calls / n == 3
    mlp = sum(us for chain, _, _, us in LAYER_FORWARD if chain[:1] == ("LlamaMLP",))
    assert rows["LlamaMLP"].total_us / n == pytest.approx(3 * 3 * mlp)
    assert rows["(no module) optimizer_step"].total_us / n == pytest.approx(2 * 4 * 15.0)
    top = {row.short: row for row in summary.top}
    assert top["multi_tensor_apply_kernel<_foreach_lerp_>"].launched_by == "aten::_foreach_lerp_"
    assert top["multi_tensor_apply_kernel<_foreach_lerp_>"].count / n == 4  # one kernel per chunk of tensors
    assert top["vectorized_elementwise_kernel<silu>"].module == "SiLUActivation"


def test_the_report_prints_the_summary_first_and_long_steps_only_when_asked(tmp_path):
    path = training_trace(tmp_path / "llama.json", layers=3)  # 3 × 18 + 6 kernels per step: over 40
    result = _report(str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("Where the GPU time goes") < out.index("Who sets the pace")
    assert "by module" in out and "LlamaMLP" in out
    assert "ProfilerStep#2 ·" not in out  # per-step lists left out: the summary stands for them
    assert "GPU work across 3 steps" not in out  # and the per-kernel tables: its top kernels stand for them
    assert "3 steps not printed one by one (--steps N or all)" in out
    shown = _report(str(path), "--steps", "1").stdout
    assert "ProfilerStep#2 ·" in shown and "ProfilerStep#3 ·" not in shown
    assert shown.index("Where the GPU time goes") < shown.index("GPU work across 3 steps")
    kernels = _report(str(path), "--kernels").stdout
    assert "GPU work across 3 steps" in kernels and "What the kernel names say" in kernels
    assert "ProfilerStep#2 ·" not in kernels


def test_short_steps_still_print_one_by_one():
    out = _report(str(ADAMW), "--steps", "3").stdout  # 32 GPU work items per step
    assert "ProfilerStep#2 ·" in out and "ProfilerStep#4 ·" in out
    assert "at::native::<…>" not in out
    brief = _report(str(ADAMW)).stdout  # 32 + 8 lines: one step fits the default's 40
    assert "ProfilerStep#2 ·" in brief and "ProfilerStep#3 ·" not in brief


def test_the_json_carries_the_summary(tmp_path):
    result = _report(str(training_trace(tmp_path / "llama.json")), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert summary["measure"] == "gpu_time"
    assert math.isclose(sum(k["share"] for k in summary["by_kind"]), 1.0, abs_tol=1e-3)
    assert {m["module"] for m in summary["by_module"]} >= {"LlamaMLP", "LlamaAttention", "LlamaRMSNorm", "Linear"}
    assert summary["top"][0]["launched_by"] == "aten::mm"
    assert summary["idle"]["window_us"] > 0
    both = json.loads(_report(str(ADAMW), str(ADAMW_FUSED), "--json").stdout)
    assert all("summary" in trace for trace in both["traces"])


TRANSFORMERS_FIXTURE = FIXTURES / "h200" / "traces" / "profile_model" / "tiny-llama_2_64_train_eager.json.gz"


@pytest.mark.skipif(not TRANSFORMERS_FIXTURE.is_file(), reason="the H200 trace of profile_model.py --model tiny-llama --train is not committed yet")
def test_a_transformers_training_step_from_an_h200_reads_by_module_with_every_kernel_launched_by_an_op():
    trace = read_trace(TRANSFORMERS_FIXTURE)
    summary = summarize(trace)
    assert summary.not_linked == 0
    assert all(row.launched_by != "-" for row in summary.top)
    assert math.isclose(sum(k.us for k in summary.kinds), summary.total_us, rel_tol=1e-9)
    assert math.isclose(sum(m.self_us for m in summary.modules), summary.total_us, rel_tol=1e-9)
    rows = {m.module: m for m in summary.modules}
    for module in ("LlamaAttention", "LlamaMLP", "LlamaRMSNorm", "Linear"):
        assert 0 < rows[module].backward_us < rows[module].total_us, module
    assert {"GEMM", "optimizer", "attention"} <= {k.kind for k in summary.kinds}
    assert not any(decode(w.name).short.startswith("at::") for w in trace.gpu_work() if w.kind == "kernel")
