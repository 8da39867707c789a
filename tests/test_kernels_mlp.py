"""03_kernels_mlp.py, profiling_in_pytorch/mlp/liger.py and profiling_in_pytorch/hub_kernels.py: every kernel source, offline, run as a user runs them.

No test here touches the network. The Hub is made unreachable on purpose (HF_HUB_OFFLINE=1, or an endpoint
on 127.0.0.1 that refuses connections); the local kernel repository is built in tmp_path and loaded by the
real `kernels` loader; a missing liger-kernel package is simulated the way Python blocks an import
(`sys.modules["liger_kernel"] = None`, from a sitecustomize on PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import closed_port, hub_unreachable_envs, load_trace, requires_cuda, run_script, stderr_lines

from trace_report.errors import UsageError
from profiling_in_pytorch.hub_kernels import HUB_PROBE_TIMEOUT_S, hub_unreachable
from profiling_in_pytorch.mlp import SimpleGeGLUMLP
from profiling_in_pytorch.mlp.liger import HUB_REPO, build_liger_geglu_mlp, require_runnable, resolve_liger_geglu_mlp

SCRIPT = "03_kernels_mlp.py"
SMALL = ["--batch", "2", "--seq", "3", "--dim", "8", "--hidden", "16"]
# The local test layer wraps its forward in this label, so a trace proves which layer ran.
LOCAL_LABEL = "local_repo_geglu_mlp"


def make_kernel_repo(root: Path) -> Path:
    """A kernel repository as `kernels` 0.17.2 reads it from disk.

    build/<variant>/ with metadata.json and the package named after metadata's `name` (dashes become
    underscores). `torch-universal` is the variant every machine accepts.
    """
    variant = root / "liger-kernels" / "build" / "torch-universal"
    package = variant / "liger_kernels"
    package.mkdir(parents=True)
    metadata = {
        "name": "liger-kernels",
        "id": f"liger_kernels_test_{abs(hash(str(root)))}",  # the module's name in sys.modules
        "version": 1,
        "license": "BSD-2-Clause",
        "python-depends": [],
        "backend": {"type": "cpu"},
    }
    (variant / "metadata.json").write_text(json.dumps(metadata))
    (package / "__init__.py").write_text("from . import layers\n")
    (package / "layers.py").write_text(
        textwrap.dedent(
            f"""
            import torch.nn.functional as F
            from torch import nn
            from torch.profiler import record_function


            class LigerGEGLUMLP(nn.Module):
                # Liger's constructor (a config object), with the eager math, so that it runs on a CPU.
                def __init__(self, config):
                    super().__init__()
                    assert config.hidden_act == "gelu_pytorch_tanh"
                    self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
                    self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
                    self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

                def forward(self, x):
                    with record_function("{LOCAL_LABEL}"):
                        gated = F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x)
                        return self.down_proj(gated)
            """
        )
    )
    return root / "liger-kernels"


@pytest.fixture
def kernel_repo(tmp_path) -> Path:
    return make_kernel_repo(tmp_path / "repo")


def without_liger_kernel(tmp_path: Path) -> dict[str, str]:
    """Environment in which `import liger_kernel` fails as if the package were not installed."""
    shim = tmp_path / "no_liger_kernel"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text('import sys\nsys.modules["liger_kernel"] = None\n')
    # In front of what is already there: on a machine that carries packages on PYTHONPATH, they stay.
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}


def lesson(*args, tmp_path, env=None):
    return run_script(SCRIPT, *SMALL, "--trace_dir", str(tmp_path / "traces"), *args, env=env)


def source_line(result) -> str:
    lines = [line for line in result.stdout.splitlines() if line.startswith("kernel source:")]
    assert len(lines) == 1, result.stdout
    return lines[0]


def output_check(result) -> str:
    """The lesson's one line judging Liger's layer against an fp32 run of SimpleGeGLUMLP's weights."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("output check against fp32: LigerGEGLUMLP")]
    assert len(lines) == 1, result.stdout
    return lines[0].rstrip()


def one_error_line(result) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = stderr_lines(result)
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr
    return lines[0]


# --- the local kernel repository, through the real kernels loader -------------------------------------


@pytest.fixture(scope="module")
def local_repo_run(tmp_path_factory):
    """The lesson on a local repository given as --kernel_repo: (the folder of its repo/ and traces/, the repository,
    the result)."""
    root = tmp_path_factory.mktemp("local_repo")
    repo = make_kernel_repo(root / "repo")
    return root, repo, lesson("--kernel_repo", str(repo), "--device", "cpu", tmp_path=root)


@pytest.mark.parametrize("how", ["--kernel_repo", "LOCAL_KERNELS"])
def test_local_kernel_repo_runs_the_lesson(how, request, tmp_path):
    # --device cpu: the same file name and expectations on every machine; the test layer is plain PyTorch.
    if how == "--kernel_repo":
        tmp_path, kernel_repo, result = request.getfixturevalue("local_repo_run")
    else:
        kernel_repo = make_kernel_repo(tmp_path / "repo")
        # The Hub is unreachable too: LOCAL_KERNELS is read before it, so nothing asks the network.
        env = {"LOCAL_KERNELS": f"{HUB_REPO}={kernel_repo}", **hub_unreachable_envs()["refused"]}
        result = lesson("--device", "cpu", tmp_path=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    line = source_line(result)
    assert line.startswith("kernel source: local") and str(kernel_repo) in line and how in line, line
    assert output_check(result).endswith("✓")
    assert "✓" in result.stdout and "✗" not in result.stdout, result.stdout  # the CPU expectations hold

    written = sorted((tmp_path / "traces" / "03_kernels_mlp").glob("2_3_8_16_local-liger-kernels-*_eager_fp32_cpu.json"))
    assert len(written) == 1, written  # the repository's folder name and a hash of its path are in the name
    trace = load_trace(written[0])
    labels = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert labels.count("kernels_mlp_fwd") == 3
    assert labels.count(LOCAL_LABEL) == 3, "the local repository's layer is not the one that ran"


def test_two_local_repositories_never_share_a_trace(local_repo_run, tmp_path):
    # The first repository's run is local_repo_run's: its trace, copied here as it wrote it, and a second
    # repository of the same name elsewhere, run into the same folder.
    first_root, _, first = local_repo_run
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "traces" / "03_kernels_mlp"
    folder.mkdir(parents=True)
    for trace in (first_root / "traces" / "03_kernels_mlp").glob("*.json"):
        shutil.copy2(trace, folder / trace.name)
    second = make_kernel_repo(tmp_path / "b")
    assert lesson("--kernel_repo", str(second), "--device", "cpu", tmp_path=tmp_path).returncode == 0
    written = sorted(p.name for p in folder.glob("*.json"))
    assert len(written) == 2 and all(name.startswith("2_3_8_16_local-liger-kernels-") for name in written), written


@pytest.mark.slow
def test_local_kernel_repo_compiles(kernel_repo, tmp_path):
    result = lesson("--kernel_repo", str(kernel_repo), "--compile", "--device", "cpu", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert list((tmp_path / "traces" / "03_kernels_mlp").glob("2_3_8_16_local-liger-kernels-*_compile_fp32_cpu.json"))
    assert "✗" not in result.stdout, result.stdout


def test_local_layer_gets_the_simple_mlps_weights(kernel_repo):
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(8, 16)
    layer, resolved = build_liger_geglu_mlp(8, 16, kernel_repo=kernel_repo)
    assert resolved.source == "local" and type(layer).__name__ == "LigerGEGLUMLP"
    assert (layer.gate_proj.weight.shape, layer.down_proj.weight.shape) == ((16, 8), (8, 16))
    x = torch.randn(2, 3, 8)
    assert not torch.allclose(layer(x), reference(x))  # fresh weights differ...
    layer.load_state_dict(reference.state_dict())
    torch.testing.assert_close(layer(x), reference(x))  # ...the same weights agree


def test_a_layer_built_holding_the_simple_mlps_weights_agrees_and_a_mismatch_is_one_line(kernel_repo):
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(8, 16)
    _, resolved = build_liger_geglu_mlp(8, 16, kernel_repo=kernel_repo)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(resolved.build_holding(reference, 8, 16)(x), reference(x))
    with pytest.raises(UsageError, match=r"does not hold SimpleGeGLUMLP's three weights \(Error\(s\) in loading"):
        resolved.build_holding(SimpleGeGLUMLP(8, 32), 8, 16)  # other sizes: the state dict does not fit


# --- the Hub unreachable: the package, named --------------------------------------------------------


@pytest.mark.parametrize("hub", ["offline", "refused"])
def test_unreachable_hub_falls_back_to_the_package(hub, tmp_path):
    started = time.monotonic()
    result = lesson(tmp_path=tmp_path, env=hub_unreachable_envs()[hub])
    line = source_line(result)
    assert line.startswith("kernel source: pypi") and "liger-kernel" in line, line
    assert "Hub is unavailable" in line, line
    assert ("HF_HUB_OFFLINE" if hub == "offline" else "Connection refused") in line, line
    if torch.cuda.is_available():
        assert result.returncode == 0, result.stderr
    else:  # Liger's kernel is Triton GPU code: the run stops at the no-GPU line
        assert "Triton GPU kernel" in one_error_line(result)
    # No retries, no long timeouts: importing torch and liger-kernel dominates.
    assert time.monotonic() - started < 120


def test_nothing_available_is_one_line(tmp_path):
    env = {**hub_unreachable_envs()["refused"], **without_liger_kernel(tmp_path)}
    line = one_error_line(lesson(tmp_path=tmp_path, env=env))
    assert "no LigerGEGLUMLP available" in line and "Connection refused" in line, line
    assert "liger-kernel package is not installed" in line, line


def test_forced_pypi_without_the_package_is_one_line(tmp_path):
    line = one_error_line(lesson("--kernel_source", "pypi", tmp_path=tmp_path, env=without_liger_kernel(tmp_path)))
    assert "liger-kernel package is not installed" in line, line


def test_hub_probe_gives_up_quickly_when_nobody_answers():
    # A listening socket that never accepts: the TCP handshake completes, no HTTP answer ever comes.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        reason = hub_unreachable(f"http://127.0.0.1:{silent.getsockname()[1]}")
        elapsed = time.monotonic() - started
    assert reason is not None and "127.0.0.1" in reason, reason
    assert elapsed < HUB_PROBE_TIMEOUT_S + 2, elapsed


def test_hub_probe_reports_a_refused_connection_at_once():
    started = time.monotonic()
    reason = hub_unreachable(f"http://127.0.0.1:{closed_port()}")
    assert reason is not None and "Connection refused" in reason, reason
    assert time.monotonic() - started < 1.5


# --- wrong input: one line, exit 2 ------------------------------------------------------------------


def test_a_file_given_as_kernel_repo_is_one_line(tmp_path):
    a_file = tmp_path / "not_a_repo.txt"
    a_file.write_text("")
    line = one_error_line(lesson("--kernel_repo", str(a_file), "--device", "cpu", tmp_path=tmp_path))
    assert "a file, not a kernel repository" in line, line


def test_wrong_kernel_repo_path_is_one_line(tmp_path):
    missing = tmp_path / "no-such-repo"
    line = one_error_line(lesson("--kernel_repo", str(missing), tmp_path=tmp_path))
    assert str(missing) in line and "no such folder" in line, line


def test_kernel_repo_without_a_build_is_one_line(tmp_path):
    empty = tmp_path / "empty-repo"
    empty.mkdir()
    line = one_error_line(lesson("--kernel_repo", str(empty), tmp_path=tmp_path))
    assert "Cannot find a build variant" in line and "build/<variant>/metadata.json" in line, line


@pytest.mark.parametrize(
    "flags, env, says",
    [
        (["--kernel_source", "local"], {}, "needs --kernel_repo PATH or LOCAL_KERNELS"),
        (["--kernel_source", "hub"], "refused", "cannot load kernels-community/liger-kernels v1 from the Hub"),
        (["--kernel_source", "pypi", "--kernel_repo", "."], {}, "contradicts --kernel_source pypi"),
        (["--kernel_source", "cuda"], {}, "invalid choice"),
        ([], {"LOCAL_KERNELS": "no-equals-sign"}, "is not repo_id=path"),
        ([], {"LOCAL_KERNELS": f"{HUB_REPO}=/nonexistent/liger"}, "/nonexistent/liger: no such folder"),
    ],
)
def test_bad_source_choices_are_one_line(flags, env, says, tmp_path):
    env = hub_unreachable_envs()[env] if isinstance(env, str) else env
    line = one_error_line(lesson(*flags, tmp_path=tmp_path, env=env))
    assert says in line, line


def test_forcing_the_hub_over_local_kernels_is_refused(kernel_repo, monkeypatch):
    monkeypatch.setenv("LOCAL_KERNELS", f"{HUB_REPO}={kernel_repo}")
    with pytest.raises(UsageError, match="unset it to load from the Hub"):
        resolve_liger_geglu_mlp(source="hub")
    assert resolve_liger_geglu_mlp().source == "local"


# --- no GPU: Liger's Triton kernel, with and without Triton's interpreter ---------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="about running without a GPU")
def test_liger_kernel_without_a_gpu_is_one_line(tmp_path):
    line = one_error_line(lesson("--kernel_source", "pypi", tmp_path=tmp_path))
    assert "Triton GPU kernel" in line and "pypi" in line, line


@pytest.mark.skipif(torch.cuda.is_available(), reason="about running without a GPU")
def test_triton_interpreter_cannot_run_liger_and_says_why(tmp_path):
    """With the Triton this project locks (3.9), the interpreter has no libdevice tanh, which Liger's kernel calls."""
    line = one_error_line(lesson("--kernel_source", "pypi", tmp_path=tmp_path, env={"TRITON_INTERPRET": "1"}))
    assert "Triton's interpreter (TRITON_INTERPRET=1) cannot run Liger's GeGLU kernel: " in line, line
    assert "libdevice" in line.split("kernel: ", 1)[1], line


def test_require_runnable_tries_a_local_layer_on_the_cpu(kernel_repo):
    resolved = resolve_liger_geglu_mlp(kernel_repo=kernel_repo)
    require_runnable(resolved, torch.device("cpu"))  # plain PyTorch: runs anywhere


# --- on a GPU: the post's shape, the real kernel ----------------------------------------------------


@pytest.mark.gpu
@requires_cuda
def test_pypi_liger_on_gpu_matches_simple_mlp(tmp_path):
    result = run_script(SCRIPT, "--kernel_source", "pypi", "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert source_line(result).startswith("kernel source: pypi")
    assert output_check(result).endswith("✓")

    trace = load_trace(tmp_path / "03_kernels_mlp" / "64_128_768_3072_pypi_eager.json")
    kernels = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    geglu = [k for k in kernels if "_geglu_tanh_forward_kernel" in k]
    assert len(geglu) == 3, kernels  # one per active step
    others = [k for k in kernels if k not in geglu]
    assert len(others) == 9, others  # gate, up, down GEMMs per step
    assert not any("Gelu" in k or "BinaryFunctor" in k for k in others), others

    # And in this process, independently of the lesson's own check.
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(768, 3072).cuda().bfloat16()
    layer, _ = build_liger_geglu_mlp(768, 3072, source="pypi")
    layer.load_state_dict(reference.state_dict())
    layer = layer.cuda().bfloat16()
    x = torch.randn(64, 128, 768, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), reference(x), rtol=1.6e-2, atol=1e-2)
