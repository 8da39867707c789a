"""Modules from the trace's Python stacks: a trace recorded with `with_stack=True` names each module call in a
`python_function` event, `nn.Module: LlamaMLP_0` (the type, numbered per instance), around the ops. The reader gives
each op and runtime call the chain of module types around it (`CpuOp.modules`), the summary's by-module table reads
them where the trace has no `nn.Module: X` ranges, and nothing else changes: the ops, their paths and tables, the
labels and the Self CPU total read the same without the frames.

The fixture, trace_report/tests/fixtures/cpu/tiny-llama_with_stack_train.json.gz, is a real CPU trace: `record_fixture` below made
it (torch 2.15, transformers 5.24: a 2-layer LlamaForCausalLM of random weights, hidden 32, 8 tokens, a forward with
labels and a backward per step, `with_stack=True`, schedule(wait=1, warmup=1, active=3)), then gzip -9. It is not
run by the tests. `with_modules=True` alone writes no module events in eager mode (torch 2.15 records module
hierarchy for TorchScript only, and says so in a FutureWarning), so with_stack is what gives these frames.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest
from conftest import FIXTURES, run_script
from trace_report.tests.synthetic_traces import ROOT, training_trace

from trace_report import read_trace
from trace_report.model import MODULES_FROM_RANGES, MODULES_FROM_STACKS
from trace_report.summary import AUTOGRAD_BACKWARD, summarize

WITH_STACK = FIXTURES / "cpu" / "tiny-llama_with_stack_train.json.gz"
# sum(e.self_cpu_time_total for e in prof.key_averages()) when the fixture was recorded: what the table rounds
TORCH_SELF_CPU_TOTAL_US = 30683.511
# Module calls per step of a 2-layer LlamaForCausalLM's forward: q, k, v, o and gate, up, down per layer, lm_head
CALLS = {"LlamaForCausalLM": 1, "LlamaModel": 1, "Embedding": 1, "LlamaRotaryEmbedding": 1, "LlamaDecoderLayer": 2,
         "LlamaAttention": 2, "LlamaMLP": 2, "SiLUActivation": 2, "LlamaRMSNorm": 5, "Linear": 15}
MLP_LINEAR = ("LlamaForCausalLM", "LlamaModel", "LlamaDecoderLayer", "LlamaMLP", "Linear")


def record_fixture(path: Path) -> float:
    """How the fixture was made (not run by the tests): returns the Self CPU total torch's table rounds, in µs."""
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, 64, (1, 8))
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(5):
            model(ids, labels=ids).loss.backward()
            prof.step()
    prof.export_chrome_trace(str(path))
    return sum(e.self_cpu_time_total for e in prof.key_averages())


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return json.loads(gzip.decompress(WITH_STACK.read_bytes()))["traceEvents"]


@pytest.fixture(scope="module")
def trace():
    return read_trace(WITH_STACK)


def _without(events: list[dict], drop, path: Path) -> Path:
    path.write_text(json.dumps({"traceEvents": [e for e in events if not drop(e)]}))
    return path


def _is_module_frame(event: dict) -> bool:
    return event.get("cat") == "python_function" and event["name"].startswith("nn.Module: ")


# --- what torch writes, and what the reader makes of it -----------------------------------------------------


def test_torch_names_each_module_call_in_a_python_frame_numbered_per_instance(events):
    frames = [e for e in events if _is_module_frame(e)]
    assert frames and all(re.fullmatch(r"nn\.Module: \w+_\d+", e["name"]) for e in frames)
    names = {e["name"] for e in frames}
    assert {"nn.Module: Linear_0", "nn.Module: Linear_14", "nn.Module: LlamaDecoderLayer_1"} <= names
    assert not any(e.get("cat") in ("cpu_op", "user_annotation") and e["name"].startswith("nn.Module: ") for e in events)


def test_each_op_knows_the_module_types_whose_frames_hold_it(events, trace):
    # The chain, worked out here the slow way from the raw events: the frames on the op's thread open when it starts.
    frames = sorted(((e["tid"], e["ts"], e["ts"] + e["dur"], re.sub(r"_\d+$", "", e["name"][len("nn.Module: "):]))
                     for e in events if _is_module_frame(e)), key=lambda f: (f[1], -f[2]))
    ops = [op for step in trace.steps for op in step.ops]
    for op in ops:
        chain = tuple(m for tid, start, end, m in frames if tid == op.tid and start <= op.ts < end)
        assert op.modules == chain, (op.name, op.ts)
    assert trace.module_source == MODULES_FROM_STACKS
    mms = {op.modules for op in ops if op.name == "aten::mm" and op.modules}
    assert MLP_LINEAR in mms and MLP_LINEAR[:3] + ("LlamaAttention", "Linear") in mms
    sdpa = {op.modules for op in ops if op.name == "aten::scaled_dot_product_attention"}
    assert sdpa == {MLP_LINEAR[:3] + ("LlamaAttention",)}
    backward = [op for op in ops if op.path[:1] and op.path[0].startswith("autograd::engine::evaluate_function: ")]
    assert backward and not any(op.modules for op in backward)  # autograd's nodes run outside every module's frame
    assert not any("nn.Module" in name for op in ops for name in op.path)  # the frames are no boxes of the paths


def test_a_frame_holds_the_boxes_that_start_inside_it_from_its_start_to_before_its_end(tmp_path):
    def box(cat, name, ts, dur, tid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}

    events = [
        box("user_annotation", "ProfilerStep#1", 0, 100),
        box("python_function", "nn.Module: Conv2d_3", 0, 10), box("cpu_op", "aten::x", 0, 5),  # starts with it
        box("cpu_op", "aten::y", 10, 1),  # starts as the frame returns: outside
        box("python_function", "nn.Module: Sequential_0", 20, 30), box("python_function", "nn.Module: Sequential_1", 20, 10),
        box("cpu_op", "aten::z", 20, 5), box("cpu_op", "aten::w", 30, 5),  # inner, then outer only
        box("cpu_op", "aten::v", 25, 1, tid=2),  # another thread: no frames there
        box("python_function", "nn.Module: Linear_0", 60, 5), box("python_function", "nn.Module: ReLU_0", 65, 5),
        box("cpu_op", "aten::relu", 65, 2),  # in the frame that starts as the one before returns, not in both
    ]
    path = tmp_path / "frames.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_trace(path)
    modules = {op.name: op.modules for op in trace.steps[0].ops}
    assert modules == {"aten::x": ("Conv2d",), "aten::y": (), "aten::z": ("Sequential", "Sequential"),
                       "aten::w": ("Sequential",), "aten::v": (), "aten::relu": ("ReLU",)}
    assert trace.steps[0].module_calls == {"Conv2d": 1, "Sequential": 2, "Linear": 1, "ReLU": 1}
    rows = {row.module: row for row in summarize(trace).modules}
    assert rows["Sequential"].calls == 2  # two calls, and its time once: a module type inside itself
    assert rows["Sequential"].total_us == pytest.approx(10.0)


# --- the summary ---------------------------------------------------------------------------------------------


def test_the_by_module_rows_name_the_model_s_module_types_with_their_calls_and_nesting(trace):
    summary = summarize(trace)
    n = summary.steps
    assert summary.module_source == MODULES_FROM_STACKS
    rows = {row.module: row for row in summary.modules}
    assert {m: rows[m].calls / n for m in CALLS} == CALLS
    assert math.isclose(sum(row.self_us for row in summary.modules), summary.total_us, rel_tol=1e-9)
    # total holds the children: each module type's total is its self time and its children's
    ops = [op for step in trace.steps for op in step.ops if not op.is_label]
    for module in CALLS:
        inside = sum(op.self_us for op in ops if module in op.modules)
        assert rows[module].total_us == pytest.approx(inside), module
        assert rows[module].backward_us == 0  # the frames hold the forward only
    assert rows["LlamaForCausalLM"].total_us >= rows["LlamaModel"].total_us >= rows["LlamaDecoderLayer"].total_us
    assert rows["LlamaDecoderLayer"].total_us >= rows["LlamaAttention"].total_us + rows["LlamaMLP"].total_us
    # the backward is one row outside every module, its nodes' own time included
    backward = rows[f"(no module) {AUTOGRAD_BACKWARD}"]
    assert backward.total_us == pytest.approx(sum(
        op.self_us for op in ops if (op.path or (op.name,))[0].startswith("autograd::engine::evaluate_function: ")))
    assert any("(no module)" in note and "backward" in note for note in summary.notes)
    # the top ops' module: where most of their calls ran (the backward's: none)
    assert {row.module for row in summary.top} - {""} <= set(CALLS)
    assert any(row.module for row in summary.top)


def test_module_frames_leave_the_ops_their_tables_labels_and_the_self_cpu_total_as_they_were(events, trace, tmp_path):
    bare = read_trace(_without(events, _is_module_frame, tmp_path / "no_module_frames.json"))
    no_python = read_trace(_without(events, lambda e: e.get("cat") == "python_function", tmp_path / "no_python.json"))
    for other in (bare, no_python):
        assert other.module_source is None
        assert [s.op_rows() for s in other.steps] == [s.op_rows() for s in trace.steps]
        assert [[op.path for op in s.ops] for s in other.steps] == [[op.path for op in s.ops] for s in trace.steps]
        assert other.labels == trace.labels
        ours, theirs = summarize(trace), summarize(other)
        assert theirs.modules == [] and theirs.module_source is None
        # the same sums, added up in another order (by module, then by kind)
        assert ours.total_us == pytest.approx(theirs.total_us, rel=1e-12) and ours.items == theirs.items
        assert [(k.kind, k.count) for k in ours.kinds] == [(k.kind, k.count) for k in theirs.kinds]
        assert [k.us for k in ours.kinds] == pytest.approx([k.us for k in theirs.kinds], rel=1e-12)
        assert [(r.name, r.count) for r in ours.top] == [(r.name, r.count) for r in theirs.top]
        assert [r.total_us for r in ours.top] == pytest.approx([r.total_us for r in theirs.top], rel=1e-12)
    # The Self CPU total is torch's own: the Python frames nest the boxes as torch nests them (they come off the
    # ProfilerStep boxes' self times), so a trace without them has another total, in torch's table too.
    assert trace.self_cpu_total_us == pytest.approx(TORCH_SELF_CPU_TOTAL_US, rel=1e-6)
    assert bare.self_cpu_total_us != pytest.approx(TORCH_SELF_CPU_TOTAL_US, rel=1e-6)


def test_the_report_says_where_the_modules_come_from(tmp_path):
    result = run_script("-m", "trace_report.report", str(WITH_STACK))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "modules from the trace's Python stacks (with_stack)" in out
    assert "LlamaDecoderLayer" in out and f"(no module) {AUTOGRAD_BACKWARD}" in out
    assert "of total: backward" not in out  # no module has a backward here: no column for it
    summary = json.loads(run_script("-m", "trace_report.report", str(WITH_STACK), "--json").stdout)["summary"]
    assert summary["module_source"] == MODULES_FROM_STACKS
    assert {m["module"] for m in summary["by_module"]} >= set(CALLS)


# --- GPU-shaped traces: the forward's kernels by module, the backward's on autograd's thread -------------------


def test_on_a_gpu_the_forward_s_kernels_get_the_modules_around_their_launch_and_the_backward_none(tmp_path):
    ranges = summarize(read_trace(training_trace(tmp_path / "ranges.json", layers=3)))
    trace = read_trace(training_trace(tmp_path / "stacks.json", layers=3, python_stacks=True))
    stacks = summarize(trace)
    assert (ranges.module_source, stacks.module_source) == (MODULES_FROM_RANGES, MODULES_FROM_STACKS)
    by_range = {row.module: row for row in ranges.modules}
    by_stack = {row.module: row for row in stacks.modules}
    for module in ROOT + ("LlamaAttention", "LlamaMLP", "Linear", "SiLUActivation", "LlamaRMSNorm"):
        assert by_stack[module].calls == by_range[module].calls, module
        assert by_stack[module].total_us == pytest.approx(by_range[module].total_us - by_range[module].backward_us), module
    assert by_stack[f"(no module) {AUTOGRAD_BACKWARD}"].total_us == pytest.approx(by_range["LlamaForCausalLM"].backward_us)
    assert math.isclose(sum(row.self_us for row in stacks.modules), stacks.total_us, rel_tol=1e-9)
    assert (stacks.total_us, stacks.kinds) == (ranges.total_us, ranges.kinds)
    top = {row.short: row for row in stacks.top}
    assert top["vectorized_elementwise_kernel<silu>"].module == "SiLUActivation"


def test_a_trace_with_both_reads_the_ranges_which_hold_the_backward(tmp_path):
    ranges = json.loads(training_trace(tmp_path / "ranges.json").read_text())
    stacks = json.loads(training_trace(tmp_path / "stacks.json", python_stacks=True).read_text())
    ranges["traceEvents"] += [e for e in stacks["traceEvents"] if e["cat"] == "python_function"]
    both = tmp_path / "both.json"
    both.write_text(json.dumps(ranges))
    trace = read_trace(both)
    assert trace.module_source == MODULES_FROM_RANGES
    assert not any(op.modules for step in trace.steps for op in step.ops)
    assert summarize(trace).modules == summarize(read_trace(tmp_path / "ranges.json")).modules
