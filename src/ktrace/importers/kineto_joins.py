"""The launch <-> GPU-record join counts of `kineto_tables.join_health`, from a streamed file's batches.

`join_health` takes the whole tables (polars: ~50 bytes a kernel row at its peak, 0.5 GB over 10 M kernels). Here
each batch leaves its correlation ids as int64 numpy arrays (the API calls': only whether each is a launch or a
sync call besides), and the counts come from sorted arrays and `searchsorted`, in blocks: ~5 bytes a kernel row (int32 ids where they fit).
The names are matched as `join_health` matches them (polars' regex, the patterns' text), once per distinct name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ktrace.importers.kineto_tables import LAUNCH_API, SYNC_API

_BLOCK = 1 << 20
"""Ids looked up at a time (the lookup's temporaries: ~9 bytes an id)."""


def _ids(column: pa.ChunkedArray | np.ndarray) -> np.ndarray:
    """The non-null ids of `column`, as int32 where they all fit (real traces' do: half the memory), else int64."""
    ids = column if isinstance(column, np.ndarray) else pc.drop_null(column).to_numpy(zero_copy_only=False)
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) and ids.min() >= _INT32.min and ids.max() <= _INT32.max:
        return ids.astype(np.int32)
    return ids


_INT32 = np.iinfo(np.int32)


def _matches(names: pa.ChunkedArray, pattern: str) -> np.ndarray:
    """Whether each name contains `pattern` (polars' regex), computed on the distinct names."""
    codes = pc.dictionary_encode(names.combine_chunks()) if not pa.types.is_dictionary(names.type) else None
    encoded = codes if codes is not None else names.combine_chunks()
    hit = pl.Series(encoded.dictionary.cast(pa.string())).str.contains(pattern).fill_null(False).to_numpy()
    return np.asarray(hit[encoded.indices.to_numpy(zero_copy_only=False)], dtype=bool)


def _count_in(ids: np.ndarray, sorted_ids: np.ndarray) -> int:
    """How many of `ids` are in `sorted_ids`."""
    return int(np.count_nonzero(_in_sorted(ids, sorted_ids)))


@dataclass
class JoinCounter:
    """Gathers the ids of kernels, memory ops, syncs and API calls batch by batch; `counts()` is `join_health`."""

    parts: dict[str, list[np.ndarray]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    api_nulls: dict[str, int] = field(default_factory=dict)
    """API calls of each kind (launch, sync) without a correlation id (never matched)."""

    def add(self, table: str, batch: pa.Table) -> None:
        """Count a batch of rows of `table` in (kernels, memory, syncs, api; others are ignored)."""
        if table not in ("kernels", "memory", "syncs", "api") or not batch.num_rows:
            return
        self.rows[table] = self.rows.get(table, 0) + batch.num_rows
        corr = batch.column("correlation_id")
        self.parts.setdefault(table, []).append(_ids(corr))
        if table == "api":
            valid = pc.is_valid(corr).to_numpy(zero_copy_only=False)
            ids = corr.to_numpy(zero_copy_only=False)
            for kind, pattern in (("launch", LAUNCH_API.pattern), ("sync", SYNC_API.pattern)):
                hit = _matches(batch.column("name"), pattern)
                self.api_nulls[kind] = self.api_nulls.get(kind, 0) + int(np.count_nonzero(hit & ~valid))
                self.parts.setdefault(kind, []).append(_ids(ids[hit & valid]))

    def _sorted(self, name: str) -> np.ndarray:
        """The ids of `name`, sorted (in place: the parts are freed as they are copied, not held twice)."""
        parts = self.parts.pop(name, [])
        wide = any(p.dtype == np.int64 for p in parts)
        ids = np.empty(sum(len(p) for p in parts), np.int64 if wide else np.int32)
        at = 0
        parts.reverse()
        while parts:
            part = parts.pop()
            ids[at : at + len(part)] = part
            at += len(part)
            del part
        ids.sort()
        return ids

    def counts(self) -> dict[str, int]:
        """The counts `kineto_tables.join_health` gives on the whole tables (the ids are handed over)."""
        kernels, memory, syncs = self._sorted("kernels"), self._sorted("memory"), self._sorted("syncs")
        launches = np.unique(self._sorted("api"))
        joined = _count_in(kernels, launches)
        mem_joined = _count_in(memory, launches)
        del launches
        fanout_kernels, fanout_launches = _fanout(kernels)
        launch, sync = self._sorted("launch"), self._sorted("sync")
        recorded = int(np.count_nonzero(_in_sorted(launch, kernels) | _in_sorted(launch, memory)))
        unmatched = self.api_nulls.get("launch", 0) + len(launch) - recorded
        return {
            "kernels_with_launch": joined,
            "kernels_without_launch": self.rows.get("kernels", 0) - joined,
            "memory_ops_without_launch": self.rows.get("memory", 0) - mem_joined,
            "launches_without_gpu_record": unmatched,
            "syncs_without_gpu_record": self.api_nulls.get("sync", 0) + len(sync) - _count_in(sync, syncs),
            "graph_fanout_kernels": fanout_kernels,
            "graph_fanout_launches": fanout_launches,
        }


def _in_sorted(ids: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Whether each of `ids` is in `sorted_ids` (a bool per id)."""
    out = np.zeros(len(ids), bool)
    if not len(sorted_ids):
        return out
    for lo in range(0, len(ids), _BLOCK):
        part = ids[lo : lo + _BLOCK]
        at = np.searchsorted(sorted_ids, part)
        at[at == len(sorted_ids)] = 0
        out[lo : lo + _BLOCK] = sorted_ids[at] == part
    return out


def _fanout(sorted_ids: np.ndarray) -> tuple[int, int]:
    """(kernels sharing their correlation id with another, correlation ids shared) of sorted non-null ids."""
    if len(sorted_ids) < 2:
        return 0, 0
    same = sorted_ids[1:] == sorted_ids[:-1]
    shared = np.zeros(len(sorted_ids), bool)
    shared[1:] |= same
    shared[:-1] |= same
    starts = int(same[0]) + int(np.count_nonzero(same[1:] & ~same[:-1]))
    return int(np.count_nonzero(shared)), starts
