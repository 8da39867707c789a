"""`trace-report A B`: the diff of two traces (compare.py) as the terminal shows it, in 100 columns at most.

    By op           which op's GPU work changed most, A against B: GPU work items · µs per step, and B/A
    By kind         GEMM, attention, elementwise, ...: the same, summed per kind of work
    Only in one     ops that ran in one trace only, and matched ops that run more of a kind of work in one
    Kernels         by decoded short name: only in A, only in B, in both (between GPUs of one vendor; across
                    vendors their count only: every kernel's name differs)
    step times      each trace's CPU and GPU time per step and its verdict, a line each

By default each table is short (the whole diff ~40 lines); `--rows N` shows N rows per table, `--rows 0` all.

`diff(a, b)` (trace_report.diff) is the TraceDiff of compare.py that a notebook shows as the terminal prints it: its
HTML view lives here, beside the printing, so that the data model imports nothing that draws it.
"""

from __future__ import annotations

from collections import Counter

from rich import box
from rich.markup import escape
from rich.table import Table

from trace_report.console import Console, html_of, name_width
from trace_report.compare import (
    FUSED, ONLY_FIRST, ONLY_SECOND, ORDER, KernelGroup, NewWork, OpMatch, OpRun, TraceDiff, op_rank, where_text,
)
from trace_report.noise import FASTER, SLOWER, Gate
from trace_report.fusion import Fusion
from trace_report.model import Trace, per_step_count
from trace_report.pace import verdict

WIDTH = 100  # the diff fits this many columns, whatever the terminal's width
COMPACT_ROWS = {"ops": 8, "only": 4, "kernels": 4}  # rows per section when --rows is not given
RATIO_GONE, RATIO_NEW = "gone", "new"


class ShownDiff(TraceDiff):
    """A TraceDiff that a notebook shows: the diff as `trace-report A B` prints it, each table short."""

    def _repr_html_(self) -> str:
        return html_of(lambda console: print_comparison(self, console, compact=True), WIDTH)


def diff(first: Trace, second: Trace) -> ShownDiff:
    """Two traces side by side (compare.py): which op's GPU work got slower, by kind, what only one runs."""
    return ShownDiff.of(first, second)


def print_comparison(d: TraceDiff, console: Console, *, full_names: bool = False, rows: int | None = None,
                     compact: bool = False) -> None:
    """The diff's sections (see the module's docstring). `rows`: rows per table (None: all), unless `compact`."""
    width = min(console.width, WIDTH)

    def cap(section: str) -> int | None:
        return COMPACT_ROWS[section] if compact else rows

    for label, trace in (("A", d.first), ("B", d.second)):
        console.print(escape(_clip(header_line(label, trace), width)))
        for text in trace.notes:
            console.print(f"[yellow]note:[/yellow] {escape(text)}")
    if not d.first.has_gpu or not d.second.has_gpu:
        console.print("[yellow]note:[/yellow] a trace without GPU work has no kernels to compare")
    print_by_op(d, console, width=width, rows=cap("ops"), full_names=full_names)
    print_by_kind(d, console)
    print_only_in_one(d, console, width=width, rows=cap("only"))
    print_kernel_names(d, console, width=width, rows=cap("kernels"), full_names=full_names)
    for label, trace in (("A", d.first), ("B", d.second)):
        console.print(escape(step_line(label, trace)))
    console.print()


# --- by op ---------------------------------------------------------------------------------------------------


def header_line(label: str, trace: Trace) -> str:
    """`A: mlp_eager.json.gz · NVIDIA H200 (sm90) · 3 steps`"""
    n = len(trace.steps)
    steps = f"{n} step{'s' if n != 1 else ''}" if trace.from_profiler_steps else "one step: the whole trace"
    return f"{label}: {trace.name} · {trace.device or 'no GPU in the trace'} · {steps}"


def print_by_op(d: TraceDiff, console: Console, *, width: int, rows: int | None, full_names: bool) -> None:
    if not d.ops:
        return
    shown = _head(d.ops, rows)
    labels = [m.op.name + op_rank(d.ops, m) for m in shown]
    places = [_place_text(m) for m in shown]
    changes = [m.change for m in shown]
    cells = [(_cell(m.first_items, m.first_us, bool(m.first)), _cell(m.second_items, m.second_us, bool(m.second)),
              _ratio(m.first_us, m.second_us)) for m in shown]
    numbers = [max(len(c[i]) for c in cells) for i in range(3)]
    room = width - _borders(5) - sum(max(n, len(h)) for n, h in zip(numbers, ("A", "B", "B/A")))
    # The op's name first: the place gets what it needs up to a third of the room, and then what the names leave.
    place_need = max(map(len, places))
    op_width = name_width(labels, room - min(place_need, room // 3))
    where_width = max(8, min(place_need, room - op_width))
    title = "By op: GPU work items · µs per step, A against B, the biggest change first"
    calls = _noise_legend(d, changes)  # in the title where it fits: a screen's diff takes no line more for it
    fits = len(title) + 3 + len(calls) <= width
    console.print("[bold]By op[/bold]" + escape(title.removeprefix("By op") + (f" · {calls}" if fits else "")))
    table = _table()
    table.add_column("op", no_wrap=not full_names, overflow="fold" if full_names else "ellipsis",
                     width=None if full_names else op_width)
    table.add_column("where", no_wrap=True, width=where_width)
    for header in ("A", "B", "B/A"):
        table.add_column(header, justify="right", no_wrap=True)
    for label, place, (a, b, ratio), m, c in zip(labels, places, cells, shown, changes):
        # The ratio's colour is the call (noise.py): red slower, green faster beyond the noise; gone and new alike.
        style = "red" if m.how == ONLY_FIRST or c.call == SLOWER else "green" if m.how == ONLY_SECOND or \
            c.call == FASTER else ""
        ratio_cell = f"[{style}]{ratio}[/{style}]" if style else ratio
        if m.how == FUSED:
            place = _clip(place, where_width)
        elif m.how == ORDER:  # the marker stays, the place is clipped after it
            place = "≈ " + _clip_left(place.removeprefix("≈ "), where_width - 2)
        else:
            place = _clip_left(place, where_width)
        table.add_row(escape(label if full_names else _clip_middle(label, op_width)), escape(place), a, b, ratio_cell)
    console.print(table)
    legend = [_more_text(d.ops, rows, "op"), "" if fits else calls]
    if any(m.how == ORDER for m in shown):
        legend.append("≈ paired by op name and order: their places differ")
    if any(m.how == FUSED and not m.op.replay for m in shown):
        legend.append("fuses: a fused kernel against the ops it took")
    if any(m.how == FUSED and m.op.replay for m in shown):
        legend.append("replays: a CUDA graph's replay against the ops it runs")
    legend = [text for text in legend if text]
    joined = " · ".join(legend)
    for line in [joined] if len(joined) <= width else legend:  # one line when it fits, else one per note
        console.print(f"[dim]{escape(line)}[/dim]")
    console.print()


def _noise_legend(d: TraceDiff, changes) -> str:
    """The calls of the rows shown (noise.py), B/A red or green for them: `2 slower, 1 faster`, `none slower or
    faster`, and `(noise unknown: 1 step)` where a trace has one step."""
    counts = {call: sum(1 for c in changes if c.call == call) for call in (SLOWER, FASTER)}
    said = ", ".join(f"{n} {call}" for call, n in counts.items() if n) or "none slower or faster"
    steps = min(len(d.first.steps), len(d.second.steps))
    return said + (f" (noise unknown: {steps} step)" if steps < 2 else "")


def print_gate(gate: Gate, stream) -> None:
    """`--fail_slower`: the gate's lines, plain (no markup, no wrapping: a CI log greps them)."""
    for line in gate.lines():
        stream.write(line + "\n")
    stream.flush()


def _place_text(m: OpMatch) -> str:
    if m.how == FUSED:
        replaced = Counter(op.name.removeprefix("aten::") for op in m.replaced)
        names = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in replaced.items())
        return f"{'replays' if m.op.replay else 'fuses'} {m.replaced_side}'s {names}"
    text = where_text(m.op.where) or "-"
    return f"≈ {text}" if m.how == ORDER else text


def _cell(items: float, us: float, ran: bool) -> str:
    return f"{per_step_count(round(items, 3))} · {us:,.1f}" if ran else "-"


def _ratio(a: float, b: float) -> str:
    if a > 0:
        return RATIO_GONE if b <= 0 else f"{b / a:.2f}×" if b / a >= 0.01 else "<0.01×"
    return RATIO_NEW if b > 0 else "-"


# --- by kind -------------------------------------------------------------------------------------------------


def print_by_kind(d: TraceDiff, console: Console) -> None:
    if not d.kinds:
        return
    console.print("[bold]By kind of work[/bold]: GPU work items · µs per step")
    table = _table()
    table.add_column("kind", no_wrap=True)
    for header in ("A", "B", "B/A"):
        table.add_column(header, justify="right", no_wrap=True)
    for k in d.kinds:
        (a, b), (ua, ub) = k.per_step, k.us_per_step
        table.add_row(escape(k.kind), _cell(a, ua, a > 0), _cell(b, ub, b > 0), _ratio(ua, ub) if ua or ub else "-")
    a = sum(k.per_step[0] for k in d.kinds), sum(k.us_per_step[0] for k in d.kinds)
    b = sum(k.per_step[1] for k in d.kinds), sum(k.us_per_step[1] for k in d.kinds)
    table.add_row("[bold]all[/bold]", _cell(a[0], a[1], True), _cell(b[0], b[1], True), _ratio(a[1], b[1]))
    console.print(table)
    console.print()


# --- only in one ---------------------------------------------------------------------------------------------


def print_only_in_one(d: TraceDiff, console: Console, *, width: int, rows: int | None) -> None:
    """Ops one trace runs and the other does not, and matched ops whose work differs in kind or count."""
    lines = []
    for how, label in ((ONLY_FIRST, "A"), (ONLY_SECOND, "B")):
        alike: dict[tuple, list[OpRun]] = {}  # one op at one place: one line (a graph's 16 input copies)
        for m in d.only_in(how):
            alike.setdefault((m.op.name, m.op.where), []).append(m.op)
        for (name, where), ops in sorted(alike.items(), key=lambda item: -sum(op.us for op in item[1])):
            times = f" ×{len(ops)}" if len(ops) > 1 else ""
            line = f"only in {label}: {name}{times}: {_work_text(ops)}, {sum(op.us for op in ops):,.1f} µs per step"
            place = where_text(where)
            if place:  # last, and clipped from the left: the innermost boxes tell most
                line += ", in " + _clip_left(place, max(12, width - 2 - len(line) - 5))
            lines.append(line)
    lines += [_new_work_line(group) for group in _grouped(d.new_work)]
    console.print("[bold]Only in one[/bold]" + ("" if lines else ": nothing: every op runs in both, with the same "
                                                "kinds of GPU work"))
    for line in _head(lines, rows):
        console.print("  " + escape(_clip(line, width - 2)))
    if _more_text(lines, rows, "line"):
        console.print(f"  [dim]{escape(_more_text(lines, rows, 'line'))}[/dim]")
    if lines:
        console.print()


def _work_text(ops: list[OpRun]) -> str:
    """`1 GEMM, 1 memset`: ops' GPU work per step by kind."""
    kinds: Counter = Counter()
    for op in ops:
        kinds.update(op.kinds)
    return ", ".join(f"{per_step_count(round(n, 3))} {kind}" for kind, n in kinds.items())


def _grouped(found: list[NewWork]) -> list[list[NewWork]]:
    """New work alike (one op name, one kind, the same counts and kernels) in one line: three GEMMs' memsets."""
    groups: dict[tuple, list[NewWork]] = {}
    for w in found:
        key = (w.match.op.name, w.kind, tuple(round(n, 3) for n in w.per_step), w.names)
        groups.setdefault(key, []).append(w)
    return list(groups.values())


def _new_work_line(group: list[NewWork]) -> str:
    w = group[0]
    op = w.match.op
    places = list(dict.fromkeys(where_text(x.match.op.where) for x in group))
    where = f" ({places[0]})" if len(places) == 1 and places[0] else ""
    times = f" ×{len(group)}" if len(group) > 1 else ""
    a, b = (per_step_count(round(n, 3)) for n in w.per_step)
    more = "B" if w.side == "second" else "A"
    return f"in {op.name}{times}{where}: {w.kind} {a} in A, {b} in B; {more}'s: {', '.join(w.names)}"


# --- kernels by name -----------------------------------------------------------------------------------------


def print_kernel_names(d: TraceDiff, console: Console, *, width: int, rows: int | None, full_names: bool) -> None:
    counts = f"{len(d.in_both)} in both, {len(d.only_in_first)} only in A, {len(d.only_in_second)} only in B"
    if not d.same_vendor:
        a, b = d.vendors
        console.print(f"[bold]Kernels by short name[/bold]: {escape(counts)} ({a} against {b}: --json lists them)")
        console.print()
        return
    listed: list[tuple[str, KernelGroup]] = [("only in A", g) for g in d.only_in_first]
    listed += [("only in B", g) for g in d.only_in_second] + [("in both", g) for g in d.in_both]
    shown = _head(listed, rows)
    more = f"; {len(shown)} shown (--rows N, 0 for all)" if len(shown) < len(listed) else ""
    console.print(f"[bold]Kernels by short name[/bold]: {escape(counts + more)}")
    if not shown:
        console.print()
        return
    names = [_kernel_label(g, full_names) for _, g in shown]
    room = width - _borders(4) - len("only in A") - 2 * len("A per step")
    kernel_width = name_width(names, room)
    table = _table()
    table.add_column("where", no_wrap=True)
    table.add_column("kernel", no_wrap=not full_names, overflow="fold" if full_names else "ellipsis",
                     width=None if full_names else kernel_width)
    table.add_column("A per step", justify="right", no_wrap=True)
    table.add_column("B per step", justify="right", no_wrap=True)
    for (where, group), name in zip(shown, names):
        style = {"only in A": "red", "only in B": "green"}.get(where, "")
        table.add_row(f"[{style}]{where}[/{style}]" if style else where,
                      escape(name if full_names else _clip_middle(name, kernel_width)),
                      per_step_count(round(group.per_step[0], 3)), per_step_count(round(group.per_step[1], 3)))
    console.print(table)
    console.print()


def _kernel_label(group: KernelGroup, full_names: bool) -> str:
    if full_names:
        return " | ".join(group.names)
    return group.short + (f" ({len(group.names)} names)" if len(group.names) > 1 else "")


# --- step times ----------------------------------------------------------------------------------------------


def step_line(label: str, trace: Trace) -> str:
    line = f"step time {label}: CPU {trace.cpu_us_per_step():,.1f} µs"
    if trace.has_gpu:
        kernels = sum(len(s.kernels) for s in trace.steps) / len(trace.steps)
        line += f", GPU busy {trace.gpu_busy_us_per_step():,.1f} µs, {per_step_count(round(kernels, 3))} kernels"
    return line + f" per step; verdict: {verdict(trace).kind}"


# --- the fusion section, in one line -------------------------------------------------------------------------


def print_fusion_line(fusion: Fusion, console: Console) -> None:
    """Where fusion would pay in A and what B did with it, in a line or two: the table (fusion_report.py) takes 20
    lines, and a compact diff's by-op rows already show what B fused."""
    if not fusion.has_gpu:
        return
    if not fusion.has_shapes or not fusion.candidates:
        console.print(escape(fusion.note or "Where fusion would pay: no candidates in A"))
        return
    n = len(fusion.candidates)
    line = f"Where fusion would pay in A: {n} candidate{'s' if n != 1 else ''}"
    outcomes = Counter(c.outcome.status for c in fusion.candidates if c.outcome is not None)
    if outcomes:
        line += "; in B " + ", ".join(f"{n} {status}" for status, n in outcomes.items())
    console.print(escape(line + " (--rows N: the table)"))


# --- small helpers -------------------------------------------------------------------------------------------


def _table() -> Table:
    """A table as the rest of the report draws them, less its outer frame: two lines fewer, for a short diff."""
    return Table(box=box.HEAVY_HEAD, show_edge=False)


def _borders(columns: int) -> int:
    """What a `_table()` of this many columns takes besides its cells: a space each side, a bar between."""
    return 3 * columns - 1


def _head(items: list, rows: int | None) -> list:
    return items if rows is None else items[:rows]


def _more_text(items: list, rows: int | None, what: str) -> str:
    """`… 28 more ops (--rows N, 0 for all)`, or "" when all are shown."""
    if rows is None or len(items) <= rows:
        return ""
    n = len(items) - rows
    return f"… {n} more {what}{'s' if n != 1 else ''} (--rows N, 0 for all)"


def _clip(text: str, width: int) -> str:
    """The start of `text` in `width` characters: a name reads from its start."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _clip_middle(text: str, width: int) -> str:
    """A long name's start and end in `width` characters: Inductor's names differ in their last words and
    number (`triton_poi_fused__scaled_dot…_view_where_3`, `…_where_4`)."""
    if len(text) <= width:
        return text
    head = (width - 1) * 3 // 5
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def _clip_left(text: str, width: int) -> str:
    """The end of `text` in `width` characters: a place reads from its innermost box, cut where a box starts."""
    if len(text) <= width:
        return text
    kept = text[len(text) - width + 1 :]
    cut = kept.find(" > ")
    return "…" + (kept[cut:] if 0 <= cut < len(kept) - 3 else kept)

