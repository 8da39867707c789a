"""`trace-report TRACE --open`, as a user runs it: a server in a subprocess, read with a real HTTP client."""

from __future__ import annotations

import gzip
import http.client
import json
import math
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from trace_report.tests.support import FIXTURES, PACKAGE_PARENT, as_from_a_terminal, run_report

from trace_report.serve import PERFETTO_ORIGIN, perfetto_link

TRACE = FIXTURES / "h200" / "traces" / "03_simple_mlp" / "64_128_768_3072_eager.json.gz"


class Served:
    """`trace-report TRACE --open --port 0` running; its output read line by line as it comes."""

    def __init__(self, trace: Path):
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trace_report.report", str(trace), "--open", "--port", "0"],
            cwd=PACKAGE_PARENT, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=as_from_a_terminal,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.out: list[str] = []
        first = self.next_line()
        found = re.search(r"on http://127\.0\.0\.1:(\d+)/", first)
        assert found, first
        self.port = int(found.group(1))
        while "Ctrl-C stops serving" not in self.out[-1]:
            self.next_line()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def next_line(self) -> str:
        line = self.lines.get(timeout=60)
        assert line, f"the server ended: rc {self.proc.poll()}, stderr {self.proc.stderr.read()}"
        self.out.append(line.rstrip("\n"))
        return self.out[-1]

    def get(self, path: str, headers: dict | None = None) -> http.client.HTTPResponse:
        """A GET with the path sent exactly as written (`..` and `%2e` included), as a browser at the far end of
        the page's link or of an SSH forward would send it."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        response.body = response.read()
        connection.close()
        return response

    def stop(self) -> tuple[int, str, str]:
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=30)
        rest = []
        while (line := self.lines.get(timeout=30)) != "":
            rest.append(line.rstrip("\n"))
        return rc, "\n".join(self.out + rest), self.proc.stderr.read()


@pytest.fixture
def served(tmp_path):
    trace = tmp_path / TRACE.name
    trace.write_bytes(TRACE.read_bytes())
    (tmp_path / "secret.txt").write_text("not for the browser")
    server = Served(trace)
    yield server, trace
    if server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait()


def test_serves_the_trace_as_is_to_perfetto_and_stops_cleanly_on_ctrl_c(served):
    server, trace = served
    assert f"open:   {perfetto_link(trace.name)}" in server.out
    assert perfetto_link(trace.name) == f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/{trace.name}"
    assert any(f"ssh -N -L 9001:127.0.0.1:{server.port} " in line for line in server.out), server.out

    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/{trace.name}", timeout=30) as response:
        body, headers = response.read(), response.headers
    assert body == trace.read_bytes()  # the gzip bytes, unpacked by Perfetto itself
    assert headers["Access-Control-Allow-Origin"] == PERFETTO_ORIGIN
    assert headers["Content-Type"] == "application/gzip" and headers["Content-Encoding"] is None
    assert int(headers["Content-Length"]) == len(body)
    assert "sent 64_128_768_3072_eager.json.gz (4.5 KB) to the browser" in server.next_line()

    rc, out, err = server.stop()
    assert rc == 0 and err == "", err
    assert out.splitlines()[-1] == f"stopped serving {trace.name}"


@pytest.mark.parametrize(
    "path",
    ["/", "/secret.txt", "/../secret.txt", "/%2e%2e/secret.txt", "/./secret.txt", "//secret.txt",
     "/{trace}/", "/{trace}/..", "/{folder}/{trace}", "/../{folder}/{trace}", "/%2e%2e/{folder}/{trace}", "/{folder}",
     "/{trace}x", "/%2F{trace}"],
)
def test_nothing_else_is_served(served, path):
    server, trace = served
    response = server.get(path.format(trace=trace.name, folder=trace.parent.name))
    assert response.status == 404 and response.body == b"not found\n"
    assert b"secret" not in response.body and b"<html" not in response.body.lower()
    assert server.get(f"/{trace.name}").status == 200  # still serving


def test_a_page_whose_host_name_points_here_gets_nothing(served):
    server, trace = served
    assert server.get(f"/{trace.name}", headers={"Host": "attacker.example:9001"}).status == 404
    assert server.get(f"/{trace.name}", headers={"Host": f"localhost:{server.port}"}).status == 200


def test_preflight_answers_for_perfetto_only_on_the_trace(served):
    server, trace = served
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("OPTIONS", f"/{trace.name}", headers={
        "Origin": PERFETTO_ORIGIN, "Access-Control-Request-Method": "GET", "Access-Control-Request-Private-Network": "true"})
    response = connection.getresponse()
    response.read()
    assert response.status == 204 and response.headers["Access-Control-Allow-Origin"] == PERFETTO_ORIGIN
    assert response.headers["Access-Control-Allow-Private-Network"] == "true"
    connection.request("OPTIONS", "/secret.txt")
    response = connection.getresponse()
    response.read()
    assert response.status == 404
    connection.request("POST", "/status", body=b"")  # the page asking whether trace_processor_shell is here
    response = connection.getresponse()
    response.read()
    assert response.status == 404
    connection.close()


def listening_addresses(port: int) -> list[str]:
    """The local addresses of the sockets listening on `port`, from the kernel's table (Linux)."""
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(address if len(address) == width else "?")
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
def test_it_listens_on_loopback_only(served):
    server, _ = served
    assert listening_addresses(server.port) == ["0100007F"]  # 127.0.0.1, nothing on IPv6 or on 0.0.0.0
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet leaves: this only asks which address would be used
        own = probe.getsockname()[0]
    except OSError:
        own = None
    finally:
        probe.close()
    if own and not own.startswith("127."):
        with pytest.raises((ConnectionRefusedError, urllib.error.URLError, OSError)):
            socket.create_connection((own, server.port), timeout=5).close()


def test_a_missing_trace_or_a_taken_port_is_one_line(tmp_path):
    run = run_report(str(tmp_path / "none.json"), "--open", timeout=60)
    assert run.returncode == 2 and run.stderr.strip().endswith("none.json: no such file") and run.stdout == ""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        port = holder.getsockname()[1]
        run = run_report(str(TRACE), "--open", "--port", str(port), timeout=60)
    finally:
        holder.close()
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and f"port {port} is taken" in lines[0], run.stderr


# A B300 micro-benchmark whose trace has 6 kernels that start inside the one before on their stream and end after it:
# Perfetto drops each (its stat slice_drop_overlapping_complete_event).
UNNESTED = FIXTURES / "world" / "b300_sm103_moe_microbench.json.gz"


def _dropped(doc: dict) -> dict:
    """Perfetto's rule, written apart from the reader's: on each track (pid, tid), in start order (the longer first of
    two that start together), an "X" event that starts inside the open one and ends after it is dropped. Times in ns
    as its JSON importer makes them: an integer µs times 1000, a fraction times 1000.0, rounded. Dropped per track."""
    def ns(value):
        return value * 1000 if type(value) is int else int(math.floor(value * 1000.0 + 0.5))

    by_track: dict = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append((ns(e["ts"]), -ns(e.get("dur", 0))))
    dropped = {}
    for track, items in by_track.items():
        ends: list[int] = []
        for start, neg in sorted(items):
            while ends and ends[-1] <= start:
                ends.pop()
            if ends and start - neg > ends[-1]:
                dropped[track] = dropped.get(track, 0) + 1
            else:
                ends.append(start - neg)
    return dropped


def _served_copy(tmp_path: Path, fixture: Path) -> tuple[dict, dict, list[str]]:
    """The fixture's events as the file holds them, as `--open` serves them, and what the server said."""
    trace = tmp_path / fixture.name
    trace.write_bytes(fixture.read_bytes())
    original = json.loads(gzip.decompress(trace.read_bytes()))
    served, said, rc, err = _fetched_copy(trace)
    assert rc == 0 and err == "", err
    assert trace.read_bytes() == fixture.read_bytes()  # the file itself untouched
    return original, served, said


def _fetched_copy(trace: Path) -> tuple[dict, list[str], int, str]:
    """`--open` on `trace`, the page's GET: the gzipped copy it serves, parsed; what the server said until it served
    (its lines); its exit code on Ctrl-C and its stderr."""
    server = Served(trace)
    try:
        response = server.get(f"/{quote(trace.name)}", headers={"Host": f"127.0.0.1:{server.port}"})
        assert response.status == 200 and response.getheader("Content-Type") == "application/gzip"
        served = json.loads(gzip.decompress(response.body))
    finally:
        rc, _, err = server.stop()
    return served, server.out, rc, err


def test_a_trace_perfetto_would_draw_in_part_is_served_whole(tmp_path):
    original, served, said = _served_copy(tmp_path, UNNESTED)
    assert sum(_dropped(original).values()) == 9  # 6 kernels on stream 7, and 3 annotations that end inside one
    assert any("6 GPU items of it start inside the one before on their stream" in line and
               "served with 6 clipped" in line for line in said), said
    assert any(line.startswith("3 events of it start inside another on their track") for line in said), said
    assert _dropped(served) == {}
    events, added = served["traceEvents"][:len(original["traceEvents"])], served["traceEvents"][len(original["traceEvents"]):]
    changed = [(a, b) for a, b in zip(original["traceEvents"], events) if a != b]
    clipped = [(a, b) for a, b in changed if {k for k in a if a[k] != b.get(k)} == {"dur"}]
    moved = [(a, b) for a, b in changed if {k for k in a if a[k] != b.get(k)} == {"tid"}]
    assert len(clipped) == 6 and all(b["dur"] < a["dur"] and a["cat"] == "kernel" for a, b in clipped)
    assert len(moved) == 3 and len(changed) == 9 and all(a["cat"] == "gpu_user_annotation" for a, _ in moved)
    new_tid = moved[0][1]["tid"]
    assert {b["tid"] for _, b in moved} == {new_tid} and new_tid not in {e.get("tid") for e in original["traceEvents"]}
    assert [(e["name"], e["ph"], e["tid"]) for e in added] == [("thread_name", "M", new_tid),
                                                                ("thread_sort_index", "M", new_tid)]


# torch.compile's H100 MLP: 12 `nn.Module` ranges open inside a `Torch-Compiled Region` and close after it, on the
# main thread. Perfetto would leave them out of the picture; the report counts them (test_overlaps.py).
COMPILED = FIXTURES / "world" / "h100_mlp_max_autotune_suite.json.gz"


def test_cpu_boxes_perfetto_would_drop_are_served_on_a_track_beside_their_thread(tmp_path):
    original, served, said = _served_copy(tmp_path, COMPILED)
    assert _dropped(original) == {(623, 623): 12}
    assert any(line.startswith("12 events of it start inside another on their track and end after it") and
               "at their own times" in line for line in said), said
    assert not any("GPU item" in line for line in said), said
    assert _dropped(served) == {}
    events = served["traceEvents"][:len(original["traceEvents"])]
    moved = [(a, b) for a, b in zip(original["traceEvents"], events) if a != b]
    assert len(moved) == 12 and all({k for k in a if a[k] != b[k]} == {"tid"} for a, b in moved)
    assert all(a["name"].startswith("nn.Module") and b["tid"] == 624 for a, b in moved), moved[:2]
    names = {e["tid"]: e["args"]["name"] for e in served["traceEvents"] if e.get("name") == "thread_name"}
    assert names[624].startswith("thread 623 (python3): events Perfetto drops there")


def test_a_served_copy_moves_only_what_crosses_and_reads_past_times_that_are_no_numbers(tmp_path):
    """A child that ends after its parent moves, its nested sibling does not; a NaN or infinite time (JSON that
    Python reads, no profiler's) is left where it is, and the server still serves."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "parent", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "inside", "pid": 1, "tid": 1, "ts": 11, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "crosses", "pid": 1, "tid": 1, "ts": 15.5, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "no time", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "endless", "pid": 1, "tid": 1, "ts": 12, "dur": float("inf")},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": 1, "args": {}},
    ]
    fixture = tmp_path / "fixture" / "crossing.json.gz"
    fixture.parent.mkdir()
    fixture.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    original, served, said = _served_copy(tmp_path, fixture)
    assert any(line.startswith("1 event of it starts inside another on its track") for line in said), said
    by_name = {e["name"]: e for e in served["traceEvents"] if e.get("ph") == "X"}
    assert by_name["crosses"]["tid"] == 2 and by_name["crosses"]["ts"] == 15.5 and by_name["crosses"]["dur"] == 10
    assert all(by_name[name]["tid"] == 1 for name in ("parent", "inside", "no time", "endless"))
    assert math.isnan(by_name["no time"]["ts"]) and math.isinf(by_name["endless"]["dur"])


def test_a_large_plain_json_trace_is_checked_and_served_as_a_gzipped_copy(tmp_path):
    # The compiled MLP's 12 crossing boxes, as plain JSON padded with whitespace past 256 MB: once too large to be
    # checked (the copy was made of the whole parsed JSON); now read as a stream, at any size.
    trace = tmp_path / "large trace.json"
    text = json.dumps(json.loads(gzip.decompress(COMPILED.read_bytes()))).encode()
    with open(trace, "wb") as out:
        out.write(text)
        left = (256 << 20) + 1 - len(text)
        while left > 0:
            out.write(b" " * min(left, 1 << 24))
            left -= 1 << 24
    served, said, rc, err = _fetched_copy(trace)
    assert rc == 0, err
    assert err == "reading 268.4 MB for events Perfetto would not draw\n", err
    assert any(line.startswith("12 events of it start inside another on their track") for line in said), said
    assert _dropped(served) == {} and len(served["traceEvents"]) == len(json.loads(text)["traceEvents"]) + 2
