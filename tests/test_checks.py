"""Guess first, then look: expectations checked against real H200 traces and CPU traces made here."""

from __future__ import annotations

import gzip
import importlib
import inspect
import io
import json
import shutil
from pathlib import Path

from conftest import H200_COMPILED as COMPILED
from conftest import H200_EAGER as EAGER
from conftest import H200_FUSED_DECODE as FUSED_DECODE
from conftest import H200_LINEAR as LINEAR
from conftest import H200_SDPA_MATH as SDPA_MATH
from conftest import FIXTURES
from rich.console import Console

from profiling_in_pytorch import checks as ex
from trace_report import read_trace


FIXTURES_01 = FIXTURES / "h200" / "traces" / "01_matmul_add"


def console() -> Console:
    return Console(file=io.StringIO(), width=300, highlight=False)


def edited(source: Path, dest: Path, edit) -> Path:
    """A copy of a fixture trace with its events changed by `edit(events)`."""
    with gzip.open(source, "rt") as f:
        data = json.load(f)
    edit(data["traceEvents"])
    dest.write_text(json.dumps(data))
    return dest


# --- the post's expectations hold on its traces --------------------------------------------------------------


def test_eager_mlp_expectations_hold(eager):
    for expectation in [
        ex.kernels_per_step(5),
        ex.gemms_per_step(3),
        ex.gemms_launched_by("aten::mm"),
        ex.launches_nothing("aten::t"),
    ]:
        outcome = expectation.check(eager)
        assert outcome.ok, (expectation.text, outcome.evidence)
    evidence = ex.kernels_per_step(5).check(eager).evidence
    assert "vectorized_elementwise_kernel<gelu>" in evidence and "2 memsets" in evidence


def test_compiled_mlp_expectations_hold(compiled):
    for expectation in [
        ex.kernels_per_step(4),
        ex.gemms_per_step(3),
        ex.gemms_launched_by("aten::mm"),
        ex.no_separate_kernel_for("gelu", "mul"),
        ex.fused_pointwise_kernel("gelu", "mul"),
        ex.same_gemm_kernels_as(EAGER, what="the eager MLP"),
    ]:
        outcome = expectation.check(compiled)
        assert outcome.ok, (expectation.text, outcome.evidence)
    assert "triton_poi_fused__unsafe_view_gelu_mul_0" in ex.fused_pointwise_kernel("gelu", "mul").check(compiled).evidence


def test_linear_expectations_hold(linear):
    for expectation in [
        ex.kernels_per_step(1),
        ex.gemms_launched_by("aten::addmm"),
        ex.bias_in_gemm_epilogue(),
        ex.launches_nothing("aten::t"),
    ]:
        outcome = expectation.check(linear)
        assert outcome.ok, (expectation.text, outcome.evidence)
    assert "_bias_" in ex.bias_in_gemm_epilogue().check(linear).evidence


def test_kernel_counts_per_step_count_what_each_step_launched():
    """SDPA's math backend on the H200: 20 kernels per forward, whatever the warmup step leaves running."""
    trace = read_trace(SDPA_MATH)
    for expectation in (ex.kernels_per_step(20), ex.gemms_per_step(2)):
        outcome = expectation.check(trace)
        assert outcome.ok, (expectation.text, outcome.evidence)


# --- wrong guesses are ✗, with the reason when we know it ----------------------------------------------------


def test_wrong_counts_fail(eager, compiled):
    assert ex.kernels_per_step(4).check(eager).ok is False
    assert ex.kernels_per_step(5).check(compiled).ok is False
    assert ex.gemms_launched_by("aten::addmm").check(eager).ok is False


def test_fusion_expectations_fail_on_an_eager_trace_and_say_why(eager):
    outcome = ex.fused_pointwise_kernel("gelu", "mul").check(eager)
    assert outcome.ok is False and outcome.reason == ex.LOOKS_EAGER
    outcome = ex.no_separate_kernel_for("gelu", "mul").check(eager)
    assert outcome.ok is False and outcome.reason == ex.ATEN_ELEMENTWISE
    assert "vectorized_elementwise_kernel<gelu>" in outcome.evidence


def test_a_compiled_graph_has_no_aten_t(compiled):
    outcome = ex.launches_nothing("aten::t").check(compiled)
    assert outcome.ok is False and outcome.reason == ex.COMPILED_NO_VIEW_OPS


def test_hopper_launches_differ_from_the_posts_a100(linear, tmp_path):
    outcome = ex.runtime_calls_per_gemm().check(linear)
    assert outcome.ok is False and outcome.reason == ex.HOPPER_LAUNCH
    assert "cuLaunchKernelEx" in outcome.evidence

    def like_a100(events):
        for event in list(events):
            if event.get("name") == "cuLaunchKernelEx":
                event["name"], event["cat"] = "cudaLaunchKernel", "cuda_runtime"
                query = dict(event, name=ex.OCCUPANCY_QUERY, ts=event["ts"] - 2.0, dur=1.0, args={"correlation": -1})
                events.append(query)
            if event.get("cat") == "kernel":
                event["name"] = "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x5_tn"

    a100 = read_trace(edited(LINEAR, tmp_path / "a100.json", like_a100))
    assert ex.runtime_calls_per_gemm().check(a100).ok is True


def test_fused_lesson_at_decode_meets_a_split_k_down_projection_and_says_why():
    """05_fused_mlp.py at 8 tokens on the H200: cuBLAS splits K of the down projection, so 3 kernels, not 2."""
    lesson = importlib.import_module("05_fused_mlp")
    out = console()
    failed = ex.check_trace(lesson.expectations("cuda"), FUSED_DECODE, "cuda", console=out)
    text = out.file.getvalue()
    assert failed == 1
    assert "3 in each of 3 steps" in text and "splitKreduce_kernel" in text
    assert f"known reason: {ex.SPLIT_K}" in text
    assert ex.gemms_per_step(2).check(read_trace(FUSED_DECODE)).ok  # the fused one and down's: the reduce is no GEMM


def test_bias_outside_the_epilogue_is_two_kernels(tmp_path):
    def bias_copied_first(events):
        """As PyTorch does when the bias cannot go in the epilogue: a copy kernel, then a GEMM without _bias_."""
        kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
        launches = [e for e in events if e.get("name") == "cuLaunchKernelEx"]
        assert launches and all(e["args"]["correlation"] in kernels for e in launches), "the fixture's GEMM launches"
        plain_gemm = "ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x5_tn"
        copy = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>()"
        for e in launches:
            kernel = kernels[e["args"]["correlation"]]
            kernel["name"] = plain_gemm  # every step's GEMM loses its _bias_
            corr = e["args"]["correlation"] + 100_000
            events.append(dict(e, name="cudaLaunchKernel", ts=e["ts"] - 3.0, dur=2.0, args={"correlation": corr}))
            events.append(dict(kernel, name=copy, ts=kernel["ts"] - 2.0, dur=1.5, args={"correlation": corr}))

    trace = read_trace(edited(LINEAR, tmp_path / "bias_copy.json", bias_copied_first))
    outcome = ex.bias_in_gemm_epilogue().check(trace)
    assert outcome.ok is False and outcome.reason == ex.NO_LT_EPILOGUE
    assert "2 kernels each" in outcome.evidence
    assert ex.kernels_per_step(1).check(trace).ok is False


def test_geglu_kernel(compiled, tmp_path):
    assert ex.geglu_kernel().check(compiled).ok is False

    def liger(events):
        for event in events:
            if str(event.get("name", "")).startswith("triton_poi_fused"):
                event["name"] = "_geglu_tanh_forward_kernel"

    trace = read_trace(edited(COMPILED, tmp_path / "liger.json", liger))
    outcome = ex.geglu_kernel().check(trace)
    assert outcome.ok is True and "_geglu_tanh_forward_kernel" in outcome.evidence
    assert ex.gemms_per_step(3).check(trace).ok is True


# --- the eager twin of a compiled trace ----------------------------------------------------------------------


def test_eager_twin_follows_the_harness_file_names():
    assert ex.eager_twin(Path("t/64_128_768_3072_compile.json")) == Path("t/64_128_768_3072_eager.json")
    assert ex.eager_twin(Path("t/1024_32_64_compile_fp32.json")) == Path("t/1024_32_64_eager_fp32.json")


def test_same_gemms_as_eager_is_skipped_without_the_eager_trace(tmp_path):
    shutil.copy(COMPILED, tmp_path / "64_compile.json.gz")
    out = console()
    failed = ex.check_trace([ex.same_gemm_kernels_as_eager()], tmp_path / "64_compile.json.gz", "cuda", console=out)
    assert failed == 0
    text = out.file.getvalue()
    assert "–" in text and "skipped" in text and "run without --compile first" in text


def test_same_gemms_as_eager_with_the_eager_trace_next_to_it(tmp_path):
    shutil.copy(COMPILED, tmp_path / "64_compile.json.gz")
    shutil.copy(EAGER, tmp_path / "64_eager.json.gz")
    outcome = ex.same_gemm_kernels_as_eager().check(read_trace(tmp_path / "64_compile.json.gz"))
    assert outcome.ok is True and "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT ×2" in outcome.evidence


def test_same_gemms_as_eager_fails_when_they_differ(tmp_path):
    shutil.copy(COMPILED, tmp_path / "64_compile.json.gz")
    shutil.copy(LINEAR, tmp_path / "64_eager.json.gz")
    outcome = ex.same_gemm_kernels_as_eager().check(read_trace(tmp_path / "64_compile.json.gz"))
    assert outcome.ok is False
    assert "only in 64_eager.json.gz: nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT" in outcome.evidence


# --- CPU: the expectations speak of ops ----------------------------------------------------------------------


def test_cpu_expectations(cpu_trace):
    trace = read_trace(cpu_trace)
    assert ex.cpu_op_runs("aten::mm", per_step=3).check(trace).ok is True
    assert ex.cpu_op_runs("aten::gelu", per_step=1).check(trace).ok is True
    assert ex.cpu_op_runs("aten::mul").check(trace).ok is True
    assert ex.cpu_op_runs("aten::mm", per_step=2).check(trace).ok is False
    assert ex.cpu_op_runs("aten::addmm").check(trace).ok is False
    outcome = ex.no_cpu_op("aten::gelu", "aten::mul").check(trace)
    assert outcome.ok is False and outcome.reason == ex.NOT_COMPILED


def test_gpu_only_claims_on_a_cpu_trace_fail_and_say_why(cpu_trace):
    trace = read_trace(cpu_trace)
    for expectation in (ex.runtime_calls_per_gemm(), ex.gemms_per_step(3), ex.closing_sync(), ex.kernel_resources()):
        outcome = expectation.check(trace)
        assert outcome.ok is False and outcome.reason == ex.NO_GPU


def test_kernel_claims_read_the_math_ops_on_a_cpu_trace(cpu_trace):
    """No GPU: the ops that do the arithmetic stand in for kernels (the tiny MLP: 3 mm, a gelu, a mul)."""
    trace = read_trace(cpu_trace)
    assert ex.kernels_per_step(5).check(trace).ok is True
    assert ex.kernels_per_step(4).check(trace).ok is False
    assert ex.kernels_in_order(("GEMM", "GEMM", "gelu", "mul", "GEMM")).check(trace).ok is True
    assert ex.kernels_in_order(("GEMM", "gelu", "GEMM", "mul", "GEMM")).check(trace).ok is False
    outcome = ex.fused_pointwise_kernel("gelu", "mul").check(trace)
    assert outcome.ok is False and outcome.reason == ex.LOOKS_EAGER


# --- what the harness calls ----------------------------------------------------------------------------------


def test_every_check_a_concern_module_defines_is_one_call_away():
    for module in (ex.regime, ex.dispatch, ex.kernels, ex.training):
        defined = {name for name, obj in vars(module).items()
                   if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")}
        assert defined == set(module.__all__), (module.__name__, defined ^ set(module.__all__))
        assert all(getattr(ex, name) is getattr(module, name) for name in defined)


def test_announce_prints_the_guesses_first():
    out = console()
    ex.announce([ex.kernels_per_step(5), ex.fused_pointwise_kernel("gelu", "mul")], console=out)
    text = out.file.getvalue()
    assert text.index("What we expect to see") < text.index("5 kernels per step") < text.index("gelu and mul")


def test_check_trace_prints_marks_evidence_and_known_reasons():
    out = console()
    expectations = [ex.kernels_per_step(5), ex.gemms_per_step(3), ex.runtime_calls_per_gemm(), ex.kernels_per_step(7)]
    failed = ex.check_trace(expectations, EAGER, "cuda", console=out)
    assert failed == 2
    text = out.file.getvalue()
    assert text.count("✓") == 2 and text.count("✗") == 2
    assert "known reason: on Hopper (sm90)" in text
    assert "5 in each of 3 steps" in text


# --- P1-16: the CPU's cost of a compiled step against its eager twin ---------------------------------------------

H200_01 = FIXTURES / "h200" / "traces" / "01_matmul_add"


def _slowed_steps(events, names, extra_us):
    """Each named ProfilerStep made `extra_us` longer on the CPU, as if another process had taken the CPU for that
    long inside it: every event from the step's end on moves later."""
    for name in names:
        step = next(e for e in events if e.get("name") == name and e.get("ph") == "X")
        end = float(step["ts"]) + float(step["dur"])
        for e in events:
            if "ts" in e and float(e["ts"]) >= end:
                e["ts"] = float(e["ts"]) + extra_us
        step["dur"] = float(step["dur"]) + extra_us


def test_compiled_cpu_cost_compares_with_the_eager_twin_and_a_busy_machine_does_not_flip_it(tmp_path):
    compiled = tmp_path / "4096_bf16_cold_compile.json.gz"
    shutil.copy(H200_01 / "4096_bf16_cold_compile.json.gz", compiled)
    slowed = edited(H200_01 / "4096_bf16_cold_eager.json.gz", tmp_path / "slowed.json",
                    lambda events: _slowed_steps(events, ["ProfilerStep#2", "ProfilerStep#3"], 5000.0))
    with gzip.open(tmp_path / "4096_bf16_cold_eager.json.gz", "wt") as f:  # where the compiled run's twin is
        f.write(slowed.read_text())
    outcome = ex.more_cpu_than_eager().check(read_trace(compiled))
    # Two of the eager run's three steps slowed by 5 ms: its fastest step still says what eager costs.
    assert outcome.ok is True, outcome.evidence
    assert "compiled 120.8 µs, eager 48.4 µs" in outcome.evidence


def test_compiled_cpu_cost_fails_when_the_compiled_run_is_the_cheaper(tmp_path):
    # The eager trace under the compiled run's name, and the compiled one as its twin: compile "costs less".
    shutil.copy(H200_01 / "4096_bf16_cold_eager.json.gz", tmp_path / "4096_bf16_cold_compile.json.gz")
    shutil.copy(H200_01 / "4096_bf16_cold_compile.json.gz", tmp_path / "4096_bf16_cold_eager.json.gz")
    outcome = ex.more_cpu_than_eager().check(read_trace(tmp_path / "4096_bf16_cold_compile.json.gz"))
    assert outcome.ok is False and "compiled 48.4 µs, eager 120.8 µs" in outcome.evidence


def test_a_timing_claim_missed_on_short_cpu_steps_says_why_and_a_gpu_miss_does_not(tmp_path):
    # Lesson 01's cold run, its first recorded step cut to the length of the next: "cold" misses. Stripped of its GPU
    # lane it reads as a CPU run whose steps last tens of µs, where another process's moment can decide the claim; with
    # its GPU lane the miss stays unexplained.
    def first_step_like_the_second(events):
        steps = sorted((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
        steps[0]["dur"] = steps[1]["dur"]

    def cpu_only(events):
        first_step_like_the_second(events)
        events[:] = [e for e in events if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
                                                               "cuda_driver", "ac2g")]

    cold_run = FIXTURES_01 / "64_bf16_cold_eager.json.gz"
    cpu_file = edited(cold_run, tmp_path / "cpu.json", cpu_only)
    as_cpu = read_trace(cpu_file)
    on_gpu = read_trace(edited(cold_run, tmp_path / "gpu.json", first_step_like_the_second))
    assert not as_cpu.has_gpu and on_gpu.has_gpu and max(s.dur for s in as_cpu.steps) < 1000
    cold = ex.cold_first_step("matmul_add", claim="P1-04")
    assert cold.check(read_trace(cold_run)).ok  # uncut, the first step is the cold one
    missed = cold.check(as_cpu)
    assert missed.ok is False and missed.reason == ex.SHORT_CPU_STEPS
    unexplained = cold.check(on_gpu)
    assert unexplained.ok is False and unexplained.reason is None
    out = console()
    assert ex.check_trace([cold], cpu_file, "cpu", console=out) == 1
    assert f"known reason: {ex.SHORT_CPU_STEPS}" in out.file.getvalue()


def test_a_cpu_step_is_short_by_its_unprofiled_timing_however_long_a_busy_machine_made_the_profiled_ones(tmp_path):
    # A CPU run's three profiled steps each stretched past a millisecond (another process took the core in each), so
    # that the cold step misses: the step timed without the profiler, in the trace, says the steps are tens of µs
    # long, and the miss gets its reason; without that timing the fastest profiled step (over 1 ms) is all there is,
    # and where the unprofiled step is itself long the miss stays unexplained.
    def stretched(unprofiled_us):
        def edit(data):
            events = data["traceEvents"]
            events[:] = [e for e in events if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset",
                                                                   "cuda_runtime", "cuda_driver", "ac2g")]
            steps = sorted((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
            stretched_us = 2000.0 + steps[1]["dur"]
            for step in steps:
                step["dur"] = stretched_us  # the cold step no longer the longest
            if unprofiled_us is not None:
                data["unprofiled"] = {"device": "cpu", "repeats": 50, "wall_us_per_step": unprofiled_us,
                                      "cpu_issue_us_per_step": unprofiled_us, "gpu_us_per_step": None,
                                      "timing_s": 0.01}
        return edit

    def reason(unprofiled_us, name):
        with gzip.open(FIXTURES_01 / "64_bf16_cold_eager.json.gz", "rt") as f:
            data = json.load(f)
        stretched(unprofiled_us)(data)
        (tmp_path / name).write_text(json.dumps(data))
        trace = read_trace(tmp_path / name)
        assert not trace.has_gpu and min(s.dur for s in trace.steps) >= 2000
        outcome = ex.cold_first_step("matmul_add", claim="P1-04").check(trace)
        assert outcome.ok is False, outcome.evidence
        return outcome.reason

    assert reason(17.0, "short.json") == ex.SHORT_CPU_STEPS
    assert reason(None, "untimed.json") is None
    assert reason(5000.0, "long.json") is None
