"""A long read shows how far it has got, on a terminal only: the reader and read_ranks tell the bytes read, and
`trace-report` draws a bar on stderr, then a line while the analyses run; both go before the report prints."""

from __future__ import annotations

import gzip
import os
import pty
import subprocess
import sys

from trace_report.console import PROGRESS_BYTES
from trace_report.ranks import read_ranks
from trace_report.reader import read_trace
from trace_report.tests.support import FIXTURES, H200_EAGER, PACKAGE_PARENT, run_report

RANKS = [FIXTURES / "h100x2" / f"64_128_768_3072_tp2_overlap4_eager_rank{r}.json.gz" for r in (0, 1)]


def _told(path_or_paths, read) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    read(path_or_paths, progress=lambda done, total: calls.append((done, total)))
    return calls


def test_the_reader_tells_the_bytes_read_up_to_the_whole_file(tmp_path):
    plain = tmp_path / "eager.json"
    plain.write_bytes(gzip.decompress(H200_EAGER.read_bytes()))
    for path in (H200_EAGER, plain):  # a .json.gz counts its own bytes, not the JSON's
        calls = _told(path, read_trace)
        size = path.stat().st_size
        assert calls and all(total == size for _, total in calls), calls
        done = [d for d, _ in calls]
        assert done == sorted(done) and done[-1] == size and done[0] > 0


def test_read_ranks_tells_the_bytes_of_the_traces_read(tmp_path):
    sizes = [path.stat().st_size for path in RANKS]
    for parallel in (False, True):  # one after the other, and in the pool of processes
        calls = _told(RANKS, lambda paths, progress: read_ranks(paths, parallel=parallel, jobs=2, progress=progress))
        assert len(calls) == 2 and all(total == sum(sizes) for _, total in calls), calls
        assert calls[-1][0] == sum(sizes) and calls[0][0] in sizes


def _padded(tmp_path, source=H200_EAGER):
    """The eager MLP's trace (or `source`) as JSON, whitespace after it up to PROGRESS_BYTES: a read long enough for a
    bar."""
    path = tmp_path / "padded trace.json"
    text = gzip.decompress(source.read_bytes())
    path.write_bytes(text + b" " * (PROGRESS_BYTES - len(text)))
    return path


def _on_terminal(path, *flags: str, stdout_too: bool = False, env: dict | None = None) -> tuple[bytes, str]:
    """`trace-report path flags` with stderr on a terminal (a pty), and stdout too or a pipe: what the terminal got,
    and stdout's text where it was a pipe."""
    main, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "trace_report.report", str(path), *flags], cwd=PACKAGE_PARENT,
                            env={**os.environ, "COLUMNS": "160", **(env or {})},
                            stdout=terminal if stdout_too else subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 1 << 16)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        drawn += chunk
    out = "" if stdout_too else proc.stdout.read().decode()
    assert proc.wait(timeout=120) == 0
    os.close(main)
    return drawn, out


def test_a_long_read_draws_a_bar_on_a_terminal_that_goes_before_the_report(tmp_path):
    path = _padded(tmp_path)
    drawn, out = _on_terminal(path)
    assert b"reading padded trace.json" in drawn and b"/67.1 MB" in drawn, drawn[:300]
    # then a line while the analyses run, till the end: stdout is no terminal
    assert drawn.index(b"analysing padded trace.json") > drawn.rindex(b"reading padded trace.json")
    assert drawn.endswith(b"\x1b[2K"), drawn[-40:]  # the lines cleared: nothing of them stays on the screen
    assert out == run_report(path).stdout  # the report is the same without a terminal


def test_the_analyses_line_goes_before_the_report_on_the_same_terminal(tmp_path):
    path = _padded(tmp_path)
    for flags, head in (((), b"\x1b[1mpadded trace.json"), (("--json",), b'{"trace": ')):  # its header, in bold
        drawn, _ = _on_terminal(path, *flags, stdout_too=True)
        line = drawn.rindex(b"analysing padded trace.json")
        report = drawn.index(head, line + len(b"analysing padded trace.json"))
        # the analyses' line is cleared (erase the line, after the cursor went back up to it) before the report starts
        assert drawn[line:report].endswith(b"\x1b[1A\x1b[2K"), drawn[line:report + 40]
        assert b"analysing" not in drawn[report:] and b"reading" not in drawn[report:], flags


def test_a_pipe_or_a_short_read_gets_no_bar(tmp_path):
    long = run_report(_padded(tmp_path))
    assert long.returncode == 0 and long.stderr == ""
    ranks = run_report(*RANKS)
    assert ranks.returncode == 0 and ranks.stderr == ""


def test_the_copy_open_serves_tells_both_its_passes(tmp_path):
    from trace_report.drawable import drawable_copy

    trace = tmp_path / "compiled.json.gz"
    trace.write_bytes((FIXTURES / "world" / "h100_mlp_max_autotune_suite.json.gz").read_bytes())
    told: dict[str, list[tuple[int, int]]] = {}

    def track(name: str):
        calls = told.setdefault(name, [])
        return lambda done, total: calls.append((done, total))

    body, _, moved = drawable_copy(trace, track)
    assert body is not None and moved == 12  # its crossing boxes: a copy is written, so both passes run
    size = trace.stat().st_size
    assert list(told) == [str(trace), "compiled.json.gz's copy"]
    assert all(calls and calls[-1] == (size, size) for calls in told.values()), told


def test_a_terminal_without_utf8_gets_lines_in_ascii(tmp_path):
    drawn, out = _on_terminal(_padded(tmp_path), env={"LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
    assert b"analysing padded trace.json" in drawn and out
    shown = drawn.replace(b"\x1b[?25l", b"").replace(b"\x1b[?25h", b"")  # the cursor hidden and shown again
    assert max(drawn) < 0x80 and b"?" not in shown, shown[-300:]  # no character the terminal shows as `?`


def test_png_draws_the_bar_of_its_long_read(tmp_path):
    path = _padded(tmp_path)
    drawn, out = _on_terminal(path, "--png")
    assert b"reading padded trace.json" in drawn and drawn.endswith(b"\x1b[2K"), drawn[-40:]
    assert out.startswith(f"picture: {tmp_path / 'padded trace.png'} (")


def test_replay_draws_the_bar_of_its_long_read(tmp_path):
    path = _padded(tmp_path, FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_shapes_eager.json.gz")
    script = tmp_path / "replay.py"
    drawn, out = _on_terminal(path, "--replay", "1", "--replay_script", str(script))
    assert b"reading padded trace.json" in drawn and drawn.endswith(b"\x1b[2K"), drawn[-40:]
    assert out.startswith(f"replay script: {script} (") and script.exists()
