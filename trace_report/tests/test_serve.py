"""`trace-report TRACE --open`, as a user runs it: a server in a subprocess, read with a real HTTP client."""

from __future__ import annotations

import http.client
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


def _gpu_slices(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def _undrawn(doc: dict) -> int:
    """Perfetto's rule, written apart from the reader's: an event that starts inside the open one on its track and
    ends after it is dropped."""
    dropped = 0
    by_stream: dict = {}
    for e in _gpu_slices(doc):
        by_stream.setdefault((e["pid"], e["tid"]), []).append((e["ts"], -e.get("dur", 0)))
    for items in by_stream.values():
        ends: list[float] = []
        for ts, neg in sorted(items):
            while ends and ends[-1] <= ts + 0.0005:
                ends.pop()
            if ends and ts - neg > ends[-1] + 0.0005:
                dropped += 1
            else:
                ends.append(ts - neg)
    return dropped


def test_a_trace_perfetto_would_draw_in_part_is_served_whole(tmp_path):
    import gzip
    import json

    trace = tmp_path / UNNESTED.name
    trace.write_bytes(UNNESTED.read_bytes())
    original = json.loads(gzip.decompress(trace.read_bytes()))
    assert _undrawn(original) == 6
    server = Served(trace)
    try:
        assert any("6 GPU items of it start inside the one before on their stream" in line and
                   "served with 6 clipped" in line for line in server.out), server.out
        response = server.get(f"/{trace.name}", headers={"Host": f"127.0.0.1:{server.port}"})
        assert response.status == 200 and response.getheader("Content-Type") == "application/gzip"
        served = json.loads(gzip.decompress(response.body))
    finally:
        rc, _, err = server.stop()
    assert rc == 0 and err == "", err
    assert _undrawn(served) == 0
    changed = [(a, b) for a, b in zip(original["traceEvents"], served["traceEvents"]) if a != b]
    assert len(changed) == 6 and len(served["traceEvents"]) == len(original["traceEvents"])
    assert all(set(a) == set(b) and {k for k in a if a[k] != b[k]} == {"dur"} and b["dur"] < a["dur"]
               for a, b in changed)
    assert trace.read_bytes() == UNNESTED.read_bytes()  # the file itself untouched
