"""benchmark_trace_report.py: a one-round run on a committed fixture, as a user runs it, without HTA (its venv is
not the project's) and with an interpreter that lacks it. The figures are checked for being there and coherent,
never for speed: timing depends on the machine, so the goals live in the benchmark's output."""

from __future__ import annotations

import gzip
import importlib
import json
import sys

import pytest
from conftest import H200_EAGER, run_script

benchmark = importlib.import_module("benchmark_trace_report")


@pytest.fixture(scope="module")
def one_round(tmp_path_factory):
    out = tmp_path_factory.mktemp("speed")
    result = run_script("benchmark_trace_report.py", str(H200_EAGER), "--rounds", "1", "--out", str(out), timeout=120)
    return result, out


def test_one_round_prints_the_figures_and_writes_json_that_parses(one_round):
    result, out = one_round
    assert result.returncode == 0, result.stderr
    payload = json.loads((out / "trace_report_speed.json").read_text())
    (row,) = payload["traces"]
    events = len(json.loads(gzip.decompress(H200_EAGER.read_bytes()))["traceEvents"])
    assert row["events"] == events  # counted by trace-report's stream reader, checked here by json.load
    assert row["json_mb"] * 1e6 == len(gzip.decompress(H200_EAGER.read_bytes()))
    assert row["file_mb"] * 1e6 == H200_EAGER.stat().st_size
    for key in ("report", "report_json"):
        figures = row[key]
        assert figures["runs"] == 1 and figures["failed_runs"] == 0
        assert 0 < figures["p20_s"] <= figures["median_s"] <= figures["p80_s"]
        assert figures["cpu_s"] > 0 and figures["peak_mb"] > 1  # wait4's rusage, the child's own
    assert "hta" not in row and "hta_ratio" not in row  # no --hta: only trace-report is timed
    assert payload["machine"]["cores"] >= 1 and payload["machine"]["python"]

    text = result.stdout
    assert "mlp_eager" in text and f"{events:,}" in text and "report s" in text
    assert f"{row['report']['median_s']:.2f}" in text  # the table prints the median the JSON holds
    assert "HTA s" not in text  # no HTA columns without --hta
    assert "≤ 1 s per 10 MB" in text and "1 of 1 traces" in text  # the goal line, judged on this run


def test_an_interpreter_without_hta_is_a_failure_in_the_table_not_a_crash(tmp_path):
    # This project's own Python has no HTA: the driver's import fails, and the run says so and goes on.
    result = run_script("benchmark_trace_report.py", str(H200_EAGER), "--rounds", "1", "--out", str(tmp_path),
                        "--hta", sys.executable, timeout=120)
    assert result.returncode == 0, result.stderr
    row = json.loads((tmp_path / "trace_report_speed.json").read_text())["traces"][0]
    assert "No module named 'hta'" in row["hta"]["failed"]
    assert "median_s" in row["report"]  # trace-report was timed all the same
    assert "HTA failed on mlp_eager: ModuleNotFoundError: No module named 'hta'" in result.stdout
    assert "HTA failed on 1" in result.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = run_script("benchmark_trace_report.py", str(tmp_path / "nope.json"), "--out", str(tmp_path))
    assert missing.returncode == 2 and missing.stderr.strip().endswith("nope.json: no such file")
    no_hta = run_script("benchmark_trace_report.py", str(H200_EAGER), "--hta", str(tmp_path / "python9"),
                        "--out", str(tmp_path))
    assert no_hta.returncode == 2 and "no such interpreter" in no_hta.stderr
    assert len(no_hta.stderr.strip().splitlines()) == 1


def test_percentiles_and_goals():
    assert benchmark.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert benchmark.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.2) == pytest.approx(1.8)  # numpy's linear rule
    case = benchmark.TraceCase(H200_EAGER, 1, 20_000_000, 10)
    case.commands = [benchmark.Command(label, []) for label in ("trace-report", "trace-report --json", "HTA")]
    for command, wall in zip(case.commands, (1.9, 2.1, 4.0)):
        command.runs = [benchmark.Run(wall, wall, 50.0, 0)]
    row = benchmark.summarize(case)
    assert row["speed_goal"] == {"allowed_s": 2.0, "met": False}  # 20 MB: 2 s allowed, --json took 2.1
    assert row["hta_ratio"] == pytest.approx(4.0 / 1.9) and not row["hta_goal_met"]  # --json: 1.90×, under 2


def test_ranks_times_one_rank_against_all_of_them(tmp_path):
    from trace_report.tests.tp_traces import simulated_tp_run

    paths = simulated_tp_run(tmp_path, world=2)
    result = run_script("benchmark_trace_report.py", *map(str, paths), "--ranks", "--rounds", "1", "--out",
                        str(tmp_path / "out"), timeout=120)
    assert result.returncode == 0, result.stderr
    payload = json.loads((tmp_path / "out" / "trace_report_ranks_speed.json").read_text())
    assert payload["traces"] == list(map(str, paths)) and payload["one"]["runs"] == payload["all"]["runs"] == 1
    assert payload["ratio"] == pytest.approx(payload["all"]["median_s"] / payload["one"]["median_s"])
    assert f"2 ranks at most 1.5× one: {payload['ratio']:.2f}×" in result.stdout


def test_large_builds_traces_and_a_rank_set_and_weighs_each_command_by_what_it_reads(tmp_path):
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    # --hta: this interpreter, which lacks HTA: its rows fail, named, and the run goes on
    result = run_script("benchmark_trace_report.py", str(H200_EAGER), "--large", "--sizes", "0.2", "--rank_count", "3",
                        "--rounds", "1", "--out", str(out), "--scratch", str(scratch), "--hta", sys.executable,
                        timeout=300)
    assert result.returncode == 0, result.stderr
    rows = {row["command"]: row for row in json.loads((out / "trace_report_large.json").read_text())["large"]}
    hta = {label: rows.pop(label) for label in ("HTA", "HTA, 3 ranks")}
    assert all("No module named 'hta'" in row["failed"] for row in hta.values()), hta
    assert hta["HTA, 3 ranks"]["json_mb"] == pytest.approx(rows["trace-report, 3 ranks"]["json_mb"])
    assert not any(row["failed"] for row in rows.values()), rows
    # the read's floor, beside json.loads in the speed goal's line
    speed = next(line for line in json.loads((out / "trace_report_large.json").read_text())["lines"]
                 if "json.loads's speed" in line)
    floor = rows["json.loads"]["median_s"] / rows["decoding alone"]["median_s"]
    assert f"decoding alone, nothing kept: {floor:.2f}×" in speed, speed
    one, every = rows["trace-report --json, rank 0"], rows["trace-report, 3 ranks"]
    assert every["json_mb"] == pytest.approx(3 * one["json_mb"], rel=0.01)  # the set's MB, not its first file's
    assert every["mb_per_s"] == pytest.approx(every["json_mb"] / every["median_s"])
    # named after their source: another source's set in the same folder is not read for this one's
    assert {p.name for p in scratch.iterdir()} >= {f"{H200_EAGER.name.split('.')[0]}_0.2MB_rank{r}.json" for r in range(3)}
