"""The trace file as a stream of events: gzip or not, `traceEvents` handed on one event at a time.

Traces can be hundreds of MB. We read the text in 1 MiB chunks, so memory grows with the events the reader keeps,
not with the size of the JSON text. Each chunk's whole events are parsed by one `json.loads` (`_whole_events`): the
chunk is cut after the last `}` that a `,` and the next event's `{` follow, and only a cut between two events of
the array makes valid JSON of `[` + the text + `]` (a cut inside a string leaves it open, one inside an event leaves
a brace open). Where that fails, and for the event that straddles two chunks, one value at a time
(`json.JSONDecoder.raw_decode`), which also says where bad JSON is. One Python call per chunk instead of several
per event: the 109k events (26 MB) of a public A100 trace parsed in 0.33-0.46 s instead of 0.63 (best of 7, 2
cores, the cyclic GC off as the reader has it). Bad input (no such file, not gzip, not JSON, not a Chrome trace)
raises `UsageError` with one line that says where.
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

from trace_report.errors import UsageError

CHUNK_CHARS = 1 << 20
MAX_EVENT_CHARS = 64 << 20  # one event (or one metadata value) larger than this is not a profiler trace

_WS = re.compile(r"[ \t\n\r]*")
_BETWEEN_EVENTS = re.compile(r"[ \t\n\r]*,[ \t\n\r]*\{")  # what follows an event's closing brace in the array


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
        self.batches = True  # False until the next chunk, after a cut that was not between two events

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
            if self.batches:
                events = self._whole_events()
                if events:
                    yield from events
                    continue  # at the start of the next event, after the comma
            yield self._value()
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch == "]":
                self.pos += 1
                return
            else:
                self._malformed("expected ',' or ']' between events")

    def _whole_events(self) -> list | None:
        """The whole events from `pos` to the last one the buffer holds, parsed at once; `pos` moves past them.

        None when the buffer holds no event followed by the next, or when the text up to the cut is not a list of
        values (a `}, {` inside an event's args, or bad JSON): then one value at a time, to this chunk's end.
        """
        buf, start = self.buf, self.pos
        cut = len(buf)
        for _ in range(3):  # the last `}` is almost always an event's end; an inner one costs one more look
            cut = buf.rfind("}", start, cut)
            if cut < 0:
                return None
            after = _BETWEEN_EVENTS.match(buf, cut + 1)
            if after is not None:
                break
        else:
            return None
        try:
            events = json.loads("[" + buf[start : cut + 1] + "]")
        except (json.JSONDecodeError, RecursionError):
            self.batches = False
            return None
        self.pos = after.end() - 1  # at the next event's `{`
        return events

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
        self.batches = True
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
