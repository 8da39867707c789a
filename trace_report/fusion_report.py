"""`trace-report`'s section "Where fusion would pay": `fusion.analyze`'s candidates as a table, ranked by saving."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from trace_report.console import Console, folded, table_room
from trace_report.fusion import CHAIN, Candidate, Fusion, mb
from trace_report.kernels import decode
from trace_report.model import per_step_count

TITLE = "Where fusion would pay"
FUSION_BRIEF_ROWS = 5  # without --rows: the five that save the most (the rest: --rows N or 0)
STATUS_STYLE = {"fused": "[green]fused[/green]", "remains": "[yellow]remains[/yellow]"}


def print_fusion(fusion: Fusion, console: Console, *, rows: int | None = None) -> None:
    """The section: one line without shapes (how to record them), else the table and what the second trace did."""
    if not fusion.has_gpu:
        return
    if not fusion.has_shapes:
        title, _, rest = (fusion.note or "").partition(" needs ")
        console.print(f"[bold]{escape(title)}[/bold] needs {escape(rest)}")
        console.print()
        return
    rate = ""
    if fusion.bandwidth_gbs is not None:
        rate = f" · floor at {fusion.bandwidth_gbs:,.0f} GB/s, {escape(fusion.bandwidth_from)}"
    console.print(f"[bold]{TITLE}[/bold]{rate}")
    if fusion.note:
        console.print(f"[yellow]note:[/yellow] {escape(fusion.note)}")
    if not fusion.candidates:
        console.print("  no memory-bound kernels run back to back on a stream, or beside a GEMM that reads their data")
        console.print()
        return
    shown = fusion.candidates if rows is None else fusion.candidates[:rows]
    numbers = [[f"{mb(c.bytes_now)} → {mb(c.bytes_fused)}", f"{c.measured_us_per_step:,.1f}",
                # the floor under the prediction: side by side they took 17 columns, the table 83 of a terminal's 80
                _us(c.predicted_us_per_step), f"({_us(c.floor_us_per_step)})", _us(c.saving_us_per_step)]
               for c in shown]
    # The ops, then what they run on and how often: a norm's chain is a dozen ops, so they get the room the numbers
    # leave, and break at their names' seams (`max_pool2d_with_` / `indices_backward`), never inside a word.
    headers = ("MB → fused", "µs/step", "fused (floor)", "saving")
    spent = len(str(len(shown))) + sum(max(len(header), *(len(cells[k]) for cells in numbers))
                                       for k, header in zip((0, 1, 3, 4), headers))  # (floor) as wide as fused
    longest = max(max(len(c.label) + 24, len(c.shape) + 12) for c in shown)  # with the kind and the count
    width = max(16, min(longest, table_room(console.width, 6) - spent))
    table = Table()
    table.add_column("#", justify="right", style="dim")
    table.add_column("ops · largest input · per step", overflow="fold", width=width)
    for name in headers:
        table.add_column(name, justify="right", overflow="fold")
    for i, (c, (moved, measured, fused, floor, saving)) in enumerate(zip(shown, numbers), 1):
        kind = "" if c.kind == CHAIN else f" ({c.link})" if c.link else f" ({c.kind.removeprefix('GEMM ')})"
        shape = f"{c.shape} · {per_step_count(c.per_step)}/step"
        ops = f"{escape(folded(c.label + kind, width, 99))}\n[dim]{escape(folded(shape, width, 99))}[/dim]"
        table.add_row(str(i), ops, moved, measured, f"{fused}\n[dim]{floor}[/dim]", saving)
    console.print(table)
    if len(shown) < len(fusion.candidates):
        console.print(f"[dim]… {len(fusion.candidates) - len(shown)} more candidates (--rows 0 for all)[/dim]")
    console.print("  fused: the µs/step one fused kernel would take, its bytes at the rate these kernels reached here "
                  "(an epilogue or a prologue: what the GEMM would add); (floor): at the nominal bandwidth")
    if fusion.second is not None:  # below the table, not a column of it: the table fits 80 columns
        console.print(f"  in B ({escape(fusion.second)}):")
        for i, c in enumerate(shown, 1):
            if c.outcome is not None:
                console.print(f"  #{i} {STATUS_STYLE.get(c.outcome.status, c.outcome.status)}{escape(_outcome_text(c))}")
    console.print()


def _outcome_text(c: Candidate) -> str:
    """What the second trace did with a candidate, after its status: which kernels, how long, against the
    prediction."""
    outcome = c.outcome
    if outcome.status == "remains":
        return ": B still runs its kernels"
    if outcome.status == "gone":
        return ": its kernels are gone, and no kernel's name in B says where its ops went"
    kernels = ", ".join(decode(name).short for name in outcome.kernels)
    took = f"{outcome.median_us:,.1f} µs a run (median)"
    if outcome.in_gemm:  # the kernel also multiplies: its time is no measure of the fused ops' alone
        took += ", the GEMM's work included"
    if outcome.status != "fused":
        return f": B runs its ops in {kernels}, {took}"
    if c.predicted_us and not outcome.in_gemm:
        took += f", {outcome.median_us / c.predicted_us:.2f}× the {c.predicted_us:,.1f} µs predicted"
    return f": {kernels} takes {took}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
