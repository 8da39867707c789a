"""What to change: each rule of trace_report/advice on real traces that have its pattern (it fires, names the evidence
and a saving that fits the trace) and on traces of the same kind of step without it (silent); the verdict's cause;
the advice in --json, in the printed report and from Python."""

from __future__ import annotations

import gzip
import json

import pytest

import trace_report
from trace_report.tests.support import FIXTURES, H200_EAGER, run_report

WORLD = FIXTURES / "world"
H200 = FIXTURES / "h200" / "traces"
# A 2021 ResNet-50 training step on a V100 (torch 1.9): a DataLoader without workers, pageable copies of the batch,
# SGD one tensor at a time, zero_grad(set_to_none=False), fp32 convolutions: the habits of its day, all in one step.
V100_RESNET = WORLD / "v100_resnet50_2021_step6.json.gz"
FP32_GEMM = H200 / "01_matmul_add" / "4096_fp32_cold_eager.json.gz"
BF16_GEMM = H200 / "01_matmul_add" / "4096_bf16_cold_eager.json.gz"
TINY_GEMM = H200 / "01_matmul_add" / "64_bf16_cold_eager.json.gz"
ADAMW_FOREACH = H200 / "06_train_mlp" / "64_128_768_3072_adamw_eager.json.gz"
ADAMW_FUSED = H200 / "06_train_mlp" / "64_128_768_3072_fused_adamw-fused_eager.json.gz"
GRAPHED_DECODE = H200 / "07_decode_mlp" / "8_1_768_3072_16fwd_graph_eager.json.gz"
EXPLICIT_SYNCS = WORLD / "b300_sm103_moe_microbench.json.gz"
TINY_LLAMA_TRAIN = FIXTURES / "h100" / "traces" / "profile_model" / "tiny-llama_4_256_train_shapes_eager.json.gz"
LLAMA_COMPILED = FIXTURES / "h100" / "traces" / "profile_model" / "llama-1b_4_256_shapes_compile.json.gz"
CPU_RANDN_TOY = WORLD / "mi250_minitoy_train_hta.json.gz"  # a toy that makes its input with randn on the CPU


@pytest.fixture(scope="module")
def v100():
    return trace_report.read(V100_RESNET)


def _rules(path) -> list[str]:
    return trace_report.read(path).advice.rules


# --- each rule: fires on its pattern, silent without it -----------------------------------------------------------


def test_the_2021_resnet_step_shows_each_habit_of_its_day(v100):
    rules = v100.advice.rules
    for rule in ("dataloader", "single-tensor-optimizer", "zero-grad", "fp32-matmul"):
        assert rule in rules, (rule, rules)
    loader = v100.advice.finding("dataloader")
    assert "_SingleProcessDataLoaderIter.__next__" in loader.evidence
    assert "num_workers" in loader.change
    optimizer = v100.advice.finding("single-tensor-optimizer")
    assert "SGD" in optimizer.evidence and "fused=True" in optimizer.change


def test_pinning_on_the_loops_own_thread_is_no_saving_promised(v100):
    """The 2021 step copies its batch from pageable memory (1.95 ms of a 174 ms step), but its DataLoader has no
    workers: pin_memory=True would pin on the loop's thread, a copy on the CPU as long as CUDA's staging was. What is
    left to save is under 1% of the step, and the advice says nothing of it."""
    assert v100.advice.finding("pageable-copy") is None, v100.advice.rules


def test_volta_is_told_fp16_autocast_not_tf32(v100):
    finding = v100.advice.finding("fp32-matmul")
    assert "float16" in finding.change and "tf32" not in finding.change.lower()


def test_no_saving_exceeds_what_the_step_holds(v100):
    for finding in v100.advice:
        low, high = finding.saving_us
        assert 0 <= low <= high <= v100.advice.step_us, finding.rule
        spent = {"zero-grad": 4.54e3, "pageable-copy": 1.95e3}.get(finding.rule)
        if spent is not None:  # the time the pattern itself takes bounds its low end: no promise above it
            assert low <= spent * 1.05, (finding.rule, low)


@pytest.mark.parametrize("path", sorted(WORLD.glob("*.json.gz")), ids=lambda p: p.name.split(".")[0])
def test_no_finding_on_the_worlds_traces_promises_more_than_the_step(path):
    advice = trace_report.read(path).advice
    for finding in advice:
        low, high = finding.saving_us
        assert 0 <= low <= high <= advice.step_us, (finding.rule, finding.saving_us, advice.step_us)


def test_a_batch_copied_from_a_dataloader_is_no_constant_built_on_the_cpu(v100):
    assert v100.advice.finding("cpu-built-tensor") is None


def test_a_tensor_made_with_randn_on_the_cpu_every_step_is_found():
    finding = trace_report.read(CPU_RANDN_TOY).advice.finding("cpu-built-tensor")
    assert finding is not None and "aten::randn" in finding.evidence
    # new random values each step: made on the device, not "once, before the loop" (that would change the script)
    assert "torch.randn(..., device='cuda')" in finding.change and "once" not in finding.change, finding.change


@pytest.mark.parametrize("nbytes, found", [(4 << 20, False), (4 << 10, True)])
def test_a_tensor_from_the_hosts_data_is_no_constant_where_it_is_large(tmp_path, nbytes, found):
    """torch.tensor(data) (aten::lift_fresh) then .to('cuda'): a step's input where it is megabytes (a TimeSformer
    benchmark's 38.5 MB of frames a step in TraceLens' tests), which no device can make; a constant where small. The
    toy's randn made the same way, renamed."""
    doc = json.loads(gzip.open(CPU_RANDN_TOY, "rt").read())
    for event in doc["traceEvents"]:
        if event.get("name") == "aten::randn":
            event["name"] = "aten::lift_fresh"
        if event.get("cat") == "gpu_memcpy":
            event.setdefault("args", {})["bytes"] = nbytes
    path = tmp_path / "from_data.json"
    path.write_text(json.dumps(doc))
    finding = trace_report.read(path).advice.finding("cpu-built-tensor")
    assert (finding is not None) is found
    if found:
        assert "torch.tensor(..., device='cuda')" in finding.change, finding.change


def test_a_loop_in_an_inference_step_claims_no_backward():
    """Mamba's forward (its reference scan, one sequence position an iteration) has no autograd: the finding names the
    loop and its CPU time, not "as many autograd nodes in the backward"."""
    finding = trace_report.read(WORLD / "h200_mamba_shapes_suite.json.gz").advice.finding("loop-kernels")
    assert finding is not None and "a loop of 32 iterations" in finding.evidence
    assert "backward" not in finding.evidence and "backward" not in finding.basis, (finding.evidence, finding.basis)
    assert "mse_loss" not in finding.change  # no other script's loss in a reader's change


@pytest.mark.parametrize("name", ["h100_vllm_tp4_rank0_cudagraph_58to96ms.json.gz",
                                  "mi300x_vllm_tp4_rank0_185to210ms.json.gz"])
def test_a_models_loop_over_its_layers_is_no_loop_over_rows(name):
    """vLLM runs its layers in a Python loop (25 and 79 iterations here, each indexing its KV cache): each holds an
    attention and an all-reduce, which no vectorised op replaces."""
    from trace_report.advice.launches import _LoopMemo, _loops
    trace = trace_report.read(WORLD / name).trace
    memo = _LoopMemo()
    assert any(_loops(step, memo) for step in trace.steps)  # a loop is there
    assert trace_report.read(WORLD / name).advice.finding("loop-kernels") is None


def test_fp32_gemms_are_told_tf32_and_bf16_ones_are_not():
    report = trace_report.read(FP32_GEMM)
    finding = report.advice.finding("fp32-matmul")
    assert finding is not None and "torch.set_float32_matmul_precision('high')" in finding.change
    gemm_us = sum(w.dur for s in report.trace.steps for w in s.gemms) / len(report.trace.steps)
    low, high = finding.saving_us
    # TF32 at 495 against fp32's 67 TFLOP/s on an H200: the GEMM keeps 13-34% of its time, as the basis says
    assert 0.5 * gemm_us < low <= high < gemm_us
    assert "fp32-matmul" not in _rules(BF16_GEMM)


def test_foreach_and_fused_optimizers_are_left_alone():
    assert "single-tensor-optimizer" not in _rules(ADAMW_FOREACH)
    assert "single-tensor-optimizer" not in _rules(ADAMW_FUSED)


def test_zero_grad_to_none_is_left_alone():
    assert "zero-grad" not in _rules(TINY_LLAMA_TRAIN)


def test_explicit_synchronize_calls_are_found_with_what_they_cost():
    advice = trace_report.read(EXPLICIT_SYNCS).advice
    finding = advice.finding("sync")
    assert finding is not None and "torch.cuda.synchronize()" in finding.change
    assert "sync" not in _rules(LLAMA_COMPILED)


def test_a_launch_bound_step_is_told_cuda_graphs_and_a_graphed_one_is_not():
    finding = trace_report.read(TINY_GEMM).advice.finding("overhead")
    assert finding is not None and "reduce-overhead" in finding.change
    assert "overhead" not in _rules(BF16_GEMM)  # compute-bound
    assert "overhead" not in _rules(GRAPHED_DECODE)  # replays CUDA graphs already


def test_a_tiny_sync_leaves_a_launch_bound_step_its_graphs():
    """HF BERT's forward on an H100: 95% of the GPU's window waiting on launches, and one `if mask:` a step (a 9 µs
    synchronize). The sync is no finding of its own, and the step's launches still are: compile breaks its graph
    there and captures the rest."""
    finding = trace_report.read(WORLD / "h100_bert_suite.json.gz").advice.finding("overhead")
    assert finding is not None and "aten::is_nonzero" in finding.evidence, finding
    assert "sync" not in _rules(WORLD / "h100_bert_suite.json.gz")


def test_gaps_longer_than_launches_are_no_launch_overhead():
    """An A100 AlexNet trace read whole (no ProfilerStep): the GPU waited 38 times, 338 ms a gap, for a host doing
    other work. No CUDA graph takes that away: no overhead finding (it once promised 8.8-39 s)."""
    report = trace_report.read(WORLD / "a100_alexnet_cudnn_hta.json.gz")
    assert report.verdict.kind == "overhead-bound"
    assert report.advice.finding("overhead") is None, report.advice.rules


def test_a_compiled_step_without_graphs_is_told_to_add_them():
    finding = trace_report.read(WORLD / "h100_mlp_max_autotune_suite.json.gz").advice.finding("overhead")
    assert finding is not None and "compiled already: add CUDA graphs" in finding.change, finding.change
    eager = trace_report.read(WORLD / "h100_resnet50_train_suite.json.gz").advice.finding("overhead")
    assert "compiled already" not in eager.change


def test_a_launch_bound_vllm_step_is_told_vllms_own_switch():
    """vLLM run with enforce_eager (a B200 decode step, TP8): the engine captures CUDA graphs itself when allowed to;
    the reader did not write the model's torch.compile."""
    finding = trace_report.read(WORLD / "b200_vllm_eager_tp8_rank0_60to90ms.json.gz").advice.finding("overhead")
    assert finding is not None and "enforce_eager=False" in finding.change, finding.change
    assert "torch.compile" not in finding.change


def test_a_step_with_nothing_worth_changing_says_so_in_one_line():
    assert trace_report.read(H200_EAGER).advice.findings == []
    result = run_report(str(H200_EAGER), env={"COLUMNS": "100"})
    assert result.returncode == 0
    section = result.stdout.split("What to change", 1)[1].splitlines()
    assert section[1].strip().startswith("nothing found worth 1% of the step")


# What the host's and the launches' rules say on the world's traces, read and judged one by one (each finding's
# evidence): launch-bound eager steps told CUDA graphs; the loop Mamba's reference scan runs over rows (vLLM's over its
# layers is none); the 2021 ResNet step's habits; a toy's CPU-made input; microbenchmarks' explicit syncs; an AlexNet
# trace read whole and a DDP step whose GPU waits while no thread launches (cuDNN's first calls; DDP's unflatten, 15 ms).
EXPECTED_HOST_WORLD = {
    "a100_alexnet_cudnn_hta.json.gz": {"host-gaps"},
    "a100_event_sync_two_streams_hta.json.gz": {"host-gaps"},  # 18.6 ms of the host's own Python between two GEMMs
    "a100_nccl_hta_step5.json.gz": {"host-gaps", "overhead"},
    "b200_vllm_eager_tp8_rank0_60to90ms.json.gz": {"overhead"},
    "b300_sm103_moe_microbench.json.gz": {"sync"},
    "h100_bert_suite.json.gz": {"overhead"},
    "h100_mlp_max_autotune_suite.json.gz": {"overhead"},
    "h100_resnet50_train_suite.json.gz": {"overhead"},
    "h100_unet_train_suite.json.gz": {"overhead"},
    "h200_flex_attention_train_shapes_suite.json.gz": {"overhead"},
    "h200_mamba_shapes_suite.json.gz": {"loop-kernels", "overhead"},
    "h200_moe_shapes_suite.json.gz": {"overhead"},
    "h200_whisper_shapes_suite.json.gz": {"overhead"},
    "mi210_gpu_only.json.gz": {"sync"},
    "mi250_minitoy_train_hta.json.gz": {"cpu-built-tensor", "overhead"},
    "v100_resnet50_2021_nodeviceprops_step6.json.gz": {"dataloader", "fp32-matmul", "single-tensor-optimizer",
                                                       "zero-grad"},
    "v100_resnet50_2021_step6.json.gz": {"dataloader", "fp32-matmul", "single-tensor-optimizer", "zero-grad"},
}
HOST_RULES = {"cpu-built-tensor", "dataloader", "dataloader-workers", "fp32-matmul", "host-gaps", "loop-kernels",
              "overhead", "pageable-copy", "single-tensor-optimizer", "sync", "zero-grad"}


@pytest.mark.parametrize("path", sorted(WORLD.glob("*.json.gz")), ids=lambda p: p.name.split(".")[0])
def test_world_traces_say_only_what_was_judged_of_the_host(path):
    said = {f.rule for f in trace_report.read(path).advice.findings if f.rule in HOST_RULES}
    assert said == EXPECTED_HOST_WORLD.get(path.name, set())


def test_a_gpu_idle_while_no_thread_launches_names_what_ran():
    """An A100 AlexNet trace read whole: the GPU idled 11.9 s in 6 stretches while no thread launched, the next
    launching thread inside aten::conv2d for 8 s (cuDNN's first calls). Nothing promised at least; the change says a
    trace without ProfilerStep may hold first calls' setup."""
    finding = trace_report.read(WORLD / "a100_alexnet_cudnn_hta.json.gz").advice.finding("host-gaps")
    assert finding is not None and "aten::conv2d" in finding.evidence, finding
    assert finding.saving_us[0] == 0 and "warmup" in finding.change


def test_a_step_whose_gpu_never_waited_on_a_launch_is_told_no_cuda_graphs():
    """HTA's trace-compare test trace: 111 ms of CPU ops a step, 2 runtime calls, one 2 µs kernel, no idle stretch
    inside the steps. It once stopped the report (a verdict cause of None) and promised CUDA graphs 26-100 ms."""
    report = trace_report.read(WORLD / "hta_trace_compare_cpu_heavy.json.gz")
    assert report.verdict.kind == "overhead-bound" and report.verdict.cause is None
    assert "the GPU idles with nothing launched: the step's time is the CPU's own work" in report.verdict.summary
    assert report.advice.finding("overhead") is None, report.advice.rules


def test_device_events_the_reader_does_not_read_are_named():
    """CUPTI's range profiler wrote 77 cuda_profiler_range events in place of kernels: the note names them."""
    notes = trace_report.read(WORLD / "a100_cupti_range_profiler_hta.json.gz").trace.notes
    assert any("cuda_profiler_range ×77" in note for note in notes), notes
    assert not any("does not read" in note for note in trace_report.read(WORLD / "cpu_only_hta.json.gz").trace.notes)


# --- the verdict names the cause --------------------------------------------------------------------------------


def test_the_verdict_counts_the_gpus_idle_time_by_what_it_waited_on(v100):
    causes = v100.verdict.idle_by_cause_us
    assert causes.get("pageable copies", 0) > 0 and causes.get("launches", 0) > 0
    tiny = trace_report.read(TINY_GEMM).verdict
    assert tiny.kind == "overhead-bound" and tiny.cause == "launches"
    assert "waits for launches" in tiny.summary or "waiting for the next launch" in tiny.summary


def test_an_idle_gpu_with_its_work_already_launched_is_not_waiting_on_launches():
    """sglang's decode server on an MI300X, read whole: the GPU idled 463 ms with its next kernel launched 38 µs into
    the wait. The launches did not keep it waiting."""
    verdict = trace_report.read(WORLD / "mi300x_sglang_qwen3_8b_decode.json.gz").verdict
    assert verdict.cause == "queued work", verdict.idle_by_cause_us
    assert verdict.idle_by_cause_us["queued work"] > 100 * verdict.idle_by_cause_us.get("launches", 0)
    assert "already launched" in verdict.summary


def test_an_idle_gpu_whose_launching_thread_does_other_work_is_host_work():
    """An A100 AlexNet trace read whole: seconds between its launch calls (cudaMalloc and attribute queries beside
    them, no launch): the host's work, which no CUDA graph removes."""
    report = trace_report.read(WORLD / "a100_alexnet_cudnn_hta.json.gz")
    assert report.verdict.cause == "host work", report.verdict.idle_by_cause_us
    assert "no CUDA graph takes it away" in report.verdict.summary
    assert report.advice.finding("overhead") is None


# --- where the reader finds it ------------------------------------------------------------------------------------


def test_json_carries_the_advice_rows_ranked():
    result = run_report(str(V100_RESNET), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rows = data["advice"]
    assert [r["rule"] for r in rows] == trace_report.read(V100_RESNET).advice.rules
    for row in rows:
        assert set(row) >= {"rule", "evidence", "change", "saving_us", "share_of_step", "basis", "source"}
        assert row["source"], row["rule"]  # every rule says where its idea comes from
    middles = [sum(r["saving_us"]) / 2 for r in rows]
    assert middles == sorted(middles, reverse=True)
    assert "with_stack=True" in " ".join(data["advice_missing"])
    assert data["verdict"]["idle_by_cause_us"]["pageable copies"] > 0


def test_the_report_shows_the_top_findings_right_after_the_verdict():
    result = run_report(str(V100_RESNET), env={"COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    advice_at = next(i for i, line in enumerate(lines) if line.startswith("What to change"))
    assert 0 < advice_at - verdict_at <= 4 and advice_at < 60  # the first screen
    section = lines[advice_at:advice_at + 25]
    assert any("change: DataLoader(" in line for line in section)
    assert all(len(line) <= 100 for line in section)


# --- where in the reader's code ---------------------------------------------------------------------------------


@pytest.mark.parametrize("frame, line", [
    ("12_what_to_change.py(208): step", "step() in 12_what_to_change.py:208"),
    ("/home/u/proj/src/train.py(42): train_step", "train_step() in train.py:42"),
    ("src/model.py(12): forward", "forward() in model.py:12"),
    ("torch/nn/modules/module.py(1751): _call_impl", None),  # a library's frame
    ("transformers/utils/generic.py(642): _replace_old_cache_name", None),
    ("dataclasses.py(1248): <genexpr>", None),  # the standard library's
    ("/usr/lib/python3.11/contextlib.py(10): helper", None),
    ("<built-in method get of dict object at 0x7f26c199d080>", None),
])
def test_a_python_frame_is_the_readers_own_code_or_a_librarys(frame, line):
    from trace_report.python_frames import user_line
    assert user_line(frame) == line
