"""The op table by roofline (roofline.py, roofline_report.py, peaks.py) on real traces: the suite's H200 and H100
traces recorded with shapes, and traces from other programs (the world fixtures: vLLM on a B200, ResNet on an MI300X
and a V100, a MoE microbenchmark on a B300)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from trace_report import fusion, peaks
from trace_report.reader import read_trace
from trace_report.roofline import op_table
from trace_report.roofline_report import ROOFLINE_BRIEF_ROWS
from trace_report.tests.support import FIXTURES, H200_EAGER, run_report

H200_SHAPES = FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz"
TINY_TRAIN = FIXTURES / "h100" / "traces" / "profile_model" / "tiny-llama_4_256_train_shapes_eager.json.gz"
WORLD = FIXTURES / "world"
GATE_FLOPS = 2 * 8192 * 768 * 3072  # [8192, 768] x [768, 3072], and the down projection [8192, 3072] x [3072, 768]


def test_every_gemm_row_of_the_posts_mlp_is_exact_and_its_rate_its_kernels():
    """Each aten::mm row: FLOPs by hand, and TFLOP/s within 1% of FLOPs × calls ÷ the summed time of the GPU work
    the calls launched, found here from the trace's correlation links."""
    trace = read_trace(H200_SHAPES)
    launched = defaultdict(float)
    calls = defaultdict(set)
    for step in trace.steps:
        for work in step.gpu:
            op = work.launch.launcher if work.launch is not None else None
            if op is not None and op.name == "aten::mm":
                launched[op.input_dims] += work.dur
                calls[op.input_dims].add(id(op))
    rows = [row for row in op_table(trace).rows if row.family == "GEMM"]
    assert {row.shapes for row in rows} == {((8192, 768), (768, 3072)), ((8192, 3072), (3072, 768))}
    for row in rows:
        assert row.op == "aten::mm" and row.flops == GATE_FLOPS
        measured = GATE_FLOPS * len(calls[row.shapes]) / launched[row.shapes] / 1e6
        assert row.tflops == pytest.approx(measured, rel=0.01)
        assert row.bound == "compute" and 0.5 < row.peak_share < 1.0  # 673 and 746 of the H200's 989 TFLOP/s
    assert sum(row.calls for row in rows) == 3 * len(trace.steps)  # gate, up, down each step


def test_nested_ops_count_each_kernel_once():
    """aten::linear > aten::matmul > aten::mm: the kernels are mm's, and the rows with what no row holds add up to
    the steps' GPU time."""
    for path in (H200_SHAPES, TINY_TRAIN, WORLD / "mi300x_resnet_ddp8_rank0_step16.json.gz"):
        table = op_table(read_trace(path))
        held = sum(row.gpu_us for row in table.rows)
        assert held + table.no_shapes_us + table.communication_us + table.unlaunched_us == pytest.approx(table.gpu_us)
        assert not {"aten::linear", "aten::matmul"} & {row.op for row in table.rows}


def test_causal_attention_is_counted_as_recorded():
    """tiny-llama's training step: cuDNN's attention with is_causal=True in its Concrete Inputs."""
    rows = [row for row in op_table(read_trace(TINY_TRAIN)).rows if row.family == "attention"]
    assert {row.op for row in rows} == {"aten::_cudnn_attention_forward", "aten::_cudnn_attention_backward"}
    forward = next(row for row in rows if row.op.endswith("forward"))
    assert forward.note == "causal"
    assert forward.flops == 2 * (4 * 4) * (256 * 257 // 2) * (64 + 64)  # 4 sequences × 4 query heads


# Share of each world trace's GPU time in ops no formula knows, as measured (the B200's is vLLM's fused MoE and its
# paged attention, whose weights and cached keys the recorded shapes do not show).
UNKNOWN_AT_MOST = {
    "amd_nodeviceprops_hipblaslt_gemm.json.gz": 0.0,
    "b300_sm103_moe_microbench.json.gz": 0.0,
    "gfx942_vllm_decode_graph_replay_emptyname.json.gz": 0.0,
    "mi250_minitoy_train_hta.json.gz": 0.0,
    "mi300x_resnet_ddp8_rank0_step16.json.gz": 0.0,
    "mi300x_sglang_qwen3_8b_decode.json.gz": 0.0,
    "v100_resnet50_2021_step6.json.gz": 0.0,
}


@pytest.mark.parametrize("name", sorted(UNKNOWN_AT_MOST))
def test_world_traces_ops_of_no_known_family_take_at_most_5_percent(name):
    table = op_table(read_trace(WORLD / name))
    assert table.has_shapes
    assert table.unknown_us <= 0.05 * table.gpu_us


def test_vllm_on_a_b200_names_the_ops_no_formula_knows():
    table = op_table(read_trace(WORLD / "b200_vllm_eager_tp8_rank0_60to90ms.json.gz"))
    unknown = {row.op for row in table.rows if row.cost is None}
    assert {"vllm::moe_forward", "vllm::unified_attention_with_output"} <= unknown
    assert table.unknown_us > 0.5 * table.gpu_us  # the fused MoE alone is half the window
    assert table.communication_us > 0  # its all-reduces: left out of the rows, said once
    addmm = next(row for row in table.rows if row.op == "aten::addmm")
    m, k, n = 888, 2880, addmm.shapes[2][1]
    assert addmm.flops == 2 * m * k * n and addmm.peak_share is not None


def test_an_unknown_gpu_gets_rates_without_shares():
    """The B300 is not in the peaks table and sm103 names no GPU: TFLOP/s and TB/s, no bound, no share."""
    table = op_table(read_trace(WORLD / "b300_sm103_moe_microbench.json.gz"))
    assert table.found is None
    bmm = next(row for row in table.rows if row.op == "aten::bmm")
    assert bmm.tflops is not None and bmm.tbps is not None
    assert bmm.bound is None and bmm.peak_share is None
    result = run_report(WORLD / "b300_sm103_moe_microbench.json.gz", env={"COLUMNS": "120"})
    assert "no peaks known for NVIDIA B300 SXM6 AC: rates without shares of peak" in result.stdout


def test_the_peaks_table_is_fusions_bandwidth():
    """One table: fusion's floor is peaks.py's bandwidth for the GPU the trace names."""
    assert peaks.bandwidth_gbs("NVIDIA H200") == 4800.0
    assert peaks.bandwidth_gbs("NVIDIA H100 80GB HBM3") == 3350.0
    assert peaks.bandwidth_gbs("NVIDIA GH200 480GB") == 4000.0  # not the H200's
    assert peaks.peak_for_name("NVIDIA H20").name == "H20"
    assert peaks.peak_for_name("NVIDIA A100-SXM4-80GB").tbps == 2.039
    assert peaks.peak_for_name("AMD Instinct MI300X VF").tflops["bf16"] == 1307.4
    assert peaks.peak_for_name("NVIDIA B300 SXM6 AC") is None
    assert fusion.analyze(read_trace(H200_SHAPES)).bandwidth_gbs == 4800.0


def test_an_architecture_without_a_name_assumes_its_common_gpu_and_says_so():
    found = peaks.find(read_trace(WORLD / "amd_nodeviceprops_hipblaslt_gemm.json.gz"))
    assert found.peak.name == "MI300X" and found.how.startswith("assumed from gfx942")


def test_the_report_shows_the_op_table_and_fits_100_and_120_columns():
    for path in (H200_SHAPES, TINY_TRAIN, WORLD / "b200_vllm_eager_tp8_rank0_60to90ms.json.gz"):
        top = [row.op for row in op_table(read_trace(path)).rows[:ROOFLINE_BRIEF_ROWS]]
        for width in (100, 120):
            # --rows: every section, as many rows as the brief table has (the first screen may leave the table out
            # for the advice, tiny-llama's training step at 100 columns)
            result = run_report(path, "--rows", str(ROOFLINE_BRIEF_ROWS), env={"COLUMNS": str(width)})
            assert result.returncode == 0, result.stderr
            section = result.stdout.split("Ops by roofline", 1)[1].split("\n\n", 1)[0]
            assert all(len(line) <= width for line in section.splitlines()), (path.name, width)
            lines = [line.split(" ", 1)[1] if line.split(" ", 1)[0].isdigit() else line for line in section.splitlines()]
            for i, op in enumerate(top, 1):  # each op's name whole on a line of its own, after its row's number
                assert any(line.startswith(f"{i} {op}") for line in section.splitlines()), (op, width)
                assert op in {line.split("  ")[0].strip() for line in lines} or any(
                    line.startswith(op + " ") for line in lines), (op, width)


def test_json_ops_rows():
    result = run_report(H200_SHAPES, "--json")
    ops = json.loads(result.stdout)["ops"]
    keys = {"op", "shapes", "dtypes", "calls", "flops", "bytes", "gpu_us", "tflops", "tbps", "bound", "peak_share"}
    assert all(keys <= row.keys() for row in ops)
    gate = next(row for row in ops if row["shapes"] == [[8192, 768], [768, 3072]])
    assert gate["flops"] == GATE_FLOPS and gate["dtypes"] == ["bf16", "bf16"] and gate["bound"] == "compute"
    assert gate["tflops"] == pytest.approx(GATE_FLOPS / gate["gpu_us"] / 1e6, rel=1e-3)


def test_peak_flag_sets_the_peaks_and_refuses_bad_values():
    result = run_report(H200_SHAPES, "--json", "--peak", "500,2")
    gate = next(row for row in json.loads(result.stdout)["ops"] if row["op"] == "aten::mm")
    assert gate["peak_share"] == pytest.approx(gate["tflops"] / 500, rel=1e-3)
    for bad in ("500", "500,0", "a,b", "1,2,3"):
        result = run_report(H200_SHAPES, "--peak", bad)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


def test_a_trace_without_shapes_says_once_how_to_record_them():
    result = run_report(H200_EAGER, "--rows", "0", env={"COLUMNS": "120"})
    lines = [line for line in result.stdout.splitlines() if "Ops by roofline" in line]
    assert len(lines) == 1 and "record_shapes=True" in lines[0]
