"""The summary JSON's `critical_path` value: the median step's critical path, its composition, items and what-ifs,
and the crossings between ranks when it spans several."""

from __future__ import annotations

from typing import Any

from ktrace.analysis.critical_path import CriticalPath


def critical_path_dict(cp: CriticalPath | None) -> dict[str, Any] | None:
    """The summary JSON's critical_path value (frames as row dicts; None stays None)."""
    if cp is None:
        return None
    return {
        "scope": cp.scope,
        "label": cp.label,
        "node": cp.node,
        "rank": cp.rank,
        "start_ns": cp.start_ns,
        "end_ns": cp.end_ns,
        "length_ns": cp.length_ns,
        "graph_nodes": cp.graph_nodes,
        "graph_edges": cp.graph_edges,
        "path_nodes": cp.path_nodes,
        "path_events": cp.path_events,
        "gpu_records_on_path": int(cp.path_records.size),
        "sync_records": cp.sync_records,
        "dropped_edges": cp.dropped_edges,
        "composition": cp.composition.to_dicts(),
        "items": cp.items.to_dicts(),
        "what_if": cp.what_if.to_dicts(),
    } | ({} if cp.crossings is None else {"ranks": cp.ranks, "crossings": cp.crossings.to_dicts()})
