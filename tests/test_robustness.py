"""What a user does at the keyboard ends in one clear line and the right exit code, and loses nothing.

Each test drives the real entry point as a subprocess, as a user meets it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, run_script, stderr_lines

from profiling_in_pytorch.device import available_host_memory
from trace_report.tests.support import as_from_a_terminal

TRACE = FIXTURES / "h200" / "mlp_eager.json.gz"
TRACE_REPORT = [sys.executable, "-m", "trace_report.report"]


def one_line(result, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    lines = stderr_lines(result)
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- Ctrl-C ------------------------------------------------------------------------------------------------------


def interrupt(args: list[str], *, after: str | None, delay: float, cwd: Path) -> subprocess.CompletedProcess:
    """Start a lesson, wait for a line on stdout starting with `after` (or just `delay` s), then press Ctrl-C."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=as_from_a_terminal)
    if after is not None:
        for line in proc.stdout:
            if line.startswith(after):
                break
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_while_torch_loads_is_one_line_and_130(tmp_path):
    # A torch that takes a minute to import, first on the path: the interrupt lands inside the lesson's imports,
    # after `trace_report.errors` (its first import) and before anything else.
    slow = tmp_path / "slow_torch" / "torch"
    slow.mkdir(parents=True)
    loading = tmp_path / "torch_is_loading"  # written when the import reaches torch: not before, on a busy machine
    (slow / "__init__.py").write_text(f"import pathlib, time\npathlib.Path({str(loading)!r}).touch()\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(slow.parent), str(ROOT)]), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "02_linear.py"), "--trace_dir", str(tmp_path / "traces")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 50
    while not loading.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loading.exists(), "the lesson never reached `import torch`"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (130, "", "interrupted\n")
    assert not (tmp_path / "traces").exists()


@pytest.mark.parametrize("after,delay", [("profiling", 0.2), ("note:", 0.0)])
def test_ctrl_c_in_a_lesson_is_one_line_and_130_and_leaves_no_file(tmp_path, after, delay):
    # A size whose CPU matmuls take a while, so that the interrupt lands inside the profiled steps.
    args = [str(ROOT / "01_matmul_add.py"), "--size", "2500", "--trace_dir", str(tmp_path)]
    result = interrupt(args, after=after, delay=delay, cwd=tmp_path)
    assert one_line(result, 130) == "interrupted"
    assert files_under(tmp_path) == []  # no trace, no table, no temporary file


# --- sizes the machine cannot hold -------------------------------------------------------------------------------


@pytest.mark.parametrize("script,args", [
    ("01_matmul_add.py", ["--size", "10000000"]),
    ("01_matmul_add.py", ["--size", "99999999999999999999"]),
    ("03_simple_mlp.py", ["--hidden", "100000000"]),
    ("benchmark_mlp.py", ["--shapes", "100000x100000:768:3072", "--variants", "eager"]),
])
def test_sizes_too_large_for_this_machine_are_one_line_before_allocating(script, args, tmp_path):
    out = ["--out", str(tmp_path)] if script == "benchmark_mlp.py" else ["--trace_dir", str(tmp_path)]
    line = one_line(run_script(script, *args, *out, "--device", "cpu"), 2)
    assert " need " in line and "available" in line and "try smaller sizes" in line, line


# A process can be held to less memory than the machine has free (a `ulimit -v`, a container's limit): the size check
# passes, and an allocation fails after it. Each run below is held to what importing torch and the package takes,
# plus 0.5 GB, and asks for sizes that fit the machine (4-7 GB) but allocate more than 0.5 GB before profiling ends.
HELD_RUNS = {
    "01_matmul_add.py": ["--size", "14000"],  # x, w, b: 784 MB each, at torch.randn
    "03_simple_mlp.py": ["--batch", "32", "--seq", "1024", "--dim", "64", "--hidden", "8192"],  # 1.1 GB in the forward
    "benchmark_mlp.py": ["--shapes", "16x1024:64:8192", "--variants", "eager"],  # the fp32 check's 537 MB tensors
}


@pytest.fixture(scope="module")
def imported_address_space() -> int:
    """The address space a process takes once it has imported torch and the package (VmPeak, bytes)."""
    code = ("import torch, profiling_in_pytorch.lesson, profiling_in_pytorch.bench.measure\n"
            "print(open('/proc/self/status').read())")
    status = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return int(re.search(r"VmPeak:\s+(\d+) kB", status).group(1)) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("script", sorted(HELD_RUNS))
def test_memory_a_process_is_held_below_is_one_line_and_exit_1(script, tmp_path, imported_address_space):
    if (available_host_memory() or 0) < 8e9:
        pytest.skip("the sizes must pass the machine's check: needs 8 GB available")
    limit = imported_address_space + 500_000_000

    def hold():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    out = ["--out", str(tmp_path)] if script == "benchmark_mlp.py" else ["--trace_dir", str(tmp_path)]
    result = subprocess.run([sys.executable, str(ROOT / script), *HELD_RUNS[script], *out, "--device", "cpu"], cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=300,
                            preexec_fn=hold)
    line = one_line(result, 1)
    # whichever allocation fails first (the benchmark's ceilings' GEMM, its fp32 check, a lesson's tensors)
    assert re.search(r"error: out of memory allocating .+ \([\d.]+ [MG]B in all\): [\d.]+ [MG]B more could not "
                     r"be had; try smaller sizes \(.*ulimit -v", line), line
    assert files_under(tmp_path) == []  # no trace, no table, no results, no temporary file


def test_a_gpu_out_of_memory_is_one_line_naming_the_sizes_and_exit_1():
    """What torch raises when a GPU's memory runs out (its own message), through the wrapper every command has."""
    code = (
        "import torch\n"
        "from trace_report.errors import exits_cleanly\n"
        "from profiling_in_pytorch.device import require_fit\n"
        "@exits_cleanly\n"
        "def main():\n"
        "    require_fit(torch.device('cpu'), 1000, 'the weights')\n"
        "    raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total '\n"
        "        'capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has '\n"
        "        '78.12 GiB memory in use. Of the allocated memory 77.50 GiB is allocated by PyTorch.')\n"
        "main()\n"
    )
    line = one_line(run_script("-c", code), 1)
    assert line == ("-c: error: out of memory allocating the weights (1,000 bytes in all): 20.00 GiB more could not be "
                    "had on the GPU (1.06 GiB free); try smaller sizes (other processes may hold the GPU's memory: "
                    "nvidia-smi lists them)"), line


@pytest.mark.parametrize("text", ["٨", "1_000", "1e8", "8.0"])
def test_sizes_take_ascii_digits_only(text, tmp_path):
    line = one_line(run_script("02_linear.py", "--batch", text, "--trace_dir", str(tmp_path)), 2)
    assert "digits 0-9" in line, line


# --- the trace's own file, checked before any profiling ----------------------------------------------------------


def test_a_folder_where_the_trace_goes_is_one_line(tmp_path):
    (tmp_path / "02_linear" / "4_32_64_eager_fp32_cpu.json").mkdir(parents=True)
    line = one_line(run_script("02_linear.py", "--batch", "4", "--device", "cpu", "--trace_dir", str(tmp_path)), 2)
    assert "a folder is there" in line, line
    assert not (tmp_path / "02_linear" / "4_32_64_eager_fp32_cpu.txt").exists()


def test_a_trace_path_too_long_for_the_file_system_is_one_line(tmp_path):
    deep = tmp_path
    while len(str(deep)) < os.pathconf(tmp_path, "PC_PATH_MAX") - 60:
        deep = deep / ("d" * min(200, os.pathconf(tmp_path, "PC_NAME_MAX")))
    line = one_line(run_script("02_linear.py", "--batch", "4", "--device", "cpu", "--trace_dir", str(deep)), 2)
    assert "too long" in line, line


def folder_of_length(base: Path, length: int) -> Path:
    """A folder path of exactly `length` characters below `base`, in names of at most 200 (created by the run)."""
    folder = str(base)
    while len(folder) < length:
        folder += "/" + "d" * min(200, length - len(folder) - 1)
    return Path(folder)


# Where each command writes, and the first file it writes there.
WRITERS = {
    "02_linear.py": ("--trace_dir", "02_linear/4_32_64_eager_fp32_cpu.json", ["--batch", "4"]),
    "benchmark_mlp.py": ("--out", "mlp_cpu_fp32.json", ["--shapes", "2x3:8:16", "--variants", "eager"]),
}


@pytest.mark.parametrize("script", sorted(WRITERS))
def test_a_folder_that_fits_the_path_limit_for_a_file_that_does_not_is_one_line(script, tmp_path):
    # The folder (with the test file we create in it) fits the system's path limit; the file's path does not.
    flag, file, args = WRITERS[script]
    path_max = os.pathconf(tmp_path, "PC_PATH_MAX")  # with the terminating NUL byte
    folder_part = os.path.dirname(file)
    room = path_max - 1 - len("/.probe-xxxxxxxx") - (len(folder_part) + 1 if folder_part else 0)
    folder = folder_of_length(tmp_path, room)
    assert len(f"{folder}/{file}") > path_max - 1
    line = one_line(run_script(script, *args, flag, str(folder), "--device", "cpu"), 2)
    assert "its path is too long for this file system" in line and f"at most {path_max - 1:,}" in line, line
    assert len(line) < 400, line  # the path is shown by its two ends
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("script", sorted(WRITERS))
def test_a_name_longer_than_the_file_system_takes_is_one_line(script, tmp_path):
    flag, _, args = WRITERS[script]
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    line = one_line(run_script(script, *args, flag, str(tmp_path / ("n" * (name_max + 1))), "--device", "cpu"), 2)
    assert f"a name in it is too long for this file system ({name_max + 1} bytes; at most {name_max})" in line, line
    assert files_under(tmp_path) == []


def test_compile_on_a_cpu_without_a_cpp_compiler_is_one_line(tmp_path):
    result = run_script("02_linear.py", "--batch", "4", "--compile", "--device", "cpu", "--trace_dir", str(tmp_path),
                        env={"CXX": "no-such-c++-compiler"})
    line = one_line(result, 2)
    assert "no-such-c++-compiler" in line and "drop --compile" in line, line


# --- the terminal ------------------------------------------------------------------------------------------------

ASCII_TERMINAL = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}


def test_a_terminal_that_cannot_show_our_symbols_gets_ascii(tmp_path):
    report = subprocess.run([*TRACE_REPORT, str(TRACE)], cwd=ROOT, env={**os.environ, **ASCII_TERMINAL},
                            capture_output=True)
    assert report.returncode == 0 and b"Traceback" not in report.stderr, report.stderr[-2000:]
    report.stdout.decode("ascii")  # every byte ASCII
    assert b" us " in report.stdout and b"verdict: compute-bound" in report.stdout

    lesson = run_script("02_linear.py", "--batch", "4", "--device", "cpu", "--trace_dir", str(tmp_path), env=ASCII_TERMINAL)
    assert lesson.returncode == 0 and "Traceback" not in lesson.stderr, lesson.stderr[-2000:]
    assert "  ok P2-01 - " in lesson.stdout and "✓" not in lesson.stdout, lesson.stdout[-3000:]


def test_an_ascii_terminals_tables_keep_their_width():
    """rich lays a table out for "…" and "µ", one column each: their ASCII keeps one column inside a table (a V100
    report's kernel rows, "<...>" for "<…>", ran 2-4 characters past an 80-column terminal)."""
    v100 = ROOT / "trace_report" / "tests" / "fixtures" / "world" / "v100_resnet50_2021_step6.json.gz"
    report = subprocess.run([*TRACE_REPORT, str(v100), "--kernels"], cwd=ROOT, capture_output=True,
                            env={**os.environ, **ASCII_TERMINAL, "COLUMNS": "80"})
    assert report.returncode == 0, report.stderr[-2000:]
    lines = report.stdout.decode("ascii").splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert any(line.startswith("|") and "<~>" in line for line in lines)  # a kernel's template, shortened
    assert any(line.startswith("...") for line in lines)  # prose keeps its readable spelling


def test_a_reader_that_leaves_is_a_normal_end():
    for extra in ([], ["--json"]):
        proc = subprocess.Popen([*TRACE_REPORT, str(TRACE), *extra, "--steps", "all"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.readline()
        proc.stdout.close()  # `| head -1`
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0 and err == b"", (extra, err)


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_output_to_a_full_device_is_one_line_and_exit_1(extra):
    with open("/dev/full", "w") as full:
        result = subprocess.run([*TRACE_REPORT, str(TRACE), *extra], cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True)
    assert one_line(result, 1).endswith("No space left on device")


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_a_closed_stdout_is_one_line_and_exit_1(extra):
    # `trace-report t.json >&-` run directly. Under `uv run` the command gets /dev/null in place of a closed
    # stdout (uv reopens it before starting it), which no program can tell from `> /dev/null`: exit 0 there.
    result = subprocess.run([*TRACE_REPORT, str(TRACE), *extra], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, pass_fds=(), preexec_fn=lambda: os.close(1))
    assert "standard output is closed" in one_line(result, 1)


# --- trace-report on JSON that is not a trace --------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_an_execution_trace_is_named_and_sent_to_its_profiler_trace(tmp_path):
    # ExecutionTraceObserver's JSON (HTA's tests hold one beside its Kineto trace): a graph of ops, no traceEvents
    et = write(tmp_path / "et.json", json.dumps({"schema": "1.0.1", "pid": 7, "time": "x", "nodes": [{"id": 1}]}))
    line = one_line(run_script("-m", "trace_report.report", str(et)), 2)
    assert "a PyTorch execution trace (its 'nodes', schema 1.0.1)" in line and "torch.profiler trace" in line, line


def test_a_rocprofv3_json_is_named(tmp_path):
    rocprof = write(tmp_path / "results.json", json.dumps({"rocprofiler-sdk-tool": [{"metadata": {"pid": 908}}]}))
    line = one_line(run_script("-m", "trace_report.report", str(rocprof)), 2)
    assert "a rocprofv3 JSON (rocprofiler-sdk-tool)" in line, line


def test_json_whose_fields_are_not_a_profilers_is_one_line(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "pid": [1], "tid": {"a": 1},
               "args": {"correlation": [1]}}]
    bad = write(tmp_path / "types.json", json.dumps({"traceEvents": events, "deviceProperties": 5}))
    assert "not a well-formed torch.profiler trace" in one_line(run_script("-m", "trace_report.report", str(bad)), 2)
    deep = write(tmp_path / "deep.json", '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    assert "nested too deeply" in one_line(run_script("-m", "trace_report.report", str(deep)), 2)


def test_non_finite_times_are_skipped_and_json_output_stays_json(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": NaN, "pid": 1, "tid": 1},'
            ' {"ph": "X", "cat": "cpu_op", "name": "b", "ts": 2, "dur": 1, "pid": 1, "tid": 1},'
            ' {"ph": "X", "cat": "kernel", "name": "k", "ts": Infinity, "dur": 1, "pid": 0, "tid": 7}]}')
    trace = write(tmp_path / "nan.json", text)
    result = run_script("-m", "trace_report.report", str(trace), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))
    note = "skipped 2 events trace-report cannot read: 1 with a dur that is not a finite number, 1 with a ts that is not a finite number"
    assert stderr_lines(result) == [f"note: {trace}: {note}"] and report["notes"][-1] == note
