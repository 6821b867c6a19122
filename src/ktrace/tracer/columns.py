"""Decode copied-out CUPTI record tuples into Arrow tables of schema v1 (runs on the writer thread).

Pure apart from the small state that spans buffers: open NVTX ranges (START and END records come in
different buffers), context -> device, and correlation_id -> external id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ktrace.model.schema import LAUNCH_CONFIG
from ktrace.tracer.records import Columns

COPY_KIND = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoD",
    4: "DtoH",
    5: "DtoD",
    6: "DtoD",
    7: "DtoD",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
"""ActivityMemcpyKind -> schema copy kind (array transfers count as device memory)."""
MEMORY_KIND = {1: "pageable", 2: "pinned", 3: "device", 4: "array", 5: "managed", 6: "device", 7: "managed"}
"""ActivityMemoryKind -> schema memory kind (0 and anything new: unknown)."""
SYNC_TYPE = {1: "event", 2: "stream_wait_event", 3: "stream", 4: "context"}
"""ActivitySynchronizationType -> schema sync type."""
NOT_APPLICABLE = 0xFFFFFFFF
"""CUPTI's 'no stream/event' value in synchronization records."""
MARKER_INSTANT, MARKER_START, MARKER_END = 1, 2, 4
OBJECT_THREAD = 2
DIRECT_DOMAINS = frozenset({"ktrace"})
"""NVTX domains whose ranges ktrace's Python API already records directly (skipped here)."""

NameOf = Callable[[str, int], str]
"""(domain "runtime"|"driver", cbid) -> API name."""


def _i64(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)  # C-speed; fails only on None from the slow getattr path
    except (TypeError, OverflowError):
        return np.fromiter((int(v or 0) & 0x7FFFFFFFFFFFFFFF for v in values), dtype=np.int64, count=len(values))


def _transpose(rows: list[tuple[Any, ...]], strings: tuple[int, ...] = ()) -> list[Any]:
    """Columns of `rows`: one structured-array pass in C (~2x faster than zip(*rows) on 20 fields)."""
    width = len(rows[0])
    dtype = np.dtype([(f"f{j}", "O" if j in strings else "i8") for j in range(width)])
    try:
        packed = np.array(rows, dtype=dtype)
    except (TypeError, OverflowError, ValueError):  # None from the slow path, or a u64 beyond int64
        return list(zip(*rows, strict=False))
    return [packed[f"f{j}"] for j in range(width)]


Rows = Sequence[tuple[Any, ...]] | Columns
"""One kind's records: tuples (cupti-python's path) or Columns (the fast path)."""


def _cols(rows: Rows, strings: tuple[int, ...] = ()) -> list[Any]:
    return rows.cols if isinstance(rows, Columns) else _transpose(list(rows), strings)


def _rows(rows: Rows) -> Sequence[tuple[Any, ...]]:
    return rows.rows() if isinstance(rows, Columns) else rows


def _nullable(values: Sequence[Any], null: int = 0) -> pa.Array:
    arr = _i64(values)
    return pa.array(arr, type=pa.int64(), mask=arr == null)


def _strings(values: Sequence[Any] | pa.Array) -> pa.Array:
    if isinstance(values, pa.DictionaryArray):  # the fast path's: already distinct, in order of first appearance
        return values
    return pa.array(values, type=pa.string(), from_pandas=True).fill_null("").dictionary_encode()


def _constant(value: str, n: int) -> pa.Array:
    """`n` copies of one string as a dictionary array, without a Python list of n items."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


EXTERNAL_KEEP = 1 << 20
"""correlation -> external id pairs kept between buffers. A GPU record arrives long before a million later
launches; without a bound, a job of 100 M launches would hold them all (a dict of ~10 GB)."""


class ExternalIds:
    """correlation_id -> external id as two sorted int64 arrays, bounded: past 2 x `keep` pairs, only the
    `keep` newest (largest correlation ids, which CUPTI hands out in increasing order) stay."""

    def __init__(self, keep: int = EXTERNAL_KEEP) -> None:
        self.keep = keep
        self.corr = np.zeros(0, np.int64)
        self.ext = np.zeros(0, np.int64)
        self.dropped_below = 0
        """Correlation ids below this may have had a pair that was dropped."""

    def __len__(self) -> int:
        return int(self.corr.size)

    def add(self, corr: np.ndarray, ext: np.ndarray) -> None:
        """Remember pairs (a repeated correlation id takes the latest external id)."""
        if not corr.size:
            return
        corr, ext = np.concatenate([self.corr, corr]), np.concatenate([self.ext, ext])
        if corr.size > 1 and (np.diff(corr) <= 0).any():  # not already increasing: sort, keep the last of each
            order = np.argsort(corr, kind="stable")
            corr, ext = corr[order], ext[order]
            last = np.append(corr[1:] != corr[:-1], True)
            corr, ext = corr[last], ext[last]
        if corr.size > 2 * self.keep:
            self.dropped_below = int(corr[-self.keep])
            corr, ext = corr[-self.keep :], ext[-self.keep :]
        self.corr, self.ext = corr, ext

    def lookup(self, corr: np.ndarray) -> tuple[pa.Array, int]:
        """(external id per correlation id, null where none; how many misses may be dropped pairs)."""
        if not self.corr.size:
            return pa.nulls(len(corr), pa.int64()), 0
        at = np.minimum(np.searchsorted(self.corr, corr), self.corr.size - 1)
        hit = self.corr[at] == corr
        missed_old = int(np.count_nonzero(~hit & (corr < self.dropped_below)))
        return pa.array(self.ext[at], type=pa.int64(), mask=~hit), missed_old


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(key, return_inverse=True) for small non-negative keys (API ids: a few thousand) in O(n), with no
    sort: a table of the keys present. This runs on the writer thread, holding the GIL for part of it; the sort
    was a third of the Arrow conversion of a drained batch."""
    if not key.size or key.min() < 0 or key.max() >= 1 << 20:
        return np.unique(key, return_inverse=True)
    counts = np.bincount(key)
    uniq = np.flatnonzero(counts)
    table = np.zeros(counts.size, np.int64)
    table[uniq] = np.arange(uniq.size)
    return uniq, table[key]


def _mapped(codes: Sequence[Any], mapping: Mapping[int, str], default: str = "unknown") -> pa.Array:
    """Labels of enum codes, dictionary-encoded in order of first appearance (one lookup per distinct code)."""
    encoded = pa.array(_i64(codes), pa.int64()).dictionary_encode()
    labels = pa.array([mapping.get(c, default) for c in encoded.dictionary.to_pylist()], pa.string())
    return labels.take(encoded.indices).dictionary_encode()


@dataclass
class DecoderState:
    """What decoding remembers between buffers."""

    open_ranges: dict[int, tuple[int, str, str, int, int, int]] = field(default_factory=dict)
    """marker id -> (start_ns, name, domain, pid, tid, depth) of an NVTX range whose END is not yet seen."""
    early_ends: dict[int, int] = field(default_factory=dict)
    """marker id -> end_ns of END records that arrived before their START."""
    depth: dict[int, int] = field(default_factory=dict)
    """tid -> open NVTX ranges on that thread."""
    context_device: dict[int, int] = field(default_factory=dict)
    external: ExternalIds = field(default_factory=ExternalIds)
    """correlation_id -> external id (EXTERNAL_CORRELATION records), bounded."""


class RecordDecoder:
    """Turns `{kind name: [tuple, ...]}` into Arrow tables of schema v1 plus health counts.

    Args:
        name_of: API name lookup (see ktrace.tracer.api_names).
        pid: pid used for NVTX records that carry no thread object.
    """

    def __init__(self, name_of: NameOf, pid: int) -> None:
        self.name_of = name_of
        self.pid = pid
        self.state = DecoderState()
        self._names: dict[tuple[str, int], str] = {}
        self._health: dict[str, int] = {}

    def decode(self, rows: Mapping[str, Rows]) -> tuple[dict[str, pa.Table], dict[str, int]]:
        """Decode one drained batch (tuples or Columns per kind); returns (table name -> Arrow table, health)."""
        health: dict[str, int] = {}
        self._health = health
        external = rows.get("EXTERNAL_CORRELATION", ())
        if len(external):
            c = _cols(external)
            self.state.external.add(_i64(c[2]), _i64(c[1]))
        for ctx, dev in _rows(rows.get("CONTEXT", ())):
            self.state.context_device[int(ctx)] = int(dev)
        tables: dict[str, list[pa.Table]] = {}

        def put(name: str, table: pa.Table | None) -> None:
            if table is not None and table.num_rows:
                tables.setdefault(name, []).append(table)

        put("kernels", self._kernels(rows.get("CONCURRENT_KERNEL", []), health))
        put("api", self._api(rows.get("RUNTIME", []), rows.get("DRIVER", []), health))
        put("memory", self._memcpy(rows.get("MEMCPY", []), health))
        put("memory", self._memcpy2(rows.get("MEMCPY2", []), health))
        put("memory", self._memset(rows.get("MEMSET", []), health))
        put("syncs", self._syncs(rows.get("SYNCHRONIZATION", []), health))
        put("ranges", self._markers(_rows(rows.get("MARKER", [])), health))
        put("threads", self._thread_names(_rows(rows.get("NAME", []))))
        put("devices", self._devices(_rows(rows.get("DEVICE", []))))
        overhead = _rows(rows.get("OVERHEAD", []))
        if overhead:
            health["cupti_overhead_records"] = len(overhead)
            health["cupti_overhead_ns"] = int(sum(max(0, (e or 0) - (s or 0)) for _, s, e in overhead))
        return {k: pa.concat_tables(v, promote_options="permissive") for k, v in tables.items()}, health

    def _external(self, corr: np.ndarray) -> pa.Array:
        ids, missed_old = self.state.external.lookup(corr)
        if missed_old:  # an upper bound: a record below the bound may never have had an external id
            key = "external_ids_maybe_dropped"
            self._health[key] = self._health.get(key, 0) + missed_old
        return ids

    def _valid(self, start: np.ndarray, end: np.ndarray, health: dict[str, int]) -> np.ndarray:
        keep: np.ndarray = (start > 0) & (end >= start)
        bad = int((~keep).sum())
        if bad:
            health["zero_timestamp_records"] = health.get("zero_timestamp_records", 0) + bad
        return keep

    def _kernels(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = _cols(rows, strings=(6,))
        start, end = _i64(c[0]), _i64(c[1])
        corr = _i64(c[5])
        table = pa.table(
            {
                "start_ns": start,
                "end_ns": end,
                "device": _i64(c[2]).astype(np.int32),
                "stream": _i64(c[4]),
                "context_id": _i64(c[3]),
                "correlation_id": corr,
                "external_id": self._external(corr),
                "name": _strings(c[6]),
                **{col: _i64(c[i]).astype(np.int32) for i, col in enumerate(LAUNCH_CONFIG, start=7)},
                "graph_id": _nullable(c[16]),
                "graph_node_id": _nullable(c[17]),
                "queued_ns": _nullable(c[18]),
                "submitted_ns": _nullable(c[19]),
            }
        )
        return table.filter(pa.array(self._valid(start, end, health)))

    def _api_name(self, domain: str, cbid: int) -> str:
        key = (domain, cbid)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self.name_of(domain, cbid)
        return name

    def _api(self, runtime: Rows, driver: Rows, health: dict[str, int]) -> pa.Table | None:
        parts = [(_cols(r), len(r), is_runtime) for r, is_runtime in ((runtime, True), (driver, False)) if len(r)]
        if not parts:
            return None
        domains = np.concatenate([np.full(n, is_runtime) for _, n, is_runtime in parts])
        c = [np.concatenate([_i64(cols[j]) for cols, _, _ in parts]) for j in range(len(parts[0][0]))]
        start, end, corr, cbid = _i64(c[0]), _i64(c[1]), _i64(c[4]), _i64(c[5])
        # Name each distinct (domain, cbid) once: a few hundred at most, not one lookup per record.
        uniq, inverse = _distinct(cbid * 2 + domains)
        labels = [self._api_name("runtime" if k % 2 else "driver", int(k // 2)) for k in uniq]
        names = pa.DictionaryArray.from_arrays(pa.array(inverse.astype(np.int32)), pa.array(labels, pa.string()))
        dom = pa.DictionaryArray.from_arrays(
            pa.array((~domains).astype(np.int32)), pa.array(["runtime", "driver"], pa.string())
        )
        failed = int(np.count_nonzero(_i64(c[6])))
        if failed:
            health["api_errors"] = failed
        table = pa.table(
            {
                "start_ns": start,
                "end_ns": end,
                "pid": _i64(c[2]),
                "tid": _i64(c[3]),
                "correlation_id": corr,
                "external_id": self._external(corr),
                "domain": dom,
                "name": names,
                "cbid": cbid.astype(np.int32),
            }
        )
        return table.filter(pa.array(self._valid(start, end, health)))

    def _memory(self, cols: dict[str, Any], start: np.ndarray, end: np.ndarray, health: dict[str, int]) -> pa.Table:
        corr = cols["correlation_id"]
        cols = {"start_ns": start, "end_ns": end, **cols, "external_id": self._external(corr)}
        return pa.table(cols).filter(pa.array(self._valid(start, end, health)))

    def _memcpy(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = _cols(rows)
        runtime_corr, driver_corr = _i64(c[6]), _i64(c[5])
        # Runtime-originated copies join the runtime API record (cupti_activity.h:2282-2295).
        corr = np.where(runtime_corr != 0, runtime_corr, driver_corr)
        return self._memory(
            {
                "op": _constant("memcpy", len(rows)),
                "device": _i64(c[2]).astype(np.int32),
                "stream": _i64(c[4]),
                "context_id": _i64(c[3]),
                "correlation_id": corr,
                "bytes": _i64(c[7]),
                "copy_kind": _mapped(c[8], COPY_KIND),
                "src_kind": _mapped(c[9], MEMORY_KIND),
                "dst_kind": _mapped(c[10], MEMORY_KIND),
                "graph_id": _nullable(c[11]),
            },
            _i64(c[0]),
            _i64(c[1]),
            health,
        )

    def _memcpy2(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = _cols(rows)
        return self._memory(
            {
                "op": _constant("memcpy", len(rows)),
                "device": _i64(c[2]).astype(np.int32),
                "stream": _i64(c[4]),
                "context_id": _i64(c[3]),
                "correlation_id": _i64(c[5]),
                "bytes": _i64(c[6]),
                "copy_kind": _constant(COPY_KIND[10], len(rows)),
                "src_kind": _mapped(c[8], MEMORY_KIND),
                "dst_kind": _mapped(c[9], MEMORY_KIND),
                "graph_id": _nullable(c[10]),
            },
            _i64(c[0]),
            _i64(c[1]),
            health,
        )

    def _memset(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = _cols(rows)
        n = len(rows)
        return self._memory(
            {
                "op": _constant("memset", n),
                "device": _i64(c[2]).astype(np.int32),
                "stream": _i64(c[4]),
                "context_id": _i64(c[3]),
                "correlation_id": _i64(c[5]),
                "bytes": _i64(c[6]),
                "copy_kind": _constant("unknown", n),
                "src_kind": _constant("unknown", n),
                "dst_kind": _mapped(c[7], MEMORY_KIND),
                "graph_id": _nullable(c[8]),
            },
            _i64(c[0]),
            _i64(c[1]),
            health,
        )

    def _syncs(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = _cols(rows)
        start, end, ctx = _i64(c[0]), _i64(c[1]), _i64(c[2])
        dev = self._devices_of(ctx)
        table = pa.table(
            {
                "start_ns": start,
                "end_ns": end,
                "device": dev,
                "stream": _nullable(c[3], NOT_APPLICABLE),
                "context_id": ctx,
                "sync_type": _mapped(c[5], SYNC_TYPE),
                "correlation_id": _i64(c[4]),
                "event_id": _nullable(c[6], NOT_APPLICABLE),
            }
        )
        return table.filter(pa.array(self._valid(start, end, health)))

    def _devices_of(self, ctx: np.ndarray) -> pa.Array:
        """Device of each context id (CONTEXT records), null where unknown; one vectorized lookup."""
        known = self.state.context_device
        if not known:
            return pa.nulls(len(ctx), pa.int32())
        keys = np.array(sorted(known), np.int64)
        values = np.array([known[int(k)] for k in keys], np.int32)
        at = np.minimum(np.searchsorted(keys, ctx), keys.size - 1)
        return pa.array(values[at], pa.int32(), mask=keys[at] != ctx)

    def _markers(self, rows: Sequence[tuple[Any, ...]], health: dict[str, int]) -> pa.Table | None:
        """Pair NVTX START/END records by id (the END repeats the id with an empty name)."""
        st = self.state
        out: list[tuple[int, int, int, int, str, str, int]] = []
        for flags, ts, mid, obj_kind, pid, tid, name, domain in rows:
            flags, ts, mid = int(flags or 0), int(ts or 0), int(mid or 0)
            domain = domain or "nvtx"
            if obj_kind != OBJECT_THREAD:
                pid, tid = self.pid, 0
            pid, tid = int(pid or self.pid), int(tid or 0)
            if flags & MARKER_START:
                depth = st.depth.get(tid, 0)
                st.depth[tid] = depth + 1
                if mid in st.early_ends:
                    st.depth[tid] = depth
                    out.append((ts, st.early_ends.pop(mid), pid, tid, name or "", domain, depth))
                else:
                    st.open_ranges[mid] = (ts, name or "", domain, pid, tid, depth)
            elif flags & MARKER_END:
                opened = st.open_ranges.pop(mid, None)
                if opened is None:
                    st.early_ends[mid] = ts
                    continue
                start, name0, domain0, pid0, tid0, depth = opened
                st.depth[tid0] = max(0, st.depth.get(tid0, 1) - 1)
                out.append((start, ts, pid0, tid0, name0, domain0, depth))
            elif flags & MARKER_INSTANT:
                out.append((ts, ts, pid, tid, name or "", domain, st.depth.get(tid, 0)))
        out = [r for r in out if r[5] not in DIRECT_DOMAINS]
        if not out:
            return None
        c = list(zip(*out, strict=False))
        starts, ends = _i64(c[0]), _i64(c[1])
        table = pa.table(
            {
                "start_ns": starts,
                "end_ns": ends,
                "pid": _i64(c[2]),
                "tid": _i64(c[3]),
                "name": _strings(c[4]),
                "domain": _strings(c[5]),
                "depth": np.asarray(c[6], dtype=np.int32),
                "on_gpu": np.zeros(len(out), dtype=bool),
            }
        )
        return table.filter(pa.array(self._valid(starts, ends, health)))

    def _thread_names(self, rows: Sequence[tuple[Any, ...]]) -> pa.Table | None:
        named = [(int(p or self.pid), int(t), n) for kind, p, t, n in rows if kind == OBJECT_THREAD and t and n]
        if not named:
            return None
        c = list(zip(*named, strict=False))
        return pa.table({"pid": _i64(c[0]), "tid": _i64(c[1]), "name": _strings(c[2])})

    def _devices(self, rows: Sequence[tuple[Any, ...]]) -> pa.Table | None:
        if not rows:
            return None
        c = list(zip(*rows, strict=False))
        return pa.table(
            {
                "device": _i64(c[0]).astype(np.int32),
                "name": _strings(c[1]),
                "uuid": pa.array(c[2], pa.string()),
                "compute_major": _i64(c[3]).astype(np.int32),
                "compute_minor": _i64(c[4]).astype(np.int32),
                "sm_count": _i64(c[5]).astype(np.int32),
                "memory_bytes": _i64(c[6]),
            }
        )

    def close(self) -> dict[str, int]:
        """Health counts of what never completed (NVTX ranges still open at the end)."""
        health: dict[str, int] = {}
        unclosed = [r for r in self.state.open_ranges.values() if r[2] not in DIRECT_DOMAINS]
        if unclosed:
            health["unclosed_nvtx_ranges"] = len(unclosed)
        if self.state.early_ends:
            health["unmatched_nvtx_ends"] = len(self.state.early_ends)
        return health


def api_name_from_enums(runtime_enum: Any, driver_enum: Any) -> NameOf:
    """An API-name lookup from cupti-python's cbid enums (works without a live CUPTI, cupti.md §2.3)."""
    import re

    suffix = re.compile(r"_v\d+$")

    def name_of(domain: str, cbid: int) -> str:
        enum = runtime_enum if domain == "runtime" else driver_enum
        try:
            return suffix.sub("", enum(cbid).name)
        except (ValueError, TypeError, AttributeError):
            return f"{domain}_cbid_{cbid}"

    return name_of


def generic_api_name(domain: str, cbid: int) -> str:
    """Fallback lookup: `runtime_cbid_211`."""
    return f"{domain}_cbid_{cbid}"
