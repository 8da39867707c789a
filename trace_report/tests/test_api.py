"""`trace_report.read(path)`: the report as plain objects, and `to_json()` exactly what `trace-report --json` prints."""

from __future__ import annotations

import json

import pytest

import trace_report
from trace_report.errors import UsageError
from trace_report.tests.support import FIXTURES, H200_EAGER, run_report


def test_to_json_is_what_the_command_prints():
    report = trace_report.read(H200_EAGER)
    printed = json.loads(run_report(H200_EAGER, "--json").stdout)
    assert json.loads(json.dumps(report.to_json())) == printed
    assert report.verdict.kind == printed["verdict"]["kind"] == "compute-bound"
    assert report.summary.to_dict() == printed["summary"]
    assert report.communication is None and report.memory == []


def test_the_command_writes_the_same_bytes_as_json_dumps_of_to_json_its_steps_made_one_at_a_time():
    report = trace_report.read(H200_EAGER)
    whole = report.to_json()
    assert type(whole["steps"]) is list and len(whole["steps"]) == len(report.trace.steps) == 3
    lazy = report.to_json(lazy_steps=True)["steps"]
    assert type(lazy) is not list and len(lazy) == 3 and list(lazy) == whole["steps"] and lazy[1:] == whole["steps"][1:]
    printed = run_report(H200_EAGER, "--json").stdout
    assert printed == json.dumps(whole, ensure_ascii=False, allow_nan=False) + "\n"


def test_a_rank_set_reads_with_its_collectives():
    paths = sorted((FIXTURES / "h100x2").glob("16_512_4096_11008_tp2_plain_graph_eager_rank*.json.gz"))
    ranks = trace_report.read_ranks(paths)
    assert [r.rank for r in ranks] == [0, 1]
    assert all(r.comm is not None and r.comm.collectives for r in ranks)


def test_a_file_that_is_no_trace_raises_usage_error(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(UsageError):
        trace_report.read(bad)


def test_the_op_table_and_fusion_of_a_trace_with_shapes():
    report = trace_report.read(FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz")
    gate = report.op_table.rows[0]
    assert (gate.op, gate.shapes, gate.flops) == ("aten::mm", ((8192, 768), (768, 3072)), 2 * 8192 * 768 * 3072)
    assert report.fusion().candidates[0].ops == ("aten::gelu", "aten::mul")
