"""The report's tables as DataFrames (frames.py), the report and the diff drawn in a notebook, and the notebook in
docs/ still running against this API. pandas and polars are optional: their tests skip without them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import trace_report
from trace_report import ranks_frame
from trace_report.frames import FramesUnavailable
from trace_report.tests.support import FIXTURES, H200_COMPILED, H200_EAGER, PACKAGE_PARENT

NOTEBOOK = PACKAGE_PARENT / "docs" / "trace-report.ipynb"
RANKS = sorted((FIXTURES / "h100x2").glob("16_512_4096_11008_tp2_plain_graph_eager_rank*.json.gz"))


@pytest.fixture(scope="module")
def report():
    return trace_report.read(H200_EAGER)


def test_the_kernels_are_the_avg_cuda_table_most_time_first(report):
    stats = report.trace.kernel_stats()
    assert len(report.kernels) == len(stats) == 5
    columns, rows = report.kernels.frame_rows()
    assert rows[0]["short_name"] == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT" and rows[0]["per_step"] == 2
    assert [r["total_us"] for r in rows] == sorted((r["total_us"] for r in rows), reverse=True)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0, abs=1e-3)
    assert all(r["min_us"] <= r["avg_us"] <= r["max_us"] for r in rows)


def test_every_table_converts_to_pandas_with_its_columns(report):
    pd = pytest.importorskip("pandas")
    frames = report.frames()
    assert set(frames) == {"kernels", "op_table", "advice", "summary_kinds", "summary_modules", "summary_top"}
    assert all(isinstance(f, pd.DataFrame) for f in frames.values())
    kernels = report.kernels.to_pandas()
    assert list(kernels.columns) == report.kernels.frame_rows()[0] and len(kernels) == 5
    assert kernels["total_us"].sum() == pytest.approx(sum(s.total_us for s in report.trace.kernel_stats()), abs=0.01)
    kinds = report.summary.to_pandas()
    assert set(kinds["kind"]) == {row["kind"] for row in report.summary.to_dict()["by_kind"]}
    # A trace with no shapes has no op table and no finding: empty frames, their columns all the same.
    assert frames["op_table"].empty and "peak_share" in frames["op_table"].columns
    assert list(frames["advice"].columns)[:3] == ["rule", "title", "saving_low_us"]
    with pytest.raises(ValueError, match="kinds, modules, top"):
        report.summary.to_pandas("kernels")


def test_polars_frames_hold_the_same_rows(report):
    pytest.importorskip("polars")
    frame = report.kernels.to_polars()
    assert frame.columns == report.kernels.frame_rows()[0] and frame.height == 5
    assert frame["avg_us"].to_list() == [r["avg_us"] for r in report.kernels.frame_rows()[1]]
    assert report.frames("polars")["summary_top"].height == len(report.summary.top)


def test_the_op_table_and_advice_of_a_trace_with_findings():
    pd = pytest.importorskip("pandas")
    shapes = trace_report.read(FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz")
    ops = shapes.op_table.to_pandas()
    assert ops.loc[0, "op"] == "aten::mm" and ops.loc[0, "shapes"] == "8192×768 · 768×3072"
    launch_bound = trace_report.read(FIXTURES / "h200" / "linear_eager.json.gz")  # its one finding: "overhead"
    advice = launch_bound.advice.to_pandas()
    assert list(advice["rule"]) == launch_bound.advice.rules == ["overhead"]
    assert (advice["saving_low_us"] <= advice["saving_high_us"]).all()
    assert isinstance(advice, pd.DataFrame)


def test_a_missing_library_says_what_to_install(report, monkeypatch):
    import importlib

    real = importlib.import_module

    def without_frames(name, *args):
        if name in ("pandas", "polars"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_frames)
    for convert in (report.kernels.to_pandas, report.kernels.to_polars, report.summary.to_pandas):
        with pytest.raises(FramesUnavailable, match=r"pip install 'trace-report\[frames\]'"):
            convert()


def test_importing_and_reading_loads_no_frame_library():
    code = ("import sys, trace_report; r = trace_report.read(sys.argv[1]); r.kernels.frame_rows(); r.summary; "
            "print(sorted(m for m in ('pandas', 'polars', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(H200_EAGER)], cwd=PACKAGE_PARENT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_rank_set_is_one_frame_with_a_rank_column():
    pd = pytest.importorskip("pandas")
    ranks = trace_report.read_ranks(RANKS, keep_traces=True)
    kernels = ranks_frame(ranks, "kernels")
    assert list(kernels.columns)[0] == "rank" and set(kernels["rank"]) == {0, 1}
    for r in ranks:
        assert len(kernels[kernels["rank"] == r.rank]) == len(r.trace.kernel_stats())
    collectives = ranks_frame(trace_report.read_ranks(RANKS), "communication")
    assert set(collectives["collective"]) == {"AllReduce"} and isinstance(collectives, pd.DataFrame)
    for per_rank in (None, _names_of_kernels):  # a per_rank of the caller's own is no table's rows
        with pytest.raises(ValueError, match="per_rank=trace_report.rank_tables"):
            ranks_frame(trace_report.read_ranks(RANKS, per_rank=per_rank), "kernels")


def _names_of_kernels(rank) -> dict:
    return {"kernels": sorted({stat.name for stat in rank.trace.kernel_stats()})}


def test_a_rank_sets_tables_made_where_each_trace_is_read_are_those_of_the_kept_traces():
    pytest.importorskip("pandas")
    kept = trace_report.read_ranks(RANKS, keep_traces=True)
    made = trace_report.read_ranks(RANKS, per_rank=trace_report.rank_tables)  # in a worker where processes start
    assert all(r.trace is None and r.extra for r in made)  # only the rows came back
    for table, parts in (("kernels", [None]), ("op_table", [None]), ("advice", [None]),
                         ("summary", ["kinds", "modules", "top"]), ("communication", [None, "kinds"])):
        for part in parts:
            expected = ranks_frame(kept, table, part=part)
            assert ranks_frame(made, table, part=part).equals(expected), (table, part)
            assert (table, part) not in (("kernels", None), ("summary", "kinds")) or set(expected["rank"]) == {0, 1}


def test_the_diff_as_a_frame_has_each_ops_spread_and_call():
    pytest.importorskip("pandas")
    d = trace_report.diff(trace_report.read_trace(H200_EAGER), trace_report.read_trace(H200_COMPILED))
    assert isinstance(d, trace_report.TraceDiff)
    ops = d.to_pandas()
    fused = ops[ops["op"] == "triton_poi_fused__unsafe_view_gelu_mul_0"].iloc[0]
    assert fused["call"] == "faster" and fused["us_b"] < fused["us_a"] and fused["std_us_a"] > 0
    assert set(d.to_pandas("kernels")["call"]) >= {"gone", "new", "within noise"}


def test_in_a_notebook_the_report_renders_as_the_terminal_prints_it(report):
    html = report._repr_html_()
    assert html.startswith("<pre") and "mlp_eager.json.gz" in html and "verdict:" in html
    assert "&lt;" in html or "<span" in html  # escaped text, styled spans: rich's export
    diff_html = trace_report.diff(report.trace, trace_report.read_trace(H200_COMPILED))._repr_html_()
    assert "By op" in diff_html and "triton_poi_fused" in diff_html


def test_the_notebooks_code_still_runs_against_this_api(monkeypatch):
    pytest.importorskip("pandas")
    pytest.importorskip("polars")
    notebook = json.loads(NOTEBOOK.read_text())
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert cells and all(c.get("outputs") for c in cells), "the notebook is committed with its outputs"
    monkeypatch.chdir(NOTEBOOK.parent)
    scope: dict = {}
    for cell in cells:
        exec(compile("".join(cell["source"]), str(NOTEBOOK), "exec"), scope)
    assert isinstance(scope["report"], trace_report.Report) and scope["gate"].passed
