"""Traces of real size for benchmark_trace_report.py --large: built from a real one, then timed against json.loads.

A Llama step recorded with shapes and stacks is hundreds of MB a rank; the test fixtures are a few MB. `grow_trace`
repeats a real trace's events until the file reaches the size asked: each copy's times shifted past the one before,
its ids (correlation, flow id, External id, ...) and ProfilerStep numbers renumbered, so that the copy is more steps
of the same run and not the same events again (links stay one to one). The metadata events and the top-level keys
(deviceProperties, ...) come once. A rank set is the same trace N times with distributedInfo's rank set and its own
shift, named `<run>_rank<r>.json` as trace-report's rank detection expects.

Written with the standard library only, one copy at a time: the generator holds the source trace, never the output.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.markup import escape

from benchmark_runs import HTA_DRIVER, MB, Command, console, hta_folder, hta_words, run_once
from trace_report.errors import UsageError

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# Ids that link events one to one (or name an event): renumbered in each copy so that links stay within it.
ID_ARGS = ("correlation", "External id", "Record function id", "Python id", "Python parent id", "Ev Idx",
           "Sequence number")
JSON_LOADS = "import json, sys; json.loads(open(sys.argv[1], 'rb').read())"
# The read's floor: the interpreter, trace-report's imports and msgspec's decoding of the fields the reader reads,
# nothing kept. Whatever the reader does per event comes on top, so its ratio to json.loads is the most any reader
# built on these records can reach on that trace.
DECODING_ALONE = ("import sys; from pathlib import Path; import trace_report.report; from trace_report import source\n"
                  "path = Path(sys.argv[1])\n"
                  "with source.open_text(path) as text:\n"
                  "    for _ in source.TraceSource(text, path, source.RECORDS).batches(): pass")

# The goals of --large (set by the project; checked against this run's figures, on this machine).
GOAL_LARGE_RATIO = 4.0  # --large: trace-report --json's MB/s over json.loads's, whole processes, the same file
GOAL_LARGE_RSS = 0.5  # --large: peak resident memory over the JSON's size
GOAL_GZIP_RATIO = 1.5  # --large: trace-report on the .json.gz over the same on its JSON


def load(path: Path) -> dict:
    with path.open("rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rt", encoding="utf-8") if gzipped else path.open(encoding="utf-8")) as text:
        return json.load(text)


def grow_trace(source: Path, target_bytes: int, out: Path, rank: int | None = None, shift_us: float = 0.0) -> int:
    """Write a trace of at least `target_bytes` built from `source` (see the module's doc); returns the copies."""
    doc = load(source)
    events = doc.pop("traceEvents")
    once = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    timed = [e for e in body if type(e.get("ts")) in (int, float) and type(e.get("dur", 0)) in (int, float)]
    if not timed:
        raise UsageError(f"{source}: no timed events to repeat")
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start + 1000.0  # the next copy 1 ms after this one ends
    ids = [v for e in body for v in (e.get("id"), *((e.get("args") or {}).get(k) for k in ID_ARGS)) if type(v) is int]
    id_stride = 10 ** len(str(max(ids, default=0) + 1))
    steps = [int(m[1]) for e in body if type(e.get("name")) is str and (m := _STEP.match(e["name"]))]
    step_stride = max(steps) - min(steps) + 1 if steps else 0
    if rank is not None:
        doc["distributedInfo"] = {**(doc.get("distributedInfo") or {}), "rank": rank}
    copies = 0
    with out.open("w", encoding="utf-8") as f:
        f.write('{"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in once))
        written = f.tell()
        while written < target_bytes or copies == 0:
            dt, did, ds = copies * span + shift_us, copies * id_stride, copies * step_stride
            parts = []
            for e in body:
                e = dict(e)
                if type(e.get("ts")) in (int, float):
                    e["ts"] = round(e["ts"] + dt, 3)
                if type(e.get("id")) is int:
                    e["id"] += did
                args = e.get("args")
                if type(args) is dict:
                    args = e["args"] = dict(args)
                    for key in ID_ARGS:
                        if type(args.get(key)) is int and args[key] >= 0:
                            args[key] += did
                name = e.get("name")
                if ds and type(name) is str and (m := _STEP.match(name)):
                    e["name"] = f"ProfilerStep#{int(m[1]) + ds}"
                parts.append(json.dumps(e))
            text = (",\n" if written > 20 else "") + ",\n".join(parts)
            f.write(text)
            written += len(text)
            copies += 1
        rest = json.dumps(doc)[1:-1]
        f.write("\n]" + (", " + rest if rest else "") + "}\n")
    return copies


def gzipped(path: Path) -> Path:
    """`path`.gz beside it, level 6 (gzip's default, as torch.profiler's export writes it)."""
    out = path.with_name(path.name + ".gz")
    if not out.exists() or out.stat().st_mtime < path.stat().st_mtime:
        partial = out.with_name(out.name + ".partial")  # whole or not at all: a run stopped here leaves no .gz
        with path.open("rb") as src, gzip.open(partial, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        partial.replace(out)
    return out


def built(source: Path, scratch: Path, mb: float, rank: int | None = None) -> Path:
    """The trace of `mb` MB under `scratch`, built once (kept between runs: 1 GB takes a minute to write), named
    after its source and size (`<source>_<mb>MB.json`, a rank's `<source>_<mb>MB_rank<r>.json`)."""
    stem = source.name.removesuffix(".gz").removesuffix(".json")
    name = f"{stem}_{mb:g}MB" + (f"_rank{rank}" if rank is not None else "") + ".json"
    out = scratch / name
    if not out.exists() or out.stat().st_mtime < source.stat().st_mtime:
        started = time.perf_counter()
        partial = out.with_name(out.name + ".partial")
        copies = grow_trace(source, int(mb * MB), partial, rank, shift_us=(rank or 0) * 7.0)
        partial.replace(out)
        console.print(f"  built {out} ({out.stat().st_size / MB:,.0f} MB, {copies} copies) in "
                      f"{time.perf_counter() - started:.1f} s", soft_wrap=True)
    return out


def large_speed(paths: list[Path], args, env: dict[str, str], meta: dict, json_path: Path) -> dict:
    """trace-report --json on traces of real size, against json.loads of the same file (and HTA, with --hta),
    interleaved."""
    if len(paths) != 1:
        raise UsageError("--large builds its traces from one real trace: give one")
    try:
        sizes = sorted(float(s) for s in args.sizes.split(","))
    except ValueError:
        raise UsageError(f"--sizes {args.sizes}: expected sizes in MB, e.g. 100,1000") from None
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]benchmark_trace_report --large[/bold] · {meta['usable_cores']} of {meta['cores']} cores · "
                  f"Python {meta['python']} · checkout {meta['checkout']} · {args.rounds} rounds · load average "
                  f"{meta['load_avg_start'][0]:.2f}{escape(hta_words(meta))}", soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="trace-report-large-") as links:
        return _large_speed(paths[0], sizes, scratch, Path(links), args, env, meta, json_path)


def _large_speed(source: Path, sizes: list[float], scratch: Path, links: Path, args, env: dict[str, str], meta: dict,
                 json_path: Path) -> dict:
    from trace_report.files import write_atomically

    report = [sys.executable, "-m", "trace_report.report"]
    driver = links / "hta_driver.py"
    driver.write_text(HTA_DRIVER)

    def hta(label: str, traces: list[Path]) -> list[Command]:
        """HTA's breakdowns of the same traces (a folder of links: HTA reads every rank in it), with --hta."""
        if not args.hta:
            return []
        folder = hta_folder(links / f"hta{len(list(links.iterdir()))}", traces)
        return [Command(label, [args.hta, str(driver), str(folder)], keep_stdout=True)]

    cases = []
    read_mb: dict[str, float] = {}  # a command that reads more than its case's trace: the MB it reads
    for mb in sizes:
        trace = built(source, scratch, mb)
        cases.append((trace, [Command("json.loads", [sys.executable, "-c", JSON_LOADS, str(trace)]),
                              Command("decoding alone", [sys.executable, "-c", DECODING_ALONE, str(trace)]),
                              Command("trace-report --json", [*report, str(trace), "--json"]),
                              Command("trace-report --json .gz", [*report, str(gzipped(trace)), "--json"]),
                              *hta("HTA", [trace])]))
    if args.rank_count > 1:
        ranks = [built(source, scratch, sizes[0], r) for r in range(args.rank_count)]
        all_ranks = f"{len(ranks)} ranks"
        cases.append((ranks[0], [Command("trace-report --json, rank 0", [*report, str(ranks[0]), "--json"]),
                                 Command(f"trace-report, {all_ranks}", [*report, *map(str, ranks)]),
                                 *hta(f"HTA, {all_ranks}", ranks)]))
        read_mb[f"trace-report, {all_ranks}"] = read_mb[f"HTA, {all_ranks}"] = sum(r.stat().st_size for r in ranks) / MB
    for _, commands in cases:  # untimed: the page cache, bytecode, failures found before the rounds
        for command in commands:
            first = run_once(command, env)
            if first.returncode != 0:
                command.failed = first.error
    for r in range(args.rounds):
        for _, commands in cases:
            live = [c for c in commands if c.failed is None]
            k = r % max(1, len(live))
            for command in live[k:] + live[:k]:
                command.runs.append(run_once(command, env))
        console.print(f"  round {r + 1}/{args.rounds}")
    rows = []
    for trace, commands in cases:
        for command in commands:
            size = read_mb.get(command.label, trace.stat().st_size / MB)
            ok = [run for run in command.runs if run.returncode == 0]
            row = {"trace": str(trace), "json_mb": size, "command": command.label, "failed": command.failed or
                   (None if ok else "every run failed")}
            if ok:
                row.update(median_s=statistics.median(r.wall_s for r in ok), cpu_s=statistics.median(r.cpu_s for r in ok),
                           peak_mb=max(r.peak_mb for r in ok), wall_s=[round(r.wall_s, 3) for r in ok])
                row["mb_per_s"] = size / row["median_s"]
                row["peak_over_file"] = row["peak_mb"] / size
            rows.append(row)
    lines = _goal_lines(rows)
    results = {"machine": {**meta, "load_avg_end": os.getloadavg()}, "rounds": args.rounds, "large": rows,
               "goals": {"ratio": GOAL_LARGE_RATIO, "rss": GOAL_LARGE_RSS, "gzip": GOAL_GZIP_RATIO}, "lines": lines}
    write_atomically(json_path, json.dumps(results, indent=2) + "\n")
    for row in rows:
        name = Path(row["trace"]).name
        if row["failed"]:
            console.print(f"  {name} · {row['command']}: failed: {row['failed']}", soft_wrap=True)
            continue
        console.print(f"  {name} ({row['json_mb']:,.0f} MB) · {row['command']}: {row['median_s']:.2f} s "
                      f"({row['cpu_s']:.2f} s CPU), {row['mb_per_s']:,.0f} MB/s, peak {row['peak_mb']:,.0f} MB "
                      f"({row['peak_over_file']:.2f}× the JSON it reads)", soft_wrap=True)
    for line in lines:
        console.print(line, soft_wrap=True)
    console.print(f"load average {meta['load_avg_start'][0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
                  f"results: {json_path}", soft_wrap=True)
    return results


def _goal_lines(rows: list[dict]) -> list[str]:
    lines = ["Goals (this machine, this run)"]
    by = {(row["trace"], row["command"]): row for row in rows if not row["failed"]}
    for (trace, label), row in by.items():
        if label != "trace-report --json":
            continue
        name = Path(trace).name
        base, packed = by.get((trace, "json.loads")), by.get((trace, "trace-report --json .gz"))
        floor = by.get((trace, "decoding alone"))
        if base:
            ratio = base["median_s"] / row["median_s"]
            lines.append(f"  {'✓' if ratio >= GOAL_LARGE_RATIO else '✗'} {name}: {ratio:.2f}× json.loads's speed "
                         f"(goal ≥ {GOAL_LARGE_RATIO:g}×; json.loads {base['mb_per_s']:,.0f} MB/s, peak "
                         f"{base['peak_mb']:,.0f} MB" + (f"; decoding alone, nothing kept: "
                         f"{base['median_s'] / floor['median_s']:.2f}×" if floor else "") + ")")
        lines.append(f"  {'✓' if row['peak_over_file'] <= GOAL_LARGE_RSS else '✗'} {name}: peak "
                     f"{row['peak_over_file']:.2f}× the file (goal ≤ {GOAL_LARGE_RSS:g}×)")
        if packed:
            ratio = packed["median_s"] / row["median_s"]
            lines.append(f"  {'✓' if ratio <= GOAL_GZIP_RATIO else '✗'} {name}.gz: {ratio:.2f}× its JSON's time "
                         f"(goal ≤ {GOAL_GZIP_RATIO:g}×)")
    ranks = [row for row in rows if row["command"].startswith("trace-report, ")]
    for row in ranks:
        one = by.get((row["trace"], "trace-report --json, rank 0"))
        if one:
            lines.append(f"  {row['command']}: {row['median_s'] / one['median_s']:.2f}× one rank's time, peak "
                         f"{row['peak_mb']:,.0f} MB")
    for (trace, label), row in by.items():  # HTA, with --hta: what it takes for the same traces
        ours = by.get((trace, label.replace("HTA", "trace-report" + ("" if "," in label else " --json"))))
        if label.startswith("HTA") and ours:
            lines.append(f"  {label} on {Path(trace).name}: {row['median_s'] / ours['median_s']:.2f}× "
                         f"{ours['command']}'s time, peak {row['peak_mb']:,.0f} MB against {ours['peak_mb']:,.0f}")
    return lines
