"""Decode copied-out CUPTI record tuples into Arrow tables of schema v1 (runs on the writer thread).

Pure apart from the small state that spans buffers: open NVTX ranges (START and END records come in
different buffers), context -> device, and correlation_id -> external id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ktrace.model.schema import LAUNCH_CONFIG
from ktrace.tracer.record_arrays import (
    COPY_KIND,
    DIRECT_DOMAINS,
    MARKER_END,
    MARKER_INSTANT,
    MARKER_START,
    MEMORY_KIND,
    NOT_APPLICABLE,
    OBJECT_THREAD,
    SYNC_TYPE,
    ExternalIds,
    NameOf,
    Rows,
    constant_strings,
    dictionary_strings,
    distinct_small,
    enum_labels,
    int64s,
    nullable_int64,
    record_cols,
    record_rows,
)


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
            c = record_cols(external)
            self.state.external.add(int64s(c[2]), int64s(c[1]))
        for ctx, dev in record_rows(rows.get("CONTEXT", ())):
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
        put("ranges", self._markers(record_rows(rows.get("MARKER", [])), health))
        put("threads", self._thread_names(record_rows(rows.get("NAME", []))))
        put("devices", self._devices(record_rows(rows.get("DEVICE", []))))
        overhead = record_rows(rows.get("OVERHEAD", []))
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
        c = record_cols(rows, strings=(6,))
        start, end = int64s(c[0]), int64s(c[1])
        corr = int64s(c[5])
        table = pa.table(
            {
                "start_ns": start,
                "end_ns": end,
                "device": int64s(c[2]).astype(np.int32),
                "stream": int64s(c[4]),
                "context_id": int64s(c[3]),
                "correlation_id": corr,
                "external_id": self._external(corr),
                "name": dictionary_strings(c[6]),
                **{col: int64s(c[i]).astype(np.int32) for i, col in enumerate(LAUNCH_CONFIG, start=7)},
                "graph_id": nullable_int64(c[16]),
                "graph_node_id": nullable_int64(c[17]),
                "queued_ns": nullable_int64(c[18]),
                "submitted_ns": nullable_int64(c[19]),
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
        parts = [(record_cols(r), len(r), is_runtime) for r, is_runtime in ((runtime, True), (driver, False)) if len(r)]
        if not parts:
            return None
        domains = np.concatenate([np.full(n, is_runtime) for _, n, is_runtime in parts])
        c = [np.concatenate([int64s(cols[j]) for cols, _, _ in parts]) for j in range(len(parts[0][0]))]
        start, end, corr, cbid = int64s(c[0]), int64s(c[1]), int64s(c[4]), int64s(c[5])
        # Name each distinct (domain, cbid) once: a few hundred at most, not one lookup per record.
        uniq, inverse = distinct_small(cbid * 2 + domains)
        labels = [self._api_name("runtime" if k % 2 else "driver", int(k // 2)) for k in uniq]
        names = pa.DictionaryArray.from_arrays(pa.array(inverse.astype(np.int32)), pa.array(labels, pa.string()))
        dom = pa.DictionaryArray.from_arrays(
            pa.array((~domains).astype(np.int32)), pa.array(["runtime", "driver"], pa.string())
        )
        failed = int(np.count_nonzero(int64s(c[6])))
        if failed:
            health["api_errors"] = failed
        table = pa.table(
            {
                "start_ns": start,
                "end_ns": end,
                "pid": int64s(c[2]),
                "tid": int64s(c[3]),
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
        c = record_cols(rows)
        runtime_corr, driver_corr = int64s(c[6]), int64s(c[5])
        # Runtime-originated copies join the runtime API record (cupti_activity.h:2282-2295).
        corr = np.where(runtime_corr != 0, runtime_corr, driver_corr)
        return self._memory(
            {
                "op": constant_strings("memcpy", len(rows)),
                "device": int64s(c[2]).astype(np.int32),
                "stream": int64s(c[4]),
                "context_id": int64s(c[3]),
                "correlation_id": corr,
                "bytes": int64s(c[7]),
                "copy_kind": enum_labels(c[8], COPY_KIND),
                "src_kind": enum_labels(c[9], MEMORY_KIND),
                "dst_kind": enum_labels(c[10], MEMORY_KIND),
                "graph_id": nullable_int64(c[11]),
            },
            int64s(c[0]),
            int64s(c[1]),
            health,
        )

    def _memcpy2(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = record_cols(rows)
        return self._memory(
            {
                "op": constant_strings("memcpy", len(rows)),
                "device": int64s(c[2]).astype(np.int32),
                "stream": int64s(c[4]),
                "context_id": int64s(c[3]),
                "correlation_id": int64s(c[5]),
                "bytes": int64s(c[6]),
                "copy_kind": constant_strings(COPY_KIND[10], len(rows)),
                "src_kind": enum_labels(c[8], MEMORY_KIND),
                "dst_kind": enum_labels(c[9], MEMORY_KIND),
                "graph_id": nullable_int64(c[10]),
            },
            int64s(c[0]),
            int64s(c[1]),
            health,
        )

    def _memset(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = record_cols(rows)
        n = len(rows)
        return self._memory(
            {
                "op": constant_strings("memset", n),
                "device": int64s(c[2]).astype(np.int32),
                "stream": int64s(c[4]),
                "context_id": int64s(c[3]),
                "correlation_id": int64s(c[5]),
                "bytes": int64s(c[6]),
                "copy_kind": constant_strings("unknown", n),
                "src_kind": constant_strings("unknown", n),
                "dst_kind": enum_labels(c[7], MEMORY_KIND),
                "graph_id": nullable_int64(c[8]),
            },
            int64s(c[0]),
            int64s(c[1]),
            health,
        )

    def _syncs(self, rows: Rows, health: dict[str, int]) -> pa.Table | None:
        if not len(rows):
            return None
        c = record_cols(rows)
        start, end, ctx = int64s(c[0]), int64s(c[1]), int64s(c[2])
        dev = self._devices_of(ctx)
        table = pa.table(
            {
                "start_ns": start,
                "end_ns": end,
                "device": dev,
                "stream": nullable_int64(c[3], NOT_APPLICABLE),
                "context_id": ctx,
                "sync_type": enum_labels(c[5], SYNC_TYPE),
                "correlation_id": int64s(c[4]),
                "event_id": nullable_int64(c[6], NOT_APPLICABLE),
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
        starts, ends = int64s(c[0]), int64s(c[1])
        table = pa.table(
            {
                "start_ns": starts,
                "end_ns": ends,
                "pid": int64s(c[2]),
                "tid": int64s(c[3]),
                "name": dictionary_strings(c[4]),
                "domain": dictionary_strings(c[5]),
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
        return pa.table({"pid": int64s(c[0]), "tid": int64s(c[1]), "name": dictionary_strings(c[2])})

    def _devices(self, rows: Sequence[tuple[Any, ...]]) -> pa.Table | None:
        if not rows:
            return None
        c = list(zip(*rows, strict=False))
        return pa.table(
            {
                "device": int64s(c[0]).astype(np.int32),
                "name": dictionary_strings(c[1]),
                "uuid": pa.array(c[2], pa.string()),
                "compute_major": int64s(c[3]).astype(np.int32),
                "compute_minor": int64s(c[4]).astype(np.int32),
                "sm_count": int64s(c[5]).astype(np.int32),
                "memory_bytes": int64s(c[6]),
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
