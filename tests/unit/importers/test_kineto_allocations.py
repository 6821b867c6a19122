"""Kineto `[memory]` allocator events become the allocations table: both eras, CPU events skipped, bad args."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ktrace.importers.kineto import import_kineto
from ktrace.model import store

PID, TID = 4242, 4243


def _mem(ts: float, nbytes: int, *, cat: str | None = "cpu_instant_event", **args: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "i", "s": "t", "name": "[memory]", "pid": PID, "tid": TID, "ts": ts}
    if cat is not None:
        event["cat"] = cat
    event["args"] = {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, **args}
    return event


def _op(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": dur, "args": {}}


def _write(tmp_path: Path, events: list[dict[str, Any]], **header: Any) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, **header}))
    return path


def test_pytorch2_allocator_events_with_address_and_totals(tmp_path: Path) -> None:
    events = [
        _op("aten::empty", 10, 5),
        _mem(11.5, 512, **{"Addr": 4096, "Total Allocated": 512, "Total Reserved": 2 << 20}),
        _mem(20.25, -512, **{"Addr": 4096, "Total Allocated": 0, "Total Reserved": 2 << 20}),
        {**_mem(12, 8, **{"Addr": 99}), "args": {"Device Type": 0, "Device Id": -1, "Bytes": 8}},  # CPU: skipped
        {"ph": "i", "cat": "cpu_instant_event", "name": "other instant", "pid": PID, "tid": TID, "ts": 13, "args": {}},
    ]
    trace = import_kineto(_write(tmp_path, events, baseTimeNanoseconds=1_000_000_000))
    rows = trace.allocations
    assert rows.select("ts_ns", "device", "pid", "tid", "address", "bytes", "total_allocated").rows() == [
        (1_000_011_500, 0, PID, TID, 4096, 512, 512),
        (1_000_020_250, 0, PID, TID, 4096, -512, 0),
    ]
    assert rows["total_reserved"].to_list() == [2 << 20, 2 << 20]
    assert trace.ops.height == 1
    assert trace.validate() == []


def test_pytorch19_allocator_events_without_category(tmp_path: Path) -> None:
    """PyTorch 1.9 wrote `[memory]` with no `cat` and only Device Type/Id and Bytes (the slow-path slice)."""
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": PID, "tid": TID, "ts": 1000, "dur": 10, "args": {}},
        _mem(1001, 1024, cat=None),
        _mem(1002, 2048, cat=None, **{"Device Id": 1}),
        _mem(1003, -1024, cat=None),
    ]
    rows = import_kineto(_write(tmp_path, events)).allocations
    assert rows.select("device", "bytes").rows() == [(0, 1024), (1, 2048), (0, -1024)]
    assert rows["ts_ns"].to_list() == [1_001_000, 1_002_000, 1_003_000]
    assert rows["address"].null_count() == 3 and rows["total_allocated"].null_count() == 3


def test_wrongly_typed_allocator_args_are_coerced_or_dropped(tmp_path: Path) -> None:
    events = [
        _op("aten::zeros", 1, 9),
        _mem(2, 64, **{"Addr": "0x10"}),  # a string address: kept, address read as its digits
        {**_mem(3, 1), "args": {"Device Type": 1, "Device Id": 0, "Bytes": "lots"}},  # no byte count: dropped
        {**_mem(4, 1), "args": None},  # no args at all: dropped
    ]
    rows = import_kineto(_write(tmp_path, events)).allocations
    assert rows["bytes"].to_list() == [64]


def test_allocations_survive_the_store(tmp_path: Path) -> None:
    events = [_op("aten::empty", 10, 5), _mem(11, 256, **{"Addr": 1, "Total Allocated": 256, "Total Reserved": 512})]
    trace = import_kineto(_write(tmp_path, events))
    back = store.read(store.write(trace, tmp_path / "t.ktrace"))
    assert back.allocations.drop("node").equals(trace.allocations.drop("node"))
    assert back.allocations.schema["bytes"] == pl.Int64


def test_a_store_without_the_allocations_table_reads_as_empty(tmp_path: Path) -> None:
    """Stores written before the table existed have no allocations.parquet: it reads as an empty table."""
    trace = import_kineto(_write(tmp_path, [_op("aten::empty", 10, 5)]))
    root = store.write(trace, tmp_path / "old.ktrace")
    assert not list(root.rglob("allocations.parquet"))
    assert store.read(root).allocations.height == 0
