"""Polars twin of ktrace.exporters.chrome_slice_lines.flow_lines (which the export uses): the flow lines as
chrome_json's polars formatter writes its other lines."""

from __future__ import annotations

import numpy as np
import polars as pl

from ktrace.exporters.chrome_json import _line, _us


def flow_lines_reference(kind: str, fid: np.ndarray, pid: np.ndarray, tid: np.ndarray, rel_ns: np.ndarray) -> pl.Series:
    """The `s` (launch) or `f` (GPU record) ends of some flows, a line each; `rel_ns`: times after the trace start."""
    head = '{"ph":"s","cat":"launch"' if kind == "s" else '{"ph":"f","bp":"e","cat":"launch"'
    frame = pl.DataFrame({"fid": fid, "pid": pid, "tid": tid, "ts": rel_ns})
    return frame.select(
        _line(head + ',"name":"launch","id":%s,"pid":%s,"tid":%s,"ts":%s}', "fid", "pid", "tid", _us(pl.col("ts")))
    )[:, 0]
