"""The copy `--open` serves, made as a stream (drawable.py): what moves and what stays as it was written."""

from __future__ import annotations

import gzip
import json

from trace_report import drawable, source

CROSSING = [
    {"ph": "X", "cat": "cpu_op", "name": "parent", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
    {"ph": "X", "cat": "cpu_op", "name": "crosses", "pid": 1, "tid": 1, "ts": 15, "dur": 10},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
]


def _copy(tmp_path, text: str) -> tuple[str, int]:
    path = tmp_path / "trace.json"
    path.write_text(text)
    body, _, moved = drawable.drawable_copy(path)
    assert body is not None
    return gzip.decompress(body).decode(), moved


def test_the_top_level_keys_keep_their_order_around_the_events(tmp_path):
    text = ('{"schemaVersion": 1, "deviceProperties": [{"name": "X"}], "traceEvents": '
            + json.dumps(CROSSING) + ', "traceName": "t", "displayTimeUnit": "ms"}')
    copy, moved = _copy(tmp_path, text)
    assert moved == 1
    doc = json.loads(copy)
    assert list(doc) == ["schemaVersion", "deviceProperties", "traceEvents", "traceName", "displayTimeUnit"]
    assert doc["deviceProperties"] == [{"name": "X"}] and doc["displayTimeUnit"] == "ms"
    crosses = next(e for e in doc["traceEvents"] if e["name"] == "crosses")
    assert crosses["tid"] == 2
    assert doc["traceEvents"][-2]["args"]["name"].startswith("main: events Perfetto drops there")


def test_an_array_trace_stays_an_array(tmp_path):
    copy, moved = _copy(tmp_path, json.dumps(CROSSING))
    doc = json.loads(copy)
    assert moved == 1 and isinstance(doc, list) and len(doc) == len(CROSSING) + 2


def test_events_left_as_they_are_keep_their_own_text(tmp_path):
    # numbers as a writer spelled them (1E1, 10.000), keys in their order, spaces: the copy changes only what it must
    kept = '{"ts":1E1,  "ph":"X","cat":"kernel","name":"k<{lambda()#1}>","pid":0,"tid":7,"dur":10.000,"args":{"a":[1, 2]}}'
    events = [json.dumps(e) for e in CROSSING[:2]] + [kept]
    copy, _ = _copy(tmp_path, '{"traceEvents": [' + ",\n".join(events) + "]}")
    assert kept in copy
    assert json.dumps(CROSSING[0]) in copy and json.dumps(CROSSING[1]) not in copy


def test_without_msgspec_the_copy_is_the_same(tmp_path, monkeypatch):
    text = json.dumps({"traceEvents": CROSSING + [
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 1.0, "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 3.0, "dur": 1.0},
    ]})
    with_msgspec, moved = _copy(tmp_path, text)
    with monkeypatch.context() as patch:
        patch.setattr(drawable._SCAN, "decoder", None)
        patch.setattr(source.RAW_EVENTS, "decoder", None)
        without, moved_without = _copy(tmp_path, text)
    assert json.loads(with_msgspec) == json.loads(without) and moved == moved_without == 1
    a = next(e for e in json.loads(without)["traceEvents"] if e["name"] == "a")
    assert a["dur"] == 2.0  # clipped to b's start, as the reader reads it


def test_a_trace_perfetto_draws_whole_is_no_copy(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": CROSSING[:1] + CROSSING[2:]}))
    assert drawable.drawable_copy(path)[0] is None


def test_times_past_64_bits_of_ns_still_move_what_crosses(tmp_path):
    # no profiler's times, but JSON: the track's times are kept as Python ints instead of 64-bit arrays
    far = 2**62
    events = [{"ph": "X", "cat": "cpu_op", "name": "near", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
              {"ph": "X", "cat": "cpu_op", "name": "parent", "pid": 1, "tid": 1, "ts": far, "dur": 10},
              {"ph": "X", "cat": "cpu_op", "name": "crosses", "pid": 1, "tid": 1, "ts": far + 5, "dur": 10},
              {"ph": "X", "cat": "kernel", "name": "past a float", "pid": 0, "tid": 7, "ts": 10**400, "dur": 1}]
    copy, moved = _copy(tmp_path, json.dumps({"traceEvents": events}))
    tids = {e["name"]: e["tid"] for e in json.loads(copy)["traceEvents"] if e["ph"] == "X"}
    assert moved == 1 and tids == {"near": 1, "parent": 1, "crosses": 2, "past a float": 7}
