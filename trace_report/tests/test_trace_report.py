"""`trace-report` as a user runs it: a subprocess, its stdout, its stderr and its exit code."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from trace_report.tests.support import H200_COMPILED as COMPILED
from trace_report.tests.support import H200_EAGER as EAGER
from trace_report.tests.support import H200_LINEAR as LINEAR
from trace_report.tests.support import H200_SDPA_MATH as SDPA_MATH
from trace_report.tests.support import FIXTURES, load_trace, run_report

from trace_report import read_trace
from trace_report.compare import TraceDiff
from trace_report.kernels import decode
from trace_report.report import main


def trace_report(*args: str | Path, columns: int | None = None) -> subprocess.CompletedProcess:
    """`python -m trace_report.report ARGS` from the repo root, as a user runs it (in a terminal this wide)."""
    env = {"COLUMNS": str(columns)} if columns else None
    return run_report(*map(str, args), env=env, timeout=60)


def test_report_on_the_eager_mlp():
    run = trace_report(EAGER)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "NVIDIA H200" in out
    assert out.count("5 kernels (3 GEMMs)") == 1  # the first step's table; the two after it ran the same work:
    assert out.count("the same 7 GPU work items as ProfilerStep#2") == 2  # a line each
    assert trace_report(EAGER, "--steps", "all").stdout.count("5 kernels (3 GEMMs)") == 3  # asked for: whole
    assert "vectorized_elementwise_kernel<gelu>" in out and "aten::gelu" in out
    assert "launched nothing (0 µs on the GPU): aten::t ×3" in out
    assert "cuLaunchKernelEx ×3" in out
    assert "avg CUDA" in out and "tile 256x128" in out
    assert "verdict: compute-bound" in out
    assert "Gelu" not in out  # the 300-character ATen name stays out of the table by default


def test_report_shows_the_flush_and_the_numbers_behind_the_verdict():
    run = trace_report(EAGER, "--steps", "0", columns=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "outside the steps: cudaDeviceSynchronize ×1 (269.3 µs)" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert "783.7" in rows["Self CPU time total"] and "269.3" in rows["closing synchronize"]
    assert "514.4" in rows["CPU issuing work"] and "171.5" in rows["CPU issuing work"]
    assert "733.2" in rows["Self CUDA time total"] and "244.4" in rows["GPU busy"]
    assert "6.2" in rows["GPU waiting on launches"] and "262.9" in rows["GPU behind CPU, at most"]
    assert "verdict: compute-bound" in out and "would say overhead-bound" in out


def test_full_names_on_request():
    run = trace_report(EAGER, "--full_names", "--steps", "1")
    assert run.returncode == 0, run.stderr
    assert "GeluCUDAKernelImpl" in run.stdout


def test_report_on_the_linear_says_overhead_bound_and_shows_the_bias_epilogue():
    run = trace_report(LINEAR)
    assert run.returncode == 0, run.stderr
    assert "nvjet_sm90_tst_64x8_64x16_1x2_h_bz_bias_TNT" in run.stdout
    assert "bias in the epilogue" in run.stdout and "aten::addmm" in run.stdout
    assert "verdict: overhead-bound" in run.stdout
    waiting = next(line for line in run.stdout.splitlines() if "GPU waiting on launches" in line)
    assert "313.7" in waiting and "97%" in waiting


def test_diff_of_eager_and_compiled():
    run = trace_report(EAGER, COMPILED, columns=200)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100  # a short diff, in 100 columns on any terminal
    ops = table_rows(lines, "By op")
    fused = next(row for row in ops if row[0] == "triton_poi_fused__unsafe_view_gelu_mul_0")
    assert fused[1] == "fuses A's gelu, mul"
    assert sorted(row[0] for row in ops if row[0].startswith("aten::mm")) == ["aten::mm #1", "aten::mm #2", "aten::mm #3"]
    kernels = table_rows(lines, "Kernels by short name")
    assert [row[1] for row in kernels if row[0] == "only in A"] == ["vectorized_elementwise_kernel<gelu>",
                                                                    "vectorized_elementwise_kernel<mul>"]
    assert [row[1] for row in kernels if row[0] == "only in B"] == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert "Kernels by short name: 2 in both, 2 only in A, 1 only in B" in run.stdout
    assert "step time A:" in run.stdout and "step time B:" in run.stdout


def test_json_of_a_diff():
    run = trace_report(EAGER, COMPILED, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [t["trace"] for t in report["traces"]] == ["mlp_eager.json.gz", "mlp_compile.json.gz"]
    diff = report["diff"]
    assert [k["name"] for k in diff["only_in_second"]] == ["triton_poi_fused__unsafe_view_gelu_mul_0"]
    assert len(diff["in_both"]) == 2
    assert {"by_op", "by_kind", "ops_only_in_first", "ops_only_in_second", "new_work_in_matched_ops"} <= set(diff)
    assert diff["vendors"] == ["NVIDIA", "NVIDIA"]


def test_json_of_one_trace():
    run = trace_report(EAGER, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [s["name"] for s in report["steps"]] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    gpu = report["steps"][0]["gpu"]
    assert {"kind", "name", "launched_by", "dur_us"} <= set(gpu[0])
    kernels = [g for g in gpu if g["kind"] == "kernel"]
    assert len(kernels) == 5 and [g["kind"] for g in gpu].count("memset") == 2
    assert {g["launched_by"] for g in kernels} == {"aten::mm", "aten::gelu", "aten::mul"}
    assert all(g["dur_us"] > 0 for g in gpu)
    assert report["verdict"]["kind"] == "compute-bound"
    assert report["self_cpu_total_us"] == pytest.approx(783.679) and report["self_gpu_total_us"] == pytest.approx(733.217)
    assert report["closing_sync"]["dur_us"] == pytest.approx(269.302)
    verdict = report["verdict"]
    assert verdict["table_totals_say"] == "overhead-bound" and verdict["closing_sync_us"] == pytest.approx(269.302)
    assert verdict["cpu_us_per_step"] == pytest.approx(171.459) and verdict["launch_waits"] == 1


def test_each_step_shows_the_kernels_its_cpu_launched():
    # The warmup step's kernels that run inside the recorded steps (their launches unrecorded) are no step's.
    run = trace_report(SDPA_MATH, "--steps", "all")
    assert run.returncode == 0, run.stderr
    titles = [line for line in run.stdout.splitlines() if line.startswith("ProfilerStep#")]
    assert len(titles) == 3 and all("· 20 kernels" in title for title in titles), titles
    rows = [line for line in run.stdout.split("outside the steps")[0].splitlines() if line.startswith("│")]
    assert len(rows) > 60 and not any(row.split("│")[4].strip() == "-" for row in rows)  # launched by: every one known
    assert "8 GPU work items from outside the steps" in run.stdout
    report = json.loads(trace_report(SDPA_MATH, "--json").stdout)
    assert [s["kernels"] for s in report["steps"]] == [20, 20, 20]
    assert all(g["launched_by"] for s in report["steps"] for g in s["gpu"])
    assert len(report["outside_steps"]["gpu"]) == 8
    assert sum(k["count"] for k in report["kernels"] if k["kind"] == "kernel") == 3 * 20



def test_a_trace_without_profiler_steps_says_so(tmp_path):
    with gzip.open(EAGER, "rt") as f:
        data = json.load(f)
    data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    path = tmp_path / "no_steps.json"
    path.write_text(json.dumps(data))
    run = trace_report(path)
    assert run.returncode == 0, run.stderr
    assert "no ProfilerStep events: the whole trace is read as one step" in run.stdout
    assert "15 kernels" in run.stdout


def with_unreadable_events(tmp_path: Path) -> Path:
    """The eager MLP's trace plus six events trace-report cannot use, each a copy of a real one with one field
    broken: a pid that is a list or an object, args that are a string, a ts that is text, an ac2g arrow with a
    list for its pid, a kernel whose correlation is a list."""
    with gzip.open(EAGER, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"]
    op = next(e for e in events if e.get("cat") == "cpu_op")
    kernel = next(e for e in events if e.get("cat") == "kernel")
    arrow = next(e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g")
    events += [
        dict(op, pid=[op["pid"]]),
        dict(op, pid={"id": op["pid"]}),
        dict(op, args="Input Dims: [8192, 768]"),
        dict(op, ts=str(op["ts"])),
        dict(arrow, pid=[arrow["pid"]]),
        dict(kernel, args=dict(kernel["args"], correlation=[kernel["args"]["correlation"]])),
    ]
    path = tmp_path / "unreadable.json"
    path.write_text(json.dumps(data))
    return path


def test_events_it_cannot_read_are_skipped_with_one_note(tmp_path):
    path = with_unreadable_events(tmp_path)
    run = trace_report(path)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == [
        f"note: {path}: skipped 6 events trace-report cannot read: 3 with a pid that is not a number or string, "
        "1 with args that are not an object, 1 with a ts that is not a finite number, "
        "1 with a correlation that is not a number or string"
    ]
    clean = trace_report(EAGER)
    assert run.stdout.replace(path.name, EAGER.name) == clean.stdout  # what it read is the trace without them


def test_with_json_the_note_goes_into_the_json_too(tmp_path):
    path = with_unreadable_events(tmp_path)
    run = trace_report(path, "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["skipped_events"] == {
        "a pid that is not a number or string": 3,
        "args that are not an object": 1,
        "a ts that is not a finite number": 1,
        "a correlation that is not a number or string": 1,
    }
    assert report["notes"] == [run.stderr.strip().removeprefix(f"note: {path}: ")]
    assert json.loads(trace_report(EAGER, "--json").stdout)["skipped_events"] == {}


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda tmp: tmp / "missing.json", id="missing"),
        pytest.param(lambda tmp: _write(tmp, "empty.json", b""), id="empty"),
        pytest.param(lambda tmp: _write(tmp, "cut.json", gzip.decompress(EAGER.read_bytes())[:20000]), id="cut-json"),
        pytest.param(lambda tmp: _write(tmp, "cut.json.gz", EAGER.read_bytes()[:2000]), id="cut-gzip"),
        pytest.param(lambda tmp: _write(tmp, "other.json", b'{"name": "not a trace"}'), id="non-trace-json"),
        pytest.param(lambda tmp: tmp, id="folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, make):
    run = trace_report(make(tmp_path))
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "Traceback" not in run.stderr


def test_bad_flags_are_one_line_and_exit_2():
    for args in (["--steps", "many", EAGER], ["--rows", "-1", EAGER], [], [EAGER, COMPILED, LINEAR]):
        run = trace_report(*args)
        assert run.returncode == 2, args
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_main_in_process_returns_0(capsys):
    assert main([str(LINEAR), "--steps", "0"]) == 0
    assert "verdict: overhead-bound" in capsys.readouterr().out


def test_main_in_process_exits_2_on_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "missing.json")])
    assert exit_.value.code == 2
    assert "no such file" in capsys.readouterr().err


# --- the diff by op: two traces paired by launching op and place, not by kernel name ----------------------------

H200_ATTENTION = FIXTURES / "h200" / "traces" / "04_a_naive_attention" / "8_16_1024_64_eager.json.gz"
H100_ATTENTION = FIXTURES / "h100" / "traces" / "04_a_naive_attention" / "8_16_1024_64_shapes_eager.json.gz"
LLAMA_EAGER = FIXTURES / "h100" / "traces" / "profile_model" / "tiny-llama_4_256_shapes_eager.json.gz"
LLAMA_COMPILED = FIXTURES / "h100" / "traces" / "profile_model" / "tiny-llama_4_256_shapes_compile.json.gz"

# The naive attention's kernels as ROCm names them on an MI300X: hipBLASLt's Tensile GEMMs for cuBLAS's nvjet ones,
# ATen's templates with other arguments (vector width, block size, a 64-wide wavefront), the runtime's hip calls.
AMD_GEMMS = {
    "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT":
        "Cijk_Alik_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB1_AFC1_AFEM1_GRVW8_ISA942_TT4_64_WG32_8_1",
    "nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT":
        "Cijk_Ailk_Bljk_BBS_BH_MT64x256x64_MI16x16x16x1_SN_1LDSB0_AFC1_AFEM1_GRVW8_ISA942_TT2_64_WG64_4_1",
}
AMD_TEMPLATES = [("vectorized_elementwise_kernel<8,", "vectorized_elementwise_kernel<4,"),
                 ("elementwise_kernel<128, 4,", "elementwise_kernel<512, 1,"),
                 ("float, 10, false, false>", "float, 11, false, false>")]
AMD_RUNTIME = {"cudaLaunchKernel": "hipLaunchKernel", "cuLaunchKernelEx": "hipExtModuleLaunchKernel",
               "cudaMemsetAsync": "hipMemsetAsync", "cudaMemcpyAsync": "hipMemcpyAsync",
               "cudaDeviceSynchronize": "hipDeviceSynchronize"}
# What the rewritten trace does differently, so that the test knows the answer: the masked fill 2.5x slower, the
# first GEMM twice as fast without cuBLAS's memset, the softmax 1.3x with a second kernel, the clone's copy gone.
SLOWER = {"masked_fill": 2.5, "Cijk_Alik": 0.5, "softmax_warp": 1.3}
EXTRA_KERNEL = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>, "
                "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MaxOps<float>, unsigned int, "
                "float, 4, 4>)")


def amd_copy(source: Path, dest: Path) -> Path:
    """`source` as if it ran on an MI300X (see AMD_GEMMS and SLOWER): its CPU side unchanged, its GPU side renamed and
    retimed (what follows a kernel on its stream moved by the time it gained), its memsets and memcpys dropped, and
    after each softmax kernel a second one from the same op."""
    data = load_trace(source)
    data["deviceProperties"][0].update(name="AMD Instinct MI300X", computeMajor=9, computeMinor=4)
    dropped = {e["args"]["correlation"] for e in data["traceEvents"] if e.get("cat") in ("gpu_memset", "gpu_memcpy")}
    calls = {e["args"]["correlation"]: e for e in data["traceEvents"]
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    correlation = max(calls) + 1000
    events = []
    for event in data["traceEvents"]:
        cat, args = event.get("cat"), event.get("args", {})
        if cat in ("gpu_memset", "gpu_memcpy") or (cat in ("cuda_runtime", "cuda_driver") and args.get("correlation") in dropped):
            continue
        if cat == "ac2g" and event.get("id") in dropped:
            continue
        event["name"] = AMD_RUNTIME.get(event["name"], event["name"])
        if cat == "kernel":
            name = AMD_GEMMS.get(event["name"], event["name"])
            for nvidia, amd in AMD_TEMPLATES:
                name = name.replace(nvidia, amd)
            event["name"] = name
            event["original_dur"] = event["dur"]
            event["dur"] *= next((scale for piece, scale in SLOWER.items() if piece in name), 1.0)
            if "softmax_warp" in name and args["correlation"] in calls:
                correlation += 1
                call = dict(calls[args["correlation"]], args={"correlation": correlation})
                call["ts"] += call["dur"] / 2  # inside the first call, and so inside aten::_softmax
                call["dur"] /= 4
                extra = dict(event, name=EXTRA_KERNEL, ts=event["ts"] + event["original_dur"] + 0.001,
                             dur=event["dur"] * 0.2, original_dur=0.0, args={**args, "correlation": correlation})
                events += [call, extra]
        events.append(event)
    shift: dict[tuple, float] = {}  # per stream: how much later its work starts now
    for event in sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"]):
        stream = (event["pid"], event["tid"])
        start = event["ts"] + shift.get(stream, 0.0)
        shift[stream] = shift.get(stream, 0.0) + event["dur"] - event.pop("original_dur", event["dur"])
        event["ts"] = start
    data["traceEvents"] = events
    dest.write_text(json.dumps(data))
    return dest


def us_by_op(path: Path) -> dict[str, float]:
    """GPU µs per step by launching op, as the reader links them (no matching of two traces involved)."""
    trace = read_trace(path)
    totals: dict[str, float] = {}
    for work in trace.gpu_work():
        totals[work.launched_by] = totals.get(work.launched_by, 0.0) + work.dur / len(trace.steps)
    return totals


def table_rows(lines: list[str], title: str) -> list[list[str]]:
    """The cells of the table under the line that starts with `title` (the diff's tables have no outer frame)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows, seen = [], False
    for line in lines[start + 1 :]:
        if "┃" in line or "━" in line:
            seen = True
            continue
        if not seen or "│" not in line:
            if seen:
                break
            continue
        rows.append([cell.strip() for cell in line.split("│")])
    return rows


@pytest.fixture(scope="module")
def cross_vendor(tmp_path_factory) -> tuple[Path, Path]:
    return H200_ATTENTION, amd_copy(H200_ATTENTION, tmp_path_factory.mktemp("amd") / "attention_mi300x.json")


def test_across_vendors_ops_are_matched_where_no_kernel_name_is(cross_vendor):
    a, b = cross_vendor
    diff = json.loads(trace_report(a, b, "--json").stdout)["diff"]
    assert diff["vendors"] == ["NVIDIA", "AMD"]
    # By name alone, every GEMM is in one trace only; ATen's templates with other arguments are one short name.
    assert {g["name"] for g in diff["only_in_first"]} == set(AMD_GEMMS)
    assert {g["name"] for g in diff["only_in_second"]} == set(AMD_GEMMS.values()) | {EXTRA_KERNEL}
    mul = next(g for g in diff["in_both"] if g["short_name"] == "vectorized_elementwise_kernel<mul>")
    assert len(mul["names"]) == 2 and "<8," in mul["names"][0] and "<4," in mul["names"][1]
    # By op, every op but the clone's copy is paired by its place, and the times are each trace's own.
    before, after = us_by_op(a), us_by_op(b)
    rows = diff["by_op"]
    assert {(r["op"], r["matched_by"]) for r in rows} == {
        ("aten::bmm", "path"), ("aten::mul", "path"), ("aten::copy_", "only_in_first"), ("aten::masked_fill_", "path"),
        ("aten::_softmax", "path")}
    assert len(rows) == 6 and [r["index"] for r in rows if r["op"] == "aten::bmm"] in ([0, 1], [1, 0])
    for row in rows:
        name = row["op"]
        if name != "aten::bmm":
            assert row["first"]["us_per_step"] == pytest.approx(before[name], abs=1e-3)
            assert (row["second"] or {"us_per_step": 0.0})["us_per_step"] == pytest.approx(after.get(name, 0.0), abs=1e-3)
    assert sum(r["first"]["us_per_step"] for r in rows if r["op"] == "aten::bmm") == pytest.approx(before["aten::bmm"], abs=1e-3)
    assert sum(r["second"]["us_per_step"] for r in rows if r["op"] == "aten::bmm") == pytest.approx(after["aten::bmm"], abs=1e-3)
    # The op that got slower comes first, at the rate the rewrite slowed it.
    assert rows[0]["op"] == "aten::masked_fill_" and rows[0]["ratio"] == pytest.approx(SLOWER["masked_fill"], abs=1e-3)
    assert max(before, key=lambda op: abs(after.get(op, 0.0) - before[op])) == "aten::masked_fill_"
    assert [r["op"] for r in diff["ops_only_in_first"]] == ["aten::copy_"] and diff["ops_only_in_second"] == []


def test_across_vendors_the_new_work_in_an_op_and_the_kinds(cross_vendor):
    a, b = cross_vendor
    diff = json.loads(trace_report(a, b, "--json").stdout)["diff"]
    new = {(w["op"], w["kind"]): w for w in diff["new_work_in_matched_ops"]}
    assert set(new) == {("aten::bmm", "memset"), ("aten::_softmax", "reduction")}
    assert new[("aten::bmm", "memset")]["per_step"] == [1, 0] and new[("aten::bmm", "memset")]["more_in"] == "first"
    softmax = new[("aten::_softmax", "reduction")]
    assert softmax["per_step"] == [1, 2] and softmax["kernels"] == [decode(EXTRA_KERNEL).short]
    # AMD's GEMMs are GEMMs by the op that launched them, where their names say nothing summary reads.
    kinds = {k["kind"]: k for k in diff["by_kind"]}
    a_trace, b_trace = read_trace(a), read_trace(b)
    gemm_us = [sum(w.dur for w in t.gpu_work() if w.launched_by == "aten::bmm" and w.kind == "kernel") / len(t.steps)
               for t in (a_trace, b_trace)]
    assert kinds["GEMM"]["per_step"] == [2, 2] and kinds["GEMM"]["us_per_step"] == pytest.approx(gemm_us, abs=1e-3)
    assert kinds["copy and memset"]["per_step"] == [2, 0]


def test_across_vendors_the_terminal_says_which_op_got_slower(cross_vendor):
    a, b = cross_vendor
    run = trace_report(a, b, columns=200)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100, run.stdout
    first = table_rows(lines, "By op")[0]
    assert first[0] == "aten::masked_fill_" and first[-1] == f"{SLOWER['masked_fill']:.2f}×"
    assert "NVIDIA against AMD" in run.stdout and "only in A │" not in run.stdout  # no list of every kernel twice
    assert any(line.strip().startswith("only in A: aten::copy_: 1 memcpy") for line in lines)
    assert any("in aten::_softmax (attn_fwd > softmax): reduction 1 in A, 2 in B" in line for line in lines)


def test_one_vendor_two_gpus_pair_every_op_by_its_place():
    # The naive attention on an H200 and on an H100: the same kernels, each op slower on the H100 by its own rate.
    diff = json.loads(trace_report(H200_ATTENTION, H100_ATTENTION, "--json").stdout)["diff"]
    assert {r["matched_by"] for r in diff["by_op"]} == {"path"} and len(diff["by_op"]) == 6
    assert diff["only_in_first"] == diff["only_in_second"] == [] and len(diff["in_both"]) == 5
    h200, h100 = us_by_op(H200_ATTENTION), us_by_op(H100_ATTENTION)
    mul = next(r for r in diff["by_op"] if r["op"] == "aten::mul")
    assert mul["ratio"] == pytest.approx(h100["aten::mul"] / h200["aten::mul"], abs=1e-3)
    changes = [abs(r["delta_us"]) for r in diff["by_op"]]
    assert changes == sorted(changes, reverse=True)


def test_a_renamed_label_falls_back_to_op_names_and_order(tmp_path):
    data = load_trace(EAGER)
    for event in data["traceEvents"]:
        if event.get("name") == "mlp_fwd":
            event["name"] = "forward"
    renamed = tmp_path / "renamed.json"
    renamed.write_text(json.dumps(data))
    same = TraceDiff.of(read_trace(EAGER), read_trace(EAGER))
    assert {m.how for m in same.ops} == {"path"} and all(m.ratio == pytest.approx(1.0) for m in same.ops)
    moved = TraceDiff.of(read_trace(EAGER), read_trace(renamed))
    assert {m.how for m in moved.ops} == {"order"} and len(moved.ops) == len(same.ops)
    assert all(m.first[0].name == m.second[0].name and m.ratio == pytest.approx(1.0) for m in moved.ops)
    assert not moved.new_work


def test_a_compiled_model_s_fused_kernels_take_the_ops_they_name():
    diff = json.loads(trace_report(EAGER, COMPILED, "--json").stdout)["diff"]
    fused = [r for r in diff["by_op"] if r["matched_by"] == "fused"]
    assert len(fused) == 1 and fused[0]["op"] == "triton_poi_fused__unsafe_view_gelu_mul_0"
    assert [op["name"] for op in fused[0]["first"]["ops"]] == ["aten::gelu", "aten::mul"]
    eager, compiled = us_by_op(EAGER), us_by_op(COMPILED)
    assert fused[0]["first"]["us_per_step"] == pytest.approx(eager["aten::gelu"] + eager["aten::mul"], abs=1e-3)
    assert fused[0]["second"]["us_per_step"] == pytest.approx(compiled["triton_poi_fused__unsafe_view_gelu_mul_0"], abs=1e-3)
    # The GEMMs run under `Torch-Compiled Region` in B: paired by name and order, each with its own time.
    assert [r["matched_by"] for r in diff["by_op"] if r["op"] == "aten::mm"] == ["order"] * 3
    assert diff["ops_only_in_first"] == diff["ops_only_in_second"] == []


def test_a_model_s_diff_is_short_by_default_and_whole_with_rows_0():
    short = trace_report(LLAMA_EAGER, LLAMA_COMPILED)
    assert short.returncode == 0, short.stderr
    every = trace_report(LLAMA_EAGER, LLAMA_COMPILED, "--rows", "0")
    ops = len(json.loads(trace_report(LLAMA_EAGER, LLAMA_COMPILED, "--json").stdout)["diff"]["by_op"])
    shown = table_rows(short.stdout.splitlines(), "By op")
    assert len(shown) < ops and f"… {ops - len(shown)} more ops" in short.stdout
    assert len(table_rows(every.stdout.splitlines(), "By op")) == ops
    assert len(short.stdout.splitlines()) <= 45 and max(map(len, every.stdout.splitlines())) <= 100


def test_each_cuda_graph_replay_takes_one_forward_s_ops():
    # 07_decode_mlp: 16 forwards a step, eager against one captured graph replayed 16 times (its input copied first).
    folder = FIXTURES / "h200" / "traces" / "07_decode_mlp"
    eager = read_trace(folder / "8_1_768_3072_16fwd_eager.json.gz")
    graphed = read_trace(folder / "8_1_768_3072_16fwd_graph_eager.json.gz")
    d = TraceDiff.of(eager, graphed)
    replays = [m for m in d.ops if m.how == "fused"]
    assert len(replays) == 16 and all(m.op.name == "cudaGraphLaunch" for m in replays)
    per_forward = sum(len(s.gpu) for s in eager.steps) / len(eager.steps) / 16
    assert all(m.first_items == pytest.approx(per_forward) == m.second_items for m in replays)
    assert sum(m.first_us for m in replays) == pytest.approx(sum(s.gpu_time_us for s in eager.steps) / len(eager.steps))
    assert not d.only_in("only_in_first")
    assert {(m.op.name, m.op.where) for m in d.only_in("only_in_second")} == {("aten::copy_", ("decode_mlp",))}
