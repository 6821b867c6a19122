"""A rank's critical-path graph as its task sends it to the client (fleet.critical_path_map): each array in the
smallest integer dtype that holds it exactly, event times as offsets from the rank's first, widened back to int64
on the client. A DLRM rank's graph of one step is ~4,000 edges: ~230 KB in int64, a third of it packed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ktrace.analysis.critical_path_graph import Graph
from ktrace.analysis.critical_path_ranks import GRAPH_ARRAYS

I64 = npt.NDArray[np.int64]
TIMES = ("ev_start", "ev_end")
"""The arrays of times (packed as offsets from PackedGraph.base_ns)."""


@dataclass(frozen=True)
class PackedGraph:
    """A Graph's arrays each in the smallest signed integer dtype that holds it exactly, event times as offsets
    from `base_ns`: what a rank's task sends the client (a third of the int64 arrays), widened by `unpack`."""

    arrays: dict[str, npt.NDArray[np.signedinteger[Any]]]
    base_ns: int
    sync_records: int

    @classmethod
    def of(cls, graph: Graph) -> PackedGraph:
        """`graph` (one window's: no ev_window, no wait_ns) packed."""
        assert graph.ev_window is None and graph.wait_ns is None
        times = np.concatenate([graph.ev_start, graph.ev_end])
        base = int(times.min()) if times.size else 0
        arrays = {name: _narrowest(getattr(graph, name)) for name in GRAPH_ARRAYS if name not in TIMES}
        arrays.update({name: _narrowest(getattr(graph, name) - base) for name in TIMES})
        return cls(arrays, base, graph.sync_records)

    def wide(self, name: str) -> I64:
        """The array `name` in int64 again (times shifted back by base_ns): what the client joins."""
        values = self.arrays[name].astype(np.int64)
        return values + self.base_ns if name in TIMES else values

    def unpack(self) -> Graph:
        """The Graph packed, int64 arrays again."""
        return Graph(**{name: self.wide(name) for name in self.arrays}, sync_records=self.sync_records)


def _narrowest(values: I64) -> npt.NDArray[np.signedinteger[Any]]:
    """`values` in the smallest signed integer dtype holding their range (int64 kept)."""
    if values.size == 0:
        return values.astype(np.int8)
    low, high = int(values.min()), int(values.max())
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= low and high <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values
