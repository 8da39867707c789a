"""The trace file as a stream of events: gzip or not, `traceEvents` handed on one event at a time.

Traces can be hundreds of MB. We read the text in 1 MiB chunks, so memory grows with the events the reader keeps,
not with the size of the JSON text. Each chunk's whole events are parsed by one `json.loads` (`_whole_events`): the
chunk is cut after the last `}` that a `,` and the next event's `{` follow, and only a cut between two events of
the array makes valid JSON of `[` + the text + `]` (a cut inside a string leaves it open, one inside an event leaves
a brace open). The event that straddles two chunks waits for the next chunk and is parsed with it. Where that fails,
and for the array's last event, one value at a time (`json.JSONDecoder.raw_decode`), which also says where bad JSON
is. One Python call per chunk instead of several
per event: the 109k events (26 MB) of a public A100 trace parsed in 0.33-0.46 s instead of 0.63 (best of 7, 2
cores, the cyclic GC off as the reader has it). Bad input (no such file, not gzip, not JSON, not a Chrome trace)
raises `UsageError` with one line that says where.

What each event becomes is the caller's `Layout`. The reader asks for `RECORDS`: each chunk is decoded by msgspec
into `Record`s, typed structs of the few fields the reader uses (`name`, `ph`, `cat`, `ts`, `dur`, `pid`, `tid`, `id`,
and of `args` only the keys it reads, `RecordArgs`): every other key is skipped without building a Python object.
Building
Python dicts is what the time went on: the 143 MB of a Mamba trace's events (407k) decode in 0.47 s to records,
2.2 s to dicts with `json.loads` or orjson (0.84 s with msgspec's own dicts), best of 2 on this project's 2-core
machine; docs/trace-report.md says more. A chunk msgspec refuses (NaN, a number past a float's range, a field of an
unexpected kind) is read as before, with `json.loads`, and its dicts turned into records (`record_of`): the same
values, the same messages. Without msgspec installed, every chunk goes that way. `RAW_EVENTS` hands on each event's
own text (`msgspec.Raw`), for a copy of the trace that leaves most events as they were written (drawable.py); a
script reading other fields asks for `DICTS`, the default.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from trace_report.errors import UsageError

try:
    import msgspec
except ImportError:  # a checkout's plain python3: the standard library's json reads every chunk
    msgspec = None

CHUNK_CHARS = 1 << 20
MAX_EVENT_CHARS = 64 << 20  # one event (or one metadata value) larger than this is not a profiler trace

_WS = re.compile(r"[ \t\n\r]*")
# What follows an event's closing brace in the array: a comma and the next event's opening brace and first key. The
# key's quote tells it from a kernel name's `{lambda()#1}, {lambda()#2}` (a quote inside a string is escaped).
_BETWEEN_EVENTS = re.compile(r'[ \t\n\r]*,[ \t\n\r]*\{(?=[ \t\n\r]*")')


GZIP_MAGIC = b"\x1f\x8b"  # a trace is gzipped when its file starts so, whatever its suffix


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
        binary = gzip.GzipFile(fileobj=raw, mode="rb") if magic == GZIP_MAGIC else raw
        yield io.TextIOWrapper(binary, encoding="utf-8-sig")  # -sig: a byte-order mark is not JSON


def bytes_read(text: io.TextIOBase) -> int:
    """How far into the file on disk reading has got (into the gzip's own bytes for a .json.gz): a read's progress."""
    binary = text.buffer  # type: ignore[attr-defined]
    return getattr(binary, "fileobj", binary).tell()


UNSET: Any = msgspec.UNSET if msgspec is not None else type("Unset", (), {"__repr__": lambda self: "UNSET"})()

# The keys of `args` the reader reads, as (attribute, key): absent ones stay UNSET (the correlation None), so that
# "absent" and "null" remain apart where the reader tells them apart (a collective's args, a [memory] event's).
ARG_KEYS = (
    ("correlation", "correlation"),
    ("input_dims", "Input Dims"),
    ("input_types", "Input type"),
    ("concrete_inputs", "Concrete Inputs"),
    ("registers", "registers per thread"),
    ("shared_memory", "shared memory"),
    ("grid", "grid"),
    ("block", "block"),
    ("occupancy", "est. achieved occupancy %"),
    # a collective's message (reader.COMM_ARGS)
    ("collective", "Collective name"),
    ("in_nelems", "In msg nelems"),
    ("out_nelems", "Out msg nelems"),
    ("dtype", "dtype"),
    ("group_size", "Group size"),
    ("group_name", "Process Group Name"),
    ("bytes", "bytes"),
    # a [memory] event's (memory.memory_event)
    ("addr", "Addr"),
    ("nbytes", "Bytes"),
    ("total_allocated", "Total Allocated"),
    ("total_reserved", "Total Reserved"),
    ("device_type", "Device Type"),
    ("device_id", "Device Id"),
)
RECORD_KEYS = ("name", "ph", "cat", "ts", "dur", "pid", "tid", "id")

if msgspec is not None:
    # Every field is Any: a value of an unexpected kind (a pid that is a list) reaches the reader, which skips the
    # event and says why, as it did with dicts. gc=False: records hold no cycles, and there are millions.
    RecordArgs = msgspec.defstruct(
        "RecordArgs",
        [("correlation", Any, None)]  # absent or null alike, as the reader has always read it
        # Kept raw, a slice of the text: an op's shapes and types repeat (a model runs a few hundred shapes), so the
        # reader decodes each distinct text once (Collector.shapes) instead of building lists for every op.
        + [(attr, msgspec.Raw, msgspec.field(name=key, default=UNSET)) for attr, key in ARG_KEYS[1:4]]
        + [(attr, Any, msgspec.field(name=key, default=UNSET)) for attr, key in ARG_KEYS[4:]],
        gc=False, module=__name__,
    )
    RecordArgs.__doc__ = "The keys of an event's `args` that the reader reads (ARG_KEYS); absent ones are UNSET."
    Record = msgspec.defstruct(
        "Record",
        [(key, Any, None) for key in RECORD_KEYS] + [("args", RecordArgs | None, None)],
        gc=False, module=__name__,
    )
    Record.__doc__ = "One trace event's fields that the reader reads; `args` a RecordArgs, None, or (odd input) other."
    _RECORDS = msgspec.json.Decoder(list[Record])
    _DECODE_ERRORS: tuple = (msgspec.DecodeError, RecursionError)

    RAW: Any = msgspec.Raw

    def raw_value(value: Any) -> Any:
        """A value kept raw (RecordArgs.input_dims, ...), decoded."""
        return msgspec.json.decode(value) if type(value) is msgspec.Raw else value
else:
    class RecordArgs:  # type: ignore[no-redef]
        __slots__ = tuple(attr for attr, _ in ARG_KEYS)

        def __init__(self, **found: Any):
            for attr, _ in ARG_KEYS:
                setattr(self, attr, found.get(attr, None if attr == "correlation" else UNSET))

    class Record:  # type: ignore[no-redef]
        __slots__ = (*RECORD_KEYS, "args")

        def __init__(self, name=None, ph=None, cat=None, ts=None, dur=None, pid=None, tid=None, id=None, args=None):
            self.name, self.ph, self.cat, self.ts, self.dur = name, ph, cat, ts, dur
            self.pid, self.tid, self.id, self.args = pid, tid, id, args

    _RECORDS = None
    _DECODE_ERRORS = ()
    RAW = type("NoRaw", (), {})  # no value is of this type

    def raw_value(value: Any) -> Any:
        return value

_ATTR_OF_KEY = {key: attr for attr, key in ARG_KEYS}


def record_of(event: Any) -> Any:
    """An event dict (from `json.loads`) as the Record msgspec would have made of it; anything else as it is."""
    if type(event) is not dict:
        return event
    get = event.get
    args = get("args")
    if type(args) is dict:
        args = RecordArgs(**{_ATTR_OF_KEY[key]: value for key, value in args.items() if key in _ATTR_OF_KEY})
    return Record(get("name"), get("ph"), get("cat"), get("ts"), get("dur"), get("pid"), get("tid"), get("id"), args)


class Layout:
    """What each event of the array becomes: a chunk's whole events through `decoder` (msgspec's, of a list of them),
    where msgspec is installed and takes the text; else each value `json.loads` made through `of` (None: as it is).
    `text`: an event read alone (the array's last, one across a bad cut) is handed on as its own text, in bytes."""

    def __init__(self, decoder: Any, of: Callable[[Any], Any] | None, text: bool = False):
        self.decoder, self.of, self.text = decoder, of, text


DICTS = Layout(None, None)
RECORDS = Layout(_RECORDS, record_of)


def _raw_text(value: Any) -> bytes:
    """An event json.loads read, as its text again (the same value; NaN stays NaN)."""
    return json.dumps(value, ensure_ascii=False).encode()


RAW_EVENTS = Layout(msgspec.json.Decoder(list[msgspec.Raw]) if msgspec is not None else None, _raw_text, text=True)


def args_dict(args: Any, keys: tuple[tuple[str, str], ...] = ARG_KEYS) -> Any:
    """A record's args as the dict of those of `keys` it has (what code written for event dicts reads)."""
    if type(args) is not RecordArgs:
        return args
    return {key: value for attr, key in keys if (value := getattr(args, attr)) is not UNSET}


class TraceSource:
    """The trace's top-level object, with `traceEvents` streamed one event at a time.

    Everything else at the top level (deviceProperties, traceName, ...) is small and lands in `meta`.
    """

    def __init__(self, text: io.TextIOBase, path: Path, layout: Layout = DICTS):
        self.text = text
        self.layout = layout  # what each event becomes: RECORDS for the reader, DICTS for a script's own reading
        self.path = path
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # characters dropped from the front of `buf`, for error positions
        self.meta: dict[str, Any] = {}
        # how many of the top-level keys in `meta` came before traceEvents (None: the file is the array alone)
        self.keys_before_events: int | None = None
        self.decoder = json.JSONDecoder()
        self.batching = True  # False until the next chunk, after a cut that was not between two events
        self.value_start = 0  # where the last value read alone began in `buf`

    def events(self) -> Iterator[Any]:
        """The events one at a time."""
        for batch in self.batches():
            yield from batch

    def batches(self, progress: Callable[[int, int], None] | None = None) -> Iterator[list]:
        """The events in lists, a chunk's worth at a time: one Python step per chunk, not two per event (0.2 s of a
        147 MB trace's 418k events, 2 cores). `progress`, when given, is told after each list the bytes of the file
        read so far and its size (console.read_progress)."""
        if progress is None:
            yield from self._batches()
            return
        size = self.path.stat().st_size
        for batch in self._batches():
            yield batch
            progress(bytes_read(self.text), size)

    def _batches(self) -> Iterator[list]:
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
                self.keys_before_events = len(self.meta)
                yield from self._array()
            else:
                self.meta[key] = self._value()
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch != "}":
                self._malformed("expected ',' or '}'")
        if not seen_events:
            if "nodes" in self.meta and "schema" in self.meta:  # ExecutionTraceObserver's graph of ops, no times
                schema = self.meta["schema"]
                schema = f", schema {schema}" if isinstance(schema, str) and len(schema) < 20 else ""
                raise UsageError(f"{self.path}: a PyTorch execution trace (its 'nodes'{schema}), not a Chrome trace: "
                                 "give the torch.profiler trace recorded beside it")
            if "rocprofiler-sdk-tool" in self.meta:  # rocprofv3's own JSON: kernels with no op or step around them
                raise UsageError(f"{self.path}: a rocprofv3 JSON (rocprofiler-sdk-tool), not a Chrome trace from "
                                 "torch.profiler: profile the run with torch.profiler for its ops and steps")
            raise UsageError(f"{self.path}: no traceEvents: JSON, but not a Chrome trace from torch.profiler")
        self._end()

    def _array(self) -> Iterator[list]:
        self._expect("[")
        if self._peek() == "]":
            self.pos += 1
            return
        while True:
            if self.batching:
                events = self._whole_events()
                if events:
                    yield events
                    continue  # at the start of the next event, after the comma
                if events is None and len(self.buf) - self.pos < MAX_EVENT_CHARS and self._more():
                    continue  # the event that straddles two chunks: whole with the next one, and batched with it
            value = self._value()
            if self.layout.text:
                value = self.buf[self.value_start : self.pos].encode()
            elif self.layout.of is not None:
                value = self.layout.of(value)
            yield [value]
            ch = self._peek()
            if ch == ",":
                self.pos += 1
            elif ch == "]":
                self.pos += 1
                return
            else:
                self._malformed("expected ',' or ']' between events")

    def _whole_events(self) -> list | None | bool:
        """The whole events from `pos` to the last one the buffer holds, parsed at once; `pos` moves past them.

        None when the buffer holds no event followed by the next (read on, and try again); False when the text up to
        the cut is not a list of values three times over (a `}, {` inside a string, bad JSON): then one value at a
        time, to this chunk's end.
        """
        buf, start = self.buf, self.pos
        cut = len(buf)
        failed = 0
        # The last `}` is mostly an event's end; inner ones (args, a kernel's `{lambda(float)#1}`) cost a look each.
        # Where none is found, none will be until the next chunk. (Three looks, as before, read 6% of a Mamba
        # trace's events one at a time: its kernel names hold braces.)
        for _ in range(256):
            cut = buf.rfind("}", start, cut)
            if cut < 0:
                break
            after = _BETWEEN_EVENTS.match(buf, cut + 1)
            if after is None:
                continue
            events = self._decode("[" + buf[start : cut + 1] + "]")
            if events is not None:
                self.pos = after.end() - 1  # at the next event's `{`
                return events
            failed += 1  # a cut inside a string (a kernel named `...{lambda()#1}, {lambda()#2}...`): an earlier one
            if failed == 3:
                self.batching = False
                return False
        self.batching = False
        return None

    def _decode(self, text: str) -> list | None:
        """A list of events as the layout has them: msgspec's where it takes the text, else made of json.loads's values;
        None if not JSON."""
        decoder, of = self.layout.decoder, self.layout.of
        if decoder is not None:
            try:
                return decoder.decode(text)
            except _DECODE_ERRORS:
                pass  # read as before: json.loads takes NaN, numbers past a float's range, any kind of field
        try:
            events = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return None
        return events if of is None else [of(event) for event in events]

    def _more(self) -> bool:
        if self.eof:
            return False
        # Read at least as much as we hold, so that a long value costs a few reads, not one per MiB.
        try:
            chunk = self.text.read(max(CHUNK_CHARS, len(self.buf) - self.pos))
        except UnicodeDecodeError as err:
            raise UsageError(f"{self.path}: not UTF-8 text, so not a JSON trace: {self._bad_byte(err)}") from None
        if not chunk:
            self.eof = True
            return False
        self.consumed += self.pos
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        self.batching = True
        return True

    def _bad_byte(self, err: UnicodeDecodeError) -> str:
        """Where the first byte UTF-8 refuses is: its offset in the file (in the gzip's content for a .json.gz) as the
        text layer read it, else the characters read before it."""
        bad = err.object[err.start:err.start + 1].hex() if isinstance(err.object, (bytes, bytearray)) else ""
        try:  # the text layer decodes what it last read from its buffer: the error's offset is within that
            at = self.text.buffer.tell() - len(err.object) + err.start
        except (AttributeError, OSError, ValueError, TypeError):
            return f"a byte {bad and '0x' + bad + ' '}after character {self.consumed + len(self.buf):,}"
        return f"byte 0x{bad} at byte {at:,}" if bad else f"a byte at byte {at:,}"

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
            self.value_start = self.pos  # where it began: reading on kept the buffer from there
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
