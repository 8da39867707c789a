"""benchmark_mlp.py: a smoke run as a user runs it, the correctness gate, the report, and bad input.

One torch.compile in the whole file (the smoke run, at a tiny shape); everything else runs eager or reads rows.
"""

from __future__ import annotations

import csv
import importlib
import json
import logging
import struct
import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import FIXTURES, requires_cuda, run_script, stderr_lines
from rich.console import Console

from profiling_in_pytorch import timers
from profiling_in_pytorch.bench import pace, prose, table
from profiling_in_pytorch.ceilings import Ceilings
from profiling_in_pytorch.bench.kernels import kernel_counts
from profiling_in_pytorch.bench.measure import Settings
from profiling_in_pytorch.bench.rows import Row, add_hardware_shares, add_speedups
from profiling_in_pytorch.bench.shapes import parse_shapes
from profiling_in_pytorch.bench.variants import INDUCTOR_AUTOTUNE_LOGGER, Variant
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from trace_report import read_trace
from trace_report.pace import CLOSE_TO_LINE, STARVED_SHARE

benchmark = importlib.import_module("benchmark_mlp")

TINY = ["--shapes", "2x3:8:16", "--warmup_ms", "2", "--rep_ms", "20"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One CPU run of every variant at a tiny shape, as `python benchmark_mlp.py` runs."""
    out = tmp_path_factory.mktemp("bench")
    result = run_script("benchmark_mlp.py", *TINY, "--device", "cpu", "--out", str(out), timeout=300)
    return result, out


def test_smoke_run_times_the_cpu_variants_and_names_the_others(smoke):
    result, out = smoke
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # a successful run's stderr holds only our own lines: none, here
    payload = json.loads((out / "mlp_cpu_fp32.json").read_text())
    rows = {row["variant"]: row for row in payload["results"]}
    assert list(rows) == list(benchmark.VARIANTS)  # every variant has a row, run or not

    for name in ("eager", "compile"):
        row = rows[name]
        assert row["status"] == "ok", row
        assert row["time_us"] > 0 and row["time_p20_us"] <= row["time_us"] <= row["time_p80_us"]
        assert row["samples"] >= 5
        assert row["rel_error"] <= row["tolerance"]
        assert row["tflops"] > 0 and row["speedup"] > 0
    assert rows["eager"]["speedup"] == pytest.approx(1.0)
    assert rows["compile"]["first_call_s"] > 0  # compilation, timed on its own

    for name in ("max-autotune", "reduce-overhead", "liger", "fused"):
        assert rows[name]["status"] == "skipped"
        assert "needs CUDA" in rows[name]["reason"]
        assert rows[name]["time_us"] is None
        assert f"skipped {name}: needs CUDA" in result.stdout

    meta = payload["meta"]
    assert meta["ceilings"]["matmul_tflops"] > 0 and meta["ceilings"]["copy_gb_per_s"] > 0
    # The GEMM's ceiling: a first burst, then one after each timed variant (eager, compile); the best counts.
    bursts = meta["ceilings"]["matmul_bursts"]
    assert len(bursts) == 3 and meta["ceilings"]["matmul_tflops"] == max(bursts)
    assert rows["eager"]["matmul_share"] == pytest.approx(rows["eager"]["tflops"] / max(bursts))
    assert meta["versions"]["torch"] == torch.__version__

    with open(out / "mlp_cpu_fp32.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["variant"] for r in table] == list(benchmark.VARIANTS)
    assert float(table[0]["time_us"]) == pytest.approx(rows["eager"]["time_us"])
    assert "× eager" in result.stdout and "2x3:8:16" in result.stdout


def test_smoke_run_writes_a_png_plot(smoke):
    _, out = smoke
    data = (out / "mlp_cpu_fp32.png").read_bytes()
    assert data[:8] == PNG_SIGNATURE
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    assert width >= 400 and height >= 300
    assert len(data) > 10_000  # axes, bars and labels, not an empty canvas
    assert not list(out.glob(".*")), "temporary files left behind"


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_building_max_autotune_quiets_what_inductor_prints_while_tuning(monkeypatch):
    """Its AUTOTUNE tables, the choices it ignores for lack of GPU resources, the TypedStorage warning; no more."""
    import torch._inductor.config as inductor_config

    monkeypatch.setattr(inductor_config, "autotune_num_choices_displayed", 10)  # torch's default
    logger = logging.getLogger(INDUCTOR_AUTOTUNE_LOGGER)
    monkeypatch.setattr(logger, "filters", list(logger.filters))  # whatever the build adds goes with the test
    records = Records()
    logger.addHandler(records)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            benchmark.VARIANTS["max-autotune"].build(SimpleGeGLUMLP(8, 16))  # lazy: nothing compiles yet
            warnings.warn("TypedStorage is deprecated. It will be removed in the future", UserWarning)
            warnings.warn("a real warning", UserWarning)
        template = "Runtime error during autotuning: \n%s. \nIgnoring this choice."
        logger.error(template, "No valid triton configs. OutOfResources: out of resource: shared memory, "
                     "Required: 262144, Hardware limit: 232448. Reducing block sizes or `num_stages` may help.")
        logger.error(template, "an illegal memory access was encountered")
        logger.error("Incorrect result from choice triton_mm_3")
    finally:
        logger.removeHandler(records)
    assert inductor_config.autotune_num_choices_displayed == 0  # no AUTOTUNE tables, no PRESCREENING lines
    assert records.messages == [
        "Runtime error during autotuning: \nan illegal memory access was encountered. \nIgnoring this choice.",
        "Incorrect result from choice triton_mm_3",
    ]
    assert [str(w.message) for w in caught] == ["a real warning"]


def relu_instead_of_gelu(mlp):
    return lambda x: mlp.down_proj(F.relu(mlp.gate_proj(x)) * mlp.up_proj(x))


def kernel_not_found(mlp):
    raise RuntimeError("no kernel image is available for execution on the device")


def test_a_wrong_variant_is_reported_and_not_timed(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(benchmark.VARIANTS, "relu", Variant("relu", build=relu_instead_of_gelu))
    monkeypatch.setitem(benchmark.VARIANTS, "broken", Variant("broken", build=kernel_not_found))
    rows = benchmark.main([*TINY, "--device", "cpu", "--variants", "relu,broken", "--out", str(tmp_path)])
    by_name = {row.variant: row for row in rows}
    assert list(by_name) == ["eager", "relu", "broken"]  # eager joins as the baseline

    assert by_name["eager"].status == "ok"
    wrong = by_name["relu"]
    assert wrong.status == "WRONG"
    assert wrong.rel_error > wrong.tolerance and "relative error" in wrong.reason
    assert wrong.time_us is None and wrong.speedup is None  # not timed

    failed = by_name["broken"]
    assert failed.status == "failed" and "no kernel image" in failed.reason

    saved = {r["variant"]: r for r in json.loads((tmp_path / "mlp_cpu_fp32.json").read_text())["results"]}
    assert saved["relu"]["status"] == "WRONG" and saved["relu"]["time_us"] is None
    printed = capsys.readouterr().out
    assert "WRONG" in printed and "relu WRONG" in printed and "broken failed" in printed


def test_training_mode_times_forward_and_backward_and_counts_what_the_backward_keeps(tmp_path):
    """--train on the CPU without a compile: eager trains, the variants that need a GPU or only infer say why."""
    variants = [name for name in benchmark.VARIANTS if name != "compile"]  # the file's one compile is the smoke run
    result = run_script("benchmark_mlp.py", *TINY, "--device", "cpu", "--train", "--variants", ",".join(variants),
                        "--out", str(tmp_path), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    payload = json.loads((tmp_path / "mlp_train_cpu_fp32.json").read_text())
    assert payload["meta"]["mode"] == "train" and "y.backward(dy)" in payload["meta"]["timer"]
    rows = {row["variant"]: row for row in payload["results"]}
    assert list(rows) == variants

    eager = rows["eager"]
    assert eager["status"] == "ok", eager
    assert eager["time_us"] > 0 and eager["time_p20_us"] <= eager["time_us"] <= eager["time_p80_us"]
    assert eager["speedup"] == pytest.approx(1.0) and eager["peak_mib"] is None  # no GPU allocator on a CPU
    assert eager["first_call_s"] < 1.0  # torch's imports on a first backward (seconds) are paid before timing
    assert set(eager["grad_errors"]) == {"x", "gate_proj.weight", "up_proj.weight", "down_proj.weight"}
    assert all(error <= eager["tolerance"] for error in eager["grad_errors"].values())
    # What eager keeps for its backward: x, then g (gelu's input), h and u (the product's), m (down's input).
    tokens, dim, hidden = 2 * 3, 8, 16
    assert eager["saved_bytes"] == (tokens * dim + 4 * tokens * hidden) * 4  # fp32
    assert eager["saved"] == f"x [{tokens}, {dim}] + 4 × [{tokens}, {hidden}]"

    for name in ("max-autotune", "liger", "fused"):
        assert rows[name]["status"] == "skipped" and "needs CUDA" in rows[name]["reason"], rows[name]
        assert f"skipped {name}: needs CUDA" in result.stdout
    assert rows["reduce-overhead"]["status"] == "skipped" and "forward only" in rows["reduce-overhead"]["reason"]
    assert "saved for backward" in result.stdout and "n/a" in result.stdout
    assert (tmp_path / "mlp_train_cpu_fp32.png").read_bytes()[:8] == PNG_SIGNATURE
    assert not (tmp_path / "mlp_cpu_fp32.json").exists()  # a forward run's results stay where they were


class GeluWithoutItsDerivative(torch.autograd.Function):
    """The right GELU forward, and a backward that passes the gradient through as if GELU were the identity."""

    @staticmethod
    def forward(ctx, g):
        return F.gelu(g, approximate="tanh")

    @staticmethod
    def backward(ctx, dh):
        return dh


class GeluGradientMissing(SimpleGeGLUMLP):
    def forward(self, x):
        return self.down_proj(GeluWithoutItsDerivative.apply(self.gate_proj(x)) * self.up_proj(x))


class UpProjectionDetached(SimpleGeGLUMLP):
    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x).detach())


def copied_into(module_class):
    """A variant that trains as `module_class`, holding a copy of the eager module's weights (as Liger's does)."""

    def build(mlp):
        hidden, dim = mlp.gate_proj.weight.shape
        module = module_class(dim, hidden).to(mlp.gate_proj.weight.device, mlp.gate_proj.weight.dtype)
        module.load_state_dict(mlp.state_dict())
        return module

    return build


def test_training_mode_finds_a_wrong_gradient_behind_a_right_output(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(benchmark.VARIANTS, "gelu-grad", Variant("gelu-grad", build=copied_into(GeluGradientMissing)))
    monkeypatch.setitem(benchmark.VARIANTS, "detached", Variant("detached", build=copied_into(UpProjectionDetached)))
    rows = benchmark.main([*TINY, "--device", "cpu", "--train", "--variants", "gelu-grad,detached",
                           "--out", str(tmp_path)])
    by_name = {row.variant: row for row in rows}
    assert by_name["eager"].status == "ok"

    wrong = by_name["gelu-grad"]
    assert wrong.status == "WRONG" and wrong.time_us is None and wrong.speedup is None  # not timed
    errors, tolerance = wrong.grad_errors, wrong.tolerance
    assert errors["up_proj.weight"] <= tolerance and errors["down_proj.weight"] <= tolerance  # GELU's output is right
    assert errors["gate_proj.weight"] > tolerance and errors["x"] > tolerance  # its derivative is not
    assert "gradient of gate_proj.weight: relative error" in wrong.reason and "output" not in wrong.reason

    detached = by_name["detached"]
    assert detached.status == "WRONG" and "gradient of up_proj.weight: relative error inf" in detached.reason
    assert "no gradient" in detached.reason
    printed = capsys.readouterr().out
    assert "gelu-grad WRONG" in printed and "detached WRONG" in printed


def gpu_row(variant, *, cpu, busy, loop, gpu, kernels, launches, status="ok", reason=None):
    return Row(
        "decode", 8, 1, 768, 3072, variant, status=status, reason=reason, first_call_s=1.0,
        rel_error=3e-3, tolerance=1.6e-2, time_us=gpu, time_p20_us=gpu * 0.98, time_p80_us=gpu * 1.03,
        samples=900, tflops=0.1, matmul_share=1e-3, roofline_share=0.3, loop_us=loop, cpu_us=cpu,
        gpu_busy_us=busy, gpu_busy_fraction=busy / loop, kernels=kernels, launches=launches,
        paced_by=pace.paced_by(cpu, busy, loop), peak_mib=0.2,
    )


def test_the_report_says_who_sets_the_pace_at_decode():
    rows = [
        gpu_row("eager", cpu=20.0, busy=8.0, loop=20.5, gpu=12.0, kernels=5, launches=5),
        gpu_row("compile", cpu=35.0, busy=7.0, loop=35.5, gpu=10.0, kernels=4, launches=4),
        gpu_row("reduce-overhead", cpu=9.0, busy=7.0, loop=9.5, gpu=10.0, kernels=4, launches=2),
        Row("decode", 8, 1, 768, 3072, "liger", status="failed", reason="no LigerGEGLUMLP available"),
        Row("decode", 8, 1, 768, 3072, "fused", status="WRONG", reason="relative error 0.3",
            rel_error=0.3, tolerance=1.6e-2),
    ]
    add_speedups(rows)
    assert rows[1].loop_speedup == pytest.approx(20.5 / 35.5) and rows[1].speedup == pytest.approx(1.2)

    per_call = {name: variant.per_call for name, variant in benchmark.VARIANTS.items()}
    story = "\n".join(pace.pace_story(benchmark.PRESETS["decode"], rows, per_call))
    assert "launch-bound" in story
    assert "compile: 4 kernels from 4 launches, 35.0 µs of CPU" in story and "0.58× eager in a loop" in story
    assert "reduce-overhead: 4 kernels from 2 launches" in story and "2.16× eager in a loop" in story
    assert "liger" not in story and "fused" not in story  # no numbers, no story

    settings = Settings(torch.device("cuda"), torch.bfloat16, 25, 100, Ceilings(700.0, 8192, 4000.0, 2 << 30))
    console = Console(record=True, width=240)
    console.print(table.shape_table(benchmark.PRESETS["decode"], rows, settings))
    text = console.export_text()
    assert "kernels/launches" in text and "4 / 2" in text and "WRONG" in text and "failed" in text
    assert "memory-bound" in text  # 14 MB of weights against 0.1 GFLOP


def test_counts_per_forward_are_whole_where_whole_and_one_decimal_where_not():
    # 16 kernels from 15 launches over the 3 profiled steps: 5.33333 / 5 read as 5.3 / 5.
    rows = [gpu_row("eager", cpu=20.0, busy=8.0, loop=20.5, gpu=12.0, kernels=16 / 3, launches=15 / 3),
            gpu_row("compile", cpu=35.0, busy=7.0, loop=35.5, gpu=10.0, kernels=4.0, launches=4 / 3 * 3)]
    add_speedups(rows)
    settings = Settings(torch.device("cuda"), torch.bfloat16, 25, 100, Ceilings(700.0, 8192, 4000.0, 2 << 30))
    console = Console(record=True, width=240)
    console.print(table.shape_table(benchmark.PRESETS["decode"], rows, settings))
    text = console.export_text()
    assert "5.3 / 5 " in text and "4 / 4 " in text and "5.33" not in text, text
    story = "\n".join(pace.pace_story(benchmark.PRESETS["decode"], rows, {}))
    assert "Eager's 5.3 kernels" in story and "compile: 4 kernels from 4 launches" in story, story


def seven_b_row(variant: str, time_us: float) -> Row:
    shape = benchmark.PRESETS["7b"]
    return Row(shape.name, shape.batch, shape.seq, shape.dim, shape.hidden, variant, rel_error=3e-3, tolerance=1.6e-2,
               time_us=time_us, time_p20_us=time_us, time_p80_us=time_us, tflops=shape.flops / (time_us * 1e6),
               loop_us=time_us, cpu_us=100.0, gpu_busy_us=time_us, gpu_busy_fraction=1.0, kernels=2, launches=2,
               paced_by="GPU")


def test_the_gemm_ceiling_is_the_best_burst_and_a_share_above_it_is_flagged():
    """The 7B shape's fused forward at 3,211 µs is 690 TFLOP/s: against a first burst that read 675, 102.3%."""
    shape = benchmark.PRESETS["7b"]
    rows = [seven_b_row("eager", 3501.3), seven_b_row("fused", 3211.3)]
    add_speedups(rows)
    first = Ceilings(675.0, 8192, 4000.0, 2 << 30, matmul_bursts=(675.0,))
    add_hardware_shares(rows, [shape], first, 2, train=False)
    assert rows[1].matmul_share == pytest.approx(1.023, abs=1e-3)

    settings = Settings(torch.device("cuda"), torch.bfloat16, 25, 100, first)
    console = Console(record=True, width=240)
    console.print(table.shape_table(shape, rows, settings))
    for line in prose.above_ceiling(rows, first):
        console.print(line)
    text = console.export_text()
    fused_line = next(line for line in text.splitlines() if "│ fused" in line)
    assert ">100*" in fused_line and "102.3" not in fused_line, fused_line
    assert "fused: faster than the ceiling measured in this run allows" in text and "measured low" in text, text
    story = "\n".join(pace.pace_story(shape, rows, {}))
    assert "above the GEMM rate measured in this run" in story and "102%" not in story, story

    # Bursts after the variants, at the clocks they ran at: the best is the ceiling, and the shares follow it.
    ceilings = first.with_matmul_burst(745.0).with_matmul_burst(690.0)
    assert ceilings.matmul_tflops == 745.0 and ceilings.matmul_bursts == (675.0, 745.0, 690.0)
    add_hardware_shares(rows, [shape], ceilings, 2, train=False)
    assert rows[1].matmul_share == pytest.approx(690.2 / 745.0, abs=1e-3)
    assert prose.above_ceiling(rows, ceilings) == []
    assert prose.share(rows[1].matmul_share) == "92.6"


def test_who_sets_the_pace_is_trace_reports_verdict_rule():
    """The verdict's rule and thresholds (trace_report/pace.py), on numbers taken without the profiler."""
    assert pace.paced_by(cpu_us=20.0, gpu_busy_us=8.0, loop_us=20.5) == "CPU"  # issuing takes longer than running
    assert pace.paced_by(cpu_us=70.0, gpu_busy_us=3000.0, loop_us=3010.0) == "GPU"
    starved_loop = 10.0 / (1 - STARVED_SHARE)  # the GPU idle STARVED_SHARE of the loop, though issued faster
    assert pace.paced_by(cpu_us=9.0, gpu_busy_us=10.0, loop_us=starved_loop) == "CPU"
    assert pace.paced_by(cpu_us=9.0, gpu_busy_us=10.0, loop_us=starved_loop * 0.99) == "GPU"

    near = gpu_row("eager", cpu=60.0, busy=55.0, loop=61.0, gpu=30.0, kernels=5, launches=5)
    assert CLOSE_TO_LINE[0] <= 55.0 / 60.0 <= CLOSE_TO_LINE[1]
    story = "\n".join(pace.pace_story(benchmark.PRESETS["decode"], [near], {}))
    assert "launch-bound" in story and "close to the line: 0.92x as much GPU work as CPU issue time" in story
    far = gpu_row("eager", cpu=65.0, busy=247.0, loop=248.8, gpu=247.4, kernels=5, launches=5)
    story = "\n".join(pace.pace_story(benchmark.PRESETS["post"], [far], {}))
    assert "GPU-bound" in story and "close to the line" not in story


def test_kernels_and_launches_per_forward_from_h200_traces():
    eager = kernel_counts(read_trace(FIXTURES / "h200" / "mlp_eager.json.gz"))
    compiled = kernel_counts(read_trace(FIXTURES / "h200" / "mlp_compile.json.gz"))
    assert (eager.kernels, eager.launches) == (5, 5)  # 3 GEMMs, gelu, mul
    assert (compiled.kernels, compiled.launches) == (4, 4)  # gelu and mul fused by Inductor
    assert any(name.startswith("triton_") for name in compiled.names)
    assert 0 < compiled.gpu_busy_us < eager.gpu_busy_us


def test_shapes_parse_presets_and_explicit_sizes():
    shapes = parse_shapes("decode, 16x512:4096:11008,2x3:8:16", benchmark.PRESETS)
    assert [s.name for s in shapes] == ["decode", "7B layer", "2x3:8:16"]
    assert shapes[2].tokens == 6 and shapes[2].flops == 2 * 6 * 8 * 16 * 3


def test_percentiles_interpolate_like_numpy():
    assert timers.percentile([5, 1, 4, 2, 3], 50) == 3
    assert timers.percentile([1, 2, 3, 4, 5], 20) == pytest.approx(1.8)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--shapes", "8x1:768"], "is not BATCHxSEQ:DIM:HIDDEN"),
        (["--shapes", "0x1:768:3072"], "positive"),
        (["--shapes", "decode,decode"], "twice"),
        (["--variants", "eager,turbo"], "unknown variant 'turbo'"),
        (["--rep_ms", "0"], "positive"),
        (["--rep-ms", "5"], "unrecognized arguments: --rep-ms 5"),  # underscores, as in every lesson
        (["--dtype", "fp8"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(flags, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main([*flags, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_bad_input_from_the_command_line(tmp_path):
    result = run_script("benchmark_mlp.py", "--shapes", "8x1:x:3072", "--out", str(tmp_path))
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and "--shapes" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main([*TINY, "--device", "cpu", "--out", str(blocker / "results")])
    assert exit_info.value.code == 2
    assert "cannot write results" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_a_gpu(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main([*TINY, "--device", "cuda", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "no CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.slow
@requires_cuda
def test_cuda_graphs_replay_the_kernels_from_fewer_launches(tmp_path):
    result = run_script("benchmark_mlp.py", "--shapes", "8x1:256:512", "--variants", "eager,reduce-overhead",
                        "--out", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    rows = {r["variant"]: r for r in json.loads((tmp_path / "mlp_cuda_bf16.json").read_text())["results"]}
    eager, graphed = rows["eager"], rows["reduce-overhead"]
    assert eager["status"] == "ok" and graphed["status"] == "ok", (eager["reason"], graphed["reason"])
    assert eager["kernels"] >= 5 and eager["launches"] >= 5
    assert graphed["launches"] < eager["launches"]
    assert eager["loop_us"] > 0 and eager["cpu_us"] > 0 and eager["peak_mib"] >= 0
    # Timed forward by forward, the GPU's time inside the forwards is part of the loop's (the rest it waited)
    for row in (eager, graphed):
        assert 0 < row["busy_in_loop_us"] <= row["busy_loop_us"], row
    assert (tmp_path / "mlp_cuda_bf16.png").read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.gpu
@pytest.mark.slow
@requires_cuda
def test_training_mode_on_a_gpu_measures_peak_memory_and_the_fused_backward(tmp_path):
    result = run_script("benchmark_mlp.py", "--train", "--shapes", "8x16:256:512", "--variants", "eager,fused",
                        "--out", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = {r["variant"]: r for r in json.loads((tmp_path / "mlp_train_cuda_bf16.json").read_text())["results"]}
    eager, fused = rows["eager"], rows["fused"]
    assert eager["status"] == "ok" and fused["status"] == "ok", (eager["reason"], fused["reason"])
    assert eager["peak_mib"] > 0 and fused["peak_mib"] > 0 and fused["time_us"] > 0
    assert eager["saved"] == "x [128, 256] + 4 × [128, 512]"
    assert 0 < fused["saved_bytes"] < eager["saved_bytes"]  # x, the interleaved g and u, and h


def _post_row(variant, time_us, loop_us, cpu_us, launches, busy=(None, None)):
    return Row("post", 64, 128, 768, 3072, variant, time_us=time_us, loop_us=loop_us, cpu_us=cpu_us, launches=launches,
               busy_loop_us=busy[0], busy_in_loop_us=busy[1])


def test_launch_goals_and_host_cost_read_the_runs_own_numbers():
    from profiling_in_pytorch.bench.floor import LaunchFloor, floor_line, host_cost_lines
    from profiling_in_pytorch.bench.goals import launch_goal_lines

    rows = [_post_row("eager", 244.7, 254.3, 66.2, 5, (255.0, 253.0)),
            _post_row("fused", 172.5, 185.9, 32.0, 2, (186.2, 184.4)),
            _post_row("fused-fp8", 122.0, 126.0, 52.2, 3, (127.0, 119.0))]
    add_speedups(rows)
    lines = launch_goal_lines(rows)
    assert "eager issues a call in 66.2 µs" in lines[0]
    fused, fp8 = lines[1], lines[2]
    # GPU-bound is judged on the loop timed forward by forward, not on the GPU µs column (L2 flushed, idle between)
    assert "✓" in fused and "0.48× eager's (goal ≤ 0.5×)" in fused and "1.08× its GPU µs (L2 flushed" in fused
    assert "1.01× the GPU's 184.4 µs inside each (goal ≤ 1.05×, the CPU's 32.0 µs below it)" in fused
    assert "✗" in fp8 and "1.07× the GPU's 119.0 µs inside each" in fp8 and "2.02× eager in a loop (goal ≥ 1.8×)" in fp8
    rows[1].cpu_us = 190.0  # the CPU slower than the GPU: its waits inside forwards count as busy, so no ✓
    assert "✗" in launch_goal_lines(rows)[1] and "the CPU's 190.0 µs above it" in launch_goal_lines(rows)[1]
    rows[1].busy_in_loop_us = None
    assert "✗" in launch_goal_lines(rows)[1] and "not timed forward by forward (goal not judged)" in launch_goal_lines(rows)[1]
    rows[1].cpu_us = 32.0
    train = launch_goal_lines([_post_row("eager", 700, 750, 564.8, 30), _post_row("fused", 560, 620, 474.6, 20)],
                              train=True)
    assert len(train) == 2 and "✓" in train[1] and "0.84× eager's (goal ≤ 1×)" in train[1]
    assert launch_goal_lines([_post_row("fused", 172.5, 185.9, 32.0, 2)]) == []  # no eager: nothing to judge by
    floor = LaunchFloor(aten_op_us=6.1, triton_launch_us=10.3, ready_launch_us=4.9)
    assert host_cost_lines(rows, floor)[1] == "  fused: 32.0 µs for 2 launches, 16.0 µs each (2.6× an ATen op's)"
    console = Console(width=400, record=True)
    console.print(floor_line(floor))
    assert "through kernel[grid] 10.3, through its compiled launcher 4.9" in console.export_text()
