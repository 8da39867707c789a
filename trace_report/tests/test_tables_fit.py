"""Every table the report prints fits the width it prints to, names in one table are told apart, and what a compiled
graph launched says the graph once.

A table wider than the terminal is cropped on the right by rich (its right border and last columns gone), so the test
reads each table line's last character: a table line that starts with a border ends with one. Names break across a
cell's lines only at their seams (after `_`, `::`, a space; before `<`), never inside a word (`aten::_grouped_m` /
`m`). Two kernels whose short names are one get what tells them apart (`bn_bw_1C11_kernel_new<…> (128)`, `(32)`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trace_report.console import Column, fitted_table, folded, op_label
from trace_report.kernels import decode, distinct_short_names
from trace_report.reader import read_trace
from trace_report.report import main as trace_report
from trace_report.summary import summarize
from trace_report.tests.support import FIXTURES, H200_COMPILED

TRACES = sorted((FIXTURES / "world").glob("*.json.gz")) + [FIXTURES / "h200" / "mlp_eager.json.gz", H200_COMPILED]
LEFT, RIGHT = "┏┃┡│└┢┣", "┓┃┩│┘┪┫"


def _report(path: Path, width: int, capsys, monkeypatch, *flags: str) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(width))
    assert trace_report([str(path), *flags]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.removesuffix(".json.gz"))
def test_no_table_is_wider_than_the_terminal(path, width, capsys, monkeypatch):
    lines = _report(path, width, capsys, monkeypatch, "--kernels")
    assert max(len(line) for line in lines) <= width
    cropped = [line for line in lines if line[:1] in LEFT and line.rstrip()[-1:] not in RIGHT]
    assert not cropped, cropped[:2]
    # rich squeezes a table whose columns do not fit: a number then breaks across lines (`1,121.` / `3`)
    cells = [cell.strip() for line in lines if line[:1] in LEFT for cell in re.split("[│┃]", line)[1:-1]]
    broken = [cell for cell in cells if re.fullmatch(r"\d[\d,]*[.,]", cell)]
    assert not broken, broken[:4]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.removesuffix(".json.gz"))
def test_two_kernels_never_share_a_row_name(path):
    trace = read_trace(path)
    names = {work.name for work in trace.gpu_work() if work.kind == "kernel"}
    told = distinct_short_names(names)
    assert len(set(told.values())) == len(names)
    top = [row for row in summarize(trace).top if row.name in names]
    assert len({row.short for row in top}) == len({row.name for row in top})


def test_what_tells_two_kernels_apart_is_their_differing_template_argument():
    # A100 ResNet training (HTA's a100_nccl_hta_step5): cuDNN's batch norm backward at three channel tilings
    names = [f"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, {n}, true, 1>(float, float, cudnnTensorStruct)"
             for n in (128, 32, 512)]
    assert decode(names[0]).short == decode(names[1]).short  # one short name alone
    assert [distinct_short_names(names)[name] for name in names] == [
        "bn_bw_1C11_kernel_new<…> (128)", "bn_bw_1C11_kernel_new<…> (32)", "bn_bw_1C11_kernel_new<…> (512)"]
    cat = [f"void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::"
           f"OpaqueType<{n}u>, unsigned int, 1, 128, 1>(int)" for n in (4, 8)]
    told = distinct_short_names(cat)
    assert told[cat[0]] != told[cat[1]] and "4u" in told[cat[0]] and "8u" in told[cat[1]]
    assert distinct_short_names(["void f<1>(int)"]) == {"void f<1>(int)": decode("void f<1>(int)").short}


def test_a_multi_tensor_apply_kernel_names_its_functor():
    apex = ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float>, float, float, float, "
            "float, float, float, adamMode_t, float>(long, int volatile*, TensorListMetadata<4>)")
    assert decode(apex).short == "multi_tensor_apply_kernel<AdamFunctor>"
    unknown = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
               "TensorListMetadata<2>, at::native::(anonymous namespace)::NewMathFunctor<float, 2, 1, 1>, float>(int)")
    assert decode(unknown).short == "multi_tensor_apply_kernel<NewMathFunctor>"


@pytest.mark.parametrize("text, width", [
    ("aten::cudnn_convolution_backward_input", 20),
    ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", 24),
    ("vectorized_elementwise_kernel<launch_clamp_scalar>", 30),
    ("## Call CompiledFxGraph fbchdjuwxr5jjccub6pthgzyacknza5bg4grqztstyc7pks76avf ##", 60),
    ("GELUActivation", 12),  # a module's type: between its CamelCase words
    ("MixtralSparseMoeBlock", 14),
])
def test_names_break_only_at_their_seams(text, width):
    lines = folded(text, width, lines=9).split("\n")
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert all(len(line) <= width for line in lines)
    end = 0
    for line in lines[:-1]:
        end = text.index(line, end) + len(line)
        camel = text[end].isupper() and text[end - 1].isalpha()
        assert text[end - 1] in "_:., " or text[end] in "<( " or camel, (line, text[end:])


def test_an_op_too_long_for_its_cell_drops_its_namespace_before_it_breaks():
    assert op_label("aten::_grouped_mm", 16) == "_grouped_mm"  # not `aten::_grouped_m` / `m`
    assert op_label("aten::mm", 16) == "aten::mm"
    assert op_label("aten::cudnn_convolution_backward", 20) == "cudnn_convolution_\nbackward"


@pytest.mark.parametrize("width", [60, 100, 120])
def test_a_fitted_table_leaves_out_its_optional_column_before_it_overflows(width):
    from rich.console import Console
    rows = [["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "GEMM", "12,345.6", "aten::_grouped_mm",
             "MixtralSparseMoeBlock"]]
    columns = [Column("kernel", least=24, fold="name"), Column("kind", least=13, most=13),
               Column("µs/step", right=True), Column("launched by", least=12, most=22, fold="op"),
               Column("module", least=12, most=20, fold="op", optional=True)]
    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(fitted_table(columns, rows, width))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= width
    assert ("module" in lines[1]) is (width >= 100)
    assert "_grouped_mm" in "".join(lines)


def test_a_compiled_graph_is_named_once_under_the_table(capsys, monkeypatch):
    lines = _report(H200_COMPILED, 100, capsys, monkeypatch)
    text = "\n".join(lines)
    graph = "## Call CompiledFxGraph fbchdjuwxr5jjccub6pthgzyacknza5bg4grqztstyc7pks76avf ##"
    assert text.replace("\n", "").count("CompiledFxGraph") == 1
    assert "graph fbchdju" in text and graph in " ".join(text.split())
    top = next(i for i, line in enumerate(lines) if line.startswith("top kernels"))
    triton = next(line for line in lines[top:] if "triton_poi_fused" in line)
    assert "graph fbchdju" in triton
