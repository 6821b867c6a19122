"""Show what a trace holds: source, time span, ranks, devices, rows per table, host clocks and its health.

A .ktrace store is described from its meta.json and Parquet footers: no rows are read, whatever its size. A Kineto
file past 96 MiB of columns (~2 M events) is first written, as it is read, into a temporary store under $TMPDIR,
removed afterwards (KTRACE_SPILL_BYTES sets the point; every reading verb does the same).

examples:
  ktrace info run.ktrace
  ktrace info worker0.pt.trace.json.gz --json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ktrace.cli.options import add_json_flag, add_trace_argument, open_trace, reading, terminal_console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace info`."""
    add_trace_argument(parser)
    add_json_flag(parser)
    parser.add_argument("--validate", action="store_true", help="also check every table against schema v1")


def describe(trace: Any, *, validate: bool = False) -> dict[str, Any]:
    """The facts `ktrace info` shows, as a JSON-ready dict (stable keys)."""
    import polars as pl

    from ktrace.model.schema import NODE_RANK

    span = trace.span_ns()
    devices = (  # by rank number: a store lists its partitions as text (rank=10 before rank=8)
        trace.devices.with_columns(pl.col(pl.Categorical).cast(pl.String))
        .sort(["node", "rank", "device"], nulls_last=True, maintain_order=True)
        .to_dicts()
    )
    info: dict[str, Any] = {
        "source": trace.meta.source,
        "schema_version": trace.meta.schema_version,
        "span": None
        if span is None
        else {
            "start_ns": span[0],
            "end_ns": span[1],
            "duration_s": round((span[1] - span[0]) / 1e9, 6),
            "start_utc": dt.datetime.fromtimestamp(span[0] / 1e9, dt.timezone.utc).isoformat(timespec="milliseconds"),
        },
        "ranks": _ranks(trace),
        "node_counters": sorted({n for n, r in trace.ranks if r == NODE_RANK}),  # hosts with node-wide counters
        "devices": devices,
        "rows": trace.counts(),
        "health": dict(sorted(trace.meta.health.items())),
        "notes": list(trace.meta.notes),
        "clock": _clock(trace),
    }
    if validate:
        info["problems"] = [str(p) for p in trace.validate()]
    return info


@contextmanager
def _opened(path: str, *, validate: bool) -> Iterator[Any]:
    """What `describe` reads: a store's footers (model.store_footers: its rows are not read), also those of the
    temporary store a big Kineto file is read through (importers.kineto_spill); the whole trace where the footers
    cannot answer, for --validate and for other formats."""
    from ktrace.importers import locate
    from ktrace.model.store_footers import store_facts

    kind, found = locate(Path(path))
    if validate or not (kind == "ktrace" or (kind == "kineto" and found.is_file())):
        yield open_trace(path)
        return
    if kind == "ktrace":
        yield store_facts(found) or open_trace(path)
        return
    from ktrace.importers.kineto_spill import kineto_opened
    from ktrace.model.store import read

    with reading(path) as bar, kineto_opened(found, progress=bar) as opened:
        yield opened if not isinstance(opened, Path) else (store_facts(opened) or read(opened))


def _ranks(trace: Any) -> list[dict[str, Any]]:
    """The traced processes: {"node", "rank"} each ("pid" too for a `ktrace run` capture). The node-wide counters'
    partition (NODE_RANK) is no rank; a capture's process that `ktrace run` filed under its pid (no RANK in its
    environment and rank 0 taken by another process) has an unknown rank: "rank" null, "partition" its folder."""
    from ktrace.model.schema import NODE_RANK

    processes = trace.meta.job.get("processes") if trace.meta.source == "ktrace" else None  # nsys: {pid: name}
    listed = processes if isinstance(processes, list) else []
    pids = {(str(p.get("node")), p.get("rank")): p.get("pid") for p in listed if isinstance(p, dict)}
    ranks: list[dict[str, Any]] = []
    for node, rank in trace.ranks:
        if rank == NODE_RANK:
            continue
        pid = pids.get((node, rank))
        entry: dict[str, Any] = (
            {"node": node, "rank": rank} if pid is None else {"node": node, "rank": rank, "pid": pid}
        )
        if pid is not None and pid == rank:
            entry.update(rank=None, partition=rank)
        ranks.append(entry)
    return ranks


def _clock(trace: Any) -> dict[str, Any]:
    """meta.clock_alignment as stored (with "applied": whether these timestamps are aligned), or a note."""
    from ktrace.model.clock import reference_clock_note

    alignment = trace.meta.clock_alignment
    if alignment is None:
        hosts = sorted({n for n, _ in trace.ranks} | set(trace.meta.hosts))
        return {"method": None, "note": reference_clock_note(hosts)}
    stored = dict(alignment.to_dict())
    if alignment.method not in ("none", "single_host") and not alignment.shifts:
        stored["applied"] = True  # nothing to shift (every offset and drift 0): raw and aligned are the same times
    return stored


def run(args: argparse.Namespace) -> int:
    """Print the description as text or JSON."""
    with _opened(args.trace, validate=args.validate) as trace:
        info = describe(trace, validate=args.validate)
    if args.json:
        json.dump(info, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    _print_text(info)
    return 0


def _print_text(info: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ktrace.model.display_text import printable_tree
    from ktrace.presentation.notes import grouped_notes

    console = terminal_console()
    info = printable_tree(info)  # trace text: no control character reaches the terminal
    span = info["span"]
    console.print(f"[bold]source[/]  {escape(str(info['source']))} (schema v{info['schema_version']})")
    if span:
        console.print(f"[bold]span[/]    {span['start_utc']}  +{span['duration_s']:.3f} s")
    ranks = ", ".join(_rank_text(r) for r in info["ranks"]) or "-"
    console.print(f"[bold]ranks[/]   {escape(ranks)}")
    for d in info["devices"]:
        cc = f"sm_{d['compute_major']}{d['compute_minor']}" if d.get("compute_major") is not None else ""
        console.print(
            f"[bold]device[/]  {escape(str(d['node']))}/{d['rank']} GPU {d['device']}: "
            f"{escape(str(d['name']))} {escape(cc)}"
        )
    table = Table("table", "rows", title="rows per table", title_justify="left")
    for name, n in info["rows"].items():
        table.add_row(name, f"{n:,}")
    console.print(table)
    if info["health"]:
        health = Table("health", "count", title="trace health", title_justify="left")
        for k, v in info["health"].items():
            health.add_row(escape(k), f"{v:,}")
        console.print(health)
    _print_clock(console, info["clock"])
    for note in grouped_notes(info["notes"]):  # repeats of one note about many ranks: one line with a count
        console.print(f"[yellow]note:[/] {escape(note.line)}")
    for problem in info.get("problems", []):
        console.print(f"[red]problem:[/] {escape(problem)}")


def _rank_text(rank: dict[str, Any]) -> str:
    """node/rank, or node/? with the pid for a process whose rank is unknown."""
    if rank["rank"] is None:
        return f"{rank['node']}/? (rank unknown, pid {rank.get('pid')})"
    return f"{rank['node']}/{rank['rank']}"


def _print_clock(console: Any, clock: dict[str, Any]) -> None:
    """One line saying how the hosts' clocks were put together, and a table of per-host offsets if they were."""
    from rich.markup import escape
    from rich.table import Table

    from ktrace.model.units import format_ns

    method = clock.get("method")
    residual = (
        f"residual p50 {format_ns(clock['residual_p50_ns'])}, p99 {format_ns(clock['residual_p99_ns'])}"
        if clock.get("residual_p99_ns") is not None
        else "no residual (no collective on 2+ ranks)"
    )
    if method in (None, "none", "single_host"):
        line = escape(str(clock.get("note") or ""))
        console.print(f"[bold]clock[/]   {line}" + (f"; {residual}" if method == "single_host" else ""))
        return
    state = "aligned to" if clock.get("applied") else "raw (KTRACE_CLOCK=raw); aligns to"
    found = f"{clock['collectives']} collectives, " if str(method).startswith("collectives") else ""
    console.print(
        f"[bold]clock[/]   {state} {escape(str(clock['reference_host']))}'s clock by {escape(str(method))}: "
        f"{found}{residual}"
    )
    if clock.get("note"):
        console.print(f"        {escape(str(clock['note']))}")
    table = Table("host", "offset", "drift", "matched", "rejected", "residual p50", "residual p99")
    for h in clock["hosts"]:
        table.add_row(
            escape(str(h["host"])),
            format_ns(h["offset_ns"]),
            f"{h['drift_ppm']:+.3f} ppm" if h["drift_ppm"] else "-",
            str(h["matched"]),
            str(h["rejected"]),
            format_ns(h["residual_p50_ns"]),
            format_ns(h["residual_p99_ns"]),
        )
    console.print(table)
