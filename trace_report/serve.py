"""Open a trace in Perfetto without uploading it: serve that one file from this machine's loopback to the page.

ui.perfetto.dev opens a trace from a link, `https://ui.perfetto.dev/#!/?url=<where the trace is>`: the page
fetches that URL itself, in the browser, with a plain GET. Two things decide whether it may:

    the page's Content-Security-Policy   its connect-src lets it fetch from http://127.0.0.1:9001 and no other
                                         local port (the port of trace_processor_shell --httpd; Perfetto's own
                                         tools/open_trace_in_ui serves traces there for the same reason)
    CORS                                 the response must carry Access-Control-Allow-Origin for the page's
                                         origin, https://ui.perfetto.dev

So we listen on 127.0.0.1 only, on port 9001 when it is free (`--port` picks another, 0 any free one), answer
GET for `/<file name>` with the file's bytes and that header, and 404 for every other path: no folder listing,
no other file, whatever the path spells (`..`, `%2e%2e`, the folder). A `.json.gz` goes as it is, gzip bytes
with Content-Type application/gzip and no Content-Encoding: Perfetto unpacks gzip itself, and a
Content-Encoding would make the browser unpack it first (and the length would no longer be the file's).

One exception to "the file's bytes": Perfetto drops an event that starts inside another on its track and ends after
it. On a GPU stream that is a kernel launched with programmatic dependent launch or ROCm's late timestamps
(overlaps.py), and would be a gap in the picture; on a CPU thread, a box that closes after its parent (a `nn.Module`
range opened inside a compiled region), and would be missing from it. A trace that has some is served as a copy made
in memory as a stream, whatever its size (drawable.py): those GPU events' ends clipped to the next one's start, as the
report reads them, and every event Perfetto would still drop (those CPU boxes, a stream's annotations and syncs that
cross its work) moved to a track of its own beside its thread or stream, at its own times. The copy is gzipped (about
a tenth of its JSON; Perfetto unpacks it whatever the file's name), the server says what changed, and the file is
never written.

From a GPU machine over SSH (no browser there) the browser on your own machine reaches it through a forward
of your port 9001 to the one we listen on: `ssh -N -L 9001:127.0.0.1:PORT HOST`. Ctrl-C stops serving: one
line, exit 0.
"""

from __future__ import annotations

import errno
import http.server
import io
import os
import socket
import sys
import threading
import webbrowser
import zlib
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from trace_report.console import read_progress
from trace_report.drawable import drawable_copy
from trace_report.errors import UsageError
from trace_report.model import Overlaps

PERFETTO_ORIGIN = "https://ui.perfetto.dev"
PERFETTO_PORT = 9001  # the one loopback port ui.perfetto.dev's Content-Security-Policy lets the page fetch from
LOOPBACK = "127.0.0.1"
CHUNK = 1 << 20
CONTENT_TYPES = {".gz": "application/gzip", ".json": "application/json"}
NOTED_SIZE = 64 << 20  # a trace file this large is read (for what Perfetto would drop) with a line saying so
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}  # what a browser on this machine (or at a forward's end) sends in Host


def perfetto_link(name: str, port: int = PERFETTO_PORT) -> str:
    """The link that opens `name`, served on `port` of the browser's own loopback, in ui.perfetto.dev."""
    return f"{PERFETTO_ORIGIN}/#!/?url=http://{LOOPBACK}:{port}/{quote(name)}"


class TraceServer(http.server.ThreadingHTTPServer):
    """Serves one file, at `/<its name>`, to ui.perfetto.dev."""

    daemon_threads = True  # Ctrl-C does not wait for a browser still downloading
    allow_reuse_address = False  # a port another server holds is busy, not shared

    def __init__(self, path: Path, port: int, body: bytes | None = None):
        self.trace = path
        self.body = body  # what to send instead of the file's bytes (a gzipped copy Perfetto draws whole), or None
        self.content_type = CONTENT_TYPES[".gz"] if body is not None else CONTENT_TYPES.get(
            path.suffix, "application/octet-stream")
        self.url_path = "/" + quote(path.name)
        self.fetched = threading.Event()
        super().__init__((LOOPBACK, port), TraceHandler)

    def handle_error(self, request, client_address) -> None:
        """A browser that leaves mid-download is no error; anything else is ours, and says so."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class TraceHandler(http.server.BaseHTTPRequestHandler):
    server: TraceServer
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return "trace-report"

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_POST(self) -> None:
        """Perfetto's page asks 127.0.0.1:9001 whether trace_processor_shell --httpd is there (POST /status): no."""
        self._not_found()

    def do_OPTIONS(self) -> None:
        """A browser's preflight (Chrome asks one before a public page reads a local address)."""
        if not self._ours():
            return self._not_found()
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        if self.headers.get("Access-Control-Request-Private-Network") == "true":
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _ours(self) -> bool:
        """The request names our file, at an address of this machine's loopback: a page on another site that
        rebinds its own host name to 127.0.0.1 sends its name in Host, and gets nothing."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
        return host in LOCAL_HOSTS and unquote(urlsplit(self.path).path) == unquote(self.server.url_path)

    def _answer(self, body: bool) -> None:
        if not self._ours():
            return self._not_found()
        try:
            trace = io.BytesIO(self.server.body) if self.server.body is not None else open(self.server.trace, "rb")
        except OSError:
            return self._not_found()
        with trace:
            size = len(self.server.body) if self.server.body is not None else os.fstat(trace.fileno()).st_size
            self.send_response(200)
            self._cors()
            self.send_header("Content-Type", self.server.content_type)
            self.send_header("Content-Length", str(size))
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            if not body:
                return
            while chunk := trace.read(CHUNK):
                self.wfile.write(chunk)
        if not self.server.fetched.is_set():
            self.server.fetched.set()
            print(f"sent {self.server.trace.name} ({_size(size)}) to the browser; Ctrl-C stops serving", flush=True)

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", PERFETTO_ORIGIN)
        self.send_header("Vary", "Origin")

    def _not_found(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", "10")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(b"not found\n")

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
        """Quiet: a request is not news (the first download of the trace is said once, on stdout)."""



def open_in_perfetto(path: Path, port: int | None = None) -> int:
    """Serve `path` to ui.perfetto.dev until Ctrl-C; print the link, the SSH forward, and open a browser when this
    machine has one. `port`: None for 9001 (or any free port when 9001 is taken), else that one (0: any free)."""
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if not path.is_file():
        raise UsageError(f"{path}: is a folder, not a trace file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{path}: cannot read it (permission denied)")
    body, found, moved = _drawable_copy(path)
    server, busy = _listen(path, port, body)
    bound = server.server_address[1]
    link = perfetto_link(path.name)
    host = socket.gethostname()
    print(f"serving {path} on http://{LOOPBACK}:{bound}{server.url_path} (this machine only, to ui.perfetto.dev only)")
    if busy:
        print(
            f"port {PERFETTO_PORT} is taken here (trace_processor_shell --httpd? another --open?), and ui.perfetto.dev "
            f"fetches only from 127.0.0.1:{PERFETTO_PORT}: forward your machine's {PERFETTO_PORT} to {bound}, or stop "
            f"what holds {PERFETTO_PORT} and run this again"
        )
    if body is not None and found.undrawn:
        n = found.undrawn
        one = n == 1
        print(f"{n:,} GPU item{'' if one else 's'} of it start{'s' if one else ''} inside the one before on "
              f"{'its' if one else 'their'} stream and end{'s' if one else ''} after it, which Perfetto does not draw: "
              f"served with {found.clipped:,} clipped to the next one's start, as trace-report reads them (the file is "
              "unchanged)")
    if body is not None and moved:
        one = moved == 1
        their = "its" if one else "their"
        print(f"{moved:,} event{'' if one else 's'} of it start{'s' if one else ''} inside another on {their} track and "
              f"end{'s' if one else ''} after it, which Perfetto does not draw: served on a track of {their} own beside "
              f"{their} thread or stream, at {their} own times (the file is unchanged)")
    print(f"open:   {link}")
    print(f"over SSH (no browser on this machine): on yours run  ssh -N -L {PERFETTO_PORT}:127.0.0.1:{bound} "
          f"{host}  (the name you reach it by), then open the link there")
    if bound == PERFETTO_PORT and _has_browser() and webbrowser.open_new_tab(link):
        print("opened it in your browser")
    try:  # the line inside: a Ctrl-C as soon as it shows stops serving as any later one does
        print("Ctrl-C stops serving", flush=True)
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print(f"stopped serving {path.name}", flush=True)
    return 0


def _drawable_copy(path: Path) -> tuple[bytes | None, Overlaps, int]:
    """The trace as Perfetto draws it whole, where it has events Perfetto would drop (drawable.py); None (serve the
    file) when it has none or is no trace we can read: the page then says what it makes of it. With it, what the GPU
    streams' clipping found and how many events moved."""
    try:
        size = path.stat().st_size
        if size > NOTED_SIZE:  # about 100 MB/s of JSON on a slow core, twice where a copy is made
            print(f"reading {_size(size)} for events Perfetto would not draw", file=sys.stderr, flush=True)
        with read_progress([path]) as track:  # on a terminal, a bar for each pass over a long trace
            return drawable_copy(path, track)
    # a gzip stream cut short or corrupt, a value no profiler writes: the page says what it makes of the file
    except (UsageError, OSError, EOFError, zlib.error, ValueError, OverflowError):
        return None, Overlaps(), 0


def _listen(path: Path, port: int | None, body: bytes | None = None) -> tuple[TraceServer, bool]:
    """The server, listening; and whether port 9001 was wanted but taken (a free port then, said so)."""
    wanted = PERFETTO_PORT if port is None else port
    try:
        return TraceServer(path, wanted, body), False
    except OSError as err:
        if err.errno != errno.EADDRINUSE:
            raise UsageError(f"cannot listen on {LOOPBACK}:{wanted}: {err.strerror or err}") from None
        if port is not None:
            raise UsageError(f"port {port} is taken on {LOOPBACK}: pick another (--port 0 takes any free one)") from None
    return TraceServer(path, 0, body), True


def _has_browser() -> bool:
    """A browser the user would see: macOS or Windows, a graphical session, or one named in $BROWSER. On a
    headless box Python's webbrowser would start a text browser in the terminal (lynx, w3m): not that."""
    if os.environ.get("BROWSER"):
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _size(n: int) -> str:
    if n < 1000:
        return f"{n} bytes"
    return f"{n / 1e3:,.1f} KB" if n < 1e6 else f"{n / 1e6:,.1f} MB"
