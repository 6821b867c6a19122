"""The cap on the tables one Kineto file makes in memory (KTRACE_MAX_TABLE_BYTES, issue 27 section 3): the worst
input (a small .json.gz of many identical small events) is read up to the cap and the trace says where it stopped.
The cap is lowered through its variable so the input stays small."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from ktrace.importers.kineto_events import EventSink, Staged
from ktrace.importers.kineto_limits import TablesFull

EVENT = (
    b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1000,"dur":1,'
    b'"args":{"device":0,"stream":7,"correlation":1}}'
)
HEADER = (
    b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "TestGPU", "totalGlobalMem": 1024}], "traceEvents": ['
)
EVENTS = 150_000
"""~17 MB of JSON: two of the importer's 8 MB slices and a part."""


def worst_input(path: Path, events: int = EVENTS) -> Path:
    """A .json.gz of `events` copies of one small kernel event, baseTimeNanoseconds after traceEvents (as Kineto
    writes it)."""
    body = b",\n".join([EVENT] * events)
    path.write_bytes(gzip.compress(HEADER + body + b'], "baseTimeNanoseconds": 1700000000000000000}', 1))
    return path


def info_json(path: Path, **env: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "ktrace", "info", "--json", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    info: dict[str, object] = json.loads(proc.stdout)
    return info


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_cap_stops_the_read_with_a_note(tmp_path: Path, workers: str) -> None:
    path = worst_input(tmp_path / "worst.json.gz")
    info = info_json(path, KTRACE_MAX_TABLE_BYTES=str(1 << 20), KTRACE_IMPORT_WORKERS=workers)
    rows = info["rows"]
    assert isinstance(rows, dict)
    assert 0 < rows["kernels"] < EVENTS
    assert rows["devices"] == 1  # the header before traceEvents is read
    notes = info["notes"]
    assert isinstance(notes, list)
    stop = [n for n in notes if "stopped reading after" in n]
    assert len(stop) == 1
    assert f"after {rows['kernels']:,} events" in stop[0]
    assert "1 MiB" in stop[0] and "KTRACE_MAX_TABLE_BYTES" in stop[0]
    assert any("baseTimeNanoseconds may have been lost" in n for n in notes)


def test_under_the_cap_every_event_is_read(tmp_path: Path) -> None:
    path = worst_input(tmp_path / "worst.json.gz")
    info = info_json(path, KTRACE_IMPORT_WORKERS="0")
    rows = info["rows"]
    assert isinstance(rows, dict) and rows["kernels"] == EVENTS
    notes = info["notes"]
    assert isinstance(notes, list)
    assert not [n for n in notes if "stopped reading" in n or "baseTimeNanoseconds" in n]


def test_the_sink_keeps_the_slice_that_passes_the_cap_then_raises() -> None:
    sink = EventSink(max_table_bytes=1000)
    small = pa.table({"x": pa.array(range(100), pa.int64())})  # 800 bytes
    sink.merge(Staged(tables=[("kernel", small)]))
    with pytest.raises(TablesFull) as full:
        sink.merge(Staged(tables=[("kernel", small)]))
    assert (full.value.table_bytes, full.value.cap) == (1600, 1000)
    table = sink.table("kernel")
    assert table is not None and table.num_rows == 200
