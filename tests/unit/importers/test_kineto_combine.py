"""The Kineto import's lean table building (issue 27 section 3: kineto_combine, null columns as scalars, times
converted block by block) gives the same trace as the old path on every real Kineto trace, and on slices whose
columns differ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from real_traces import REAL_TRACES, real_traces_dir

from ktrace.importers import kineto, kineto_events, kineto_tables, kineto_times
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_combine import combined, slimmed
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace
from ktrace.testing.compare import assert_trace_equal

KINETO = [name for name, rel in REAL_TRACES.items() if not rel.endswith(".sqlite")]


def _old_combined(parts: list[pa.Table]) -> pa.Table:
    """EventSink.table before this change."""
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts, promote_options="permissive").unify_dictionaries().combine_chunks()


def _old_ts_to_ns(ts_us: np.ndarray, base_ns: int) -> np.ndarray:
    """kineto_times.ts_to_ns before this change (on the whole column at once)."""
    whole = np.floor(ts_us)
    frac_ns = np.rint((ts_us - whole) * 1000.0).astype(np.int64)
    return whole.astype(np.int64) * 1000 + frac_ns + np.int64(base_ns)


def _old_import(path: Path, monkeypatch: pytest.MonkeyPatch) -> Trace:
    with monkeypatch.context() as m:
        m.setattr(kineto_events, "slimmed", lambda table, kind: table)
        m.setattr(kineto_events, "combined", _old_combined)
        m.setattr(kineto, "_null_columns_as_scalars", lambda frame: frame)
        m.setattr(kineto, "LeanBuilder", TraceBuilder)
        m.setattr(kineto_tables, "ts_to_ns", _old_ts_to_ns)
        return import_kineto(path)


@pytest.mark.parametrize("name", KINETO)
def test_every_real_trace_imports_as_before(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = real_traces_dir() / REAL_TRACES[name]
    new, old = import_kineto(path), _old_import(path, monkeypatch)
    assert_trace_equal(new, old, check_order=True)
    assert (new.meta.notes, new.meta.job, new.meta.hosts) == (old.meta.notes, old.meta.job, old.meta.hosts)


def test_slimmed_leaves_out_null_columns_and_narrows_what_fits() -> None:
    table = pa.table(
        {
            "ts": pa.array([None, None], pa.float64()),
            "device": pa.array([0, 1], pa.int64()),
            "grid_x": pa.array([1, 2**31], pa.int64()),  # does not fit int32: stays int64
            "block_x": pa.array([None, None], pa.int64()),
            "stream": pa.array([7, 7], pa.int64()),  # int64 in the kernels table
        }
    )
    out = slimmed(table, "kernel")
    assert out.column_names == ["ts", "device", "grid_x", "stream"]
    assert [f.type for f in out.schema] == [pa.float64(), pa.int32(), pa.int64(), pa.int64()]
    assert out.column("device").to_pylist() == [0, 1]
    assert slimmed(table, "sync") is table  # kinds whose columns kineto_tables reads by name are left alone


def test_combined_fills_a_column_that_some_slices_left_out() -> None:
    a = pa.table({"ts": [1.0, 2.0], "name": pa.array(["x", "y"]).dictionary_encode()})
    b = pa.table({"ts": [3.0], "name": pa.array(["z"]).dictionary_encode(), "device": pa.array([5], pa.int32())})
    parts = [a, b]
    out = combined(parts)
    assert parts == []
    assert out.to_pydict() == {"ts": [1.0, 2.0, 3.0], "name": ["x", "y", "z"], "device": [None, None, 5]}
    assert all(out.column(c).num_chunks == 1 for c in out.column_names)


def test_times_converted_block_by_block_equal_the_whole_column(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    ts = np.concatenate([rng.uniform(0, 2.0**43, 997), rng.integers(0, 10**12, 10).astype(np.float64), [0.0, 1e-3]])
    monkeypatch.setattr(kineto_times, "_NS_BLOCK", 64)
    base = 1_700_000_000_000_000_000
    assert np.array_equal(kineto_times.ts_to_ns(ts, base), _old_ts_to_ns(ts, base))
