"""The lessons, run as a user runs them (a subprocess), at sizes small enough for a CPU."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import CPU_LESSON_RUNS, H200_EAGER, ROOT, load_trace, run_script, stderr_lines

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


# 01 and 02 at these sizes are runs of tests/conftest.py's CPU_LESSON_RUNS, started from the repository's root with
# their trace folder elsewhere; 03 runs here (its run there starts inside the trace folder and prints relative paths).
SESSION_RUNS = {"01_matmul_add.py": "01", "02_linear.py": "02"}


@pytest.fixture(scope="module")
def simple_mlp_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lessons")
    return folder, run_script("03_simple_mlp.py", *SMALL["03_simple_mlp.py"], "--trace_dir", str(folder))


def small_run(script: str, request) -> tuple:
    """(the trace folder, the result) of `script` at its SMALL sizes, run from the repository's root."""
    if script not in SESSION_RUNS:
        return request.getfixturevalue("simple_mlp_run")
    script_of_run, args, cwd = CPU_LESSON_RUNS[SESSION_RUNS[script]]
    assert (script_of_run, shlex.split(args), cwd) == (script, SMALL[script], ROOT)
    runs = request.getfixturevalue("cpu_lesson_runs")
    return runs.folder, runs[SESSION_RUNS[script]]


@pytest.mark.parametrize("script", sorted(SMALL))
def test_lesson_writes_a_trace_of_three_active_steps(script, request):
    tmp_path, result = small_run(script, request)
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


def test_simple_mlp_runs_the_posts_ops(simple_mlp_run):
    tmp_path, result = simple_mlp_run
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


def test_different_flags_different_files_same_flags_replace(cpu_lesson_runs, tmp_path):
    # The plain and --warmup runs are tests/conftest.py's ("01", "01 warm"): their traces, copied here as they wrote
    # them, and two more runs into the same folder.
    args = ["--size", "16", "--trace_dir", str(tmp_path)]
    folder = tmp_path / "01_matmul_add"
    folder.mkdir()
    for name, trace in (("01", "16_fp32_cold_eager_cpu.json"), ("01 warm", "16_fp32_warm_eager_cpu.json")):
        assert shlex.split(CPU_LESSON_RUNS[name][1])[:2] == args[:2]
        assert cpu_lesson_runs[name].returncode == 0
        shutil.copy2(cpu_lesson_runs.folder / "01_matmul_add" / trace, folder / trace)
    assert run_script("01_matmul_add.py", *args, "--dtype", "bf16").returncode == 0
    traces = sorted(p.name for p in folder.glob("*.json"))
    assert traces == ["16_bf16_cold_eager_cpu.json", "16_fp32_cold_eager_cpu.json", "16_fp32_warm_eager_cpu.json"]

    first = (folder / "16_fp32_cold_eager_cpu.json").read_text()
    assert run_script("01_matmul_add.py", *args).returncode == 0
    second = (folder / "16_fp32_cold_eager_cpu.json").read_text()
    assert first != second  # replaced (new timestamps), not appended to
    load_trace(folder / "16_fp32_cold_eager_cpu.json")  # and whole
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


# The lessons' op table from a GPU profile, with key_averages' rows as torch makes them (a key, a count, times).
OP_TABLE = """
import json, sys
from types import SimpleNamespace
import torch
from profiling_in_pytorch import lesson
rows = [SimpleNamespace(key=name, count=3 * (i + 1), cpu_time_total=12345.6 / (i + 1),
                        self_cpu_time_total=1234.5 / (i + 1), device_time_total=9876.5 / (i + 1),
                        self_device_time_total=987.6 / (i + 1))
        for i, name in enumerate(json.loads(sys.argv[1]))]
lesson.print_op_table(SimpleNamespace(key_averages=lambda: rows), torch.device("cuda"))
"""


def test_the_op_table_shows_each_name_on_one_line_at_80_columns():
    """On an H200 the eager GELU's and mul's kernels are C++ templates of 451 and 345 characters: decoded and
    shortened as trace-report shows them, each is one line of the table, the part that tells them apart kept."""
    events = load_trace(H200_EAGER)["traceEvents"]
    kernels = sorted({e["name"] for e in events if e.get("cat") == "kernel"}, key=len, reverse=True)
    ops = sorted({e["name"] for e in events if e.get("cat") == "cpu_op"})[:15 - len(kernels)]
    assert len(kernels[0]) > 300, kernels[0]
    result = subprocess.run([sys.executable, "-c", OP_TABLE, json.dumps(kernels + ops)], cwd=ROOT, capture_output=True,
                            text=True, env={**os.environ, "COLUMNS": "80"})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    body = lines[lines.index(next(line for line in lines if line.startswith("┡"))) + 1:]
    body = body[:body.index(next(line for line in body if line.startswith("└")))]
    assert len(body) == len(kernels + ops), result.stdout  # one line per row: no name folds onto a second
    assert all(len(line) <= 80 for line in lines), result.stdout
    for i, line in enumerate(body):
        assert f"│ {3 * (i + 1):>5} │" in line, line  # the row's own numbers beside its name
    shown = [line.split("│")[1].strip() for line in body]
    assert any(name.endswith("kernel<gelu>") for name in shown) and any(name.endswith("kernel<mul>") for name in shown)
    assert any(name.endswith("coopA_TNT") for name in shown), shown


def test_the_share_command_parses_under_the_trace_util_it_pins(tmp_path, monkeypatch):
    """The printed command names trace-util's version, the folder the traces are in and a bucket name (not a path),
    and trace-util 0.1.0's own command line (installed with the dev dependencies) takes its arguments."""
    cli = pytest.importorskip("trace_util.cli")
    import importlib.metadata

    import typer
    from huggingface_hub.utils import validate_repo_id

    folder = tmp_path / "my traces!"
    result = run_script("02_linear.py", *SMALL["02_linear.py"], "--trace_dir", str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    share = result.stdout.split("share it:", 1)[1].splitlines()
    command = shlex.split(share[0])
    assert command[:2] == ["uvx", f"trace-util@{importlib.metadata.version('trace-util')}"], command
    assert command[1] == "trace-util@0.1.0"
    assert command[2:] == ["my traces!", "-b", "my-traces"], command  # relative to where the lesson ran
    validate_repo_id(command[4])  # a name the Hub takes, alone and under an account
    validate_repo_id(f"someone/{command[4]}")
    assert "hf auth login" in share[1] and "deleting nothing" in share[1] and "public" in share[1], share[1]

    monkeypatch.chdir(tmp_path)
    # trace-util 0.1.0 is `typer.run(share)`: the click command typer.run makes of it parses the arguments (and
    # checks that the folder exists) without running the upload.
    app = typer.Typer(add_completion=False)
    app.command()(cli.share)
    context = typer.main.get_command(app).make_context("trace-util", command[2:])
    assert context.params["local_dir"] == folder.resolve() and context.params["bucket"] == "my-traces"
    assert (folder / "02_linear" / f"{EXPECTED_TAGS['02_linear.py']}.json").is_file()
    assert "local_dir" in subprocess.run([sys.executable, "-m", "trace_util.cli", "--help"], capture_output=True,
                                         text=True, env={**os.environ, "COLUMNS": "200"}).stdout.lower()


def test_the_exported_trace_keeps_only_the_name_of_an_inductor_kernel_file(tmp_path):
    # torch 2.11 records each Inductor kernel launch with its source's absolute path in the compile cache
    # (/tmp/torchinductor_<user>/...), as kernel_file, when the profile records shapes: a shared trace keeps the
    # file's name only.
    from torch.profiler import ProfilerActivity, profile

    from profiling_in_pytorch.lesson.profiling import export_trace

    source = tmp_path / "torchinductor_me" / "5a" / "c5arvga7.py"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch._C._profiler._RecordFunctionFast("triton_poi_fused_gelu_mul_0", (), {"kernel_file": str(source)}):
            torch.ones(4).add_(1)
    out = tmp_path / "trace.json"
    export_trace(prof, out, "trace.json")
    launches = [e for e in load_trace(out)["traceEvents"] if e.get("name") == "triton_poi_fused_gelu_mul_0"]
    assert [e["args"]["kernel_file"] for e in launches] == ["c5arvga7.py"]
    assert str(tmp_path) not in out.read_text()
