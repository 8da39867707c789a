"""Lessons 02, 03 and 05 weigh their GEMMs: FLOPs by trace-report's formula, TFLOP/s from the trace's kernels, the
share of the ceiling trace-report reads for the trace (the rate measured beside the profile, else the datasheet)."""

from __future__ import annotations

import gzip
import json
import re
import statistics

import pytest
from conftest import FIXTURES, requires_cuda, run_report, run_script

from profiling_in_pytorch import checks as ex
from trace_report import read_trace

EAGER = FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_eager.json.gz"
POST = [("gate", 8192, 768, 3072), ("up", 8192, 768, 3072), ("down", 8192, 3072, 768)]
GATE_FLOPS = 2 * 8192 * 768 * 3072  # the post's 38.7 GFLOP


def rates(evidence: str) -> list[tuple[float, float, int]]:
    """(µs, TFLOP/s, % of the ceiling) per GEMM, as the evidence prints them."""
    return [(float(us.replace(",", "")), float(tf.replace(",", "")), int(share)) for us, tf, share in
            re.findall(r"GFLOP in ([\d,.]+) µs: ([\d,]+) TFLOP/s, (\d+)%", evidence)]


def with_measured_peak(tmp_path, tflops: float, trace=EAGER) -> str:
    data = json.load(gzip.open(trace, "rt"))
    data["measured_peak"] = {"dtype": "bf16", "gemm_tflops": tflops, "copy_tbps": 4.3, "how": "a test's figures"}
    path = tmp_path / "measured.json"
    path = path.with_name(trace.name.replace(".json.gz", "_measured.json"))
    path.write_text(json.dumps(data))
    return str(path)


def test_the_post_gemms_against_the_datasheet():
    trace = read_trace(EAGER)
    outcome = ex.gemm_rates(POST, "bf16", same_work=True, claim="P2-11").check(trace)
    assert outcome.ok is True and outcome.evidence.count("38.7 GFLOP") == 3
    assert "(of 989 TFLOP/s, the datasheet)" in outcome.evidence
    kernel_us = [statistics.mean(step.gemms[i].dur for step in trace.steps) for i in range(3)]
    for (us, tflops, share), expected_us in zip(rates(outcome.evidence), kernel_us):
        assert us == round(expected_us, 1)
        assert abs(tflops - GATE_FLOPS / (expected_us * 1e6)) <= 0.5 and abs(share - 100 * tflops / 989) <= 1
    # down does the same work as gate and up in less time (P2-12's "~10% faster for the same FLOPs")
    assert rates(outcome.evidence)[2][0] < min(rates(outcome.evidence)[0][0], rates(outcome.evidence)[1][0])


def test_a_measured_ceiling_replaces_the_datasheet_and_is_said(tmp_path):
    path = with_measured_peak(tmp_path, 800.0)
    outcome = ex.gemm_rates(POST, "bf16").check(read_trace(path))
    assert "(of 800 TFLOP/s, measured here)" in outcome.evidence
    assert all(abs(share - 100 * tflops / 800) <= 1 for _, tflops, share in rates(outcome.evidence))
    shapes = with_measured_peak(tmp_path, 800.0, EAGER.with_name("64_128_768_3072_shapes_eager.json.gz"))
    report = run_report(shapes, env={"COLUMNS": "120"})
    assert "H200 SXM, measured: 800 TFLOP/s bf16 dense, 4.3 TB/s" in report.stdout, report.stdout


def test_gemms_of_different_work_fail_the_same_work_claim():
    outcome = ex.gemm_rates([("gate", 8192, 768, 3072), ("down", 8192, 768, 768)], "bf16", same_work=True).check(
        read_trace(EAGER))
    assert outcome.ok is False and "FLOPs differ" in outcome.reason
    missing = ex.gemm_rates(POST * 2, "bf16").check(read_trace(EAGER))
    assert missing.ok is False and "6 expected" in missing.evidence


@pytest.mark.gpu
@requires_cuda
def test_the_lesson_measures_its_ceiling_and_weighs_its_gemms_against_it(tmp_path):
    run = run_script("03_simple_mlp.py", "--trace_dir", str(tmp_path), timeout=600)
    assert run.returncode == 0, run.stderr
    assert "this GPU, measured:" in run.stdout and "measured here)" in run.stdout
    trace = json.loads((tmp_path / "03_simple_mlp" / "64_128_768_3072_eager.json").read_text())
    measured = trace["measured_peak"]
    assert measured["dtype"] == "bf16" and 100 < measured["gemm_tflops"] < 5000 and 0.5 < measured["copy_tbps"] < 20
