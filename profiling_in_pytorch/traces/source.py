"""The trace file as a stream of events: gzip or not, `traceEvents` parsed one event at a time.

Traces can be hundreds of MB. We parse the `traceEvents` array one event at a time (`json.JSONDecoder.raw_decode`
over 1 MiB chunks), so memory grows with the events the reader keeps, not with the size of the JSON text. Bad
input (no such file, not gzip, not JSON, not a Chrome trace) raises `UsageError` with one line that says where.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from profiling_in_pytorch.errors import UsageError

CHUNK_CHARS = 1 << 20
MAX_EVENT_CHARS = 64 << 20  # one event (or one metadata value) larger than this is not a profiler trace

_WS = re.compile(r"[ \t\n\r]*")


@contextmanager
def open_text(path: Path) -> Iterator[io.TextIOBase]:
    """Open a trace as text, gzip or not (told by the magic bytes, not the suffix)."""
    try:
        raw = open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a trace file") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot open it ({err.strerror or err})") from None
    with raw:
        try:
            magic = raw.peek(2)[:2]
        except OSError as err:
            raise UsageError(f"{path}: cannot read it ({err.strerror or err})") from None
        if not magic:
            raise UsageError(f"{path}: the file is empty")
        binary = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
        yield io.TextIOWrapper(binary, encoding="utf-8-sig")  # -sig: a byte-order mark is not JSON


class TraceSource:
    """The trace's top-level object, with `traceEvents` streamed one event at a time.

    Everything else at the top level (deviceProperties, traceName, ...) is small and lands in `meta`.
    """

    def __init__(self, text: io.TextIOBase, path: Path):
        self.text = text
        self.path = path
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped from the front of `buf`, for error positions
        self.meta: dict[str, Any] = {}
        self.decoder = json.JSONDecoder()

    def events(self) -> Iterator[Any]:
        first = self._peek()
        if first == "":
            raise UsageError(f"{self.path}: the file holds only whitespace")
        if first == "[":  # the JSON Array Format of the Chrome trace spec: events only
            yield from self._array()
            self._end()
            return
        if first != "{":
            raise UsageError(f"{self.path}: not a Chrome trace (expected a JSON object with traceEvents)")
        self.pos += 1
        seen_events = False
        while True:
            ch = self._peek()
            if ch == "}":
                self.pos += 1
                break
            key = self._value()
            if not isinstance(key, str):
                self._malformed("expected a key")
            self._expect(":")
            if key == "traceEvents":
                if self._peek() != "[":
                    raise UsageError(f"{self.path}: traceEvents is not a list: not a Chrome trace")
                seen_events = True
                yield from self._array()
            else:
                self.meta[key] = self._value()
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch != "}":
                self._malformed("expected ',' or '}'")
        if not seen_events:
            raise UsageError(f"{self.path}: no traceEvents: JSON, but not a Chrome trace from torch.profiler")
        self._end()

    def _array(self) -> Iterator[Any]:
        self._expect("[")
        if self._peek() == "]":
            self.pos += 1
            return
        while True:
            yield self._value()
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch == "]":
                self.pos += 1
                return
            else:
                self._malformed("expected ',' or ']' between events")

    def _more(self) -> bool:
        if self.eof:
            return False
        # Read at least as much as we hold, so that a long value costs a few reads, not one per MiB.
        chunk = self.text.read(max(CHUNK_CHARS, len(self.buf) - self.pos))
        if not chunk:
            self.eof = True
            return False
        self.consumed += self.pos
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def _peek(self) -> str:
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def _expect(self, ch: str) -> None:
        if self._peek() != ch:
            self._malformed(f"expected {ch!r}")
        self.pos += 1

    def _value(self) -> Any:
        if self._peek() == "":
            self._malformed("unexpected end")
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                # The value may just continue in the next chunk; past MAX_EVENT_CHARS it is broken.
                if len(self.buf) - self.pos < MAX_EVENT_CHARS and self._more():
                    continue
                cut = self.eof and (err.msg.startswith("Unterminated") or err.pos >= len(self.buf.rstrip()))
                self._malformed(err.msg, self.consumed + err.pos, cut)
            except RecursionError:
                self._malformed("arrays or objects nested too deeply for a trace")
            if end == len(self.buf) and self._more():  # a number cut at the chunk's end: read on
                continue
            self.pos = end
            return value

    def _end(self) -> None:
        if self._peek() != "":
            self._malformed("extra data after the trace")

    def _malformed(self, what: str, at: int | None = None, cut: bool | None = None) -> None:
        if at is None:
            at = self.consumed + self.pos
        if cut is None:
            cut = self.eof and self.pos >= len(self.buf)
        hint = ", the file is cut short" if cut else ""
        raise UsageError(f"{self.path}: not valid JSON{hint}: {what.removesuffix(' at')} at character {at:,}")
