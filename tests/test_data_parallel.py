"""Lesson 09 as a user runs it (torchrun, two CPU processes, gloo: DDP and FSDP2 in one launch), trace-report on its
rank traces (collectives by bucket and unit, read one process per trace), and several ranks read together from
lesson 08's real traces on 2 H100s (trace_report/tests/fixtures/h100x2): the CUDA-graph pair compared on one clock, the
straggler named with its reason, the ranks drawn one above the other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES, ROOT, run_script, stderr_lines
from trace_report.tests.tp_traces import simulated_tp_run

from trace_report import attribution
from trace_report import ranks as rank_traces
from trace_report.communication import communication
from trace_report.picture import layout, layout_ranks
from trace_report.reader import read_trace

LESSON = "09_data_parallel_mlp.py"
FOLDER = "09_data_parallel_mlp"
TINY = ["--batch", "2", "--seq", "4", "--dim", "16", "--hidden", "32", "--layers", "3"]
H100X2 = FIXTURES / "h100x2"
GRAPH = [H100X2 / f"64_128_768_3072_tp2_overlap4_graph_eager_rank{r}.json.gz" for r in (0, 1)]
EAGER = [H100X2 / f"64_128_768_3072_tp2_overlap4_eager_rank{r}.json.gz" for r in (0, 1)]
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


def torchrun(*args: str, nproc: int = 2):
    return run_script("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                      str(ROOT / LESSON), *args, env={"OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """DDP (a bucket per weight: 1 KB buckets, 2 KB weights) and FSDP2 on 2 CPU processes: one launch."""
    folder = tmp_path_factory.mktemp("dp")
    result = torchrun(*TINY, "--device", "cpu", "--strategy", "all", "--bucket_mb", "0.001",
                      "--trace_dir", str(folder))
    return result, folder / FOLDER


def rank_files(folder, strategy: str) -> list:
    how = "ddp_b0.001mb" if strategy == "ddp" else "fsdp"
    return [folder / f"2_4_16_32_L3_dp2_{how}_eager_fp32_cpu_rank{r}.json" for r in (0, 1)]


def test_both_strategies_run_on_two_cpu_processes_quietly(cpu_run):
    result, folder = cpu_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert stderr_lines(result) == []
    assert result.stdout.count("09_data_parallel_mlp · dp_fwd") == 2  # rank 0 speaks, once per strategy
    assert result.stdout.count("without the profiler: ") == 2  # timed on every rank, in step; rank 0 says it
    for strategy in ("ddp", "fsdp"):
        assert all(path.is_file() for path in rank_files(folder, strategy))
        assert all('"unprofiled"' in path.read_text()[:4096] for path in rank_files(folder, strategy))


def test_the_guesses_about_buckets_and_units_hold(cpu_run):
    result, _ = cpu_run
    lines = result.stdout.splitlines()
    # DDP: 9 weights of 2 KB, 1 KB buckets -> a bucket each; FSDP2: 3 units, resharded after the forward.
    ddp = next(i for i, line in enumerate(lines) if "9 AllReduce per step (one all-reduce per gradient bucket" in line
               and line.lstrip().startswith("✓"))
    fsdp = next(i for i, line in enumerate(lines) if "6 AllGather, 3 ReduceScatter per step" in line
                and line.lstrip().startswith("✓"))
    assert ddp < fsdp
    evidence = " ".join(" ".join(lines[fsdp:fsdp + 4]).split())  # the lines as one, however the console wrapped them
    assert "AllGather ×6, ReduceScatter ×3" in evidence
    assert "units or buckets named: layers.0, layers.1, layers.2" in evidence


def test_trace_report_gives_each_collective_its_bucket_or_unit(cpu_run):
    _, folder = cpu_run
    fsdp = run_script("-m", "trace_report.report", *map(str, rank_files(folder, "fsdp")), timeout=120)
    assert fsdp.returncode == 0, fsdp.stderr
    rows = [line.split() for line in fsdp.stdout.splitlines()]
    # rank, collective, unit, phase, then the figures: each unit all-gathered in the forward and the backward,
    # its gradients reduce-scattered in the backward (gloo ran them as all-reduces; the issuing op says what).
    for rank in ("0", "1"):
        for unit in ("layers.0", "layers.1", "layers.2"):
            assert [rank, "AllGather", unit, "dp_fwd", "1"] in [row[:5] for row in rows]
            assert [rank, "AllGather", unit, "dp_bwd", "1"] in [row[:5] for row in rows]
            assert [rank, "ReduceScatter", unit, "dp_bwd", "1"] in [row[:5] for row in rows]
    payload = json.loads(run_script("-m", "trace_report.report", "--json",
                                    *map(str, rank_files(folder, "ddp"))).stdout)
    units = [row["unit"] for row in payload["ranks"][0]["collectives_by_unit"]]
    assert units == [f"bucket {i}" for i in range(9)]


def test_ranks_read_in_processes_give_what_reading_them_here_gives(tmp_path):
    paths = simulated_tp_run(tmp_path, world=3, chunks=2, overlap=True, lag_us=15.0)
    here = rank_traces.read_ranks(paths, parallel=False)
    apart = rank_traces.read_ranks(paths, parallel=True)
    assert [r.figures for r in apart] == [r.figures for r in here]
    assert [r.comm.to_dict() for r in apart] == [r.comm.to_dict() for r in here]
    assert rank_traces.skew(apart).to_dict() == rank_traces.skew(here).to_dict()
    assert rank_traces.straggler(apart).to_dict() == rank_traces.straggler(here).to_dict()
    assert rank_traces.straggler(here).rank == 2  # the last GPU to reach each all-reduce


def test_cuda_graph_ranks_are_compared_on_the_gpus_clock():
    ranks = rank_traces.read_ranks(GRAPH)
    # Rank 1's CPU steps all end before rank 0's begin (a replay costs the CPU tens of µs) ...
    cpu_windows = [(t.steps[0].ts, t.steps[-1].ts + t.steps[-1].dur) for t in map(read_trace, GRAPH)]
    assert cpu_windows[1][1] < cpu_windows[0][0]
    # ... while their GPUs run side by side: the windows overlap, the 12 all-reduces match within microseconds.
    assert rank_traces.windows_overlap(ranks)
    lag = rank_traces.skew(ranks)
    assert lag.matched == 12 and lag.median_us < 10


def test_the_straggler_and_why_from_lesson_08s_eager_ranks():
    ranks = rank_traces.read_ranks(EAGER)
    lag = rank_traces.skew(ranks)
    assert lag.median_us == pytest.approx(389.7, abs=0.1)
    slow = rank_traces.straggler(ranks, lag)
    assert slow.rank == 1 and slow.last == 12
    assert slow.reasons[0].startswith("its CPU spends 1,906 µs a step issuing it, the others 1,162 (1.64×): every "
                                      "op slower alike")


def test_collectives_have_their_colour_and_ranks_stack_on_one_clock():
    traces = [read_trace(path) for path in EAGER]
    alone = layout(traces[1], traces[1].steps[0])
    nccl = [b for b in alone.boxes if b.name.startswith("ncclDevKernel_AllReduce")]
    assert nccl and {b.kind for b in nccl} == {"collective"} and "collective" in alone.kinds
    stacked = layout_ranks([(r, t, t.steps[0]) for r, t in enumerate(traces)])
    titles = [row.title for row in stacked.rows]
    assert titles[0].startswith("rank 0 · CPU thread") and any(t.startswith("rank 1 · GPU 1") for t in titles)
    rank_of_row = [0 if t.startswith("rank 0") else 1 for t in titles]
    starts = {r: min(b.start for b in stacked.boxes if rank_of_row[b.row] == r and b.kind == "step") for r in (0, 1)}
    # one clock: rank 1's step starts later, by as much as the traces say
    assert starts[1] - starts[0] == pytest.approx(traces[1].steps[0].ts - traces[0].steps[0].ts)


def test_trace_report_draws_a_rank_set_in_one_picture(tmp_path):
    paths = simulated_tp_run(tmp_path, world=2)
    result = run_script("-m", "trace_report.report", *map(str, paths), "--png", timeout=120)
    assert result.returncode == 0, result.stderr
    png = tmp_path / "64_128_768_3072_tp2_plain_eager_ranks.png"
    assert result.stdout.startswith(f"picture: {png} (2 ranks, ProfilerStep#2,")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_strategy_is_one_line():
    result = run_script(LESSON, "--strategy", "ddp,zero")
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and "unknown strategy 'zero'" in lines[0], result.stderr


@pytest.mark.gpu
@two_gpus
def test_both_strategies_on_two_gpus(tmp_path):
    small = ["--batch", "4", "--seq", "64", "--dim", "256", "--hidden", "1024", "--layers", "2"]
    result = torchrun(*small, "--strategy", "all", "--bench", "--trace_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert stderr_lines(result) == []
    # as many all-reduces as DDP's reducer holds buckets; 2 units, each gathered twice and reduce-scattered once
    assert re.search(r"✓ \d+ AllReduce per step \(one all-reduce per gradient bucket", result.stdout)
    assert "✓ 4 AllGather, 2 ReduceScatter per step" in result.stdout
    assert "scaling efficiency" in result.stdout
    ranks = [tmp_path / FOLDER / f"4_64_256_1024_L2_dp2_fsdp_eager_rank{r}.json" for r in (0, 1)]
    report = run_script("-m", "trace_report.report", *map(str, ranks), timeout=120)
    rows = [line.split()[:4] for line in report.stdout.splitlines()]
    assert ["0", "ReduceScatter", "layers.1", "dp_bwd"] in rows and ["1", "AllGather", "layers.0", "dp_fwd"] in rows


@pytest.mark.gpu
@two_gpus
def test_lesson_08s_cuda_graph_ranks_read_together_on_two_gpus(tmp_path):
    result = run_script("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(ROOT / "08_tensor_parallel_mlp.py"), "--variant", "overlap", "--cuda_graph",
                        "--trace_dir", str(tmp_path), env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "skew between ranks at each collective's start (12 matched" in result.stdout
    assert "do not overlap in time" not in result.stdout


def test_ddp_buckets_on_a_real_gpu_trace():
    """HTA's A100 DDP trace (trace_report/tests/fixtures/world): NCCL kernels tied to their launches, two broadcasts of the
    buffers in the forward, then the gradient buckets' all-reduces in the backward, numbered in the order issued."""
    trace = read_trace(FIXTURES / "world" / "a100_nccl_hta_step5.json.gz")
    owned = attribution.owners(trace, communication(trace))[0]
    assert [(o.kind, o.unit, o.phase) for o in owned if o.kind == "Broadcast"] == [("Broadcast", None,
                                                                                   "## forward ##")] * 2
    buckets = [o for o in owned if o.kind == "AllReduce"]
    assert [o.unit for o in buckets] == [f"bucket {i}" for i in range(len(buckets))] and len(buckets) >= 5
    assert {o.phase for o in buckets} == {"## backward ##"}
    assert [o.issued_at for o in buckets] == sorted(o.issued_at for o in buckets)


def fsdp_gpu_trace(path, units=("layers.0", "layers.1")):
    """One rank's GPU trace of an FSDP2 step, shaped as torch.profiler writes one: per unit, an all-gather in the
    forward and a reduce-scatter in the backward, each an NCCL kernel launched from a c10d op inside FSDP2's range;
    a GEMM per unit beside them."""
    cpu, compute, nccl = {"pid": 1, "tid": 1}, {"pid": 0, "tid": 7}, {"pid": 0, "tid": 20}
    events, corr = [], 0

    def box(cat, name, ts, dur, lane=cpu, **args):
        events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **lane, "args": args})

    def launch(op, kernel, ts, lane, gpu_ts, gpu_dur, outer=None):
        nonlocal corr
        corr += 1
        if outer:
            box("user_annotation", outer, ts, 8)
        box("cpu_op", op, ts + 1, 6)
        box("cuda_runtime", "cudaLaunchKernel", ts + 2, 3, correlation=corr)
        box("kernel", kernel, gpu_ts, gpu_dur, lane, correlation=corr)

    for step in range(3):
        t = step * 1000.0
        box("user_annotation", f"ProfilerStep#{2 + step}", t, 900)
        box("user_annotation", "dp_fwd", t + 1, 400)
        box("user_annotation", "dp_bwd", t + 410, 400)
        for i, unit in enumerate(units):
            launch("c10d::_allgather_base_", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   t + 10 + 100 * i, nccl, t + 20 + 100 * i, 30, f"FSDP::all_gather ({unit})")
            launch("aten::mm", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", t + 60 + 100 * i, compute,
                   t + 60 + 100 * i, 80)
        for i, unit in enumerate(reversed(units)):
            launch("aten::mm", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", t + 420 + 100 * i, compute,
                   t + 420 + 100 * i, 80)
            launch("c10d::_reduce_scatter_base_",
                   "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                   t + 500 + 100 * i, nccl, t + 505 + 100 * i, 40, f"FSDP::post_backward_reduce ({unit})")
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events,
                                "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
    return path


def test_fsdp_units_on_a_gpu_trace_come_from_the_kernels_launch_path(tmp_path):
    trace = read_trace(fsdp_gpu_trace(tmp_path / "fsdp_rank0.json"))
    owned = attribution.owners(trace, communication(trace))
    assert [(o.kind, o.unit, o.phase) for o in owned[0]] == [
        ("AllGather", "layers.0", "dp_fwd"), ("AllGather", "layers.1", "dp_fwd"),
        ("ReduceScatter", "layers.1", "dp_bwd"), ("ReduceScatter", "layers.0", "dp_bwd")]
    # the first reduce-scatter (505-545 µs) runs beside the next unit's GEMM from 520 µs: 15 µs exposed; the last
    # has no GEMM left beside it: all of its 40 µs
    exposed = [round(o.collective.exposed_us, 1) for o in owned[0] if o.kind == "ReduceScatter"]
    assert exposed == [15.0, 40.0]


def test_the_lessons_checks_on_a_gpu_shaped_fsdp_trace(tmp_path):
    from profiling_in_pytorch import checks as ex

    trace = read_trace(fsdp_gpu_trace(tmp_path / "fsdp_rank0.json"))
    assert ex.collectives_by_kind({"AllGather": 2, "ReduceScatter": 2}).check(trace).ok
    assert not ex.collectives_by_kind({"AllGather": 4, "ReduceScatter": 2}).check(trace).ok
    started = ex.collectives_start_in_backward("dp_bwd", "ReduceScatter", 1).check(trace)
    assert started.ok and "1 of 2, 1 of 2, 1 of 2" in started.evidence
    assert not ex.collectives_start_in_backward("dp_bwd", "ReduceScatter", 2).check(trace).ok


def test_many_buckets_are_summed_per_rank_and_phase(cpu_run):
    _, folder = cpu_run
    ranks = rank_traces.read_ranks(rank_files(folder, "ddp"), parallel=False)
    grouped = attribution.owner_rows(ranks, group_units=True)
    assert [(row["rank"], row["collective"], row["unit"], row["phase"], round(row["per_step"], 6)) for row in grouped] \
        == [(0, "AllReduce", "9 buckets", "dp_bwd", 9.0), (1, "AllReduce", "9 buckets", "dp_bwd", 9.0)]
    alone = attribution.owner_rows(ranks, group_units=False)
    assert sum(row["us_per_step"] for row in alone if row["rank"] == 0) == pytest.approx(grouped[0]["us_per_step"])


def test_a_picture_of_many_ranks_draws_the_lowest_eight(tmp_path):
    # Each drawn rank's whole trace is held to draw it: ten ranks of a run give the eight lowest, and say so.
    paths = simulated_tp_run(tmp_path, "run", world=10)
    result = run_script("-m", "trace_report.report", *map(str, reversed(paths)), "--png", timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"picture: {tmp_path / 'run_ranks.png'} (8 ranks of 10, the lowest,"), result.stdout
    lowest = rank_traces.lowest_ranks(list(reversed(paths)), 8)
    assert [Path(p).name for p in lowest] == [f"run_rank{r}.json" for r in range(8)]  # by rank, not as given
