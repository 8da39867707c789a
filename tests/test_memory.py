"""Lesson 11, where a training step's memory goes: the lesson run on the CPU as a user runs it (its claims, its files),
`trace-report`'s memory section on its trace, on a trace the lesson did not write and on one without memory events,
and the GPU's claims on an H100 trace kept as a fixture."""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import re
import shlex

import pytest
import torch
from conftest import FIXTURES, H200_EAGER, lesson_marks, load_trace, run_script
from torch.profiler import ProfilerActivity, profile, record_function

from trace_report import read_trace
from profiling_in_pytorch.checks import memory as mx
from trace_report.memory import CategoryTimeline, memory_peaks

SCRIPT = "11_memory_mlp.py"
LESSON = importlib.import_module("11_memory_mlp")
TINY = "--batch 2 --seq 32 --dim 16 --hidden 32 --layers 2"
CPU_RUNS = {"eager": TINY, "checkpoint": f"{TINY} --checkpoint"}  # the checkpointed run compares with the eager one
TRACES = {"eager": "2_32_16_32_L2_adamw_eager_fp32_cpu.json", "checkpoint": "2_32_16_32_L2_ckpt_adamw_eager_fp32_cpu.json"}
GPU_FIXTURES = FIXTURES / "h100" / "memory"
GPU_EAGER = GPU_FIXTURES / "64_128_768_3072_L2_adamw_eager.json.gz"
GPU_CHECKPOINT = GPU_FIXTURES / "64_128_768_3072_L2_ckpt_adamw_eager.json.gz"
GPU_SIZES = {"batch": 64, "seq": 128, "dim": 768, "hidden": 3072, "layers": 2}


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("memory")
    results = {name: run_script(SCRIPT, *shlex.split(args), "--device", "cpu", "--trace_dir", str(folder), cwd=folder)
               for name, args in CPU_RUNS.items()}
    return folder / "11_memory_mlp", results


def report(*args: str):
    return run_script("-m", "trace_report.report", *args)


@pytest.mark.parametrize("name", list(CPU_RUNS))
def test_cpu_lesson_checks_its_claims_and_writes_its_files(cpu_runs, name):
    folder, results = cpu_runs
    result = results[name]
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.strip() == ""  # no C++ allocator warning, no library chatter
    seen = lesson_marks(result.stdout)
    failed = [title for title, mark in seen.items() if mark == "✗"]
    # Only what needs a caching allocator fails on a CPU, each with that reason.
    assert len(failed) == 2 and all("torch.cuda.max_memory_allocated" in t or "optimizer's first" in t for t in failed)
    assert result.stdout.count("known reason: a CPU has no caching allocator") == 2
    assert any("peaks in backward" in t and m == "✓" for t, m in seen.items())
    assert any("holds" in t and "for the backward" in t and m == "✓" for t, m in seen.items())
    trace = folder / TRACES[name]
    assert trace.is_file() and trace.with_name(trace.name.removesuffix(".json") + ".memory.png").is_file()
    assert not list(folder.glob("*.pickle"))  # the allocator's snapshot is a GPU's
    assert "only a GPU shows the caching allocator" in result.stdout
    if name == "checkpoint":
        assert any("runs again (2 per step)" in t and m == "✓" for t, m in seen.items())
        assert any("lowers the step's peak" in t and m == "✓" for t, m in seen.items())


def test_checkpointing_holds_less_and_recomputes(cpu_runs):
    folder, _ = cpu_runs
    eager, ckpt = (CategoryTimeline.of(read_trace(folder / TRACES[n])) for n in ("eager", "checkpoint"))
    assert ckpt.total(ckpt.peak_index()) < eager.total(eager.peak_index())
    trace = read_trace(folder / TRACES["checkpoint"])
    backward = trace.steps[0].phase(LESSON.BACKWARD)
    again = [op for op in backward.ops if op.is_label and op.name == LESSON.RECOMPUTE]
    assert len(again) == 2 and any(op.name == "aten::gelu" and LESSON.RECOMPUTE in op.path for op in backward.ops)


def test_trace_report_reads_the_memory_events(cpu_runs):
    folder, _ = cpu_runs
    path = folder / TRACES["eager"]
    raw = [e for e in load_trace(path)["traceEvents"] if e.get("name") == "[memory]"]
    result = report(str(path), "--json")
    assert result.returncode == 0, result.stderr
    (peak,) = json.loads(result.stdout)["memory"]
    assert peak["device"] == "cpu" and peak["events"] == len(raw)
    assert peak["peak_bytes"] == max(e["args"]["Total Allocated"] for e in raw)
    assert peak["step"] == "ProfilerStep#2" and peak["ranges"] == ["backward"]
    assert sum(a["bytes"] for a in peak["allocators"]) <= peak["peak_bytes"]
    assert {a["where"] for a in peak["allocators"]} >= {"forward"}  # the forward's activations are live at the peak
    text = report(str(path), "--rows", "0")
    assert text.returncode == 0 and re.search(r"Memory on cpu: peak [\d,]+ bytes allocated, ProfilerStep#2 at", text.stdout)


def test_trace_report_on_a_trace_it_did_not_write(tmp_path):
    """A plain profile of any model (no steps, no lesson's timeline), and a trace without memory events."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("train"):
            model(torch.randn(32, 16)).sum().backward()
    path = tmp_path / "any.json"
    prof.export_chrome_trace(str(path))
    (peak,) = json.loads(report(str(path), "--json").stdout)["memory"]
    assert peak["device"] == "cpu" and peak["peak_bytes"] > 0 and "train" in peak["ranges"]
    assert CategoryTimeline.of(read_trace(path)) is None
    without = report(str(H200_EAGER), "--json")
    assert json.loads(without.stdout)["memory"] == []
    assert "Memory on" not in report(str(H200_EAGER), "--rows", "0").stdout


def test_gpu_memory_events_by_device_and_what_was_there_before(tmp_path):
    """A GPU's events as Kineto writes them: the device named, the reserved bytes kept, and what no event of the trace
    allocated (the weights, cuBLAS's workspace) shown apart."""
    ops = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
           {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 1, "dur": 40},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
           {"ph": "X", "cat": "cpu_op", "name": "aten::gelu", "pid": 1, "tid": 1, "ts": 20, "dur": 10}]

    def mem(ts, addr, nbytes, total):
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": {"Addr": addr, "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 4096,
                         "Device Type": 1, "Device Id": 0}}

    events = ops + [mem(6, 1, 1000, 3000), mem(21, 2, 500, 3500), mem(50, 1, -1000, 2500)]
    path = tmp_path / "gpu.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    (peak,) = memory_peaks(read_trace(path))
    assert (peak.device, peak.peak_bytes, peak.reserved_bytes, peak.op) == ("cuda:0", 3500, 4096, "aten::gelu")
    assert [(a.op, a.nbytes) for a in peak.allocators] == [("aten::mm", 1000), ("aten::gelu", 500)]
    assert peak.before_recording == 2000 and peak.ranges == ("forward",)


@pytest.mark.parametrize("flags", ["--variant liger --model tiny-llama", "--variant fused --compile",
                                   "--kernel_source pypi", "--model gpt-17", "--checkpoint --compile"])
def test_bad_flags_are_one_line(tmp_path, capsys, flags):
    with pytest.raises(SystemExit) as exited:
        LESSON.main([*shlex.split(flags), "--trace_dir", str(tmp_path)])
    assert exited.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.json"))


# --- on an H100: traces the lesson wrote there (gzipped), their claims checked here ---------------------------


def gpu_fixture(path):
    if not path.is_file():
        pytest.skip(f"no H100 memory trace at {path.relative_to(FIXTURES.parent.parent)}: docs/memory.md says how to "
                    "make it")
    return read_trace(path)


def gpu_held(checkpoint: bool) -> int:
    """The lesson's own prediction for the fixture's run (bf16). The loss, a 0-d tensor, keeps mse_loss's
    [tokens, dim] buffer on a GPU as on a CPU (the fixture's block allocated by aten::mse_loss, live at the
    forward's end)."""
    args = argparse.Namespace(**GPU_SIZES, checkpoint=checkpoint, compile=False, variant="eager")
    loss_bytes = GPU_SIZES["batch"] * GPU_SIZES["seq"] * GPU_SIZES["dim"] * 2
    return LESSON.held_prediction(args, 2, loss_bytes, torch.device("cuda"))[0]


@pytest.mark.parametrize("checkpoint", [False, True], ids=["eager", "checkpoint"])
def test_h100_memory_claims(checkpoint):
    trace = gpu_fixture(GPU_CHECKPOINT if checkpoint else GPU_EAGER)
    labels = (LESSON.FORWARD, LESSON.BACKWARD, LESSON.OPTIMIZER)
    checks = [mx.memory_events_recorded(), mx.state_held_from_the_start(True), mx.peak_in_phase(LESSON.BACKWARD, labels),
              mx.largest_at_peak(("autograd detail",) if checkpoint else ("activations",)),
              mx.activations_held(LESSON.FORWARD, gpu_held(checkpoint), "the lesson's prediction"),
              mx.peak_matches_allocator(0.02), mx.steady_peak_not_below_first()]
    if checkpoint:
        checks += [mx.recompute_in_backward(LESSON.RECOMPUTE, LESSON.BACKWARD, GPU_SIZES["layers"]),
                   mx.checkpointing_saves(GPU_EAGER)]
    for check in checks:
        outcome = check.check(trace)
        assert outcome.ok, f"{check.text}: {outcome.evidence}"
    peaks = {p.device: p for p in memory_peaks(trace)}
    peak = peaks["cuda:0"]  # and the CPU's few bytes beside it
    assert peak.reserved_bytes >= peak.peak_bytes > 0 and peak.phase == LESSON.BACKWARD
    timeline = CategoryTimeline.of(trace)
    assert timeline.device == "cuda:0" and timeline.extras["max_memory_allocated"] > 0


def test_categories_against_the_allocator_add_what_no_op_touched(cpu_runs, tmp_path):
    """The GPU check's arithmetic on the CPU trace, given the allocator's figures a GPU run writes: the categories'
    peak plus what was allocated before and touched by no op, against max_memory_allocated, within 2%."""
    folder, _ = cpu_runs
    data = load_trace(folder / TRACES["eager"])
    timeline = CategoryTimeline.of(read_trace(folder / TRACES["eager"]))
    peak, start = timeline.total(timeline.peak_index()), timeline.total(0)
    outcomes = []
    for most in (peak + 1000, int((peak + 1000) * 1.03)):
        data["memoryTimeline"]["extras"].update(allocated_before=start + 1000, max_memory_allocated=most)
        path = tmp_path / f"{most}.json"
        path.write_text(json.dumps(data))
        outcomes.append(mx.peak_matches_allocator(0.02).check(read_trace(path)))
    assert outcomes[0].ok and "ratio 1.0000" in outcomes[0].evidence
    assert outcomes[1].ok is False


def test_the_timeline_lands_on_the_traces_clock_with_or_without_its_base(cpu_runs):
    folder, _ = cpu_runs
    trace = read_trace(folder / TRACES["eager"])
    with_base = CategoryTimeline.of(trace)
    first = min(e.ts for e in trace.memory_events)
    assert abs(with_base.times_us[0] - first) < 1.0  # the profiler's clock minus baseTimeNanoseconds
    del trace.meta["baseTimeNanoseconds"]
    without = CategoryTimeline.of(trace).times_us  # its first point on the first event: within the µs torch truncates
    assert len(without) == len(with_base.times_us) and max(abs(a - b) for a, b in zip(without, with_base.times_us)) < 1


def test_an_unknown_share_as_large_as_the_forwards_is_named_activations(tmp_path):
    """torch's memory profiler leaves uncategorized what it cannot tie to the autograd graph (a transformers model's
    saved tensors, on an H100: 105.1 MB unknown at the peak, 105.2 MB held by the forward): the ✗ says so, and only
    when the sizes agree."""
    data = json.load(gzip.open(GPU_EAGER, "rt"))
    timeline = data["memoryTimeline"]
    moved, unknown = timeline["categories"].index("ACTIVATION"), timeline["categories"].index("UNKNOWN")
    check = mx.largest_at_peak(("activations",), forward=LESSON.FORWARD)
    outcomes = []
    for share in (1.0, 0.5):
        for row in timeline["sizes"]:
            part = int(row[moved] * share)
            row[moved], row[unknown] = row[moved] - part, row[unknown] + part
        path = tmp_path / f"unknown_{share}.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump(data, f)
        outcomes.append(check.check(read_trace(path)))
        data = json.load(gzip.open(GPU_EAGER, "rt"))
        timeline = data["memoryTimeline"]
    whole, half = outcomes
    assert whole.ok is False and "the saved activations, uncategorized" in whole.reason, whole
    assert half.ok is True or half.reason is None, half


@pytest.mark.parametrize("variant, checkpoint, largest", [("eager", False, ("activations",)),
                                                          ("eager", True, ("autograd detail",)),
                                                          ("fused", False, ("inputs",))])
def test_the_guess_names_the_category_torchs_profiler_files_them_under(variant, checkpoint, largest):
    """The post's shape, 2 layers, AdamW, on an H100: what the lesson guessed there and the trace showed."""
    args = argparse.Namespace(**GPU_SIZES, variant=variant, checkpoint=checkpoint, compile=False, optimizer="adamw")
    tokens_hidden = 64 * 128 * 3072 * 2
    held = LESSON.held_prediction(args, 2, 64 * 128 * 768 * 2, torch.device("cuda"))[0]
    params = 2 * 3 * 768 * 3072 * 2
    phase, guessed, _ = LESSON.peak_guess(held, params, 768 * 3072 * 2, args, True, tokens_hidden)
    assert (phase, guessed) == (LESSON.BACKWARD, largest)
