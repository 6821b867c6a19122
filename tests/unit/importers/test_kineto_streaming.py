"""The streaming import of one Kineto file (importers/kineto_streaming): the store it writes is the one
`store.write(import_kineto(FILE))` writes, table by table, row by row, meta and file metadata, whether the tables
are written in chunks (flushes forced small here) or built in memory (a file under FLUSH_BYTES)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from real_traces import FIXTURE_TRACES

from ktrace.importers import kineto_decode, kineto_streaming
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_joins import JoinCounter
from ktrace.importers.kineto_streaming import import_to_store
from ktrace.importers.kineto_tables import join_health
from ktrace.importers.kineto_workers import WORKERS_ENV
from ktrace.model import store
from ktrace.testing import assert_trace_equal

KINETO_FIXTURES = sorted(
    p.relative_to(FIXTURE_TRACES).as_posix()
    for p in FIXTURE_TRACES.rglob("*.json.gz")
    if "expected" not in p.parts and p.name != "STATS.json"
)


def _small_chunks(monkeypatch: pytest.MonkeyPatch, slice_bytes: int = 64 << 10, flush_bytes: int = 32 << 10) -> None:
    """Slices and flushes small enough that a fixture is written in many chunks."""
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", slice_bytes)
    monkeypatch.setattr(kineto_streaming, "FLUSH_BYTES", flush_bytes)
    monkeypatch.setattr(kineto_streaming, "CONFORM_ROWS", 1000)


def _file_metadata(root: Path) -> dict[str, Any]:
    out = {}
    for path in sorted(root.rglob("*.parquet")):
        meta = pq.ParquetFile(path).metadata
        keys = {k: v for k, v in (pq.read_schema(path).metadata or {}).items() if k != b"ARROW:schema"}
        out[path.relative_to(root).as_posix()] = (keys, meta.num_rows, meta.num_row_groups)
    return out


def assert_same_store(streamed: Path, reference: Path) -> None:
    """Both stores hold the same tables in the same row order, the same meta (but `created`) and file metadata."""
    a, b = store.read(streamed), store.read(reference)
    assert_trace_equal(a, b, check_order=True)
    meta_a, meta_b = json.loads(a.meta.to_json()), json.loads(b.meta.to_json())
    meta_a.pop("created")
    meta_b.pop("created")
    assert meta_a == meta_b
    assert _file_metadata(streamed) == _file_metadata(reference)
    assert not (streamed / ".kineto-chunks").exists()


def _both(path: Path, tmp_path: Path, **options: Any) -> tuple[Path, Path]:
    reference = store.write(import_kineto(path, **options), tmp_path / "reference.ktrace")
    streamed = tmp_path / "streamed.ktrace"
    streamed.mkdir()
    import_to_store(path, streamed, **options)
    return streamed, reference


@pytest.mark.parametrize("name", KINETO_FIXTURES)
def test_every_fixture_written_in_chunks_is_the_store_of_today(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKERS_ENV, "0")
    text_bytes = len(gzip.decompress((FIXTURE_TRACES / name).read_bytes()))
    _small_chunks(monkeypatch, slice_bytes=max(8 << 10, text_bytes // 12), flush_bytes=1)  # a flush per slice
    flushes = []
    flush = kineto_streaming.StreamingSink.flush
    monkeypatch.setattr(kineto_streaming.StreamingSink, "flush", lambda sink: (flushes.append(1), flush(sink)))
    assert_same_store(*_both(FIXTURE_TRACES / name, tmp_path))
    assert len(flushes) > 1


def test_a_small_file_is_built_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "0")
    streamed, reference = _both(FIXTURE_TRACES / KINETO_FIXTURES[0], tmp_path)
    assert_same_store(streamed, reference)


def test_lean_import_and_decode_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-ops, and slices decoded by two forked workers while the main process writes the chunks."""
    monkeypatch.setenv(WORKERS_ENV, "2")
    _small_chunks(monkeypatch, slice_bytes=256 << 10, flush_bytes=128 << 10)
    name = "tracelens-h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz"
    assert_same_store(*_both(FIXTURE_TRACES / name, tmp_path, with_ops=False))


def _secret_trace(path: Path) -> None:
    """Kernels whose names hold a token (the same few names in every chunk), on a host whose name holds one, and
    a base time after traceEvents, as PyTorch writes it."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": f"worker {token}"}},
        *(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"kernel_{i % 3}" + (f" {token}" if i % 3 == 0 else ""),
                "pid": 0,
                "tid": 7,
                "ts": 10.0 + i,
                "dur": 0.5,
                "args": {"device": 0, "stream": 7, "correlation": i, "grid": [1, 1, 1], "block": [32, 1, 1]},
            }
            for i in range(6000)
        ),
        *(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 2,
                "ts": 9.5 + i,
                "dur": 0.2,
                "args": {"correlation": i},
            }
            for i in range(0, 6000, 2)
        ),
    ]
    doc = {
        "schemaVersion": 1,
        "hostname": f"node-{token}",
        "traceEvents": events,
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_secrets_are_scrubbed_and_counted_once_per_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "0")
    _small_chunks(monkeypatch, slice_bytes=16 << 10, flush_bytes=8 << 10)
    path = tmp_path / "secret.json.gz"
    _secret_trace(path)
    streamed, reference = _both(path, tmp_path)
    assert_same_store(streamed, reference)
    trace = store.read(streamed)
    assert trace.meta.health["secrets_scrubbed"] >= 3
    assert not any("ghp_" in str(n) for n in trace.kernels["name"].unique().to_list())
    assert trace.kernels["start_ns"].min() == 1_700_000_000_000_000_000 + 10_000
    assert [p.parent.name for p in streamed.glob("node=*/rank=*")] and "ghp_" not in os.listdir(streamed)[0]


@pytest.mark.parametrize("seed", range(6))
def test_join_counts_of_batches_are_join_health(seed: int) -> None:
    """kineto_joins.JoinCounter over batches gives kineto_tables.join_health of the whole tables: null ids,
    fan-out, launches recorded only as memory ops, syncs, names matched case-sensitively as polars does."""
    rng = np.random.default_rng(seed)

    def ids(n: int, wide: bool = seed % 2 == 1) -> pa.Array:
        values = rng.integers(0, 60, n) + (2**40 if wide else 0)  # (ids past int32: the counter keeps int64)
        return pa.array(values, pa.int64(), mask=rng.random(n) < 0.1)

    names = ["cudaLaunchKernel", "cudaMemcpyAsync", "CUDALAUNCHKERNEL", "cudaStreamSynchronize", "cudaFree"]
    tables = {
        "kernels": pa.table({"correlation_id": ids(300, wide=seed in (1, 4))}),  # 4: only the kernels' wide
        "memory": pa.table({"correlation_id": ids(40)}),
        "syncs": pa.table({"correlation_id": ids(20)}),
        "api": pa.table(
            {
                "correlation_id": ids(200),
                "name": pa.array([names[i] for i in rng.integers(0, len(names), 200)]).dictionary_encode(),
            }
        ),
    }
    counter = JoinCounter()
    for name, table in tables.items():
        for lo in range(0, table.num_rows, 37):
            counter.add(name, table.slice(lo, 37))
    frames = {name: pl.from_arrow(table) for name, table in tables.items()}
    assert counter.counts() == join_health(frames["kernels"], frames["memory"], frames["syncs"], frames["api"])


def test_the_cap_on_tables_in_memory_does_not_stop_the_streaming_import(tmp_path: Path) -> None:
    """KTRACE_MAX_TABLE_BYTES caps the columns held in memory; `ktrace import` of one file writes them as it reads,
    so it reads the whole file where `ktrace info` stops at the cap (with a note)."""
    name = "tracelens-h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz"
    env = {**os.environ, "KTRACE_MAX_TABLE_BYTES": str(4 << 20), WORKERS_ENV: "0"}
    out = tmp_path / "capped.ktrace"
    subprocess.run(
        [sys.executable, "-m", "ktrace", "import", str(FIXTURE_TRACES / name), "-o", str(out), "-q"],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    streamed, whole = store.read(out), import_kineto(FIXTURE_TRACES / name)
    assert streamed.counts() == whole.counts()
    assert not any("KTRACE_MAX_TABLE_BYTES" in n for n in streamed.meta.notes)


def test_a_truncated_file_written_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file cut inside traceEvents: no header after it (no base time), the events before the cut kept, noted."""
    monkeypatch.setenv(WORKERS_ENV, "0")
    _small_chunks(monkeypatch, slice_bytes=1 << 20, flush_bytes=1)
    name = "tracelens-h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz"
    text = gzip.decompress((FIXTURE_TRACES / name).read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(text[: len(text) * 3 // 5])
    streamed, reference = _both(path, tmp_path)
    assert_same_store(streamed, reference)
    assert any("truncated" in n for n in store.read(streamed).meta.notes)
