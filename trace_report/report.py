"""`trace-report`: print the post's tables for any torch.profiler trace, or diff two traces.

    uv run trace-report traces/03_simple_mlp/64_128_768_3072_eager.json
    uv run trace-report EAGER.json COMPILED.json          # which op got slower, by kind, what only one runs
    uv run trace-report TRACE.json --json                  # the same content, for programs
    uv run trace-report TRACE.json --png [FILE] [--step N] # one step drawn as Perfetto shows it, into a PNG
    uv run trace-report TRACE.json --open                  # Perfetto opens it from this machine: no upload
    uv run trace-report RUN_rank0.json RUN_rank1.json      # one run's ranks: collectives, exposed time, skew
    uv run trace-report GRAPHED.json --graph_kernels       # CUDA graphs: each replay's kernels under its row
    uv run trace-report SHAPES.json --bandwidth 3350       # where fusion would pay, at this memory bandwidth

For each active step (`ProfilerStep#N`): the GPU work in time order, each with the op that launched it,
its duration and share of the step's GPU time; the runtime calls; the CPU ops that launched nothing.
Then what happened outside the steps (the profiler's closing synchronize), one row per kernel across steps
(the post's "avg CUDA" table), what each kernel's name says, and a verdict: overhead-bound or compute-bound,
with the numbers behind it, starting from the two totals under `prof.key_averages().table()`, and what the profiler
changed (trace_report/observer.py): the step timed without it where the trace holds that timing (the lessons write it),
else what the trace was recorded with and, for an overhead-bound verdict, whether it would likely survive without the
profiler. In a trace recorded with profile_memory=True, where the memory goes: per device the peak, when, and the ops
that allocated what was live then (memory.py). Each op by roofline (roofline.py), then where fusion would pay (trace_report/fusion.py), in a trace recorded with shapes; with two traces, what the
second fused.

This module is the command: its flags, the ranks, the diff, --json. What one trace's report prints is
text_report.py's; the diff's, compare_report.py's.
"""

from __future__ import annotations

import argparse
import codecs
import gc
import importlib.util
import json
import math
import os
import sys
import zlib
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rich.markup import escape

from trace_report.cli import ArgumentParser, count_or_zero, positive_int
from trace_report.console import Console, analysing, read_progress
from trace_report.errors import CannotRunHere, UsageError, exits_cleanly, note
from trace_report.export import LazyRows
from trace_report.files import writable_file
from trace_report.compare import TraceDiff
from trace_report.compare_report import WIDTH as DIFF_WIDTH
from trace_report.compare_report import diff, print_comparison, print_fusion_line, print_gate
from trace_report.fusion_report import FUSION_BRIEF_ROWS, print_fusion
from trace_report.roofline_report import ROOFLINE_BRIEF_ROWS
from trace_report import communication as comm
from trace_report import ranks as rank_traces
from trace_report.api import Report
from trace_report.attribution import print_owners
from trace_report import fusion  # fusion candidates (fusion.py)
from trace_report import peaks, roofline  # the ops by roofline against the GPU's peaks
from trace_report.picture import choose_step, gpu_counts, picture_path, step_flag, write_picture
from trace_report.picture import write_ranks_picture
from trace_report.reader import read_trace
from trace_report.replay import replay_command
from trace_report.serve import PERFETTO_PORT, open_in_perfetto
from trace_report.text_report import AUTO_STEPS, BRIEF_LINES, BRIEF_ROWS, DEFAULT_ROWS, DEFAULT_STEPS, STEP_LINES
from trace_report.text_report import print_report

DRAWN_RANKS = 8  # --png of a rank set draws this many ranks at most, one above the other
AUTO_ROWS = -1  # --rows not given: a short report (BRIEF_ROWS a table) for one trace; a diff's short default


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="trace-report",
        description="Read a torch.profiler Chrome trace (.json or .json.gz): kernels per step, the ops that "
        "launched them, per-kernel stats, a verdict; with two traces, a diff of their kernels.",
    )
    parser.add_argument("trace", help="a Chrome trace written by torch.profiler (.json or .json.gz)")
    parser.add_argument("other", nargs="?", help="a second trace: print what differs (e.g. eager vs --compile)")
    # --- communication: several ranks' traces (trace_report/communication.py) ---
    parser.add_argument("more", nargs="*", help="more traces, with --ranks: the other ranks of the same run")
    parser.add_argument(
        "--ranks",
        action="store_true",
        help="read the traces as the ranks of one distributed run: a row per rank, the skew between them "
        "(automatic when the names are RUN_rank0.json, RUN_rank1.json, ...)",
    )
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="ranks: read N traces at a time (default: one per core)")
    parser.add_argument("--skip_bad", action="store_true",
                        help="ranks: a trace that cannot be read is skipped (a note on stderr), not the end of the run")
    # --- end communication ---
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument("--fail_slower", type=_percent_flag, default=None, metavar="PCT",
                        help="with two traces: exit 1 when an op of 1%% of the step or more is slower by more than "
                        "PCT%% beyond the noise of its per-step times, one line per op on stderr (noise.py)")
    parser.add_argument("--full_names", action="store_true", help="show kernel names whole, not shortened")
    parser.add_argument("--kernels", action="store_true",
                        help="always print the post's avg CUDA table and what each kernel's name says (by default "
                        "only when the steps are printed one by one: the summary's top kernels stand for them)")
    # --- CUDA graphs (trace_report/graphs.py) ---
    parser.add_argument("--graph_kernels", action="store_true",
                        help="with CUDA graph replays: list each replay's kernels under its row")
    # --- end CUDA graphs ---
    # --- where fusion would pay (trace_report/fusion.py) ---
    parser.add_argument("--bandwidth", type=fusion.bandwidth_flag, default=None, metavar="GB/s",
                        help="the GPU's memory bandwidth for 'Where fusion would pay' (default: the nominal peak of "
                        "the GPU the trace names, when known)")
    # --- end fusion ---
    parser.add_argument("--replay", default=None, metavar="ROW|OP",
                        help="re-time one op of 'Ops by roofline' alone on this machine's GPU (its row number or op "
                        "name), rebuilt from the trace's shapes, strides and types; needs torch and a GPU")
    parser.add_argument("--replay_script", default=None, metavar="FILE",
                        help="with --replay: write the standalone script that re-times the op to FILE, run nothing")
    parser.add_argument("--peak", type=peaks.peak_flag, default=None, metavar="TFLOPS,TBPS",
                        help="the GPU's peak compute and memory bandwidth for 'Ops by roofline' (default: the datasheet "
                        "figures of the GPU the trace names, peaks.py)")
    parser.add_argument(
        "--steps",
        type=_steps_flag,
        default=AUTO_STEPS,
        help=f"how many steps to print one by one: a number or 'all' (default: up to {DEFAULT_STEPS} when their "
        f"kernels fit about {STEP_LINES} lines, else none: the summary stands for them)",
    )
    parser.add_argument(
        "--rows",
        type=count_or_zero,
        default=AUTO_ROWS,
        help=f"rows per table; 0 for all (default: {BRIEF_ROWS} for one trace, the report about 120 lines at most; "
        "with two traces a short diff, ~40 lines)",
    )
    # Seeing a step without uploading it: a picture, or Perfetto fed from this machine (_look, at the end).
    parser.add_argument(
        "--png", nargs="?", const="", metavar="FILE",
        help="draw one step as Perfetto shows it (CPU threads over GPU streams, an arrow from each launch to its "
        "kernel) into FILE, a PNG (default: beside the trace, .json replaced by .png); prints no tables. A run's "
        f"ranks: the {DRAWN_RANKS} lowest, one above the other, on one clock",
    )
    parser.add_argument(
        "--step", type=step_flag, default=None,
        help="the step --png draws: a ProfilerStep number (3 or ProfilerStep#3), else an index (0 the first, "
        "-1 the last) (default: the first active step)",
    )
    parser.add_argument(
        "--open", action="store_true",
        help="serve this one trace from 127.0.0.1 to ui.perfetto.dev, print the link (and open it where a browser "
        "is); no upload; Ctrl-C stops",
    )
    parser.add_argument(
        "--port", type=count_or_zero, default=None,
        help=f"where --open listens (default: {PERFETTO_PORT}, the one port ui.perfetto.dev fetches from; "
        "0: any free one, for the far end of an SSH forward)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    frozen_before = gc.get_freeze_count()
    try:
        return exits_cleanly(_main)(argv)
    finally:
        if not frozen_before:  # called in a longer process (a test, a notebook): its objects go back to the GC
            gc.unfreeze()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.png is not None or args.open or args.step is not None or args.port is not None:
        return _look(args, parser)
    if args.replay is not None or args.replay_script is not None:
        if args.replay is None or args.other or args.more:
            parser.error("--replay ROW re-times an op of one trace (--replay_script FILE writes its script)")
        return replay_command(args.trace, args.replay, args.replay_script, args.peak)
    # --- communication: several ranks' traces ---
    paths = [args.trace, *([args.other] if args.other else []), *args.more]
    if args.ranks or rank_traces.is_rank_set(paths):
        return _ranks_main(paths, args)
    if args.more:
        raise UsageError(f"{len(paths)} traces: give --ranks to read them as the ranks of one run (a diff takes two)")
    # --- end communication ---
    if args.fail_slower is not None and not args.other:
        parser.error("--fail_slower PCT gates the diff of two traces: give the base trace and the new one")
    with read_progress(paths) as progress:  # a bar on a terminal for a long read, gone before the report
        first = read_trace(args.trace, progress(args.trace))
        second = read_trace(args.other, progress(args.other)) if args.other else None
    # The traces' objects live as long as this process: kept out of the cyclic GC's later passes, which would walk
    # them all again while the analyses allocate (0.1-0.25 s of CPU on a 54 MB trace of 216k events, 2 cores).
    gc.freeze()
    for trace in (first, second):
        if trace is not None and trace.skipped_note:
            note(f"{trace.path}: {trace.skipped_note}")
    with analysing(paths, " and ".join(Path(path).name for path in paths)):  # a line on a terminal till the report
        return _report(args, first, second)


def _report(args, first, second) -> int:
    """One trace's report, or the diff of two, on stdout (text or --json); the exit code (--fail_slower's gate)."""
    rows = _rows(args.rows)
    compared = diff(first, second) if second is not None else None
    gate = compared.gate(args.fail_slower) if args.fail_slower is not None else None
    if args.json:
        payload = Report(first, args.bandwidth, args.peak).to_json(lazy_steps=True) if second is None else {
            "traces": [Report(first, args.bandwidth, args.peak).to_json(second),
                       Report(second, args.bandwidth, args.peak).to_json()],
            "diff": compared.to_dict(gate),
        }
        # JSON has no NaN or Infinity: a value a trace could not give (a zero-length window) is null.
        _print_json(payload)
        return _gated(gate)
    console = Console(highlight=False, width=_width())
    found = fusion.analyze(first, args.bandwidth, second)  # the last section
    if second is None:
        brief = args.rows == AUTO_ROWS and args.steps == AUTO_STEPS and not args.kernels  # asked for detail: 40 rows
        print_report(first, console, full_names=args.full_names, steps=args.steps,
                     rows=BRIEF_ROWS if brief else rows, graph_kernels=args.graph_kernels, kernels=args.kernels,
                     fusion_found=found, fusion_rows=FUSION_BRIEF_ROWS if brief else rows,
                     op_table=roofline.op_table(first, args.peak), op_rows=ROOFLINE_BRIEF_ROWS if brief else rows,
                     lines=BRIEF_LINES if brief else None)
        return 0
    console.width = min(console.width, DIFF_WIDTH)  # a diff fits 100 columns, its fusion section too
    compact = args.rows == AUTO_ROWS
    print_diff(compared, console, full_names=args.full_names, rows=rows, compact=compact)
    if compact:
        print_fusion_line(found, console)
    else:
        print_fusion(found, console, rows=rows)
    return _gated(gate)


def _gated(gate) -> int:
    """--fail_slower: the gate's lines on stderr (stdout stays the report, or --json's JSON), exit 1 when it fails."""
    if gate is None:
        return 0
    sys.stdout.flush()
    print_gate(gate, sys.stderr)
    return 0 if gate.passed else 1


def _percent_flag(text: str) -> float:
    try:
        value = float(text.removesuffix("%"))
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a percentage, 0 or more (5 or 5%), got {text!r}")
    return value


# --- communication (trace_report/communication.py) ---------------------------------------------


def _ranks_main(paths: list[str], args) -> int:
    """The ranks of one run: each rank's collectives and steps in a row, the skew between them, the straggler, and
    per rank each collective with its bucket or unit (attribution.py). The traces are read --jobs at a time."""
    if len(paths) < 2:
        raise UsageError("--ranks reads two traces or more, one per rank of the same run")
    with read_progress(paths, ticking=False) as progress:  # one bar for the run's traces, by the bytes of those read
        ranks = rank_traces.read_ranks(paths, jobs=args.jobs, skip_bad=args.skip_bad,
                                       per_rank=_rank_json if args.json else None,
                                       progress=progress(f"{len(paths)} ranks"))
    with analysing(paths, f"{len(paths)} ranks"):  # a line on a terminal till the report
        return _ranks_report(args, ranks)


def _ranks_report(args, ranks) -> int:
    """The ranks' report on stdout, text or --json."""
    if args.json:
        lag = rank_traces.skew(ranks)
        slow = rank_traces.straggler(ranks, lag)
        payload = {
            "ranks": [RankJSON(r) for r in ranks],  # each written in pieces
            "skew": lag.to_dict() if lag is not None else None,
            "straggler": slow.to_dict() if slow is not None else None,
        }
        _print_json(payload)
        return 0
    console = Console(highlight=False, width=_width())
    rank_traces.print_ranks(ranks, console)
    print_owners(ranks, console)
    first = ranks[0]
    if first.comm is not None:
        console.print(f"[bold]rank {first.rank}[/bold]: {escape(first.figures.name)}")
        comm.print_communication(first.comm, console, rows=_rows(args.rows))
    return 0


def _rank_json(rank) -> tuple[bytes, str | None]:
    """A rank's part of --ranks --json, made where its trace is read (read_ranks' per_rank, in a worker): its JSON text
    but the collectives, compressed as it is written (5.6 MB to 0.47), and its CUDA graph replays'. The parsed traces
    never come back, so the ranks are read in parallel and the parent holds only their texts: 4 ranks of 30 MB, read in
    the parent one after the other, took 4.8 s and 190 MB; so, 3.1 s and 87 MB (2 cores; 8 of 100 MB: 39.4 s and 952
    MB, 21.4-22.0 s and 187 MB). The collectives are the parent's to write (RankJSON): the skew over all ranks sets
    each one's wait and transfer (ranks.skew)."""
    report = Report(rank.trace)
    report.communication = None
    payload = report.with_communication(lazy_steps=True)
    graphs = payload.pop("cuda_graphs", None)
    packer = zlib.compressobj(1)
    packed: list[bytes] = []
    _write_object({"rank": rank.rank, **payload}, lambda text: packed.append(packer.compress(text.encode())),
                  close=False)
    packed.append(packer.flush())
    return b"".join(packed), None if graphs is None else _dumps(graphs)


class RankJSON:
    """A rank's item of --ranks --json, as with_communication orders it, written a piece at a time (_write_object):
    _rank_json's text unpacked 4 MB at a time, the collectives, the CUDA graph replays, the collectives by unit."""

    PIECE = 4 << 20

    def __init__(self, rank):
        self.rank = rank

    def pieces(self) -> Iterator[str]:
        head, graphs = self.rank.extra
        unpacker, text = zlib.decompressobj(), codecs.getincrementaldecoder("utf-8")()
        while head:
            yield text.decode(unpacker.decompress(head, self.PIECE))
            head = unpacker.unconsumed_tail
        yield text.decode(unpacker.flush(), final=True)
        if self.rank.comm is not None:
            yield f', "communication": {_dumps(self.rank.comm.to_dict())}'
        if graphs is not None:
            yield f', "cuda_graphs": {graphs}'
        yield f', "collectives_by_unit": {_dumps(self.rank.figures.owners)}}}'


# --- end communication ---


def _print_json(payload) -> None:
    """The report as one line of JSON: json's C encoder writes it only without indentation, 0.4 s sooner on a 14 MB
    report (jq or python -m json.tool indent it for reading). Written a piece at a time (_write_object), the same
    bytes as json.dumps of the whole: the text of a 147 MB trace's report is 30 MB, and held whole (with its encoding
    for stdout) it was the process's peak."""
    write = sys.stdout.write
    if not isinstance(payload, dict):
        write(_dumps(payload))
        write("\n")
        return
    _write_object(payload, write)
    write("\n")


def _write_object(payload: dict, write: Callable[[str], object], close: bool = True) -> None:
    """A dict as JSON through `write`, each top-level value and each item of a top-level list encoded alone; a
    LazyRows' items (one trace's steps) made as they are written, so that its rows are never all held at once, a
    RankJSON's written in its pieces. `close`: with the closing brace."""
    write("{")
    for i, (key, value) in enumerate(payload.items()):
        write(f"{', ' if i else ''}{_dumps(key)}: ")
        if isinstance(value, (list, LazyRows)) and value:
            write("[")
            for j, item in enumerate(value):
                if j:
                    write(", ")
                if isinstance(item, RankJSON):
                    for piece in item.pieces():
                        write(piece)
                else:
                    write(_dumps(item))
            write("]")
        else:
            write(_dumps(value))
    if close:
        write("}")


def _dumps(value) -> str:
    try:  # most reports hold no NaN or infinity: one pass of the C encoder, without walking the value first
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False)


def _finite(value):
    """`value` with every non-finite float replaced by None, in dicts and lists at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


# --- two traces ----------------------------------------------------------------------------------------------


def print_diff(d: TraceDiff, console: Console, *, full_names: bool, rows: int | None, compact: bool = False) -> None:
    """Two traces: which op got slower, by kind, what only one runs, kernels by name, step times
    (compare_report.py). `compact`: each table's short default instead of `rows`."""
    print_comparison(d, console, full_names=full_names, rows=rows, compact=compact)


# --- one step drawn, or the trace opened in Perfetto (picture.py, serve.py) ----------------------------------


def _look(args: argparse.Namespace, parser: ArgumentParser) -> int:
    """`--png` and `--open`: the picture first (its flags checked before the trace is read), then the server. With
    several ranks' traces, `--png` draws them one above the other on one time axis."""
    paths = [args.trace, *([args.other] if args.other else []), *args.more]
    several = len(paths) > 1 and args.png is not None and (args.ranks or rank_traces.is_rank_set(paths))
    if (args.other and not several) or args.json:
        parser.error(f"--png and --open take one trace (or, --png, each rank's of one run) and print no report: drop "
                     f"{'the second trace' if args.other else '--json'}")
    if several and args.open:
        parser.error("--open opens one trace in Perfetto: give one, or drop --open")
    if args.png is None and args.step is not None:
        parser.error("--step picks the step that --png draws: add --png")
    if not args.open and args.port is not None:
        parser.error("--port is where --open listens: add --open")
    trace_path = Path(args.trace)
    if args.png is not None:
        if importlib.util.find_spec("matplotlib") is None:
            raise CannotRunHere("--png draws with matplotlib, which is not installed here: install trace-report[png] "
                                "(uvx --from './trace_report[png]' trace-report ...) or pip install matplotlib")
        default = picture_path(trace_path)
        if several:  # RUN_rank0.json, RUN_rank1.json -> RUN_ranks.png
            default = default.with_name(rank_traces.RANK_NAME.sub(r"\g<run>_ranks.png", trace_path.name))
        png = Path(args.png) if args.png else default
        if png.suffix.lower() != ".png":
            parser.error(f"--png writes a PNG: give it a file name ending in .png, not {png.name!r}")
        writable_file(png, "the picture")
        if several:
            # The picture holds each drawn rank's whole trace: DRAWN_RANKS of them, the lowest (64 ranks of 100 MB
            # would be 8 GB here, and a picture nobody reads)
            drawn_paths = rank_traces.lowest_ranks(paths, DRAWN_RANKS)
            with read_progress(drawn_paths, ticking=False) as progress:  # a bar on a terminal for a long read
                ranks = rank_traces.read_ranks(drawn_paths, keep_traces=True, jobs=args.jobs, skip_bad=args.skip_bad,
                                               progress=progress(f"{len(drawn_paths)} ranks"))
            chosen = [(r.rank, r.trace, choose_step(r.trace, args.step)) for r in ranks]
            drawn = write_ranks_picture(chosen, png)
            of = f" of {len(paths)}, the lowest" if len(drawn_paths) < len(paths) else ""
            print(f"picture: {png} ({len(chosen)} ranks{of}, {chosen[0][2].name}, {len(drawn.arrows)} launch "
                  "arrows)", flush=True)
            return 0
        with read_progress([trace_path]) as progress:  # a bar on a terminal for a long read
            trace = read_trace(trace_path, progress(trace_path))
        step = choose_step(trace, args.step)
        drawn = write_picture(trace, step, png)
        gpu = f": {gpu_counts(step)}, {len(drawn.arrows)} launch arrows" if step.gpu else ""
        print(f"picture: {png} ({step.name}{gpu})", flush=True)
    if args.open:
        return open_in_perfetto(trace_path, args.port)
    return 0


# --- small helpers -------------------------------------------------------------------------------------------


def _rows(flag: int) -> int | None:
    """--rows as a number of rows per table: None for all (0), DEFAULT_ROWS when not given."""
    return None if flag == 0 else DEFAULT_ROWS if flag == AUTO_ROWS else flag


def _steps_flag(text: str) -> int | None:
    if text == "all":
        return None
    try:
        return count_or_zero(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of steps (0 or more) or 'all', got {text!r}") from None


def _width() -> int | None:
    """A terminal's own width; 120 columns when piped, so kernel names do not fold at 80."""
    return None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120


if __name__ == "__main__":
    sys.exit(main())
