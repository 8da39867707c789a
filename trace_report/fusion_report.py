"""`trace-report`'s section "Where fusion would pay": `fusion.analyze`'s candidates as a table, ranked by saving."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from trace_report.console import Console
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
    table = Table()
    table.add_column("#", justify="right", style="dim")
    # The ops, then what they run on and how often: a norm's chain is a dozen ops, so they get the room.
    table.add_column("ops · largest input · per step", overflow="fold", min_width=min(30, max(16, console.width - 72)))
    for name in ("MB → fused", "µs/step", "fused (floor)", "saving"):
        table.add_column(name, justify="right", overflow="fold")
    for i, c in enumerate(shown, 1):
        kind = "" if c.kind == CHAIN else f" ({c.link})" if c.link else f" ({c.kind.removeprefix('GEMM ')})"
        ops = f"{escape(c.label)}{kind}\n[dim]{escape(c.shape)} · {per_step_count(c.per_step)}/step[/dim]"
        cells = [
            str(i), ops, f"{mb(c.bytes_now)} → {mb(c.bytes_fused)}", f"{c.measured_us_per_step:,.1f}",
            f"{_us(c.predicted_us_per_step)} ({_us(c.floor_us_per_step)})", _us(c.saving_us_per_step),
        ]
        table.add_row(*cells)
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
