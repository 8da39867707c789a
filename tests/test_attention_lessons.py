"""Part 3's lessons (04_a … 04_d), run as a user runs them (a subprocess) at a size a CPU runs in seconds, and the
modules they profile.

No test touches the network: 04_d's Hub is made unreachable (HF_HUB_OFFLINE=1 with empty caches, or an endpoint on
127.0.0.1 that refuses connections, as tests/test_kernels_mlp.py does), and a local kernel repository is built in
tmp_path and loaded by the real `kernels` loader.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import shlex
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT, hub_unreachable_envs, load_trace, requires_cuda, run_script, stderr_lines

from profiling_in_pytorch.attention import InPlaceCausalAttention, NaiveCausalAttention, sdpa
from profiling_in_pytorch.attention.flash_kernel import FLASH_ATTN, torch_flash_attn_func
from profiling_in_pytorch.checks import attention as ac
from trace_report import read_trace

SMALL = "--batch 1 --heads 2 --seq 64 --head_dim 16"
TAG = "1_2_64_16"
LOCAL_LABEL = "local_repo_flash_attn"

# Each run, in the post's order, into one trace folder: later lessons compare with earlier ones' traces.
CPU_RUNS = {
    "04_a": ("04_a_naive_attention.py", SMALL),
    "04_b": ("04_b_inplace_ops_attention.py", SMALL),
    "04_c math": ("04_c_sdpa_attention.py", SMALL + " --backend math"),
    "04_c auto": ("04_c_sdpa_attention.py", SMALL),
    "04_d": ("04_d_kernels_attention.py", SMALL),
}
# What a CPU shows, claim by claim, after profiling: ✓, ✗ (each with its known reason) or – (skipped).
CPU_MARKS = {
    "04_a": {"P3-01": ["✓"], "P3-02": ["✓", "✓"], "P3-17": ["✓"]},
    "04_b": {"P3-01": ["✓"], "P3-03": ["✓", "✓"], "P3-17": ["✓"]},
    "04_c math": {"P3-04": ["✗"], "P3-05": ["✗", "✓"], "P3-06": ["✗", "✗"], "P3-07": ["✓"], "P3-08": ["✓"]},
    "04_c auto": {"P3-16": ["✓", "✗", "✗"], "P3-10": ["✗"], "P3-11": ["✗"], "P3-13": ["✗"], "P3-17": ["✓"]},
    "04_d": {},
}
TRACES = {
    "04_a": f"04_a_naive_attention/{TAG}_eager_fp32_cpu.json",
    "04_b": f"04_b_inplace_ops_attention/{TAG}_eager_fp32_cpu.json",
    "04_c math": f"04_c_sdpa_attention/{TAG}_math_eager_fp32_cpu.json",
    "04_c auto": f"04_c_sdpa_attention/{TAG}_auto_eager_fp32_cpu.json",
    "04_d": f"04_d_kernels_attention/{TAG}_torch_flashattn_eager_fp32_cpu.json",
}
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="about what a machine without a GPU does")


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("attention_traces")
    return folder, {
        name: run_script(script, *shlex.split(args), "--trace_dir", str(folder), "--device", "cpu", cwd=folder, env=hub_unreachable_envs()["offline"])
        for name, (script, args) in CPU_RUNS.items()
    }


def marks(stdout: str) -> dict[str, list[str]]:
    """claim -> the marks printed for it after profiling."""
    found: dict[str, list[str]] = {}
    for mark, claim in re.findall(r"^\s+([✓✗–]) (P3-\d\d) ·", stdout.split("What we saw", 1)[1], flags=re.M):
        found.setdefault(claim, []).append(mark)
    return found


@pytest.mark.parametrize("name", list(CPU_RUNS))
def test_a_cpu_run_checks_what_it_announced_and_explains_each_miss(cpu_runs, name):
    folder, results = cpu_runs
    result = results[name]
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    assert marks(result.stdout) == CPU_MARKS[name], result.stdout
    announced = re.findall(r"^\s+• (P3-\d\d) ·", result.stdout.split("What we saw")[0], flags=re.M)
    assert sorted(announced) == sorted(c for c, m in CPU_MARKS[name].items() for _ in m)
    assert result.stdout.count("  ✗ ") == result.stdout.count("known reason:"), result.stdout
    unnumbered = re.findall(r"^\s+([✓✗–]) (?!P3-)", result.stdout.split("What we saw", 1)[1], flags=re.M)
    assert set(unnumbered) == {"✓"}, result.stdout  # the suite's own guesses hold on a CPU

    trace = load_trace(folder / TRACES[name])
    steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    label = {"04_c math": "sdpa_fwd", "04_c auto": "sdpa_fwd", "04_d": "flash_kernel_fwd"}.get(name, "attn_fwd")
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"].count(label) == 3
    assert not trace["traceName"].startswith("/") and str(folder) not in json.dumps(trace)


def test_on_a_cpu_the_out_of_place_copy_is_a_cpu_op_and_in_place_has_none(cpu_runs):
    folder, _ = cpu_runs
    naive, inplace = (read_trace(folder / TRACES[name]) for name in ("04_a", "04_b"))
    copies = [o.path for o in naive.steps[0].ops if o.name == "aten::copy_" and "aten::masked_fill" in o.path]
    assert copies == [("attn_fwd", "aten::masked_fill", "aten::clone")]
    assert not any(o.name in ("aten::clone", "aten::masked_fill") for o in inplace.steps[0].ops)


def test_on_a_cpu_sdpa_shows_maths_decomposition_and_one_flash_op(cpu_runs):
    folder, results = cpu_runs
    math, auto = (read_trace(folder / TRACES[name]) for name in ("04_c math", "04_c auto"))
    ops = math.steps[0].op_names()
    assert ops["aten::_scaled_dot_product_attention_math"] == 1 and ops["aten::_safe_softmax"] == 1 and ops["aten::tril"] == 1
    assert auto.steps[0].op_names()["aten::_scaled_dot_product_flash_attention_for_cpu"] == 1
    assert "torch says SDPA will run flash" in results["04_c auto"].stdout
    table = results["04_c auto"].stdout.split("side by side", 1)[1]  # the variants whose traces exist, side by side
    assert all(row in table for row in ("naive (04_a)", "in-place (04_b)", "sdpa math", "sdpa auto ←"))


def test_04d_without_the_hub_runs_torchs_flash_attention_and_says_so(cpu_runs):
    _, results = cpu_runs
    stdout = results["04_d"].stdout
    source = next(line for line in stdout.splitlines() if line.startswith("kernel source:"))
    assert source.startswith("kernel source: torch") and "the Hub is unavailable" in source and "HF_HUB_OFFLINE" in source
    assert re.search(r"output check against fp32: flash_attn_func in fp32, relative error \S+ \(tolerance 0.001\) ✓", stdout)


def test_the_next_lines_diff_with_the_traces_they_compare_with(cpu_runs):
    folder, results = cpu_runs
    diffs = {name: re.findall(r"diff it: .*? (\S+\.json) (\S+\.json)$", results[name].stdout, flags=re.M) for name in CPU_RUNS}
    assert diffs["04_b"] == [(TRACES["04_a"], TRACES["04_b"])]
    assert diffs["04_c math"] == [(TRACES["04_b"], TRACES["04_c math"])]
    assert diffs["04_d"] == []  # 04_c --backend flash was not run here
    for pairs in diffs.values():
        assert all((folder / path).is_file() for pair in pairs for path in pair)


def test_with_shapes_the_naive_lessons_write_their_own_traces_and_say_where_fusion_would_pay(tmp_path):
    for script in ("04_a_naive_attention.py", "04_b_inplace_ops_attention.py"):
        result = run_script(script, *SMALL.split(), "--record_shapes", "--trace_dir", str(tmp_path))
        assert result.returncode == 0 and result.stderr == "", result.stderr
        trace = tmp_path / script.removesuffix(".py") / "1_2_64_16_shapes_eager_fp32_cpu.json"
        assert any(e.get("args", {}).get("Input Dims") for e in load_trace(trace)["traceEvents"])
        said = result.stdout.split("Where fusion would pay", 1)[1]
        assert "a CPU trace has no kernels" in said.splitlines()[1]
    # 04_b compares with 04_a recorded the same way, not with a run without shapes
    assert re.search(r"diff it: .*04_a_naive_attention/1_2_64_16_shapes_eager_fp32_cpu\.json \S+_shapes_", result.stdout)


@pytest.mark.slow
def test_compiled_naive_attention_fuses_scale_mask_and_softmax(tmp_path):
    result = run_script("04_a_naive_attention.py", *shlex.split(SMALL), "--compile", "--device", "cpu", "--trace_dir", str(tmp_path))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    after = result.stdout.split("What we saw", 1)[1]
    assert "✗" not in after and after.count("✓") == 4, after
    assert "cpp_fused__softmax_masked_fill_mul" in after


# --- 04_d's sources: a local kernel repository ----------------------------------------------------------------


def make_flash_repo(root: Path, *, wrong: bool = False) -> Path:
    """A kernel repository as `kernels` reads it from disk, whose flash_attn_func is plain PyTorch (so that it runs
    on a CPU) under its own label; `wrong` leaves out the causal mask, which the output check must catch."""
    variant = root / "flash-attn2" / "build" / "torch-universal"
    package = variant / "flash_attn2"
    package.mkdir(parents=True)
    metadata = {"name": "flash-attn2", "id": f"flash_attn2_test_{abs(hash(str(root)))}", "version": 3,
                "license": "BSD-3-Clause", "python-depends": [], "backend": {"type": "cpu"}}
    (variant / "metadata.json").write_text(json.dumps(metadata))
    (package / "__init__.py").write_text(textwrap.dedent(f"""
        import torch.nn.functional as F
        from torch.profiler import record_function


        def flash_attn_func(q, k, v, causal=False):
            with record_function("{LOCAL_LABEL}"):
                out = F.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal={"False" if wrong else "causal"}
                )
                return out.transpose(1, 2)
        """))
    return root / "flash-attn2"


def test_04d_runs_a_local_kernel_repository(tmp_path):
    repo = make_flash_repo(tmp_path / "repo")
    result = run_script("04_d_kernels_attention.py", *shlex.split(SMALL), "--kernel_repo", str(repo), "--device", "cpu",
                        "--trace_dir", str(tmp_path / "traces"), env=hub_unreachable_envs()["refused"])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert f"kernel source: local · {repo}" in result.stdout
    assert "output check against fp32: flash_attn_func" in result.stdout and "✗" not in result.stdout
    written = list((tmp_path / "traces" / "04_d_kernels_attention").glob(f"{TAG}_local-flash-attn2-*_flashattn_eager_fp32_cpu.json"))
    assert len(written) == 1, written
    labels = [e["name"] for e in load_trace(written[0])["traceEvents"] if e.get("cat") == "user_annotation"]
    assert labels.count("flash_kernel_fwd") == 3 and labels.count(LOCAL_LABEL) == 3  # the repository's kernel ran


def test_04d_fails_a_kernel_that_computes_something_else(tmp_path):
    repo = make_flash_repo(tmp_path / "repo", wrong=True)
    result = run_script("04_d_kernels_attention.py", *shlex.split(SMALL), "--kernel_repo", str(repo), "--device", "cpu",
                        "--trace_dir", str(tmp_path / "traces"))
    assert result.returncode == 1, result.stderr
    assert re.search(r"output check against fp32: flash_attn_func .* over the torch.float32 tolerance ✗", result.stdout), result.stdout


# --- bad input: one line, exit 2 -------------------------------------------------------------------------------


BAD_INPUTS = [
    ("04_a_naive_attention.py", ["--heads", "0"], {}, "positive"),
    ("04_b_inplace_ops_attention.py", ["--seq", "many"], {}, "positive"),
    ("04_c_sdpa_attention.py", ["--backend", "fastest"], {}, "invalid choice"),
    ("04_c_sdpa_attention.py", ["--backend", "math", "--seq", "10000000"], {}, "try smaller sizes"),
    ("04_d_kernels_attention.py", ["--head_dim", "-1"], {}, "positive"),
    ("04_d_kernels_attention.py", ["--kernel_source", "local"], {}, "needs --kernel_repo PATH or LOCAL_KERNELS=kernels-community/flash-attn2=PATH"),
    ("04_d_kernels_attention.py", ["--kernel_repo", "/nonexistent/flash"], {}, "/nonexistent/flash: no such folder"),
    ("04_d_kernels_attention.py", ["--kernel_source", "hub"], "refused", "cannot load kernels-community/flash-attn2 v3 from the Hub"),
    ("04_d_kernels_attention.py", ["--kernel_source", "torch", "--kernel_repo", "."], {}, "contradicts --kernel_source torch"),
    ("04_d_kernels_attention.py", [], {"LOCAL_KERNELS": "no-equals-sign"}, "is not repo_id=path"),
]


@pytest.mark.parametrize("script,args,env,says", BAD_INPUTS, ids=[f"{s[:4]} {' '.join(a) or e}" for s, a, e, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(script, args, env, says, tmp_path):
    env = hub_unreachable_envs()[env] if isinstance(env, str) else env
    result = run_script(script, *args, "--trace_dir", str(tmp_path), env=env)
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr)
    lines = stderr_lines(result)
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.stderr, result.stderr


@cpu_only
@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_a_backend_with_no_cpu_kernel_is_one_line(backend, tmp_path):
    result = run_script("04_c_sdpa_attention.py", *shlex.split(SMALL), "--backend", backend, "--trace_dir", str(tmp_path))
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and lines[0].endswith(f"--backend {backend} cannot run here (this CPU, float32, head_dim 16): "
                                                 "torch found no kernel for it (No viable backend for "
                                                 "scaled_dot_product_attention was found); the backends that can: math, flash"), lines
    assert not list(tmp_path.rglob("*.json")), "nothing is profiled"


# --- the modules: the post's code, and the same attention every way ----------------------------------------


def docstring(script: str) -> str:
    return (ROOT / script).read_text().split('"""')[1]


def code_after(script: str, marker: str) -> str:
    """The indented code block that follows the paragraph holding `marker` in a lesson's docstring, dedented."""
    after = docstring(script).split(marker, 1)[1].split("\n\n", 1)[1]
    lines = []
    for line in after.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


@pytest.mark.parametrize("script,module", [("04_a_naive_attention.py", NaiveCausalAttention),
                                           ("04_b_inplace_ops_attention.py", InPlaceCausalAttention)])
def test_the_lessons_show_the_modules_as_they_are_defined(script, module):
    shown = code_after(script, "(it lives in")
    assert inspect.getsource(module).strip() in shown, shown


def test_04c_shows_the_posts_table_and_call_as_they_are_defined():
    source = inspect.getsource(sdpa)
    tree = ast.parse(source)
    defined = {
        node.targets[0].id if isinstance(node, ast.Assign) else node.name: ast.get_source_segment(source, node)
        for node in tree.body if isinstance(node, (ast.Assign, ast.FunctionDef)) and not isinstance(getattr(node, "targets", [None])[0], ast.Tuple)
    }
    shown = code_after("04_c_sdpa_attention.py", "copy identical):")
    assert defined["backends"] in shown and defined["attention"] in shown, shown


def test_04d_shows_the_posts_call_with_the_kernels_repository_and_version():
    shown = docstring("04_d_kernels_attention.py")
    assert f'get_kernel("{FLASH_ATTN.repo_id}", version={FLASH_ATTN.version})' in shown
    assert "out = flash.flash_attn_func(q, k, v, causal=True)" in shown


def test_every_variant_computes_the_same_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 32, 16) for _ in range(3))
    mask = torch.triu(torch.ones(32, 32, dtype=torch.bool), diagonal=1)
    naive = NaiveCausalAttention(16)(q, k, v, mask)
    # by hand: a token attends to itself and the ones before it
    scores = (q @ k.transpose(-2, -1)) / 4.0 + torch.full((32, 32), float("-inf")).triu(1)
    torch.testing.assert_close(naive, scores.softmax(-1) @ v)
    torch.testing.assert_close(InPlaceCausalAttention(16)(q, k, v, mask), naive)
    torch.testing.assert_close(sdpa.attention(q, k, v), naive)
    bshd = [t.transpose(1, 2).contiguous() for t in (q, k, v)]
    torch.testing.assert_close(torch_flash_attn_func(*bshd, causal=True).transpose(1, 2), naive)
    assert not torch.allclose(F.scaled_dot_product_attention(q, k, v), naive)  # without the mask it differs


def test_the_in_place_forward_leaves_no_copy_of_the_scores():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, 8, 4) for _ in range(3))
    mask = torch.triu(torch.ones(8, 8, dtype=torch.bool), diagonal=1)
    with torch.profiler.profile() as prof:
        InPlaceCausalAttention(4)(q, k, v, mask)
    names = {e.key for e in prof.key_averages()}
    assert "aten::masked_fill_" in names and "aten::clone" not in names and "aten::masked_fill" not in names


def test_cpu_work_stands_in_for_kernels_outermost_only(cpu_runs):
    folder, _ = cpu_runs
    naive = read_trace(folder / TRACES["04_a"])
    phase = naive.steps[0].phase("attn_fwd")
    # aten::mul's own aten::copy_ (the Python scalar made a tensor) sits inside aten::mul: it is not the scores' copy
    assert [ac.role(o) for o in ac.operations(naive, phase)] == ["GEMM", "mul", "copy", "masked_fill", "softmax", "GEMM"]


# --- on a GPU: the post's shape, every lesson, in the post's order ------------------------------------------


GPU_RUNS = [
    ("04_a_naive_attention.py", []),
    ("04_b_inplace_ops_attention.py", []),
    *[("04_c_sdpa_attention.py", ["--backend", backend]) for backend in ("math", "flash", "efficient", "cudnn", "auto")],
    ("04_d_kernels_attention.py", ["--kernel_source", "torch"]),
]


@pytest.mark.gpu
@requires_cuda
def test_on_a_gpu_every_lesson_runs_and_explains_each_miss(tmp_path):
    for script, args in GPU_RUNS:
        result = run_script(script, *args, "--trace_dir", str(tmp_path), cwd=tmp_path)
        assert result.returncode == 0, (script, args, result.stderr)
        assert result.stderr == "", (script, args, result.stderr)
        after = result.stdout.split("What we saw", 1)[1]
        assert after.count("  ✗ ") == after.count("known reason:"), (script, args, after)
    auto = read_trace(tmp_path / "04_c_sdpa_attention" / "8_16_1024_64_auto_eager.json")
    assert ac.backend_of(auto, auto.steps[0].phase("sdpa_fwd")) in ac.FUSED
