"""A collective's bytes and bandwidth (nccl-tests' algbw and busbw), against its link's peak, and with every rank's
trace its kernel split into the wait for the last rank and the transfer after it.

The synthetic runs (tp_traces.py) have times we choose, so each figure is counted by hand below; the h100x2 fixtures
are lesson 08 on 2 H100s over NVLink.
"""

from __future__ import annotations

import json
import re

import pytest

from trace_report import communication as comm
from trace_report import ranks as rank_traces
from trace_report.attribution import rank_owner_rows
from trace_report.links import bus_factor, link_of
from trace_report.reader import read_trace
from trace_report.tests.support import FIXTURES, load_trace, run_report
from trace_report.tests.tp_traces import NCCL_GENERIC, NCCL_LL, simulated_tp_run

H100X2 = FIXTURES / "h100x2"
# 3.5 M bf16 elements: 7,000,000 bytes an all-reduce, round figures over the synthetic kernels' 100 and 70 µs.
NELEMS = 3_500_000
BYTES = 7_000_000


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    """Four ranks, one all-reduce a step; rank r's GPU 10·r µs behind rank 0's, so rank 0's kernel runs 100 µs (30
    waiting for rank 3, 70 transferring), rank 3's 70."""
    return simulated_tp_run(tmp_path_factory.mktemp("four"), "64_128_768_3072_tp4_plain_eager", world=4,
                            nelems=NELEMS)


# --- nccl-tests' convention ------------------------------------------------------------------------------------


@pytest.mark.parametrize("collective,ranks,factor", [
    ("AllReduce", 2, 1.0), ("AllReduce", 8, 1.75), ("AllGather", 4, 0.75), ("ReduceScatter", 8, 0.875),
    ("AllToAll", 2, 0.5), ("Broadcast", 8, 1.0), ("Reduce", 4, 1.0), ("Barrier", 8, None),
])
def test_bus_factors_are_nccl_tests(collective, ranks, factor):
    assert bus_factor(collective, ranks) == factor


@pytest.mark.parametrize("args,nbytes", [
    ({"In msg nelems": 1572864, "Out msg nelems": 1572864, "dtype": "BFloat16"}, 3_145_728),  # all-reduce
    ({"In msg nelems": 25136, "Out msg nelems": 201088, "dtype": "BFloat16"}, 402_176),  # all-gather: the output
    ({"In msg nelems": 2049000, "Out msg nelems": 2049000, "dtype": "Float"}, 8_196_000),
    ({"In msg nelems": 8, "Out msg nelems": 1, "dtype": "Float8_e4m3fn"}, 8),  # reduce-scatter: the input
    ({"In msg nelems": 10, "dtype": "NoSuchType"}, None),
    ({"dtype": "Float"}, None),
])
def test_message_bytes_from_c10ds_record(args, nbytes):
    assert comm.message_bytes(args) == nbytes


@pytest.mark.parametrize("gpu,each_way", [
    ("NVIDIA H100 80GB HBM3", 450), ("NVIDIA H200", 450), ("NVIDIA A100-SXM4-80GB", 300), ("NVIDIA B200", 900),
    ("Tesla V100-SXM2-16GB", 150), ("NVIDIA H100 PCIe", 64), ("NVIDIA H800", 200), ("NVIDIA L4", 32),
])
def test_link_peaks_per_direction_are_half_the_datasheets_figure(gpu, each_way):
    link = link_of(gpu)
    assert link.per_direction_gbps() == each_way and link.total_gbps == 2 * each_way


def test_a_full_mesh_gives_two_ranks_one_of_its_links():
    mi300x = link_of("AMD Instinct MI300X")
    assert mi300x.per_direction_gbps(8) == 448 and mi300x.per_direction_gbps(2) == 64
    assert link_of("AMD Radeon Graphics") is None and link_of("") is None  # no peak claimed for a GPU not in the table


# --- one trace ---------------------------------------------------------------------------------------------------


def test_bytes_and_bandwidth_of_a_synthetic_all_reduce(four_ranks):
    found = comm.communication(read_trace(four_ranks[0]))
    assert [c.dur for c in found.collectives] == pytest.approx([100.0] * 3)
    for c in found.collectives:
        assert c.bytes == BYTES and c.group_size == 4
        assert c.algbw_gbps == pytest.approx(70.0)  # 7,000,000 B / 100 µs
        assert c.busbw_gbps == pytest.approx(105.0)  # × 2·3/4
        assert c.wait_us is None and c.transfer_us is None  # one rank's trace cannot tell its wait
    row, = found.kind_rows()
    assert (row.bytes, row.algbw_gbps, row.busbw_gbps) == pytest.approx((BYTES, 70.0, 105.0))


def test_bytes_from_the_launching_op_when_the_kernel_holds_none(tmp_path):
    """Before torch 2.1 the NCCL kernel carried no message; the record_param_comms op that launched it did."""
    rank0, _ = simulated_tp_run(tmp_path, nccl=NCCL_GENERIC, nelems=NELEMS, message_on_kernel=False)
    found = comm.communication(read_trace(rank0))
    assert [c.bytes for c in found.collectives] == [BYTES] * 3
    assert found.collectives[0].busbw_gbps == pytest.approx(BYTES / 80.0 / 1e3)  # 2 ranks: factor 1, 80 µs


def test_no_message_recorded_no_bandwidth(tmp_path):
    rank0, _ = simulated_tp_run(tmp_path)
    found = comm.communication(read_trace(rank0))
    assert all(c.bytes is None and c.algbw_gbps is None and c.busbw_gbps is None for c in found.collectives)
    assert found.collectives[0].group_size == 2  # from distributedInfo's world_size


def test_a_real_all_reduces_bytes_over_its_kernel_time():
    """Lesson 08's overlapped forward at the post's shape, rank 0 on 2 H100s: each chunk's all-reduce is a quarter
    of y, 2,048 tokens × 768 bf16 = 3,145,728 bytes, counted from the raw events beside the reader's figures."""
    path = H100X2 / "64_128_768_3072_tp2_overlap4_eager_rank0.json.gz"
    raw = [e for e in load_trace(path)["traceEvents"]
           if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel") and "In msg nelems" in e["args"]]
    assert {e["args"]["In msg nelems"] for e in raw} == {2048 * 768}
    by_start = {round(e["ts"], 3): e["dur"] for e in raw}
    found = comm.communication(read_trace(path))
    assert len(found.collectives) == 12
    for c in found.collectives:
        dur = by_start[round(c.ts, 3)]
        assert c.bytes == 2048 * 768 * 2
        assert c.algbw_gbps == pytest.approx(3_145_728 / dur / 1e3)
        assert c.busbw_gbps == pytest.approx(c.algbw_gbps)  # 2 ranks: 2(n−1)/n = 1
    # rank 0 waited for a slower rank 1 (fixtures' README): over whole kernels it reads 3-12 GB/s
    assert all(2 < c.busbw_gbps < 15 for c in found.collectives)


def test_copy_engine_copies_carry_their_own_bytes():
    """overlap-ce at the 7B shape: each pull from the peer is an 8 MiB `Memcpy PtoP`, one transfer over NVLink."""
    found = comm.communication(read_trace(H100X2 / "16_512_4096_11008_tp2_overlapce4_eager_rank0.json.gz"))
    peer = [c for c in found.collectives if "PtoP" in c.name]
    assert peer and {c.bytes for c in peer} == {8_388_608}
    for c in peer:
        assert c.busbw_gbps == pytest.approx(c.bytes / c.dur / 1e3)
        assert 200 < c.busbw_gbps < 450  # H100's NVLink: 450 GB/s each way
    local = [c for c in found.collectives if "DtoD" in c.name]
    assert local and all(c.bytes == 8_388_608 and c.busbw_gbps is None for c in local)  # no link crossed
    barriers = [c for c in found.collectives if c.collective == "Barrier"]
    assert barriers and all(c.bytes is None for c in barriers)


def test_the_7b_plain_all_reduce_on_two_h100s():
    """Lesson 08's plain forward at the 7B shape in a CUDA graph: the replay records no message for its NCCL kernel
    (no op runs around it), so the bytes are counted by hand: y, 16·512 tokens × 4096 bf16 = 67,108,864 bytes. Over
    its 248 µs kernel that is 270.6 GB/s busbw (2 ranks: busbw = algbw), 60% of NVLink 4's 450 GB/s each way."""
    path = H100X2 / "16_512_4096_11008_tp2_plain_graph_eager_rank0.json.gz"
    found = comm.communication(read_trace(path))
    assert found.link.per_direction_gbps(found.group_size) == 450
    hand = 16 * 512 * 4096 * 2
    raw = sorted(e["dur"] for e in load_trace(path)["traceEvents"]
                 if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel_AllReduce"))[:3]
    for c, dur in zip(sorted(found.collectives, key=lambda c: c.dur), raw, strict=True):
        assert c.bytes is None and c.group_size == 2
        c.bytes = hand
        assert c.dur == pytest.approx(dur)
        assert c.busbw_gbps == pytest.approx(hand / dur / 1e3)
        assert 10 < c.busbw_gbps < 450
    row, = found.kind_rows()
    assert row.busbw_gbps == pytest.approx(270.6, abs=0.5)


# --- several ranks: wait and transfer ----------------------------------------------------------------------------


def test_wait_and_transfer_of_a_synthetic_run(four_ranks):
    ranks = rank_traces.read_ranks(four_ranks, parallel=False)
    rank_traces.skew(ranks)
    for r in ranks:
        for c in r.comm.collectives:
            assert c.wait_us == pytest.approx(10.0 * (3 - r.rank))  # rank 3 arrives 30 µs after rank 0
            assert c.transfer_us == pytest.approx(70.0)
            assert c.wait_us + c.transfer_us == pytest.approx(c.dur)
            assert c.transfer_busbw_gbps == pytest.approx(150.0)  # 7,000,000 B / 70 µs × 1.5, on every rank
    assert ranks[0].comm.collectives[0].busbw_gbps == pytest.approx(105.0)  # the wait in: a late rank looks slow
    rows = {rank: k for rank, k in rank_traces.transfer_rows(ranks)}
    assert (rows[0].wait_us, rows[0].transfer_us, rows[0].transfer_busbw_gbps) == pytest.approx((30.0, 70.0, 150.0))


def test_a_late_rank_and_a_slow_link_stop_looking_alike():
    """Lesson 08's overlapped eager pair on 2 H100s: rank 1 is the straggler. Over whole kernels rank 0's all-reduces
    read 3-12 GB/s and rank 1's ~97; over the transfer alone both ranks read the same link, 75-105 GB/s."""
    paths = sorted(H100X2.glob("64_128_768_3072_tp2_overlap4_eager_rank*.json.gz"))
    ranks = rank_traces.read_ranks(paths, parallel=False)
    assert rank_traces.skew(ranks).matched == 12
    first, late = ranks
    for mine, theirs in zip(first.comm.collectives, late.comm.collectives, strict=True):
        assert mine.wait_us > 200 and theirs.wait_us == 0  # rank 0 waits for rank 1 in every one
        assert mine.busbw_gbps < theirs.busbw_gbps / 5
        assert 70 < mine.transfer_busbw_gbps < 110 and 70 < theirs.transfer_busbw_gbps < 110


# --- where the reader shows them ---------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [100, 120])
def test_the_communication_table_fits_and_keeps_names_whole(four_ranks, columns):
    result = run_report(four_ranks[0], env={"COLUMNS": str(columns)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Communication"))
    section = lines[start:start + 12]
    assert all(len(line) <= columns for line in section)
    header = next(line for line in section if "algbw GB/s" in line)
    assert re.search(r"collective\s+/step\s+avg µs\s+size\s+algbw GB/s\s+busbw GB/s", header)
    row = next(line for line in section if line.lstrip().startswith("ncclDevKernel"))
    assert row.split() == [NCCL_LL.split("(")[0], "1", "100.0", "7.0", "MB", "70.0", "105.0"]
    assert "NVLink 4 (18 links): 450 GB/s each way (900 GB/s both ways)" in " ".join(result.stdout.split())


def test_json_has_each_collectives_bytes_and_bandwidth(four_ranks):
    result = run_report(four_ranks[0], "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)["communication"]
    one = found["steps"][0]["collectives"][0]
    assert (one["bytes"], one["algbw_gbps"], one["busbw_gbps"], one["group_size"]) == (BYTES, 70.0, 105.0, 4)
    assert "transfer_us" not in one
    assert found["link"] == {"name": "NVLink 4 (18 links)", "total_gbps": 900, "per_direction_gbps": 450}


def test_ranks_json_and_text_split_wait_from_transfer(four_ranks):
    result = run_report(*four_ranks, "--json")
    assert result.returncode == 0, result.stderr
    ranks = json.loads(result.stdout)["ranks"]
    for r in ranks:
        one = r["communication"]["steps"][0]["collectives"][0]
        assert one["wait_us"] == pytest.approx(10.0 * (3 - r["rank"]))
        assert one["transfer_us"] == pytest.approx(70.0) and one["transfer_busbw_gbps"] == pytest.approx(150.0)
    text = run_report(*four_ranks, env={"COLUMNS": "100"})
    assert text.returncode == 0, text.stderr
    assert "wait and transfer, per rank" in text.stdout
    row = next(line for line in text.stdout.splitlines() if line.split()[:2] == ["0", "AllReduce"])
    assert row.split() == ["0", "AllReduce", "1", "7.0", "MB", "100.0", "30.0", "70.0", "105.0", "150.0"]


def test_each_ddp_bucket_with_its_bytes():
    """HTA's A100 DDP trace (fixtures/world): each bucket's all-reduce with c10d's element count × 4 (fp32), in the
    order the reducer issued them, counted from the raw kernels."""
    path = FIXTURES / "world" / "a100_nccl_hta_step5.json.gz"
    raw = sorted((e for e in load_trace(path)["traceEvents"] if e.get("cat") == "kernel"
                  and e["name"].startswith("ncclKernel_AllReduce")), key=lambda e: e["ts"])
    assert {e["args"]["dtype"] for e in raw} == {"Float"}
    trace = read_trace(path)
    rows = [row for row in rank_owner_rows(0, trace, comm.communication(trace)) if row["collective"] == "AllReduce"]
    assert [row["unit"] for row in rows] == [f"bucket {i}" for i in range(5)]
    assert [row["bytes_per_step"] for row in rows] == [e["args"]["In msg nelems"] * 4 for e in raw]
    assert rows[1]["bytes_per_step"] == 31_502_336
