"""The lessons, run as a user runs them (a subprocess), at sizes small enough for a CPU."""

from __future__ import annotations

import inspect
import re
import textwrap

import pytest
import torch
from conftest import ROOT, load_trace, run_script, stderr_lines

from profiling_in_pytorch.mlp import SimpleGeGLUMLP

SMALL = {
    "01_matmul_add.py": ["--size", "16"],
    "02_linear.py": ["--batch", "8", "--in_dim", "4", "--out_dim", "6"],
    "03_simple_mlp.py": ["--batch", "2", "--seq", "3", "--dim", "8", "--hidden", "16"],
}
LABELS = {"01_matmul_add.py": "matmul_add", "02_linear.py": "linear_fwd", "03_simple_mlp.py": "mlp_fwd"}
EXPECTED_TAGS = {
    "01_matmul_add.py": "16_fp32_cold_eager_cpu",
    "02_linear.py": "8_4_6_eager_fp32_cpu",
    "03_simple_mlp.py": "2_3_8_16_eager_fp32_cpu",
}


def names(trace: dict, **where) -> list[str]:
    return [e["name"] for e in trace["traceEvents"] if all(e.get(k) == v for k, v in where.items())]


@pytest.mark.parametrize("script", sorted(SMALL))
def test_lesson_writes_a_trace_of_three_active_steps(script, tmp_path):
    result = run_script(script, *SMALL[script], "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    folder = tmp_path / script.removesuffix(".py")
    trace_path = folder / f"{EXPECTED_TAGS[script]}.json"
    assert trace_path.exists(), sorted(p.name for p in folder.iterdir())

    trace = load_trace(trace_path)
    steps = sorted(n for n in names(trace) if n.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert names(trace, cat="user_annotation").count(LABELS[script]) == 3
    assert not trace["traceName"].startswith("/"), trace["traceName"]
    assert str(ROOT) not in trace_path.read_text() and str(tmp_path) not in trace_path.read_text()

    table = (folder / f"{EXPECTED_TAGS[script]}.txt").read_text()
    assert "Self CPU" in table and LABELS[script] in table
    assert "no gpu here" in result.stdout.lower()  # the CPU note, one line of what differs
    picture = folder / f"{EXPECTED_TAGS[script]}.png"  # the first recorded step, drawn beside its trace
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(picture) in result.stdout.split("Next")[1]
    assert result.stderr == "", result.stderr  # drawing it adds nothing there (matplotlib logs through logging)
    assert not list(folder.glob(".*")), "temporary files left behind"


def test_simple_mlp_runs_the_posts_ops(tmp_path):
    result = run_script("03_simple_mlp.py", *SMALL["03_simple_mlp.py"], "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    trace = load_trace(tmp_path / "03_simple_mlp" / f"{EXPECTED_TAGS['03_simple_mlp.py']}.json")
    ops = names(trace, cat="cpu_op")
    # three GEMMs, a gelu and a mul per active step
    assert ops.count("aten::mm") == 9 and ops.count("aten::gelu") == 3 and ops.count("aten::mul") == 3


def test_the_module_is_the_posts():
    torch.manual_seed(0)
    mlp = SimpleGeGLUMLP(8, 16)
    x = torch.randn(2, 3, 8)
    gate = x @ mlp.gate_proj.weight.T
    gelu_tanh = 0.5 * gate * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (gate + 0.044715 * gate**3)))
    expected = (gelu_tanh * (x @ mlp.up_proj.weight.T)) @ mlp.down_proj.weight.T
    torch.testing.assert_close(mlp(x), expected)
    assert all(m.bias is None for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))


def test_lesson_03_shows_the_module_as_it_is_defined():
    """The lesson's docstring carries the post's code for the reader; the module's one home is profiling_in_pytorch/mlp."""
    docstring = (ROOT / "03_simple_mlp.py").read_text().split('"""')[1]
    shown = textwrap.dedent(docstring.split("as the post writes it")[1].split("\n\n", 1)[1])
    source = inspect.getsource(SimpleGeGLUMLP)
    assert source.strip() in shown, shown


@pytest.mark.slow
def test_compile_shows_the_compiled_region(tmp_path):
    result = run_script("02_linear.py", "--batch", "4", "--in_dim", "4", "--out_dim", "4", "--compile",
                        "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    trace = load_trace(tmp_path / "02_linear" / "4_4_4_compile_fp32_cpu.json")
    all_names = names(trace)
    # Dynamo's compiled frame shows up as its own region inside each labelled step.
    assert any(re.match(r"Torch-Compiled Region", n) for n in all_names), sorted(set(all_names))[:40]
    assert names(trace, cat="user_annotation").count("linear_fwd") == 3


def test_different_flags_different_files_same_flags_replace(tmp_path):
    args = ["--size", "8", "--trace_dir", str(tmp_path)]
    assert run_script("01_matmul_add.py", *args).returncode == 0
    assert run_script("01_matmul_add.py", *args, "--warmup").returncode == 0
    assert run_script("01_matmul_add.py", *args, "--dtype", "bf16").returncode == 0
    folder = tmp_path / "01_matmul_add"
    traces = sorted(p.name for p in folder.glob("*.json"))
    assert traces == ["8_bf16_cold_eager_cpu.json", "8_fp32_cold_eager_cpu.json", "8_fp32_warm_eager_cpu.json"]

    first = (folder / "8_fp32_cold_eager_cpu.json").read_text()
    assert run_script("01_matmul_add.py", *args).returncode == 0
    second = (folder / "8_fp32_cold_eager_cpu.json").read_text()
    assert first != second  # replaced (new timestamps), not appended to
    load_trace(folder / "8_fp32_cold_eager_cpu.json")  # and whole
    assert sorted(p.name for p in folder.glob("*.json")) == traces


BAD_INPUTS = [
    (["--size", "0"], "positive"),
    (["--size", "-3"], "positive"),
    (["--size", "big"], "positive"),
    (["--dtype", "fp8"], "invalid choice"),
    (["--device", "tpu"], "invalid choice"),
]


@pytest.mark.parametrize("args,needle", BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    result = run_script("01_matmul_add.py", *args, "--trace_dir", str(tmp_path))
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "01_matmul_add").exists() or not any((tmp_path / "01_matmul_add").iterdir())


def test_unwritable_trace_dir(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = run_script("02_linear.py", "--batch", "2", "--trace_dir", str(blocker))
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and "cannot write traces" in lines[0] and "is a file, not a folder" in lines[0], result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gives")
def test_cuda_without_gpu(tmp_path):
    result = run_script("03_simple_mlp.py", "--device", "cuda", "--trace_dir", str(tmp_path))
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and "no CUDA GPU" in lines[0], result.stderr
