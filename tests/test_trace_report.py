"""`trace-report` as a user runs it: a subprocess, its stdout, its stderr and its exit code."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from conftest import H200_COMPILED as COMPILED
from conftest import H200_EAGER as EAGER
from conftest import H200_LINEAR as LINEAR
from conftest import H200_SDPA_MATH as SDPA_MATH
from conftest import run_script

from profiling_in_pytorch.traces.report import main


def trace_report(*args: str | Path, columns: int | None = None) -> subprocess.CompletedProcess:
    """`python -m profiling_in_pytorch.traces.report ARGS` from the repo root, as a user runs it (in a terminal this wide)."""
    env = {"COLUMNS": str(columns)} if columns else None
    return run_script("-m", "profiling_in_pytorch.traces.report", *map(str, args), env=env, timeout=60)


def test_report_on_the_eager_mlp():
    run = trace_report(EAGER)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "NVIDIA H200" in out
    assert out.count("5 kernels (3 GEMMs)") == 3  # one title per step
    assert "vectorized_elementwise_kernel<gelu>" in out and "aten::gelu" in out
    assert "launched nothing (0 µs on the GPU): aten::t ×3" in out
    assert "cuLaunchKernelEx ×3" in out
    assert "avg CUDA" in out and "tile 256x128" in out
    assert "verdict: compute-bound" in out
    assert "Gelu" not in out  # the 300-character ATen name stays out of the table by default


def test_report_shows_the_flush_and_the_numbers_behind_the_verdict():
    run = trace_report(EAGER, "--steps", "0", columns=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "outside the steps: cudaDeviceSynchronize ×1 (269.3 µs)" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert "783.7" in rows["Self CPU time total"] and "269.3" in rows["closing synchronize"]
    assert "514.4" in rows["CPU issuing work"] and "171.5" in rows["CPU issuing work"]
    assert "733.2" in rows["Self CUDA time total"] and "244.4" in rows["GPU busy"]
    assert "6.2" in rows["GPU waiting on launches"] and "262.9" in rows["GPU behind CPU, at most"]
    assert "verdict: compute-bound" in out and "would say overhead-bound" in out


def test_full_names_on_request():
    run = trace_report(EAGER, "--full_names", "--steps", "1")
    assert run.returncode == 0, run.stderr
    assert "GeluCUDAKernelImpl" in run.stdout


def test_report_on_the_linear_says_overhead_bound_and_shows_the_bias_epilogue():
    run = trace_report(LINEAR)
    assert run.returncode == 0, run.stderr
    assert "nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT" in run.stdout
    assert "bias in the epilogue" in run.stdout and "aten::addmm" in run.stdout
    assert "verdict: overhead-bound" in run.stdout
    waiting = next(line for line in run.stdout.splitlines() if "GPU waiting on launches" in line)
    assert "313.7" in waiting and "97%" in waiting


def test_diff_of_eager_and_compiled():
    run = trace_report(EAGER, COMPILED)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    rows = [line for line in lines if line.startswith("│")]
    only_b = [line for line in rows if "only in B" in line]
    assert len(only_b) == 1 and "triton_poi_fused__unsafe_view_gelu_mul_0" in only_b[0]
    assert sum("only in A" in line for line in rows) == 2
    assert sum("in both, same name" in line and "nvjet_sm90" in line for line in rows) == 2
    assert "byte-identical kernel names in both: 2; only in A: 2; only in B: 1" in run.stdout
    assert "step time A:" in run.stdout and "step time B:" in run.stdout


def test_json_of_one_trace():
    run = trace_report(EAGER, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [s["name"] for s in report["steps"]] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    gpu = report["steps"][0]["gpu"]
    assert {"kind", "name", "launched_by", "dur_us"} <= set(gpu[0])
    kernels = [g for g in gpu if g["kind"] == "kernel"]
    assert len(kernels) == 5 and [g["kind"] for g in gpu].count("memset") == 2
    assert {g["launched_by"] for g in kernels} == {"aten::mm", "aten::gelu", "aten::mul"}
    assert all(g["dur_us"] > 0 for g in gpu)
    assert report["verdict"]["kind"] == "compute-bound"
    assert report["self_cpu_total_us"] == pytest.approx(783.679) and report["self_gpu_total_us"] == pytest.approx(733.217)
    assert report["closing_sync"]["dur_us"] == pytest.approx(269.302)
    verdict = report["verdict"]
    assert verdict["table_totals_say"] == "overhead-bound" and verdict["closing_sync_us"] == pytest.approx(269.302)
    assert verdict["cpu_us_per_step"] == pytest.approx(171.459) and verdict["launch_waits"] == 1


def test_json_of_a_diff():
    run = trace_report(EAGER, COMPILED, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [t["trace"] for t in report["traces"]] == ["mlp_eager.json.gz", "mlp_compile.json.gz"]
    assert [k["name"] for k in report["diff"]["only_in_second"]] == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert len(report["diff"]["in_both"]) == 2


def test_each_step_shows_the_kernels_its_cpu_launched():
    # The warmup step's kernels that run inside the recorded steps (their launches unrecorded) are no step's.
    run = trace_report(SDPA_MATH, "--steps", "all")
    assert run.returncode == 0, run.stderr
    titles = [line for line in run.stdout.splitlines() if line.startswith("ProfilerStep#")]
    assert len(titles) == 3 and all("· 20 kernels" in title for title in titles), titles
    rows = [line for line in run.stdout.split("outside the steps")[0].splitlines() if line.startswith("│")]
    assert len(rows) > 60 and not any(row.split("│")[4].strip() == "-" for row in rows)  # launched by: every one known
    assert "8 GPU work items from outside the steps" in run.stdout
    report = json.loads(trace_report(SDPA_MATH, "--json").stdout)
    assert [s["kernels"] for s in report["steps"]] == [20, 20, 20]
    assert all(g["launched_by"] for s in report["steps"] for g in s["gpu"])
    assert len(report["outside_steps"]["gpu"]) == 8
    assert sum(k["count"] for k in report["kernels"] if k["kind"] == "kernel") == 3 * 20


def test_cpu_trace_reports_cpu_ops_and_no_gpu(cpu_trace):
    run = trace_report(cpu_trace)
    assert run.returncode == 0, run.stderr
    assert "no GPU in the trace" in run.stdout
    assert "aten::gelu" in run.stdout and "aten::linear" in run.stdout and "self µs" in run.stdout
    assert "verdict: no GPU data" in run.stdout
    assert "Who sets the pace" not in run.stdout and "outside the steps" not in run.stdout
    report = json.loads(trace_report(cpu_trace, "--json").stdout)
    assert report["verdict"]["kind"] == "no GPU data"
    assert report["closing_sync"] is None and report["verdict"]["closing_sync_us"] is None
    assert report["self_cpu_total_us"] == pytest.approx(sum(s["cpu_us"] for s in report["steps"]), abs=0.01)
    ops = {op["name"]: op for op in report["steps"][0]["cpu_ops"]}
    assert ops["aten::linear"]["count"] == 3 and ops["aten::linear"]["launched_gpu_work"] == 0


def test_a_trace_without_profiler_steps_says_so(tmp_path):
    with gzip.open(EAGER, "rt") as f:
        data = json.load(f)
    data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    path = tmp_path / "no_steps.json"
    path.write_text(json.dumps(data))
    run = trace_report(path)
    assert run.returncode == 0, run.stderr
    assert "no ProfilerStep events: the whole trace is read as one step" in run.stdout
    assert "15 kernels" in run.stdout


def with_unreadable_events(tmp_path: Path) -> Path:
    """The eager MLP's trace plus six events trace-report cannot use, each a copy of a real one with one field
    broken: a pid that is a list or an object, args that are a string, a ts that is text, an ac2g arrow with a
    list for its pid, a kernel whose correlation is a list."""
    with gzip.open(EAGER, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"]
    op = next(e for e in events if e.get("cat") == "cpu_op")
    kernel = next(e for e in events if e.get("cat") == "kernel")
    arrow = next(e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g")
    events += [
        dict(op, pid=[op["pid"]]),
        dict(op, pid={"id": op["pid"]}),
        dict(op, args="Input Dims: [8192, 768]"),
        dict(op, ts=str(op["ts"])),
        dict(arrow, pid=[arrow["pid"]]),
        dict(kernel, args=dict(kernel["args"], correlation=[kernel["args"]["correlation"]])),
    ]
    path = tmp_path / "unreadable.json"
    path.write_text(json.dumps(data))
    return path


def test_events_it_cannot_read_are_skipped_with_one_note(tmp_path):
    path = with_unreadable_events(tmp_path)
    run = trace_report(path)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [
        f"note: {path}: skipped 6 events trace-report cannot read: 3 with a pid that is not a number or string, "
        "1 with args that are not an object, 1 with a ts that is not a finite number, "
        "1 with a correlation that is not a number or string"
    ]
    clean = trace_report(EAGER)
    assert run.stdout.replace(path.name, EAGER.name) == clean.stdout  # what it read is the trace without them


def test_with_json_the_note_goes_into_the_json_too(tmp_path):
    path = with_unreadable_events(tmp_path)
    run = trace_report(path, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["skipped_events"] == {
        "a pid that is not a number or string": 3,
        "args that are not an object": 1,
        "a ts that is not a finite number": 1,
        "a correlation that is not a number or string": 1,
    }
    assert report["notes"] == [run.stderr.strip().removeprefix(f"note: {path}: ")]
    assert json.loads(trace_report(EAGER, "--json").stdout)["skipped_events"] == {}


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda tmp: tmp / "missing.json", id="missing"),
        pytest.param(lambda tmp: _write(tmp, "empty.json", b""), id="empty"),
        pytest.param(lambda tmp: _write(tmp, "cut.json", gzip.decompress(EAGER.read_bytes())[:20000]), id="cut-json"),
        pytest.param(lambda tmp: _write(tmp, "cut.json.gz", EAGER.read_bytes()[:2000]), id="cut-gzip"),
        pytest.param(lambda tmp: _write(tmp, "other.json", b'{"name": "not a trace"}'), id="non-trace-json"),
        pytest.param(lambda tmp: tmp, id="folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, make):
    run = trace_report(make(tmp_path))
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "Traceback" not in run.stderr


def test_bad_flags_are_one_line_and_exit_2():
    for args in (["--steps", "many", EAGER], ["--rows", "-1", EAGER], [], [EAGER, COMPILED, LINEAR]):
        run = trace_report(*args)
        assert run.returncode == 2, args
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_main_in_process_returns_0(capsys):
    assert main([str(LINEAR), "--steps", "0"]) == 0
    assert "verdict: overhead-bound" in capsys.readouterr().out


def test_main_in_process_exits_2_on_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "missing.json")])
    assert exit_.value.code == 2
    assert "no such file" in capsys.readouterr().err
