"""Runs HTA's critical_path_analysis on one trace and prints its results as JSON (run with HTA's Python).

Called by benchmarks/critical_path_vs_hta.py as `<hta python> _hta_critical_path.py TRACE ANNOTATION INSTANCE`;
kept separate because HTA lives in its own virtual environment. An empty ANNOTATION means the whole trace,
INSTANCE -1 means none.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile

os.environ.setdefault("CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE", "1")
logging.disable(logging.WARNING)


def _pandas_compat() -> None:
    """HTA 0.5.0 calls DataFrame.drop(axis=1, columns=...), which pandas >= 3 rejects; drop the redundant axis."""
    import pandas as pd

    drop = pd.DataFrame.drop

    def compat_drop(self, labels=None, *, axis=0, index=None, columns=None, **kw):  # type: ignore[no-untyped-def]
        if columns is not None or index is not None:
            return drop(self, labels, index=index, columns=columns, **kw)
        return drop(self, labels, axis=axis, **kw)

    pd.DataFrame.drop = compat_drop  # type: ignore[method-assign]


def main() -> None:
    _pandas_compat()
    trace, annotation, instance = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(trace, os.path.join(tmp, os.path.basename(trace)))
        ta = TraceAnalysis(trace_dir=tmp)
        graph, ok = ta.critical_path_analysis(
            rank=0, annotation=annotation, instance_id=None if instance < 0 else instance
        )
        df = ta.t.get_trace(0)
        sym = ta.t.symbol_table.get_sym_table()
        breakdown = graph.get_critical_path_breakdown()
        bound: dict[str, int] = {}
        for b, d in zip(breakdown["bound_by"], breakdown["duration"], strict=True):
            bound[str(b)] = bound.get(str(b), 0) + int(d)
        kernels = []
        for ev in sorted(graph.critical_path_events_set):
            row = df.loc[ev]
            if int(row["stream"]) >= 0:
                kernels.append([int(row["correlation"]), sym[int(row["name"])]])
        edge_types: dict[str, int] = {}
        for e in graph.critical_path_edges_set:
            edge_types[e.type.value] = edge_types.get(e.type.value, 0) + 1
        out = {
            "ok": bool(ok),
            "graph_nodes": graph.number_of_nodes(),
            "graph_edges": graph.number_of_edges(),
            "path_nodes": len(graph.critical_path_nodes),
            "path_edges": len(graph.critical_path_edges_set),
            "path_events": len(graph.critical_path_events_set),
            "length_us": int(sum(e.weight for e in graph.critical_path_edges_set)),
            "bound_by_us": bound,
            "edge_types": edge_types,
            "kernels": kernels,
            "window_us": [int(df.loc[list(graph.critical_path_events_set)]["ts"].min())],
        }
        print(json.dumps(out))


if __name__ == "__main__":
    main()
