"""Lesson 12's training step on an H200 (torch 2.11), recorded twice: with every habit planted and with every habit
fixed. The same step, the same sizes: each rule the planted trace holds a pattern for fires on it, and none of them
on the fixed one (the pairs the host's rules are checked on, beside other people's traces in test_advice.py). The H200's
fixed step is the lesson's earlier one, its batches made by 4 DataLoader workers (which did not keep up in one step of
three: the dataloader-workers rule's real trace); the lesson's fix now makes each batch on the GPU, as the H100's fixed
trace does. The H100's planted trace is from a host whose CPU ran torch's ops up to 30× slower on its threads: what a
slow host changes."""

from __future__ import annotations

import pytest

import trace_report
from trace_report.tests.support import FIXTURES

LESSON = FIXTURES / "h200" / "traces" / "12_what_to_change"
PLANTED = LESSON / "32_256_1024_4096_L4_planted_eager_fp32.json.gz"
FIXED = LESSON / "32_256_1024_4096_L4_fixed-all_eager_fp32.json.gz"
HABITS = ("dataloader", "pageable-copy", "sync", "fp32-matmul", "single-tensor-optimizer", "zero-grad",
          "cpu-built-tensor", "loop-kernels")
# What the planted step's trace shows worth 1% of its step or more (the lesson's guesses on a GPU, QUIET_ON_A_GPU)
FOUND = ("dataloader", "sync", "fp32-matmul", "loop-kernels", "pageable-copy", "cpu-built-tensor")


@pytest.fixture(scope="module")
def planted():
    return trace_report.read(PLANTED)


@pytest.fixture(scope="module")
def fixed():
    return trace_report.read(FIXED)


@pytest.mark.parametrize("rule", FOUND)
def test_each_habit_the_planted_step_pays_for_is_found(planted, rule):
    finding = planted.advice.finding(rule)
    assert finding is not None, planted.advice.rules
    low, high = finding.saving_us
    assert 0 <= low <= high <= planted.advice.step_us
    assert "12_what_to_change.py" in (finding.where or ""), finding.where


# The same step on H100 hosts: planted on one whose CPU was slow, fixed (each batch made on the GPU) on another
SLOW_HOST = FIXTURES / "h100" / "traces" / "12_what_to_change"


def test_a_slow_hosts_position_table_is_weighed_by_its_making():
    """The H100 host's torch ops ran up to 30× slower on its 16 threads than on one: the table took 8.9 ms a step to
    make (sin on 256×512 from 0.07 to 4.2 ms, step to step), and the advice weighs it at 8% of the step, the making
    and its copy."""
    report = trace_report.read(SLOW_HOST / PLANTED.name)
    finding = report.advice.finding("cpu-built-tensor")
    assert finding is not None, report.advice.rules
    low, high = finding.saving_us
    assert 5_000 < low <= high < 40_000, finding.saving_us
    assert "aten::sin" in finding.evidence and "1.0 MB a step" in finding.evidence
    fixed = trace_report.read(SLOW_HOST / FIXED.name)
    assert not set(HABITS) & set(fixed.advice.rules), fixed.advice.rules


def test_the_training_loops_backward_is_named_with_it(planted):
    """The planted loss loops over the batch's rows in a training step: autograd runs one node per row and op."""
    finding = planted.advice.finding("loop-kernels")
    assert "as many autograd nodes in the backward" in finding.evidence, finding.evidence
    assert "(forward and backward)" in finding.basis, finding.basis


def test_the_loops_backward_is_its_own_nodes_not_the_models_gemms(planted):
    """The loop's body holds `aten::add` (loss = loss + ...): AddmmBackward0, the model's backward GEMMs (22 ms a step),
    is not its backward. Counted as the loop's, they made the finding promise 12.7-25.2 ms; an H200 and an H100 host
    measured nothing saved by the vectorised loss."""
    finding = planted.advice.finding("loop-kernels")
    low, high = finding.saving_us
    assert 0 < low <= high < 4_000, finding.saving_us


def test_the_fixed_step_shows_none_of_the_habits(fixed):
    assert not set(HABITS) & set(fixed.advice.rules), fixed.advice.rules


def test_every_fp32_gemm_is_counted_and_no_tf32_one(planted, fixed):
    """The planted step's GEMMs run as cuBLAS's sm80_xmma ffma kernels and CUTLASS's simt_sgemm (which name no
    dtype); the fixed step's as sm90_xmma_gemm_f32f32_tf32f32: fp32 in memory, TF32 on the tensor cores."""
    finding = planted.advice.finding("fp32-matmul")
    assert "×23 a step" in finding.evidence, finding.evidence
    assert fixed.advice.finding("fp32-matmul") is None


def test_pinning_without_workers_is_weighed_on_the_loops_thread(planted):
    """No DataLoader workers: pin_memory=True pins on the loop's thread, a copy on the CPU. The range starts near
    nothing (an H100 measured 1.1 ms saved of a 10.7 ms pageable copy) and stays under the copy's own time (8.6 ms a
    step here)."""
    finding = planted.advice.finding("pageable-copy")
    low, high = finding.saving_us
    assert low < 1000 and high < 8_580, finding.saving_us
    assert "loop's thread" in finding.basis and "num_workers" in finding.change


def test_a_batch_of_large_tensor_ops_is_made_on_the_gpu(planted):
    """The loop's thread made a batch of tanh, mul and collate on 256×1024 samples, which torch spread over the host's
    16 cores: workers would make it on the same cores (4 of them took this step from 72 to 100 ms), so the change makes
    it on the GPU. The least saving keeps the batch's copies, the most drops them with the data kept on the GPU."""
    finding = planted.advice.finding("dataloader")
    low, high = finding.saving_us
    loader_us = float(finding.evidence.split(": ", 1)[1].split(" ms")[0].replace(",", "")) * 1000
    assert 0.3 * loader_us < low < high <= planted.advice.step_us, (finding.saving_us, loader_us)
    copies_us = sum(w.dur for s in planted.trace.steps for w in s.gpu if w.is_pageable_copy and w.dur > 1000)
    assert high - low > 0.5 * copies_us / len(planted.trace.steps), (finding.saving_us, copies_us)
    assert finding.change.startswith("make the batch on the GPU") and "tanh" in finding.change, finding.change
    assert "num_workers" not in finding.change and "torch spread over the loop's cores" in finding.basis


def test_a_batch_of_small_ops_keeps_its_least_saving(tmp_path):
    """The same trace with every op inside the loader on 16 elements (a dataset of small samples, one thread either
    way): workers make a batch no slower than the loop's thread did, and the step saves at least the rest of it."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(PLANTED.read_bytes()))
    for event in doc["traceEvents"]:
        if event.get("cat") == "cpu_op" and "Input Dims" in event.get("args", {}):
            event["args"]["Input Dims"] = [[16] if dims else [] for dims in event["args"]["Input Dims"]]
    path = tmp_path / "small_samples.json"
    path.write_text(json.dumps(doc))
    finding = trace_report.read(path).advice.finding("dataloader")
    low, high = finding.saving_us
    assert 10_000 < low <= high, finding.saving_us
    assert "no faster at worst" in finding.basis, finding.basis
    assert "worker_init_fn" not in finding.change and finding.change.endswith("prefetch_factor=2)"), finding.change


def test_the_position_tables_making_is_counted_whole(planted):
    """The table's making is every op from its first arange to its copy: exp, the outer product's mul, sin, cos,
    stack (0.8 ms a step on the H200 host), not the factory ops alone (arange, exp, sin, cos: a third of it). The
    Python time between those ops is not the table's (an earlier rule dropped it too and promised 4 ms)."""
    finding = planted.advice.weighed("cpu-built-tensor")
    assert finding is not None
    making = []
    for step in planted.trace.steps:
        top = sorted((o for o in step.ops if o.path == ("data",)), key=lambda o: o.ts)
        first = next(i for i, o in enumerate(top) if o.name == "aten::arange")
        copy = next(i for i, o in enumerate(top) if o.name == "aten::to" and o.input_dims[:1] == ((256, 1024),))
        making.append(sum(o.dur for o in top[first:copy + 1]))
    per_step = sum(making) / len(making)
    low, high = finding.saving_us
    assert 0.5 * per_step <= low <= high <= 1.5 * per_step, (finding.saving_us, per_step)  # low: the CPU unprofiled


def test_a_loop_waiting_for_its_workers_is_said_without_a_promise(fixed, planted):
    """The fixed step's 4 workers, one thread each, did not keep up in one recorded step of three: it waited 65 ms for
    its batch (the others 0.2 and 0.6 ms), and the step took 21 ms without the profiler against 8 ms of GPU work.
    Whether the host has cores for more workers no trace says: the range starts at nothing, and ends near the 22 ms a
    step the waits cost."""
    finding = fixed.advice.finding("dataloader-workers")
    assert finding is not None, fixed.advice.rules
    low, high = finding.saving_us
    assert low == 0 and 15_000 < high < fixed.advice.step_us - 7_000, finding.saving_us
    assert "65.30 ms the longest wait" in finding.evidence and "num_workers" in finding.change
    assert planted.advice.finding("dataloader-workers") is None  # no workers there: the dataloader rule's


def test_savings_weigh_each_step_by_its_time(fixed):
    """The fixed step's three recorded steps took 11, 76 and 8 ms: the fusion a compiler would do saves GPU time the
    steps did not wait on, under 1% of their time, and is not said (a mean of each step's share would weigh the short
    steps as much as the long one)."""
    assert fixed.advice.finding("compile-fusion") is None, fixed.advice.rules


def test_workers_that_keep_up_are_not_named(tmp_path):
    """The same fixed step with every wait cut to the shortest one it had (0.15 ms): the batches were ready, and no
    finding is made of the loader."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(FIXED.read_bytes()))
    waits = [e for e in doc["traceEvents"] if "_MultiProcessingDataLoaderIter.__next__" in str(e.get("name"))]
    assert max(e["dur"] for e in waits) > 60_000
    for event in waits:
        event["dur"] = min(event["dur"], 150.0)
    path = tmp_path / "workers_kept_up.json"
    path.write_text(json.dumps(doc))
    assert trace_report.read(path).advice.finding("dataloader-workers") is None


# Lesson 12's fixed step when its fix made each sample on the GPU, one sample at a time (the stored inputs on the GPU,
# roll, scale, tanh and the weight's fill per sample: 128 launches a step from the DataLoader), on two H100 hosts
SAMPLES_ON_GPU = FIXTURES / "h100" / "dataloader"


def test_a_batch_made_on_the_gpu_a_sample_at_a_time_is_named():
    """On a host whose CPU ran torch's ops slowly, the loader's launches were 9.6 ms of a 10.3 ms step: made a batch at
    a time, each op's launches are one call's. Workers would not help (the work is the GPU's): they are not named."""
    report = trace_report.read(SAMPLES_ON_GPU / "samples_on_gpu_slow_host.json.gz")
    assert report.verdict.cause == "data loading"
    finding = report.advice.finding("dataloader")
    assert finding is not None and finding.title == "batches made on the GPU a sample at a time", report.advice.rules
    assert "roll ×32" in finding.evidence and "128 launches" in finding.evidence, finding.evidence
    assert "__getitems__" in finding.change and "num_workers" not in finding.change
    low, high = finding.saving_us
    assert 500 < low <= high < 3_420, finding.saving_us  # at most the per-sample ops' own CPU time, 3.42 ms a step


def test_the_replayed_cpu_is_as_fast_as_the_step_timed_without_the_profiler():
    """The same step on a host that held still: its issue time measured without the profiler makes the CPU 1.19x
    faster than recorded, but the replay then takes 9.1 ms for a step timed at 7.43 ms (its GPU working 7.38 ms). At
    1.37x it takes 7.43 ms, and the loader's launches are worth 0.23 ms at that end, not 0.54."""
    report = trace_report.read(SAMPLES_ON_GPU / "samples_on_gpu.json.gz")
    finding = report.advice.finding("dataloader")
    low, high = finding.saving_us
    assert low < 300 < high, finding.saving_us
    assert "the CPU 1.2× to 1.4× faster than recorded" in finding.basis, finding.basis
