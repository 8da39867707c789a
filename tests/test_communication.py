"""Communication in traces: NCCL kernel names, collective and exposed time, several ranks, their checks, trace-report.

GPU traces here are simulated (tests/tp_traces.py), shaped like lesson 08's on an H200, with times we choose, so
each number below is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_script, stderr_lines
from trace_report.tests.tp_traces import NCCL_GENERIC, simulated_tp_run

from trace_report import communication as comm
from trace_report import ranks as rank_traces
from profiling_in_pytorch import checks as ex
from profiling_in_pytorch.checks import communication as cx
from trace_report.kernels import decode_nccl
from trace_report.reader import read_trace


def trace_report(*args) -> object:
    return run_script("-m", "trace_report.report", *map(str, args), timeout=60)


# --- NCCL kernel names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,fields", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     ("AllReduce", "Sum", "bf16", "RING", "LL")),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     ("AllReduce", "Sum", "float", "RING", "LL")),
    ("ncclKernel_AllReduce_TREE_LL128_Sum___nv_bfloat16(ncclDevComm*, unsigned long, ncclWork*)",
     ("AllReduce", "Sum", "__nv_bfloat16", "TREE", "LL128")),
    ("ncclDevKernel_ReduceScatter_Sum_f32_NVLS_SIMPLE", ("ReduceScatter", "Sum", "f32", "NVLS", "SIMPLE")),
    ("ncclDevKernel_AllReduce_MinMax_i32_COLLNET_DIRECT_LL128",
     ("AllReduce", "MinMax", "i32", "COLLNET_DIRECT", "LL128")),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ("AllGather", None, None, "RING", "LL")),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", ("SendRecv", None, None, None, None)),
])
def test_nccl_kernel_names_say_collective_op_dtype_algorithm_and_protocol(name, fields):
    kernel = decode_nccl(name)
    assert (kernel.collective, kernel.op, kernel.dtype, kernel.algorithm, kernel.protocol) == fields
    assert not kernel.generic and "(" not in kernel.name


def test_what_a_name_says_in_words():
    text = decode_nccl("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)").describe()
    assert text.startswith("NCCL AllReduce; op Sum; bf16; ring:") and "protocol LL, low latency" in text
    assert "fp32" in decode_nccl("ncclKernel_AllReduce_RING_LL_Sum_float(x)").describe()


def test_the_generic_kernel_says_nothing_and_other_kernels_are_not_nccl():
    generic = decode_nccl(NCCL_GENERIC)
    assert generic.generic and generic.collective is None and "generic" in generic.describe()
    assert decode_nccl("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") is None
    assert decode_nccl("triton_poi_fused_gelu_mul_0") is None


@pytest.mark.parametrize("op,collective", [
    ("c10d::allreduce_", "AllReduce"), ("_c10d_functional::all_reduce", "AllReduce"), ("gloo:all_reduce", "AllReduce"),
    ("nccl:all_gather", "AllGather"), ("c10d::_reduce_scatter_base_", "ReduceScatter"), ("aten::mm", None),
    ("gloo:unknown_thing", None),
])
def test_ops_and_record_functions_name_their_collective(op, collective):
    assert comm.collective_of_op(op) == collective


# --- one rank's trace ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """Two ranks, one all-reduce per step after the compute; rank 1's GPU 10 µs behind rank 0's."""
    return simulated_tp_run(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def overlapped(tmp_path_factory):
    """Two ranks, four chunks whose all-reduces run beside the next chunk's compute (the 7B-sized layer's times)."""
    return simulated_tp_run(tmp_path_factory.mktemp("overlap"), "16_512_4096_11008_tp2_overlap4_eager", chunks=4,
                            overlap=True, compute_us=1700, allreduce_us=300)


def test_one_all_reduce_per_step_all_of_it_exposed(plain):
    for path, expected_us in zip(plain, (80.0, 70.0), strict=True):
        found = comm.communication(read_trace(path))
        assert found.where == "gpu"
        assert found.per_step("AllReduce") == [1, 1, 1] and found.issued_per_step("AllReduce") == [1, 1, 1]
        # rank 0 got there 10 µs first: its kernel spins until rank 1 joins
        assert found.comm_us_per_step == pytest.approx(expected_us)
        assert found.exposed_share == pytest.approx(1.0)


def test_overlapped_chunks_leave_only_the_last_all_reduce_exposed(overlapped):
    for path in overlapped:
        found = comm.communication(read_trace(path))
        assert found.per_step() == [4, 4, 4]
        assert found.exposed_share == pytest.approx(0.25)
        exposed = [c.exposed_us > 0 for c in found.collectives]
        assert exposed == [False, False, False, True] * 3


def test_the_generic_kernel_is_named_by_the_op_that_launched_it(tmp_path):
    rank0, _ = simulated_tp_run(tmp_path, nccl=NCCL_GENERIC)
    found = comm.communication(read_trace(rank0))
    assert found.per_step("AllReduce") == [1, 1, 1]
    assert "generic" in found.kinds()[0][1]


def test_gloo_record_functions_are_the_collectives_of_a_cpu_trace(tmp_path):
    MAIN, GLOO = {"pid": 1, "tid": 1}, {"pid": 1, "tid": 9}  # the caller's thread, one of gloo's
    events = []
    for i, number in enumerate((2, 3, 4)):
        t = i * 200.0
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "ts": t, "dur": 150, **MAIN},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t + 10, "dur": 50, **MAIN},
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": t + 35, "dur": 5, **MAIN},
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": t + 40, "dur": 50, **GLOO},
        ]
    path = tmp_path / "cpu_rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    found = comm.communication(read_trace(path))
    assert found.where == "cpu" and found.per_step() == [1, 1, 1]
    assert found.issued_per_step() == [1, 1, 1]
    assert found.exposed_us_per_step == pytest.approx(30.0)  # 20 of its 50 µs ran beside aten::mm


def test_a_trace_without_collectives_has_no_communication(eager):
    assert comm.communication(eager) is None


# --- several ranks -----------------------------------------------------------------------------------------------------


def test_skew_matches_collectives_by_step_and_order(plain):
    ranks = rank_traces.read_ranks(list(reversed(plain)))
    assert [r.rank for r in ranks] == [0, 1]  # from distributedInfo, whatever the order given
    lag = rank_traces.skew(ranks)
    assert lag.matched == 3 and lag.median_us == pytest.approx(10.0) and lag.max_us == pytest.approx(10.0)
    assert lag.waits_us_per_step == pytest.approx({0: 10.0, 1: 0.0}) and lag.last == {1: 3}


def test_rank_sets_are_named_run_rank_r():
    assert rank_traces.is_rank_set(["a/x_rank0.json", "a/x_rank1.json.gz"])
    assert not rank_traces.is_rank_set(["x_rank0.json"])
    assert not rank_traces.is_rank_set(["x_rank0.json", "y_rank1.json"])  # two runs: a diff, not ranks
    assert not rank_traces.is_rank_set(["x_rank0.json", "b/x_rank0.json"])


def test_trace_report_reads_a_runs_ranks_together(plain):
    result = trace_report(*plain)
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())  # prose wraps at the terminal's width, between words
    assert "2 ranks" in out and "per rank, per step" in out
    assert "median 10.0 µs, max 10.0 µs" in out and "last to start: rank 1 ×3" in out
    assert "NCCL AllReduce; op Sum; bf16; ring" in out  # rank 0's collectives, decoded


def test_trace_report_ranks_as_json(overlapped):
    result = trace_report("--ranks", "--json", *overlapped)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert [r["rank"] for r in payload["ranks"]] == [0, 1]
    assert payload["ranks"][0]["communication"]["exposed_share"] == pytest.approx(0.25)
    assert payload["skew"]["matched"] == 12


def test_one_trace_gets_its_communication_section(plain):
    result = trace_report(plain[0], "--steps", "1")
    assert result.returncode == 0, result.stderr
    assert "Communication (NCCL kernels on the GPU lane" in result.stdout
    assert "80.0 µs of collectives, 80.0 µs of them exposed (100%)" in result.stdout


def test_two_runs_rank_0_are_diffed_not_read_as_ranks(plain, overlapped):
    result = trace_report(plain[0], overlapped[0])
    assert result.returncode == 0, result.stderr
    assert "By op:" in result.stdout and "per rank" not in result.stdout


def test_traces_from_different_runs_have_no_skew(plain, tmp_path):
    shifted = json.loads(plain[1].read_text())
    for event in shifted["traceEvents"]:
        event["ts"] += 10_000_000
    moved = tmp_path / plain[1].name
    moved.write_text(json.dumps(shifted))
    result = trace_report(plain[0], moved)
    assert result.returncode == 0, result.stderr
    assert "do not overlap in time" in result.stdout and "median" not in result.stdout


@pytest.mark.parametrize("args,message", [
    (["{0}", "{1}", "{0}"], "give --ranks"),
    (["--ranks", "{0}"], "two traces or more"),
])
def test_trace_counts_that_make_no_sense_are_one_line(plain, args, message):
    result = trace_report(*(a.format(*plain) for a in args))
    assert result.returncode == 2
    lines = stderr_lines(result)
    assert len(lines) == 1 and message in lines[0], result.stderr


# --- the lesson's checks -----------------------------------------------------------------------------------------------


def check(expectation, path: Path):
    return expectation.check(read_trace(path))


def test_collectives_per_step(plain, overlapped):
    assert check(ex.collectives_per_step(1), plain[0]).ok
    four = check(ex.collectives_per_step(1), overlapped[0])
    assert four.ok is False and "AllReduce per step: 4, 4, 4" in four.evidence
    assert check(ex.collectives_per_step(4), overlapped[0]).ok


def test_exposed_shares(plain, overlapped):
    assert check(ex.exposed_share_at_least(0.9), plain[0]).ok
    assert check(ex.exposed_share_at_most(0.4), overlapped[0]).ok
    too_much = check(ex.exposed_share_at_most(0.4), plain[1])
    assert too_much.ok is False and "exposed 100%" in too_much.evidence and "NCCL kernel" in too_much.reason


def test_cpu_time_against_gpu_time(tmp_path):
    dtensor = simulated_tp_run(tmp_path, "dtensor", cpu_step_us=1100)  # DTensor at the post's shape: ~1.1 ms CPU
    outcome = check(ex.cpu_time_exceeds_gpu_time(), dtensor[0])
    assert outcome.ok and "the CPU issues work for 1,100.0 µs, the GPU is busy 200.0 µs" in outcome.evidence
    fast = simulated_tp_run(tmp_path, "fast", cpu_step_us=100)
    outcome = check(ex.cpu_time_exceeds_gpu_time(), fast[0])
    assert outcome.ok is False and outcome.reason == cx.SHAPE_HIDES_DISPATCH


def test_less_cpu_than_another_trace_is_skipped_without_it(tmp_path, plain):
    dtensor = simulated_tp_run(tmp_path, "dtensor", cpu_step_us=1100)
    assert check(ex.less_cpu_than(dtensor[0], "DTensor"), plain[0]).ok
    assert check(ex.less_cpu_than(plain[0], "plain"), dtensor[0]).ok is False
    assert check(ex.less_cpu_than(tmp_path / "missing.json", "DTensor"), plain[0]).ok is None


def test_a_trace_without_collectives_fails_the_communication_checks(eager):
    outcome = ex.collectives_per_step(1).check(eager)
    assert outcome.ok is False and outcome.reason == cx.NO_COLLECTIVE


# --- async-TP: symmetric memory, no NCCL ------------------------------------------------------------------------


@pytest.mark.parametrize("copy_us,exposed_us", [(60.0, 0.0), (130.0, 30.0)])
def test_async_tp_copies_are_its_collectives_and_hide_behind_the_matmuls(tmp_path, copy_us, exposed_us):
    from trace_report.tests.tp_traces import simulated_async_tp_trace

    trace = read_trace(simulated_async_tp_trace(tmp_path / "asynctp_rank0.json", copy_us=copy_us))
    found = comm.communication(trace)
    assert found.where == "gpu"
    assert found.per_step("AllGather") == [1, 1, 1] and found.per_step("ReduceScatter") == [1, 1, 1]
    assert found.per_step("Barrier") == [2, 2, 2]
    # per step: two copies beside two matmuls, two barriers alone (5 µs each)
    assert found.comm_us_per_step == pytest.approx(2 * copy_us + 10)
    assert found.exposed_us_per_step == pytest.approx(2 * exposed_us + 10)
    kinds = {name: what for name, what, _, _ in found.kinds()}
    assert "copy-engine" in kinds["Memcpy DtoD (Device -> Device)"]
    assert cx.no_nccl_kernel().check(trace).ok
    assert not cx.no_nccl_kernel().check(read_trace(simulated_tp_run(tmp_path)[0])).ok


@pytest.mark.parametrize("labels,memcpy,collectives", [
    (("copy_engine_all_gather", "copy_engine_reduce_scatter"), "Memcpy PtoP (Device -> Device)",
     ["AllGather", "ReduceScatter"]),  # overlap-ce's record functions: named for the collective their copies make
    (None, "Memcpy PtoP (Device -> Device)", ["PeerCopy", "PeerCopy"]),  # a CUDA graph's replay: between GPUs
    (None, "Memcpy DtoD (Device -> Device)", []),  # ... and a copy inside one GPU, which may be anything
    (("nccl:all_gather", "c10d::reduce_scatter_"), "Memcpy DtoD (Device -> Device)", []),  # c10d's own copies
])
def test_copies_are_collectives_when_a_name_or_their_ends_say_so(tmp_path, labels, memcpy, collectives):
    from trace_report.tests.tp_traces import simulated_async_tp_trace

    trace = read_trace(simulated_async_tp_trace(tmp_path / "t_rank0.json", labels=labels, memcpy=memcpy))
    found = comm.communication(trace)
    copies = [c.collective for c in found.steps[0].collectives if c.name.startswith("Memcpy")]
    assert copies == collectives
    assert found.per_step("Barrier") == [2, 2, 2]  # the symmetric-memory kernels, whatever launched them
    if "PeerCopy" in collectives:
        kinds = {name: what for name, what, _, _ in found.kinds()}
        assert "CUDA graph" in kinds[memcpy] and "between two GPUs" in kinds[memcpy]


def test_many_ranks_are_named_by_their_files_pattern(tmp_path):
    # 64 ranks' files one by one filled 13 lines of the report's first screen: past four, the pattern the names share
    paths = simulated_tp_run(tmp_path, "run7", world=6)
    every = trace_report(*paths)
    assert every.returncode == 0, every.stderr
    assert every.stdout.splitlines()[0] == "6 ranks · run7_rank{0..5}.json"
    gaps = trace_report(*(p for p in paths if not p.name.endswith("_rank2.json")))
    assert gaps.stdout.splitlines()[0] == "5 ranks · run7_rank{0,1,3,4,5}.json", gaps.stderr
    two = trace_report(*paths[:2])
    assert two.stdout.splitlines()[0] == "2 ranks · rank 0: run7_rank0.json, rank 1: run7_rank1.json"
