"""The verdicts a trace the posts never showed gets: a data-parallel rank that spends its GPU time in collectives, a
trace with no CPU side, a window that holds a CUDA graph's capture, CUDA graph replays; and a trace without device
properties still names a GPU. Each expectation is read off the trace itself (its kernels, its launch calls)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import trace_report as trace_report_api

from trace_report.kernels import COMMUNICATION, kind_of_kernel
from trace_report.pace import COMMUNICATION_SHARE, verdict
from trace_report.reader import read_trace
from trace_report.report import main as trace_report
from trace_report.timeline import busy_time

WORLD = Path(__file__).resolve().parent / "fixtures" / "world"
DDP_RANK = WORLD / "mi300x_resnet_ddp8_rank0_step16.json.gz"  # RCCL's all-reduce, waiting on seven other ranks
GRAPHED = WORLD / "h100_vllm_tp4_rank0_cudagraph_58to96ms.json.gz"  # vLLM decode, CUDA graph replays
BERT = WORLD / "h100_bert_suite.json.gz"


def _rewritten(source: Path, target: Path, keep=lambda event: True, meta=lambda data: data) -> Path:
    data = json.loads(gzip.open(source, "rt").read())
    data["traceEvents"] = [e for e in data["traceEvents"] if keep(e)]
    target.write_text(json.dumps(meta(data)))
    return target


def _collective_share(path: Path) -> float:
    lane = read_trace(path).gpu_lane()
    collectives = [w for w in lane if w.kind == "kernel" and kind_of_kernel(w.name, False, w.launched_by) == COMMUNICATION]
    return busy_time(collectives) / busy_time(lane)


def test_a_rank_that_waits_on_its_collectives_is_communication_bound(capsys):
    share = _collective_share(DDP_RANK)
    assert share >= COMMUNICATION_SHARE  # the trace's own collectives hold most of its GPU's busy time
    judged = verdict(read_trace(DDP_RANK))
    assert judged.kind == "communication-bound"
    assert judged.communication_share == share
    assert f"collectives run during {share:.0%} of the GPU's busy time" in judged.summary
    assert "waiting for the other ranks" in judged.summary
    assert trace_report([str(DDP_RANK)]) == 0
    assert "verdict: communication-bound" in capsys.readouterr().out


def test_without_device_properties_the_rank_still_has_a_gpu_and_the_same_verdict(tmp_path, capsys):
    bare = _rewritten(DDP_RANK, tmp_path / "rank0.json", meta=lambda d: {k: v for k, v in d.items() if k != "deviceProperties"})
    trace = read_trace(bare)
    assert "gfx942" in trace.device and "inferred from kernel names" in trace.device  # Tensile's ISA942
    assert verdict(trace).kind == "communication-bound"
    assert trace_report([str(bare)]) == 0
    out = capsys.readouterr().out
    assert "no GPU in the trace" not in out and "gfx942" in out.splitlines()[0]


def test_a_compute_trace_is_not_called_communication_bound():
    judged = verdict(read_trace(BERT))  # one GPU, no collective
    assert judged.kind in ("overhead-bound", "compute-bound") and not judged.communication_share


def test_a_gpu_only_trace_is_judged_on_its_gpu_lane_alone(tmp_path, capsys):
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    only = _rewritten(BERT, tmp_path / "gpu_only.json", keep=lambda e: str(e.get("cat", "")).lower() in gpu_cats)
    trace = read_trace(only)
    judged = verdict(trace)
    assert judged.kind == "GPU only"
    busy = busy_time(trace.gpu_lane())
    assert judged.gpu_busy_us_per_step == busy / len(trace.steps)
    assert "no CPU ops or launch calls" in judged.summary and "launch" not in judged.summary.split(". ", 1)[1]
    assert trace_report([str(only)]) == 0
    assert "GPU only" in capsys.readouterr().out


def test_graph_replays_are_said_with_their_share_of_the_gpu_work():
    trace = read_trace(GRAPHED)
    lane = trace.gpu_lane()
    graphed = sum(w.dur for w in lane if w.runtime is not None and "GraphLaunch" in w.runtime)
    judged = verdict(trace)
    assert graphed > 0 and judged.graph_share == graphed / trace.self_gpu_total_us
    assert f"{judged.graph_share:.0%} of the GPU work ran in CUDA graph replays" in judged.summary


def test_a_window_that_captures_a_graph_says_so_not_overhead_bound(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "capture", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1000.0, "args": {}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "pid": 1, "tid": 1, "ts": 1.0,
               "dur": 2.0, "args": {"correlation": 1}}]
    for i in range(40):  # launches inside the capture queue no GPU work
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 10.0 + 20 * i, "dur": 15.0, "args": {"correlation": 10 + i}})
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamEndCapture", "pid": 1, "tid": 1, "ts": 900.0,
                   "dur": 5.0, "args": {"correlation": 2}})
    events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1, "ts": 950.0,
                   "dur": 3.0, "args": {"correlation": 3}})
    events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 960.0,
                   "dur": 1.0, "args": {"correlation": 3}})
    path = tmp_path / "capture.json"
    path.write_text(json.dumps({"traceEvents": events}))
    judged = verdict(read_trace(path))
    assert judged.kind == "CUDA graph capture"
    assert "cudaStreamBeginCapture ×1" in judged.summary and "queue no GPU work" in judged.summary
    launches = [e for e in events if e["name"] == "cudaLaunchKernel"]
    assert sum(e["dur"] for e in launches) > 10 * 1.0  # without the capture it would read overhead-bound


def test_a_fifth_of_the_window_on_the_loader_is_not_compute_bound(tmp_path):
    """An OWLv2 step on an H100 (TraceLens' tests): its GPU busy 53% of its window, idle 46% while a DataLoader
    without workers makes the next batch, its CPU issuing less than the GPU runs (most of its time a synchronize).
    Cut to that: two kernels, the loader between them, a sync on the second; 28% of the window idle on the loader."""
    def x(cat, name, ts, dur, pid=1, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
    events = [x("cpu_op", "ProfilerStep#1", 0.0, 7100.0),
              x("cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 2100.0, 1800.0),
              x("cuda_runtime", "cudaLaunchKernel", 10.0, 5.0, correlation=1),
              x("kernel", "gemm", 20.0, 2000.0, pid=0, tid=7, correlation=1),
              x("cuda_runtime", "cudaLaunchKernel", 3950.0, 5.0, correlation=2),
              x("kernel", "gemm", 4000.0, 3000.0, pid=0, tid=7, correlation=2),
              x("cuda_runtime", "cudaStreamSynchronize", 4010.0, 2990.0, correlation=3)]
    path = tmp_path / "loader.json"
    path.write_text(json.dumps({"traceEvents": events}))
    judged = verdict(read_trace(path))
    assert judged.kind == "overhead-bound" and judged.cause == "data loading", judged.summary
    assert "makes the next batch" in judged.summary


def test_a_capture_windows_quiet_host_is_no_finding(tmp_path):
    """While a graph is captured the host launches nothing to the GPU (vLLM's capture traces): the 20 ms before the
    next real launch is host work by the verdict's count, and no host-gaps finding."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 30_000.0,
               "args": {}}]
    calls = [(10.0, "cudaMemsetAsync", 1), (20.0, "cudaStreamBeginCapture", None)]
    calls += [(30.0 + 20 * i, "cudaLaunchKernel", None) for i in range(40)]
    calls += [(900.0, "cudaStreamEndCapture", None), (21_000.0, "cudaMemsetAsync", 2)]
    for ts, name, correlation in calls:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 5.0,
                       "args": {"correlation": correlation if correlation else int(ts) + 100}})
    for ts, correlation in ((16.0, 1), (21_006.0, 2)):
        events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": ts,
                       "dur": 1.0, "args": {"correlation": correlation}})
    path = tmp_path / "capture_quiet.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = trace_report_api.read(path)
    assert report.verdict.kind == "CUDA graph capture"
    assert report.verdict.idle_by_cause_us.get("host work", 0) > 10_000
    assert report.advice.finding("host-gaps") is None


def test_collectives_hidden_behind_compute_do_not_make_a_rank_communication_bound():
    """Lesson 08's overlapped variant in a CUDA graph on 2 H100s: NCCL runs during most of the GPU's busy time, but
    beside the next chunk's GEMMs; the pace is the compute's."""
    path = Path(__file__).resolve().parent / "fixtures" / "h100x2" / "64_128_768_3072_tp2_overlap4_graph_eager_rank0.json.gz"
    share = _collective_share(path)
    assert share >= COMMUNICATION_SHARE
    judged = verdict(read_trace(path))
    assert judged.kind != "communication-bound"
    assert judged.exposed_communication_share < COMMUNICATION_SHARE <= judged.communication_share
    assert "they are hidden, not setting the pace" in judged.summary
    assert verdict(read_trace(DDP_RANK)).exposed_communication_share >= COMMUNICATION_SHARE  # RCCL waiting, alone


# --- a busy GPU, a rank made of collectives ---------------------------------------------------------------------
A100_DDP = WORLD / "a100_nccl_hta_step5.json.gz"  # a DDP ResNet rank on NCCL: 24% of its GPU time in all-reduces


def test_gpu_work_on_two_devices_of_one_process_is_said_with_each_ones_share(tmp_path):
    """A model split over two GPUs in one process (`device_map="auto"`): device 1 runs what device 0 ran, after it.
    The lane reads them as one GPU, busy while either is; the note says so, and each device's own busy share."""
    source = WORLD.parent / "h200" / "mlp_eager.json.gz"
    data = json.loads(gzip.open(source, "rt").read())
    gpu = [e for e in data["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    start = min(e["ts"] for e in gpu)
    span = max(e["ts"] + e["dur"] for e in gpu) - start
    data["traceEvents"] += [{**e, "pid": 1, "ts": e["ts"] + span, "args": {k: v for k, v in e.get("args", {}).items()
                                                                         if k != "correlation"}} for e in gpu]
    path = tmp_path / "two_devices.json"
    path.write_text(json.dumps(data))
    notes = [n for n in read_trace(path).notes if "devices in one process" in n]
    assert len(notes) == 1 and "each device alone: device 0 48%, device 1 48%" in notes[0], notes
    assert not any("devices in one process" in n for n in read_trace(source).notes)


def test_a_compute_bound_verdict_names_what_overrides_the_tables_totals():
    """vLLM's decode rank: the table's totals say overhead-bound (31.9 ms of CPU against 13.9 ms of GPU), the GPU
    busy 84% of its window says compute-bound; its 6.5 µs of synchronize waits decide nothing, and the summary does not
    say they do."""
    judged = verdict(read_trace(GRAPHED))
    assert judged.kind == "compute-bound"
    assert "busy 84% of its window: the CPU's ops run beside its work" in judged.summary, judged.summary
    assert "not issuing work, decides it" not in judged.summary


def test_a_gpu_busy_most_of_its_window_is_never_called_overhead_bound():
    from trace_report.pace import BUSY_SHARE
    from trace_report.tests.support import FIXTURES, H200_COMPILED
    for path in sorted(FIXTURES.rglob("*.json.gz")):
        judged = verdict(read_trace(path))
        if judged.gpu_idle_fraction is not None and judged.kind == "overhead-bound":
            assert 1 - judged.gpu_idle_fraction < BUSY_SHARE, path.name
    # the compiled MLP on an H200: its CPU ops outlast its GPU work, yet the GPU is busy 92% of the window
    compiled = verdict(read_trace(H200_COMPILED))
    assert compiled.kind == "compute-bound" and compiled.cpu_us_per_step > compiled.self_gpu_total_us / compiled.steps
    assert "the GPU is busy 92% of its window" in compiled.summary


def test_a_rank_whose_collectives_hold_a_tenth_of_its_gpu_keeps_them_on_a_screen(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert trace_report([str(DDP_RANK)]) == 0  # 69% in RCCL's all-reduce, and fusion candidates too
    out = capsys.readouterr().out
    left = next((line for line in out.splitlines() if line.startswith("left out to fit a screen")), "")
    assert "collectives" not in left and "exposed" in out  # the collectives' table is printed
    assert len(out.splitlines()) <= 120


def test_a_recorded_collective_is_said_by_the_op_that_issued_it(capsys, monkeypatch):
    # NCCL's kernels are launched inside `record_param_comms`, which names no collective: c10d's op around it does,
    # and from autograd's hooks it is DDP's reducer all-reducing the gradient buckets
    monkeypatch.setenv("COLUMNS", "100")
    assert trace_report([str(A100_DDP)]) == 0
    out = capsys.readouterr().out
    top = out[out.index("top kernels"): out.index("GPU idle")]
    nccl = next(line for line in top.splitlines() if "ncclKernel_AllReduce" in line)
    assert "c10d::allreduce_" in nccl and "record_param_comms" not in top
    assert "the gradient buckets' all-reduces, DDP's reducer" in " ".join(top.split())
    assert trace_report([str(A100_DDP), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["summary"]["top"]
    nccl_row = next(row for row in rows if row["name"].startswith("ncclKernel_AllReduce"))
    assert nccl_row["launched_by"] == "record_param_comms" and nccl_row["issued_by"] == "c10d::allreduce_"


def test_gpu_work_outside_the_steps_is_in_no_per_step_figure(capsys, monkeypatch):
    # The SDPA math probe (H200): the warmup step's 8 kernels still run in the first recorded step, launched before
    # the profiler recorded the CPU; and a vLLM rank replaying graphs before its first step
    from trace_report.summary import summarize
    from trace_report.tests.support import FIXTURES, H200_SDPA_MATH
    checked = 0
    for path in [H200_SDPA_MATH, *sorted(FIXTURES.glob("world/*.json.gz")), *sorted(FIXTURES.glob("h100x2/*.json.gz"))]:
        trace = read_trace(path)
        if not trace.gpu_outside_steps or not any(step.gpu for step in trace.steps):
            continue
        checked += 1
        judged, summary = verdict(trace), summarize(trace)
        header = summary.total_us / summary.steps
        outside = sum(w.dur for w in trace.gpu_outside_steps)
        assert judged.outside_gpu_us == outside and judged.outside_gpu_items == len(trace.gpu_outside_steps)
        assert (judged.self_gpu_total_us - judged.outside_gpu_us) / judged.steps == pytest.approx(header)
        assert judged.gpu_busy_us_per_step <= header + 1e-6  # overlaps counted once: never more than the sum
    assert checked >= 3
    monkeypatch.setenv("COLUMNS", "120")
    assert trace_report([str(H200_SDPA_MATH), "--rows", "0"]) == 0
    out = capsys.readouterr().out
    assert "2.62 ms per step" in out.splitlines()[1]
    pace = out[out.index("Who sets the pace"):]
    assert "│ Self CUDA time total    │ 9,408.2 │  2,616.4 │" in pace and "│ GPU busy                │ 7,849.2 │  2,616.4 │" in pace
    assert pace.count("8 GPU work items in no") == 1 and "the GPU is busy 2.62 ms" in " ".join(pace.split())
