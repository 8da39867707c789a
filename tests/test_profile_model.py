"""profile_model.py as a user runs it on a CPU: a tiny transformers preset (forward, and a training step), a module of
the user's from a factory in a file, a model folder holding only a config; then `trace-report`'s summary of those
traces; and every way the input can be wrong, each one line on stderr."""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import run_script, stderr_lines

SCRIPT = "profile_model.py"
SMALL = ["--batch", "1", "--seq", "16", "--device", "cpu"]

FACTORY = '''
import torch
from torch import nn


class Scorer(nn.Module):
    """Embeds token ids, mixes them through two Linear layers and a LayerNorm; takes keyword arguments."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.mix = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
        self.norm = nn.LayerNorm(32)

    def forward(self, ids, scale):
        return self.norm(self.mix(self.embed(ids)) * scale)


def build():
    return Scorer(), {"ids": torch.randint(0, 100, (2, 8)), "scale": torch.tensor(0.5, dtype=torch.float64)}


def build_positional():
    return nn.Linear(8, 4), (torch.randn(3, 8),)


def raises():
    raise RuntimeError("no weights here")


def wrong():
    return nn.Linear(8, 4)


def out_of_memory():
    class Hungry(nn.Module):
        def forward(self, x):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
    return Hungry(), (torch.randn(2),)
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each run once, into one folder: (folder of traces, {name: result})."""
    folder = tmp_path_factory.mktemp("model")
    (folder / "my_model.py").write_text(FACTORY)
    config_folder = folder / "gpt2-config"
    config_folder.mkdir()
    # A model folder with only its config.json, as a Hub download of the config would leave it: GPT-2-shaped.
    (config_folder / "config.json").write_text(json.dumps({
        "model_type": "gpt2", "vocab_size": 512, "n_embd": 64, "n_layer": 1, "n_head": 2, "n_positions": 64,
        "bos_token_id": 0, "eos_token_id": 0,
    }))
    commands = {
        "forward": ["--model", "tiny-llama", *SMALL],
        "train": ["--model", "tiny-llama", "--train", *SMALL],
        "module": ["--module", "my_model.py:build", "--device", "cpu"],
        "module_train": ["--module", "my_model.py:build_positional", "--train", "--device", "cpu"],
        "folder": ["--model", str(config_folder), "--train", "--no_module_ranges", *SMALL],
    }
    results = {name: run_script(SCRIPT, *args, "--trace_dir", str(folder / "traces"), cwd=folder, env=_offline(folder))
               for name, args in commands.items()}
    return folder / "traces" / "profile_model", results


def _offline(folder: Path) -> dict:
    """No network in tests: the Hub is off and its cache is an empty folder."""
    return {"HF_HUB_OFFLINE": "1", "HF_HOME": str(folder / "hf-home")}


TRACES = {
    "forward": "tiny-llama_1_16_eager_fp32_cpu.json",
    "train": "tiny-llama_1_16_train_eager_fp32_cpu.json",
    "module": "my_model.build_eager_fp32_cpu.json",
    "module_train": "my_model.build_positional_train_eager_fp32_cpu.json",
    "folder": "gpt2-config_1_16_train_noranges_eager_fp32_cpu.json",
}


@lru_cache(maxsize=None)
def report_json(path: Path) -> dict:
    result = run_script("-m", "trace_report.report", str(path), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --- the runs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(TRACES))
def test_a_run_writes_its_trace_with_an_empty_stderr_and_prints_the_summary(runs, name):
    folder, results = runs
    result = results[name]
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    assert (folder / TRACES[name]).is_file()
    assert (folder / TRACES[name]).with_suffix(".txt").is_file()
    assert "Where the CPU time (ops' self time) goes" in result.stdout
    assert "by kind of work" in result.stdout
    assert not list(folder.glob(".*")), "temporary files left behind"
    assert str(folder) not in (folder / TRACES[name]).read_text(), "the trace holds a local path"


def test_a_transformers_model_says_its_weights_are_random_and_why_that_is_fine(runs):
    _, results = runs
    assert "random weights (from the config): a dense model runs the same kernels" in results["forward"].stdout
    assert "the config in gpt2-config/" in results["folder"].stdout


def test_the_training_step_has_its_three_labels(runs):
    _, results = runs
    out = results["train"].stdout
    assert "✓ model_fwd, model_bwd and optimizer_step once per step, in this order" in out


@pytest.mark.parametrize("name", list(TRACES))
def test_the_summary_s_kinds_and_modules_add_up_to_the_cpu_time(runs, name):
    folder, _ = runs
    summary = report_json(folder / TRACES[name])["summary"]
    assert summary["measure"] == "cpu_self_time"
    total = summary["total_us_per_step"]
    assert total > 0
    assert math.isclose(sum(k["us_per_step"] for k in summary["by_kind"]), total, rel_tol=1e-3)
    if summary["by_module"]:
        # every op is somewhere: in a module (its self time) or in a row outside them
        assert math.isclose(sum(m["self_us_per_step"] for m in summary["by_module"]), total, rel_tol=1e-3)


def test_the_llama_s_modules_are_named_and_the_backward_counts_for_them(runs):
    folder, _ = runs
    forward = {m["module"]: m for m in report_json(folder / TRACES["forward"])["summary"]["by_module"]}
    for module in ("LlamaForCausalLM", "LlamaDecoderLayer", "LlamaAttention", "LlamaMLP", "LlamaRMSNorm", "Linear"):
        assert forward[module]["total_us_per_step"] > 0, module
        assert forward[module]["backward_us_per_step"] == 0, module
    assert forward["LlamaDecoderLayer"]["calls_per_step"] == 2  # two layers
    assert forward["LlamaRMSNorm"]["calls_per_step"] == 5  # two per layer and the final norm
    train = {m["module"]: m for m in report_json(folder / TRACES["train"])["summary"]["by_module"]}
    for module in ("LlamaAttention", "LlamaMLP", "LlamaRMSNorm", "Linear"):
        assert 0 < train[module]["backward_us_per_step"] < train[module]["total_us_per_step"], module
    assert any(m.startswith("(no module) optimizer_step") for m in train)  # AdamW's loop runs outside the model
    kinds = {k["kind"] for k in report_json(folder / TRACES["train"])["summary"]["by_kind"]}
    assert {"GEMM", "optimizer", "attention", "elementwise", "reduction"} <= kinds  # the RMSNorm: pow, mean, rsqrt on a CPU


def test_a_user_module_takes_keyword_inputs_moved_to_the_device_and_dtype(runs):
    folder, results = runs
    assert "Scorer from my_model.py:build" in results["module"].stdout
    modules = {m["module"] for m in report_json(folder / TRACES["module"])["summary"]["by_module"]}
    assert {"Scorer", "Sequential", "Linear", "GELU", "LayerNorm", "Embedding"} <= modules


def test_without_module_ranges_the_summary_has_no_module_table(runs):
    folder, results = runs
    assert report_json(folder / TRACES["folder"])["summary"]["by_module"] == []
    assert "by module" not in results["folder"].stdout


# --- what the user can get wrong: one line each -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["--model", "tiny-bert"], 2, "not a preset (tiny-llama"),
        (["--module", "my_model.py"], 2, "expected FILE.py:FACTORY"),
        (["--module", "nowhere.py:build"], 2, "no such file nowhere.py"),
        (["--module", "my_model.py:raises"], 2, "raised RuntimeError: no weights here"),
        (["--module", "my_model.py:wrong"], 2, "must return (model, example_inputs)"),
        (["--module", "my_model.py:build", "--batch", "4"], 2, "--batch, --seq and --pretrained go with --model"),
        (["--model", "tiny-llama", "--pretrained"], 2, "has no trained weights"),
        (["--model", "someone/some-model"], 1, "HF_HUB_OFFLINE is set, and the Hugging Face cache does not hold its config"),
        (["--module", "my_model.py:out_of_memory"], 1, "out of memory: CUDA out of memory"),
    ],
)
def test_bad_input_is_one_line_on_stderr(tmp_path, args, code, words):
    (tmp_path / "my_model.py").write_text(FACTORY)
    result = run_script(SCRIPT, *args, "--device", "cpu", "--trace_dir", str(tmp_path / "traces"), cwd=tmp_path,
                        env=_offline(tmp_path))
    assert result.returncode == code, (result.stdout[-2000:], result.stderr)
    lines = stderr_lines(result)
    assert len(lines) == 1, lines
    assert words in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "traces").rglob("*.json")), "a trace was written"
