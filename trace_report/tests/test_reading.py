"""Reading traces fast and lean: msgspec's records read what the standard library's dicts read, the odd chunk falls
back to json.loads, and the reader still works without msgspec installed."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trace_report import source
from trace_report.export import trace_to_dict
from trace_report.reader import read_trace
from trace_report.tests.support import FIXTURES, PACKAGE_PARENT

# A shapes trace (raw dims and types), one with stacks (python_function), a memory profile, collectives with their
# args on the kernels, a 2021 trace (steps among the ops) and one whose kernels carry no correlation (flows only).
SAMPLES = [
    FIXTURES / "h100/traces/profile_model/tiny-llama_4_256_train_shapes_eager.json.gz",
    FIXTURES / "cpu/tiny-llama_with_stack_train.json.gz",
    FIXTURES / "h100/memory/64_128_768_3072_L2_adamw_eager.json.gz",
    FIXTURES / "h100x2/64_128_768_3072_tp2_overlap4_eager_rank0.json.gz",
    FIXTURES / "world/v100_resnet50_2021_step6.json.gz",
    FIXTURES / "world/amd_nodeviceprops_hipblaslt_gemm.json.gz",
    FIXTURES / "world/h200_mamba_shapes_suite.json.gz",
]


def read_as_dicts(path: Path, monkeypatch) -> dict:
    """The trace read with every chunk through json.loads and record_of, as without msgspec."""
    with monkeypatch.context() as patch:
        patch.setattr(source.RECORDS, "decoder", None)
        return trace_to_dict(read_trace(path))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_records_read_what_dicts_read(path, monkeypatch):
    assert source.msgspec is not None, "msgspec is a dependency of trace-report"
    assert trace_to_dict(read_trace(path)) == read_as_dicts(path, monkeypatch)


def test_each_chunk_is_decoded_at_once_even_with_braces_in_kernel_names(tmp_path, monkeypatch):
    # Kernel names hold braces ({lambda(float)#1}): a chunk ending inside such an event once sent every following
    # event of the chunk through raw_decode one at a time.
    name = "void k<{lambda(float)#1}, {lambda(float)#2}, {lambda()#3}, {lambda()#4}>(int)"
    events = [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10.0 + i, "dur": 0.5,
               "args": {"correlation": i, "grid": [1, 1, 1]}} for i in range(20000)]
    path = tmp_path / "braces.json"
    path.write_text(json.dumps({"traceEvents": events}))
    singles = []
    decode = source.TraceSource._value

    def counted(self):
        singles.append(self.pos)
        return decode(self)

    monkeypatch.setattr(source.TraceSource, "_value", counted)
    trace = read_trace(path)
    assert sum(len(step.gpu) for step in trace.steps) + len(trace.gpu_outside_steps) == 20000
    assert path.stat().st_size > 2 * source.CHUNK_CHARS
    # The event across each chunk's end is parsed with the next chunk's: one value at a time only for the key
    # "traceEvents" and the array's last event.
    assert len(singles) == 2


def test_a_chunk_msgspec_refuses_is_read_by_json_loads(tmp_path):
    # NaN and a number past a float's range: json.loads reads them, msgspec does not; the reader skips such events
    # and says why, with records as it did with dicts.
    good = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "dur": 2.0,
            "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}}
    events = [{**good, "ts": float(i * 10)} for i in range(50)]
    text = json.dumps({"traceEvents": events})
    text = text.replace('"ts": 100.0', '"ts": NaN', 1).replace('"dur": 2.0', '"dur": 1e999', 1)
    path = tmp_path / "odd.json"
    path.write_text(text)
    trace = read_trace(path)
    assert dict(trace.skipped_events) == {"a ts that is not a finite number": 1, "a dur that is not a finite number": 1}
    ops = [op for step in trace.steps for op in step.ops]
    assert len(ops) == 48 and ops[0].input_dims == ((2, 3), (3, 4)) and ops[0].input_types == ("float", "float")


def test_repeated_shapes_share_one_tuple(tmp_path):
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "dur": 1.0,
          "args": {"Input Dims": [[8, 16], [8, 16], []], "Input type": ["float", "float", "Scalar"],
                   "Concrete Inputs": ["", "", "1"]}}
    path = tmp_path / "same.json"
    path.write_text(json.dumps({"traceEvents": [{**op, "ts": float(i * 2)} for i in range(100)]}))
    ops = [o for step in read_trace(path).steps for o in step.ops]
    assert ops[0].input_dims == ((8, 16), (8, 16), ()) and ops[0].input_types == ("float", "float", "Scalar")
    assert len({id(o.input_dims) for o in ops}) == 1 and len({id(o.input_types) for o in ops}) == 1


def test_without_msgspec_the_standard_library_reads_the_same():
    path = SAMPLES[0]
    script = (
        "import sys, json; sys.modules['msgspec'] = None\n"  # import msgspec raises ImportError
        "from trace_report import source; assert source.msgspec is None\n"
        "from trace_report.reader import read_trace; from trace_report.export import trace_to_dict\n"
        f"print(json.dumps(trace_to_dict(read_trace({str(path)!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=PACKAGE_PARENT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(trace_to_dict(read_trace(path))))


# --- several ranks ---------------------------------------------------------------------------------------------

RANKS = [FIXTURES / f"h100x2/64_128_768_3072_tp2_overlap4_eager_rank{r}.json.gz" for r in (0, 1)]


def rank_set(tmp_path: Path, copies: int = 2, bad: int | None = None) -> list[Path]:
    """`copies` ranks of one run, rank r a copy of RANKS[r % 2] (its distributedInfo's rank r); rank `bad` cut short
    halfway."""
    paths = []
    for r in range(copies):
        doc = json.loads(gzip.decompress(RANKS[r % 2].read_bytes()))
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": r}
        data = gzip.compress(json.dumps(doc).encode(), compresslevel=1)
        path = tmp_path / f"run_rank{r}.json.gz"
        path.write_bytes(data[: len(data) // 2] if r == bad else data)
        paths.append(path)
    return paths


def figures(ranks) -> list:
    return [(r.rank, r.figures) for r in ranks]


def test_ranks_read_by_any_executor_match_those_read_here(tmp_path):
    import concurrent.futures

    from trace_report.ranks import read_ranks

    paths = rank_set(tmp_path, 4)
    here = read_ranks(paths, parallel=False)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert figures(read_ranks(paths, executor=pool)) == figures(here)
    assert [r.rank for r in here] == [0, 1, 2, 3]


def _kernel_names(rank) -> list[str]:
    """read_ranks' per_rank in the tests: what only the whole trace holds."""
    return sorted({work.name for step in rank.trace.steps for work in step.gpu})


def _pools_counted(monkeypatch) -> list[int]:
    """The process pools read_ranks starts from here on, by their workers; threads in their place (no fork in a
    test)."""
    import concurrent.futures

    pools: list[int] = []

    class Counted(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers, mp_context=None, initializer=None):
            pools.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Counted)
    return pools


def test_per_rank_makes_more_of_each_trace_where_it_is_read(tmp_path, monkeypatch):
    from trace_report.ranks import read_ranks

    paths = rank_set(tmp_path, 3)
    here = read_ranks(paths, parallel=False, per_rank=_kernel_names)
    assert all(r.extra and r.trace is None for r in here)  # made of the trace, which did not come back
    for parallel in (True, False):
        pools = _pools_counted(monkeypatch)
        apart = read_ranks(paths, jobs=2, parallel=parallel, per_rank=_kernel_names)
        assert pools == ([1] if parallel else [])
        assert [(r.rank, r.extra) for r in apart] == [(r.rank, r.extra) for r in here]


def test_ranks_json_reads_in_workers_and_prints_what_one_process_reads(tmp_path, monkeypatch, capsys):
    from trace_report.report import main

    paths = [str(path) for path in rank_set(tmp_path, 3)]
    assert main(["--ranks", "--json", "--jobs", "1", *paths]) == 0
    alone = capsys.readouterr().out
    pools = _pools_counted(monkeypatch)
    assert main(["--ranks", "--json", "--jobs", "2", *paths]) == 0
    assert pools == [1] and capsys.readouterr().out == alone  # the parsed traces stayed in the workers
    assert [r["rank"] for r in json.loads(alone)["ranks"]] == [0, 1, 2]


def test_ranks_are_read_by_as_many_workers_as_jobs_not_one_process_per_trace(tmp_path, monkeypatch):
    from trace_report import ranks as rank_traces

    pools = _pools_counted(monkeypatch)
    paths = rank_set(tmp_path, 5)
    found = rank_traces.read_ranks(paths, jobs=2)
    assert pools == [1] and [r.rank for r in found] == [0, 1, 2, 3, 4]  # this process and one worker
    assert figures(found) == figures(rank_traces.read_ranks(paths, parallel=False))
    monkeypatch.setattr(rank_traces.os, "cpu_count", lambda: 3)
    rank_traces.read_ranks(paths)
    assert pools == [1, 2]  # by default as many as the cores


def test_a_bad_rank_is_named_and_skip_bad_reads_the_others(tmp_path, capsys):
    from trace_report.errors import UsageError
    from trace_report.ranks import read_ranks

    paths = rank_set(tmp_path, 3, bad=1)
    with pytest.raises(UsageError) as err:
        read_ranks(paths, parallel=False)
    line = str(err.value)
    assert "run_rank1.json.gz" in line and "cut short" in line and "--skip_bad reads the other 2" in line
    assert "\n" not in line
    capsys.readouterr()
    ranks = read_ranks(paths, parallel=False, skip_bad=True)
    assert [r.rank for r in ranks] == [0, 2]
    err = capsys.readouterr().err
    assert "skipped" in err and "run_rank1.json.gz" in err


def test_the_command_line_names_the_bad_rank_and_skips_it_when_asked(tmp_path):
    from trace_report.tests.support import run_report

    paths = [str(p) for p in rank_set(tmp_path, 3, bad=2)]
    run = run_report(*paths, "--jobs", "2", timeout=120)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "run_rank2.json.gz" in lines[0], run.stderr
    run = run_report(*paths, "--jobs", "2", "--skip_bad", timeout=120)
    assert run.returncode == 0, run.stderr
    assert "2 ranks" in run.stdout and "run_rank2.json.gz" in run.stderr and "skipped" in run.stderr


def test_the_ranks_picture_skips_a_bad_rank_when_asked(tmp_path):
    pytest.importorskip("matplotlib")
    from trace_report.tests.support import run_report

    paths = [str(p) for p in rank_set(tmp_path, 3, bad=2)]
    png = tmp_path / "ranks.png"
    run = run_report(*paths, "--png", str(png), timeout=120)
    assert run.returncode == 2 and "run_rank2.json.gz" in run.stderr and not png.exists(), run.stderr
    run = run_report(*paths, "--png", str(png), "--skip_bad", timeout=120)
    assert run.returncode == 0, run.stderr
    assert "2 ranks" in run.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "run_rank2.json.gz" in run.stderr and "skipped" in run.stderr


# --- bad input at any size -------------------------------------------------------------------------------------


@pytest.mark.parametrize("gzipped", [False, True], ids=["json", "gz"])
def test_a_byte_that_is_not_utf8_is_named_with_its_offset(tmp_path, gzipped):
    from trace_report.tests.support import run_report

    events = b",".join(b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": %d, "dur": 1, "pid": 1, "tid": 1}' % i
                       for i in range(30_000))  # past the first chunk the reader decodes
    head = b'{"traceEvents": [' + events + b', {"ph": "X", "name": "ab'
    text = head + b'\xff"}]}'
    path = tmp_path / ("bad.json.gz" if gzipped else "bad.json")
    path.write_bytes(gzip.compress(text) if gzipped else text)
    run = run_report(str(path), timeout=60)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert f"not UTF-8 text, so not a JSON trace: byte 0xff at byte {len(head):,}" in run.stderr


def test_a_trace_cut_anywhere_is_one_line_that_says_where(tmp_path):
    whole = gzip.decompress(SAMPLES[0].read_bytes()).decode()
    assert len(whole) > 2 * source.CHUNK_CHARS  # cuts in the first chunk, the middle ones and the last
    for fraction in (0.0001, 0.25, 0.5, 0.75, 0.9999):
        at = int(len(whole) * fraction)
        path = tmp_path / f"cut_{fraction}.json"
        path.write_text(whole[:at])
        with pytest.raises(source.UsageError) as err:
            read_trace(path)
        line = str(err.value)
        assert "\n" not in line and str(path) in line and "cut short" in line, line
        where = int(re.search(r"character ([\d,]+)$", line)[1].replace(",", ""))
        assert at - 1000 <= where <= at, line  # the value it broke in, near the cut


def test_garbage_in_the_middle_of_a_large_trace_is_one_line_that_says_where(tmp_path):
    text = gzip.decompress(SAMPLES[0].read_bytes()).decode()
    at = text.index('{"ph"', len(text) // 2) if '{"ph"' in text else text.index("{", len(text) // 2)
    path = tmp_path / "garbage.json"
    path.write_text(text[:at] + "{oops" + text[at:])
    with pytest.raises(source.UsageError) as err:
        read_trace(path)
    line = str(err.value)
    assert "\n" not in line and "not valid JSON" in line and f"character {at + 1:,}" in line, line


def test_the_reader_builds_ops_with_their_fields_in_order():
    """The reader makes each CpuOp with positional arguments (keywords cost 0.1 s of a 260k-op read): a field moved
    in model.CpuOp must move there too."""
    import dataclasses

    from trace_report.model import CpuOp

    assert [f.name for f in dataclasses.fields(CpuOp)][:14] == [
        "name", "ts", "dur", "pid", "tid", "is_label", "self_us", "launched", "path", "input_dims", "input_types",
        "modules", "comm_args", "concrete_inputs"]


def test_the_reader_builds_gpu_work_with_its_fields_in_order():
    """GpuWork likewise (keywords cost 0.1 s of a 147 MB trace's read)."""
    import dataclasses

    from trace_report.model import GpuWork

    assert [f.name for f in dataclasses.fields(GpuWork)] == [
        "kind", "name", "ts", "dur", "pid", "tid", "correlation", "launch", "registers", "shared_memory", "grid",
        "block", "occupancy", "comm_args"]


@pytest.mark.parametrize("odd_cat", ["python_function", "cpu_op"])
def test_python_frames_nest_alike_when_a_time_is_past_the_packed_bits(tmp_path, odd_cat):
    # Each box is packed into one int for the sort, the Python frames as they are read; a time past the bits (no
    # profiler's: 1e16 µs) sends the frames, or the other boxes, back to tuples, which must nest the same.
    trace = json.loads(gzip.decompress((FIXTURES / "cpu/tiny-llama_with_stack_train.json.gz").read_bytes()))
    odd = {"ph": "X", "cat": odd_cat, "name": "odd", "pid": 1, "tid": 99, "ts": 1e16, "dur": 0.0, "args": {}}

    def nested(events: list) -> tuple:
        path = tmp_path / "trace.json"
        path.write_text(json.dumps({**trace, "traceEvents": events}))
        read = read_trace(path)
        return read.self_cpu_total_us, [(op.name, op.self_us, op.path, op.modules, op.source, op.launched)
                                        for step in read.steps for op in step.ops]

    plain = nested(trace["traceEvents"])
    without_frames = nested([e for e in trace["traceEvents"] if e.get("cat") != "python_function"])
    assert plain[0] != without_frames[0]  # the frames take part: they nest ops, off the table's total
    assert nested([*trace["traceEvents"], odd]) == plain
