"""Pure details of one selected row: times, launch<->run latency both ways, launch config, enclosing ranges.

Every lookup is a row fetch or a binary search in the track index (never a scan of a whole table), and the app
runs `describe` in a worker anyway. What the index does not hold yet (links, sorted tracks, steps) is shown as
pending; the app describes the selection again when it arrives.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ktrace.analysis.units import format_bytes
from ktrace.tui.steps import StepSpans
from ktrace.tui.table_model import SmCounts, blocks_per_sm, sm_counts
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.viewmodel import format_duration, format_signed_offset

Fields = list[tuple[str, str]]
MAX_RANGES = 6
"""Enclosing ranges listed, outermost first."""
LINKING = "(linking launches and kernels…)"
INDEXING = "(indexing tracks…)"


def describe(index: TrackIndex, steps: StepSpans, table: str, row: int) -> Fields:
    """(label, value) lines describing row `row` of `table`."""
    rec = index.trace.table(table).row(row, named=True)
    t0 = index.t0
    start, end = int(rec["start_ns"]), int(rec["end_ns"])
    out: Fields = [
        ("what", f"{table[:-1] if table.endswith('s') else table}: {rec.get('name') or rec.get('op')}"),
        ("duration", format_duration(end - start)),
    ]
    if table in ("kernels", "memory"):  # the launch configuration before the times: a short pane still shows it
        out += _gpu_fields(rec, sm_counts(index.trace.devices))
    out += [
        ("start", f"{format_signed_offset(start - t0)}  (end {format_signed_offset(end - t0)})"),
        ("where", f"{rec['node']} rank {rec['rank']}" + _place(rec)),
    ]
    links = index.linked_rows(table, row)
    anchor = start
    if table in ("kernels", "memory"):
        out += _launch_fields(index, links, start) if index.links_ready else [("launch", LINKING)]
        anchor = _first_api_start(index, links) or start
    elif table == "api":
        out += _launched_fields(index, links, rec) if index.links_ready else [("runs", LINKING)]
    if rec.get("correlation_id") is not None:
        out.append(("correlation", str(rec["correlation_id"])))
    out += _context(index, steps, rec, anchor)
    return out


def _place(rec: dict[str, Any]) -> str:
    if rec.get("device") is not None and "pid" not in rec:
        return f" · GPU {rec['device']} stream {rec.get('stream')}"
    if "tid" in rec:
        return f" · pid {rec['pid']} tid {rec['tid']}"
    return ""


def _gpu_fields(rec: dict[str, Any], sms: SmCounts | None = None) -> Fields:
    if "grid_x" not in rec:
        nbytes = rec.get("bytes") or 0
        dur = max(1, rec["end_ns"] - rec["start_ns"])
        return [
            ("copy", f"{rec['copy_kind']} {rec['src_kind']} -> {rec['dst_kind']}"),
            ("bytes", f"{format_bytes(nbytes)} ({nbytes / dur:.2f} GB/s)"),
        ]
    out = [
        ("grid", _dims(rec, "grid")),
        ("block", _dims(rec, "block")),
        ("registers", "-" if rec["registers_per_thread"] is None else f"{rec['registers_per_thread']} per thread"),
        (
            "shared mem",
            f"static {format_bytes(rec['static_shared_bytes'])}, dynamic {format_bytes(rec['dynamic_shared_bytes'])}",
        ),
    ]
    figures = launch_figures(rec, sms or {})
    if figures:
        out.append(("efficiency", figures))
    if rec.get("collective"):
        out.append(("collective", f"{rec['collective']} ({rec.get('in_nelems')} elements)"))
    return out


def launch_figures(rec: dict[str, Any], sms: SmCounts) -> str:
    """Grid blocks per SM and Kineto's est. achieved occupancy, where the trace has them ("" where it has neither)."""
    parts = []
    per_sm = blocks_per_sm(rec, sms)
    if per_sm is not None:
        parts.append(f"{per_sm[0]:,.2f} blocks per SM ({per_sm[1]} SMs)")
    if rec.get("est_occupancy_pct"):  # 0: Kineto's "not estimated"
        parts.append(f"est. achieved occupancy {rec['est_occupancy_pct']} %")
    return " · ".join(parts)


def _dims(rec: dict[str, Any], what: str) -> str:
    vals = [rec.get(f"{what}_{a}") for a in "xyz"]
    return "-" if all(v is None for v in vals) else "×".join("?" if v is None else str(v) for v in vals)


def _first_api_start(index: TrackIndex, links: list[tuple[str, int]]) -> int | None:
    api = [r for t, r in links if t == "api"]
    return int(index.trace.api["start_ns"][api[0]]) if api else None


def _launch_fields(index: TrackIndex, links: list[tuple[str, int]], start: int) -> Fields:
    api = [r for t, r in links if t == "api"]
    if not api:
        return [("launch", "none in the trace (no API row with this correlation id)")]
    launch = index.trace.api.row(api[0], named=True)
    return [
        ("launch", f"{launch['name']} on tid {launch['tid']}"),
        (
            "latency",
            f"API start -> run {format_duration(start - launch['start_ns'])}; "
            f"API end -> run {format_duration(start - launch['end_ns'])}",
        ),
    ]


def _launched_fields(index: TrackIndex, links: list[tuple[str, int]], rec: dict[str, Any]) -> Fields:
    if not links:
        return [("runs", "no kernel or copy with this correlation id")]
    table, row = links[0]
    run = index.trace.table(table).row(row, named=True)
    what = run.get("name") or run.get("op")
    return [
        ("runs", f"{len(links)} GPU record(s); first: {what}"),
        (
            "latency",
            f"API start -> run {format_duration(run['start_ns'] - rec['start_ns'])}; "
            f"API end -> run {format_duration(run['start_ns'] - rec['end_ns'])}",
        ),
    ]


def _context(index: TrackIndex, steps: StepSpans, rec: dict[str, Any], t: int) -> Fields:
    out: Fields = []
    if not steps.ready:
        out.append(("step", "(detecting steps…)"))
    elif (i := steps.containing(t)) is not None:
        out.append(("step", steps.names[i]))
    names = enclosing_ranges(index, str(rec["node"]), int(rec["rank"]), t)
    if names is None:
        out.append(("ranges", INDEXING))
    elif names:
        out.append(("ranges", " > ".join(names)))
    return out


def enclosing_ranges(index: TrackIndex, node: str, rank: int, t: int) -> list[str] | None:
    """Names of the ranges of (node, rank) holding time t, by depth then start (None until their tracks are sorted).

    Per range track two binary searches bound the candidates (start <= t, running max of ends >= t); only those
    rows of the ranges table are read.
    """
    tracks = [index.tracks[i] for i in index.tracks_of(node, rank, "ranges")]
    if not all(track.ready for track in tracks):
        return None
    hits = []
    for track in tracks:
        stop = int(np.searchsorted(track.starts, t, side="right"))
        first = int(np.searchsorted(track.max_end, t, side="left"))
        if stop > first:
            starts, ends = track.starts[first:stop], track.ends[first:stop]
            # [start, end): at the boundary of two adjacent steps only the one that begins there holds t
            hits.append(track.rows[first + np.flatnonzero((ends > t) | (ends == starts))])
    rows = np.concatenate(hits) if hits else np.empty(0, np.int64)
    if rows.size == 0:
        return []
    found = index.trace.ranges.select("depth", "start_ns", "name")[pl.Series(rows)]
    return [str(n) for n in found.sort("depth", "start_ns").head(MAX_RANGES)["name"].cast(pl.String).to_list()]
