"""Lesson 08 as a user runs it: torchrun starting two processes, gloo between them on a CPU (NCCL on two GPUs).

A torchrun launch imports torch three times (torchrun and each worker): the CPU variants share one launch.
"""

from __future__ import annotations

import inspect
import json
import os
import textwrap

import pytest
import torch
from conftest import ROOT, load_trace, run_script, stderr_lines

from profiling_in_pytorch.parallel.sharded import ShardedGeGLUMLP

LESSON = "08_tensor_parallel_mlp.py"
FOLDER = "08_tensor_parallel_mlp"
TINY = ["--batch", "2", "--seq", "4", "--dim", "16", "--hidden", "32"]
HEADER = "08_tensor_parallel_mlp · tp_mlp_fwd"
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


def torchrun(*args: str, nproc: int = 2, env: dict | None = None):
    """`python -m torch.distributed.run --standalone --nproc-per-node N 08_tensor_parallel_mlp.py ARGS`, from the
    repository's root (--standalone: a free port, so that two runs on one machine do not collide)."""
    return run_script("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                      str(ROOT / LESSON), *args, env={"OMP_NUM_THREADS": "1", **(env or {})})


def names(trace: dict, **where) -> list[str]:
    return [e["name"] for e in trace["traceEvents"] if all(e.get(k) == v for k, v in where.items())]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """dtensor, plain, overlap and seqpar on 2 CPU processes, then their timings: one launch."""
    folder = tmp_path_factory.mktemp("tp")
    result = torchrun(*TINY, "--device", "cpu", "--variant", "dtensor,plain,overlap,seqpar", "--bench",
                      "--trace_dir", str(folder))
    return result, folder / FOLDER


def test_every_variant_runs_on_two_cpu_processes_quietly(cpu_run):
    result, _ = cpu_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert stderr_lines(result) == []
    assert result.stdout.count(HEADER) == 4  # rank 0 speaks, once per variant; rank 1 is quiet


@pytest.mark.parametrize("name", ["DTensor", "plain + all_reduce", "overlap, 4 chunks", "seq-parallel AG + RS"])
def test_each_variant_computes_the_single_process_modules_output(cpu_run, name):
    result, _ = cpu_run
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"output check against fp32: {name} "))
    assert line.endswith("✓"), line


@pytest.mark.parametrize("variant,collectives", [("dtensor", 1), ("plain", 1), ("overlap4", 4)])
def test_each_rank_writes_its_trace_with_its_all_reduces(cpu_run, variant, collectives):
    _, folder = cpu_run
    for rank in (0, 1):
        path = folder / f"2_4_16_32_tp2_{variant}_eager_fp32_cpu_rank{rank}.json"
        trace = load_trace(path)
        steps = sorted(n for n in names(trace) if n.startswith("ProfilerStep#"))
        assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
        assert names(trace, cat="user_annotation").count("tp_mlp_fwd") == 3
        assert names(trace, cat="cpu_op").count("c10d::allreduce_") == 3 * collectives
        assert names(trace, cat="user_annotation").count("gloo:all_reduce") == 3 * collectives
        assert trace["distributedInfo"]["rank"] == rank and not trace["traceName"].startswith("/")
        assert str(ROOT) not in path.read_text() and (folder / path.name.replace(".json", ".txt")).is_file()
    assert not list(folder.glob(".*")), "temporary files left behind"


def test_sequence_parallel_gathers_x_and_scatters_y_on_each_rank(cpu_run):
    _, folder = cpu_run
    for rank in (0, 1):
        trace = load_trace(folder / f"2_4_16_32_tp2_seqpar_eager_fp32_cpu_rank{rank}.json")
        ops, labels = names(trace, cat="cpu_op"), names(trace, cat="user_annotation")
        assert ops.count("c10d::_allgather_base_") == 3 and ops.count("c10d::_reduce_scatter_base_") == 3
        assert "c10d::allreduce_" not in ops
        # gloo has no reduce-scatter of its own: it all-reduces y whole, each rank keeping its rows
        assert labels.count("gloo:all_gather") == 3 and labels.count("gloo:all_reduce") == 3


def test_the_checks_and_the_ranks_table(cpu_run):
    out = cpu_run[0].stdout
    assert out.count("✓ one AllReduce per step") == 3 and "✓ 4 AllReduce per step" in out
    assert "✓ one AllGather per step" in out and "✓ at least 90% of the all-gather and reduce-scatter time" in out
    assert "✓ the CPU takes longer to issue a step than the GPU takes to run it" in out  # DTensor's dispatch
    assert out.count("2 ranks · rank 0:") == 4 and "skew between ranks" in out
    assert "all ranks: " in out and "_rank1.json" in out


def test_the_timings_table(cpu_run):
    result, folder = cpu_run
    table = (folder / "2_4_16_32_tp2_dtensor+plain+overlap4+seqpar_bench_fp32_cpu.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    first_cells = [row.split(" | ")[0] for row in rows]
    assert first_cells == ["| variant", "| 1 process", "| DTensor", "| plain + all_reduce", "| overlap, 4 chunks",
                           "| seq-parallel AG + RS"]
    assert "WRONG" not in table and "× 1 process run the same way" in result.stdout


def test_the_timings_table_keeps_each_variant_name_whole_in_80_columns():
    from rich.console import Console

    from profiling_in_pytorch.parallel import timing, variants

    names = ["1 GPU", "1 GPU, CUDA graph"] + [variants.describe(v, 4, graph, carve) for v in variants.VARIANTS[2:]
                                               for graph in (False, True) for carve in (None, 32)]
    rows = [timing.Row(name, 1234.5, 1000.0, 456.7) for name in names]
    console = Console(width=80, record=True, color_system=None)
    console.print(timing.table(rows, "forward µs"))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80
    for name in names:
        assert any(f"│ {name} " in line for line in lines), name


def test_each_variant_reads_against_one_gpu_run_the_same_way():
    """The H200 figures at the post's shape: plain in a CUDA graph is 1.44x one GPU eager but 1.17x one GPU in a
    CUDA graph, the like-with-like figure the goal reads."""
    from profiling_in_pytorch.parallel import timing

    rows = [timing.Row("1 GPU", 314.1, 80.0, None), timing.Row("1 GPU, CUDA graph", 256.1, 9.0, None, way="graph"),
            timing.Row("plain + all_reduce", 262.0, 95.0, 156.0),
            timing.Row("plain + all_reduce, CUDA graph", 218.8, 9.0, 156.0, way="graph")]
    cells = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1:4]
             for line in timing.markdown(rows, "t").splitlines() if line.startswith("| ") and "---" not in line}
    assert cells["variant"][1:3] == ["× 1 GPU run the same way", "× 1 GPU eager"]
    assert cells["plain + all_reduce, CUDA graph"] == ["218.8", "1.17", "1.44"]
    assert cells["plain + all_reduce"] == ["262.0", "1.20", "1.20"]
    assert cells["1 GPU, CUDA graph"] == ["256.1", "1.00", "1.23"]
    line = timing.goal_line(rows, 1.7)
    assert "best here 1.20× (plain + all_reduce, against eager on one GPU): not reached" in line, line


def test_trace_report_reads_both_ranks_and_finds_the_all_reduce(cpu_run):
    _, folder = cpu_run
    ranks = [folder / f"2_4_16_32_tp2_plain_eager_fp32_cpu_rank{r}.json" for r in (0, 1)]
    result = run_script("-m", "trace_report.report", *map(str, ranks), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "2 ranks" in result.stdout and "gloo:all_reduce" in result.stdout
    payload = json.loads(run_script("-m", "trace_report.report", "--json", *map(str, ranks)).stdout)
    assert [r["communication"]["steps"][0]["collectives"][0]["collective"] for r in payload["ranks"]] == ["AllReduce"] * 2


@pytest.mark.parametrize("variant", ["async-tp", "overlap-ce", "one-shot"])
def test_symmetric_memory_variants_on_a_cpu_are_one_line(tmp_path, variant):
    result = torchrun(*TINY, "--device", "cpu", "--variant", f"plain,{variant}", "--trace_dir", str(tmp_path), nproc=1)
    assert result.returncode != 0  # the rank exits 2; torchrun reports any failed worker as 1
    ours = [line for line in stderr_lines(result) if "08_tensor_parallel_mlp.py: error:" in line]
    assert len(ours) == 1 and f"--variant {variant} runs on PyTorch's symmetric memory" in ours[0], result.stderr
    assert not list(tmp_path.rglob("*.json"))


def test_async_tp_computes_its_token_slice_through_the_fused_ops(monkeypatch):
    """One rank (gloo, in this process), torch.ops.symm_mem's fused ops replaced by PyTorch's own reference
    implementations of them (all-gather then matmul; matmul then reduce-scatter), which run on a CPU: the variant's
    weights and layout give the module's output."""
    import torch.distributed._symmetric_memory as symm_mem

    from profiling_in_pytorch.mlp import SimpleGeGLUMLP
    from profiling_in_pytorch.parallel import sharded, variants
    from profiling_in_pytorch.parallel.launch import process_group

    one_rank_here(monkeypatch)
    monkeypatch.setattr(torch.ops.symm_mem, "fused_all_gather_matmul", symm_mem._fused_all_gather_matmul_fallback)
    monkeypatch.setattr(torch.ops.symm_mem, "fused_matmul_reduce_scatter",
                        symm_mem._fused_matmul_reduce_scatter_fallback)
    torch.manual_seed(0)
    reference = SimpleGeGLUMLP(16, 32).eval()
    x = torch.randn(2, 4, 16)
    with process_group("cpu") as ranks, torch.no_grad():
        model = variants.build("async-tp", reference, x, ranks)
        got = model(x)
        want = variants.wanted_rows(reference(x), "async-tp", 0, 1)
        # what async-tp-compile compiles: the same split in functional collectives, here uncompiled
        functional = sharded.FunctionalSequenceParallelGeGLUMLP.from_module(reference, 0, 1)(x)
    assert got.shape == (8, 16)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(functional, want, rtol=1e-5, atol=1e-5)


def test_file_names_say_the_carveout_and_nccl_channels():
    import argparse

    from profiling_in_pytorch.parallel.runs import variant_tag

    flags = argparse.Namespace(batch=2, seq=4, dim=16, hidden=32, chunks=4, cuda_graph=True, sm_carveout=16,
                               nccl_channels=8)
    assert variant_tag(flags, "overlap", 2) == [2, 4, 16, 32, "tp2", "overlap4", "carve16", "nccl8ch", "graph"]
    assert variant_tag(flags, "dtensor", 2) == [2, 4, 16, 32, "tp2", "dtensor", "nccl8ch", "graph"]
    plain = argparse.Namespace(**{**vars(flags), "sm_carveout": None, "nccl_channels": None, "cuda_graph": False})
    assert variant_tag(plain, "async-tp", 4) == [2, 4, 16, 32, "tp4", "asynctp"]
    assert variant_tag(plain, "one-shot", 2) == [2, 4, 16, 32, "tp2", "oneshot"]


def test_one_rank_runs_and_dtensor_missing_all_reduce_says_why(tmp_path):
    result = torchrun(*TINY, "--device", "cpu", "--variant", "dtensor", "--trace_dir", str(tmp_path), nproc=1)
    assert result.returncode == 0 and stderr_lines(result) == [], result.stderr[-3000:]
    lines = result.stdout.splitlines()
    missed = lines.index("  ✗ one AllReduce per step (down_proj's partial sums of y, added once)")
    assert lines[missed + 2].startswith("      known reason: one rank: there is nothing to add up across ranks")


RANK_MAIN = """
import atexit, sys
from profiling_in_pytorch.parallel.launch import leaves_at_once
atexit.register(lambda: print(" and the teardown ran"))

@leaves_at_once
def main(how):
    print("the rank's last line", end="")
    if how == "raise":
        raise SystemExit(2)
    return int(how)

main(sys.argv[1])
"""


def test_a_rank_leaves_with_its_code_and_its_output_and_without_the_teardown(tmp_path):
    script = tmp_path / "rank_main.py"
    script.write_text(RANK_MAIN)
    buffered = {"PYTHONUNBUFFERED": "", "PYTHONPATH": str(ROOT)}  # the last line is still in stdout's buffer
    for how, code in [("1", 1), ("raise", 2)]:
        result = run_script(str(script), how, env={**buffered, "RANK": "1"}, timeout=120)
        assert (result.returncode, result.stdout, result.stderr) == (code, "the rank's last line", "")
    outside = run_script(str(script), "0", env=buffered, timeout=120)  # outside torchrun: Python's own exit
    assert (outside.returncode, outside.stdout) == (0, "the rank's last line and the teardown ran\n")


def test_outside_torchrun_it_says_the_command(tmp_path):
    result = run_script(LESSON, "--variant", "plain", "--trace_dir", str(tmp_path))
    assert result.returncode == 2
    lines = stderr_lines(result)
    # `python3 -m torch.distributed.run`, or `uv run torchrun` under uv
    command = "run --nproc-per-node 2 08_tensor_parallel_mlp.py --variant plain"
    assert len(lines) == 1 and "torch" in lines[0] and command in lines[0]
    assert not list(tmp_path.iterdir())


def test_an_unknown_variant_is_one_line():
    result = run_script(LESSON, "--variant", "plain,nope")
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and "unknown variant 'nope'" in lines[0], result.stderr


@pytest.mark.parametrize("flags, says", [
    (("--variant", "bogus"), "argument --variant: unknown variant 'bogus'"),
    (("--chunks", "0"), "argument --chunks:"),
])
def test_a_bad_flag_under_torchrun_is_our_line(flags, says):
    """torchrun stops every rank once one fails: the silent rank leaves after rank 0 has said why."""
    result = torchrun("--device", "cpu", *flags)
    ours = [line for line in stderr_lines(result) if line.startswith(f"{LESSON}: error:")]
    assert result.returncode != 0 and len(ours) == 1 and says in ours[0], result.stderr


def test_the_lesson_shows_the_plain_forward_as_it_is_defined():
    docstring = (ROOT / LESSON).read_text().split('"""')[1]
    shown = textwrap.dedent(docstring.split("a test keeps this copy identical):")[1].split("\n\n", 2)[1])
    source = textwrap.dedent(inspect.getsource(ShardedGeGLUMLP.forward))
    assert source.strip() == shown.strip(), shown


def one_rank_here(monkeypatch) -> None:
    """torchrun's variables for a run of one rank in this process, on a free port; the variables that joining sets
    are restored after the test."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)}.items():
        monkeypatch.setenv(name, value)
    for name in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                 "TORCH_NCCL_HIGH_PRIORITY"):
        monkeypatch.delenv(name, raising=False)  # set in there: restored after


def test_joining_forces_nvlink_multicast_off(monkeypatch):
    """One rank (gloo, in this process): the variables are forced to their off values, not merely defaulted."""
    from profiling_in_pytorch.parallel.launch import NO_MULTICAST, process_group

    one_rank_here(monkeypatch)
    multicast_on = {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0", "NVSHMEM_DISABLE_NVLS": "0"}
    for name, on in multicast_on.items():
        monkeypatch.setenv(name, on)
    with process_group("cpu") as ranks:
        assert (ranks.rank, ranks.world, ranks.backend) == (0, 1, "gloo")
        assert {name: os.environ[name] for name in NO_MULTICAST} == {
            "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.mark.slow
def test_compiled_dtensor_on_two_cpu_processes(tmp_path):
    result = torchrun(*TINY, "--device", "cpu", "--variant", "dtensor-compile", "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert stderr_lines(result) == []
    assert "output check against fp32: DTensor, compiled" in result.stdout
    assert "✓ one AllReduce per step" in result.stdout
    trace = load_trace(tmp_path / FOLDER / "2_4_16_32_tp2_dtensor_compile_fp32_cpu_rank1.json")
    assert any("cpp_fused" in n for n in names(trace, cat="cpu_op"))  # Inductor's kernel for gelu and mul
    assert names(trace, cat="cpu_op").count("c10d::allreduce_") == 3


@pytest.mark.slow
def test_sizes_the_split_cannot_take_are_one_line_from_rank_0(tmp_path):
    result = torchrun("--batch", "2", "--seq", "4", "--dim", "16", "--hidden", "33", "--device", "cpu",
                      "--variant", "plain", "--trace_dir", str(tmp_path))
    assert result.returncode != 0
    ours = [line for line in stderr_lines(result) if "08_tensor_parallel_mlp.py: error:" in line]
    assert len(ours) == 1 and "does not split into 2 equal shares" in ours[0], result.stderr
    assert stderr_lines(result)[0] == ours[0]  # before torchrun's own report of the failed workers


# --- on two GPUs ---------------------------------------------------------------------------------------------------


def output_checks(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("output check against fp32:")]


@pytest.mark.gpu
@two_gpus
def test_every_variant_on_two_gpus(tmp_path):
    small = ["--batch", "4", "--seq", "64", "--dim", "256", "--hidden", "1024"]
    result = torchrun(*small, "--variant", "all", "--bench", "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert stderr_lines(result) == []
    checks = output_checks(result.stdout)
    assert len(checks) == 8 and all(line.endswith("✓") for line in checks), checks
    ranks = [tmp_path / FOLDER / f"4_64_256_1024_tp2_plain_eager_rank{r}.json" for r in (0, 1)]
    nccl = [n for n in names(load_trace(ranks[0]), cat="kernel") if n.startswith(("ncclDevKernel_", "ncclKernel_"))]
    assert len(nccl) == 3, nccl  # one all-reduce per profiled step
    report = run_script("-m", "trace_report.report", *map(str, ranks), timeout=60)
    assert report.returncode == 0 and "2 ranks" in report.stdout and "NCCL AllReduce" in report.stdout
    timings = (tmp_path / FOLDER / "4_64_256_1024_tp2_all_bench.md").read_text()
    assert "plain + all_reduce, CUDA graph" in timings and "overlap, 4 chunks, CUDA graph" in timings
    assert "seq-parallel AG + RS, CUDA graph" in timings and "async-TP (symm. memory)" in timings
    assert "overlap, copy engine, 4 pieces, CUDA graph" in timings
    assert "WRONG" not in timings


@pytest.mark.gpu
@two_gpus
def test_plain_and_overlap_in_a_cuda_graph_on_two_gpus(tmp_path):
    result = torchrun("--variant", "plain,overlap", "--cuda_graph", "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    checks = output_checks(result.stdout)
    assert len(checks) == 2 and all(line.endswith("✓") for line in checks), checks
    assert "✓ one AllReduce per step" in result.stdout and "✓ 4 AllReduce per step" in result.stdout
    assert (tmp_path / FOLDER / "64_128_768_3072_tp2_overlap4_graph_eager_rank1.json").is_file()


@pytest.mark.gpu
@two_gpus
def test_the_one_shot_all_reduce_on_two_gpus_eagerly_and_in_a_cuda_graph(tmp_path):
    for graph in ([], ["--cuda_graph"]):
        result = torchrun("--variant", "one-shot", *graph, "--trace_dir", str(tmp_path))
        assert result.returncode == 0, result.stderr[-3000:]
        assert stderr_lines(result) == []
        checks = output_checks(result.stdout)
        assert len(checks) == 1 and checks[0].endswith("✓"), checks
        assert "✓ no NCCL kernel in the steps" in result.stdout and "one_shot_all_reduce" in result.stdout


@pytest.mark.gpu
@two_gpus
def test_the_copy_engine_overlap_on_two_gpus_eagerly_and_in_a_cuda_graph(tmp_path):
    small = ["--batch", "4", "--seq", "64", "--dim", "256", "--hidden", "1024"]
    stdout = {}
    for graph in ([], ["--cuda_graph"]):
        result = torchrun(*small, "--variant", "overlap-ce", "--chunks", "2", *graph, "--trace_dir", str(tmp_path))
        assert result.returncode == 0, result.stderr[-3000:]
        assert stderr_lines(result) == []
        checks = output_checks(result.stdout)
        assert len(checks) == 1 and checks[0].endswith("✓"), checks
        assert "✓ no NCCL kernel in the steps" in result.stdout
        stdout[bool(graph)] = result.stdout
    assert "✓ 2 ReduceScatter per step" in stdout[False] and "✓ 4 AllGather per step" in stdout[False]
    eager = load_trace(tmp_path / FOLDER / "4_64_256_1024_tp2_overlapce2_eager_rank0.json")
    copies = [n for n in names(eager, cat="gpu_memcpy") if n.startswith("Memcpy PtoP")]
    # per profiled step and piece: a pull of the partial sums and one of the rows (and the warm-up step's last ones)
    assert len(copies) >= 3 * (2 + 2), copies


@pytest.mark.gpu
@two_gpus
def test_fewer_gpus_than_ranks_is_one_line(tmp_path):
    result = torchrun("--variant", "plain", "--trace_dir", str(tmp_path), env={"CUDA_VISIBLE_DEVICES": "0"})
    assert result.returncode != 0
    ours = [line for line in stderr_lines(result) if "08_tensor_parallel_mlp.py: error:" in line]
    assert len(ours) == 1 and "2 ranks on this host need a GPU each, and PyTorch sees 1" in ours[0], result.stderr
