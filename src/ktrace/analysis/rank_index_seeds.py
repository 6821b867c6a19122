"""A rank's TraceIndex structures cut from the index of a trace that joins it with other ranks.

A fleet task (fleet.summary_map) reads a few dozen partitions as one trace (its partial's) and each partition as a
trace of its own (what judges one rank alone: the "per rank" rules, the critical path's steps and graph). Each of
those indexes built its rank's GPU columns, launch rows and rank ids again from the rank's tables: ~3.5 ms of
polars calls on tiny frames a rank (~0.9 s of CPU on 256 DLRM ranks) that one process never spends. They are
per-rank structures, so a rank's are its share of the joined trace's: the same arrays, cut at the rank's rows.

The joined trace holds each rank's rows as one block of every table, in the order of the ranks' own traces
(store.read_each); `seed_rank_indexes` relies on that and sets nothing an index has computed already. A GPU record's
operator (operators.operator_of_records: the innermost on its launch call's thread) is per record too: its ops row
in the joined trace less the rank's first; its kernels' name codes are the joined codes renumbered over the names
its kernels hold (a sorted list's subset is sorted).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl

from ktrace.analysis.columns import GpuColumns
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.operators import OPERATOR_OF_RECORD, operator_of_records
from ktrace.model.schema import TABLES

I64 = npt.NDArray[np.int64]
_RANK_KEYS = {"node": pl.String, "rank": pl.Int32}


def seed_rank_indexes(joined: TraceIndex, indexes: Sequence[TraceIndex], parts: Sequence[tuple[str, int]]) -> None:
    """Set each of `indexes` (the traces of `parts`, one (node, rank) each, in the joined trace's order) to hold
    its rank ids of every table, GPU columns, runtime call times, launch rows and records' operators as `joined`'s
    share of its rank."""
    c = joined.gpu_columns()
    start, end = joined.api_times()
    launch = joined.launch_rows()
    operator = operator_of_records(joined.trace, index=joined)
    name_code, names = joined.kernel_name_codes()
    firsts = table_blocks(joined, indexes, parts)
    n_kernels = c.n_kernels
    for i, (ix, (node, rank)) in enumerate(zip(indexes, parts, strict=True)):
        trace = ix.trace
        keys = pl.DataFrame({"node": [node], "rank": [rank]}, schema=_RANK_KEYS)
        for name in TABLES:
            height = trace.table(name).height
            ids = (keys if height else keys.clear(), np.zeros(height, np.int64))
            ix.seed(("table_rank_ids", name), ids)
        k0, m0 = int(firsts["kernels"][i]), n_kernels + int(firsts["memory"][i])
        ix.seed("kernel_name_codes", _name_codes(name_code[k0 : k0 + trace.kernels.height], names))
        rows = np.r_[k0 : k0 + trace.kernels.height, m0 : m0 + trace.memory.height].astype(np.int64)
        a0, a1 = int(firsts["api"][i]), int(firsts["api"][i + 1])
        ix.seed("api_times", (start[a0:a1].copy(), end[a0:a1].copy()))
        if rows.size == 0:  # no GPU record: its own build gives the empty columns (and keys) it always gave
            continue
        ix.seed("gpu_columns", _columns(c, rows, trace.kernels.height, keys))
        found = launch[rows]
        ix.seed("launch_rows", np.where(found >= 0, found - a0, -1).astype(np.int64))
        inner, o0 = operator[rows], int(firsts["ops"][i])
        ix.seed((OPERATOR_OF_RECORD, ()), np.where(inner >= 0, inner - o0, -1).astype(np.int64))


def table_blocks(joined: TraceIndex, indexes: Sequence[TraceIndex], parts: Sequence[tuple[str, int]]) -> dict[str, I64]:
    """Per table, the first row of each rank's block in the joined trace (and the end): the layout the cuts rely
    on, checked (each block holds its rank's rows and they tile the table), else ValueError."""
    firsts = {}
    for name in TABLES:
        first = np.cumsum([0] + [ix.trace.table(name).height for ix in indexes]).astype(np.int64)
        keys, ids = joined.table_rank_ids(name)
        id_of = {(str(n), int(r)): i for i, (n, r) in enumerate(keys.iter_rows())}
        want = np.repeat(np.array([id_of.get((n, r), -1) for n, r in parts], np.int64), np.diff(first))
        if int(first[-1]) != joined.trace.table(name).height or not np.array_equal(want, ids):
            raise ValueError(f"rank index seeds: the ranks' {name} rows do not make up the joined trace's")
        firsts[name] = first
    return firsts


def _name_codes(joined_codes: I64, names: list[str]) -> tuple[I64, list[str]]:
    """A rank's kernel_name_codes from its kernels' codes in the joined trace and the joined trace's names."""
    held = np.unique(joined_codes[joined_codes >= 0])
    codes = np.where(joined_codes >= 0, np.searchsorted(held, joined_codes), -1).astype(np.int64)
    return codes, [names[i] for i in held]


def _columns(c: GpuColumns, rows: I64, n_kernels: int, keys: pl.DataFrame) -> GpuColumns:
    return GpuColumns(
        n_kernels=n_kernels,
        rank_keys=keys,
        rank_id=np.zeros(rows.size, np.int64),
        device=c.device[rows],
        stream=c.stream[rows],
        kind=c.kind[rows],
        start=c.start[rows],
        end=c.end[rows],
        correlation_id=c.correlation_id[rows],
    )
