"""meta.json's clock_alignment: stored, applied on read (or not, with KTRACE_CLOCK=raw), absent in old stores."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest

from ktrace.model import ExitCode, KtraceError, TraceFormatError, store
from ktrace.model.clock_estimate import align_hosts, align_trace
from ktrace.model.schema import SPAN_TABLES
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate
from ktrace.testing.fleet import FleetConfig, generate_fleet

_TIMES = {name: ("start_ns", "end_ns") for name in SPAN_TABLES} | {"kernels": ("start_ns", "end_ns", "queued_ns")}


def _same_times(a: Trace, b: Trace, tolerance_ns: int = 0) -> bool:
    for name, columns in _TIMES.items():
        key = ["node", "rank", "correlation_id"] if "correlation_id" in a.table(name).columns else ["node", "rank"]
        left = a.table(name).with_columns(pl.col("node").cast(pl.String)).sort([*key, "start_ns"])
        right = b.table(name).with_columns(pl.col("node").cast(pl.String)).sort([*key, "start_ns"])
        for c in columns:
            diff = (left[c] - right[c]).abs().max()
            if diff is not None and int(diff) > tolerance_ns:  # type: ignore[arg-type]
                return False
    return True


@pytest.mark.parametrize("drift", [0.0, 50.0])
def test_a_store_of_raw_timestamps_reads_aligned_and_raw(tmp_path: Path, drift: float) -> None:
    """As a streaming import writes it: partitions as each host recorded them, the alignment in meta.json."""
    fleet = generate_fleet(FleetConfig(ranks=8, hosts=2, steps=3, max_drift_ppm=drift, step_gap_ns=1_000_000_000))
    raw = fleet.trace
    alignment = align_trace(raw)
    root = store.write(raw.with_meta(dataclasses.replace(raw.meta, clock_alignment=alignment)), tmp_path / "r.ktrace")
    meta = json.loads((root / "meta.json").read_text())
    assert meta["clock_alignment"]["applied"] is False and meta["clock_alignment"]["method"] == "collectives:order"
    aligned = store.read(root)
    assert aligned.meta.clock_alignment == dataclasses.replace(alignment, applied=True)
    assert _same_times(aligned, align_hosts(raw))
    assert not _same_times(aligned, raw, tolerance_ns=1_000_000)
    back = store.read(root, clock="raw")
    assert back.meta.clock_alignment == alignment
    assert _same_times(back, raw)


def test_a_store_of_aligned_timestamps_is_not_shifted_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = generate_fleet(FleetConfig(ranks=8, hosts=2, steps=3, max_drift_ppm=50.0, step_gap_ns=1_000_000_000))
    aligned = align_hosts(fleet.trace)
    root = store.write(aligned, tmp_path / "a.ktrace")
    assert json.loads((root / "meta.json").read_text())["clock_alignment"]["applied"] is True
    assert _same_times(store.read(root), aligned)
    monkeypatch.setenv("KTRACE_CLOCK", "raw")
    assert _same_times(store.read(root), fleet.trace, tolerance_ns=1)  # the drift term, undone at aligned time
    again = store.write(store.read(root), tmp_path / "again.ktrace")  # written raw, read aligned
    monkeypatch.delenv("KTRACE_CLOCK")
    assert _same_times(store.read(again), aligned, tolerance_ns=1)


def test_single_host_and_old_stores_have_no_alignment_and_are_not_shifted(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5))
    root = store.write(trace, tmp_path / "old.ktrace")
    assert "clock_alignment" not in json.loads((root / "meta.json").read_text())  # as older ktrace wrote it
    for clock in ("aligned", "raw"):
        back = store.read(root, clock=clock)
        assert back.meta.clock_alignment is None and _same_times(back, trace)


def _shifting(host: dict[str, object]) -> dict[str, object]:
    """An alignment that moves the timestamps of the synthetic trace's host, with `host`'s fields on top."""
    node = generate(SyntheticConfig(steps=1, kernels_per_step=2)).kernels["node"].cast(pl.String)[0]
    return {"method": "collectives:order", "hosts": [{"host": node, "offset_ns": 1000, **host}]}


@pytest.mark.parametrize(
    ("alignment", "message"),
    [
        ("nope", "clock_alignment is a str, expected an object"),
        ({"method": "guess"}, "clock_alignment.method 'guess' is not one of"),
        ({"method": "none", "hosts": [{"host": "a", "offset_ns": "5"}]}, "clock_alignment.hosts[0].offset_ns is str"),
        ({"method": "none", "hosts": {}}, "clock_alignment.hosts must be a list of objects"),
        ({"method": "none", "applied": 1}, "clock_alignment.applied is int, expected bool"),
        # values that pass the type checks but would overflow the shift (a traceback from polars before)
        (_shifting({"offset_ns": 10**30}), "clock_alignment.hosts[0].offset_ns is 1000000000000000000000000000000"),
        (_shifting({"anchor_ns": -(2**63)}), "clock_alignment.hosts[0].anchor_ns is -9223372036854775808, expected"),
        (_shifting({"drift_ppm": float("nan")}), "clock_alignment.hosts[0].drift_ppm is nan, expected a finite"),
        (_shifting({"drift_ppm": float("inf")}), "clock_alignment.hosts[0].drift_ppm is inf, expected a finite"),
        (_shifting({"drift_ppm": 10**30}), "clock_alignment.hosts[0].drift_ppm is 1e+30, expected a finite"),
    ],
)
def test_a_malformed_alignment_is_a_one_line_format_error(tmp_path: Path, alignment: object, message: str) -> None:
    root = store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2)), tmp_path / "bad.ktrace")
    meta = json.loads((root / "meta.json").read_text())
    (root / "meta.json").write_text(json.dumps({**meta, "clock_alignment": alignment}))
    with pytest.raises(TraceFormatError, match="meta.json: ") as exc:
        store.read(root)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_an_unknown_clock_mode_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2)), tmp_path / "m.ktrace")
    monkeypatch.setenv("KTRACE_CLOCK", "utc")
    with pytest.raises(KtraceError, match="KTRACE_CLOCK='utc': expected one of aligned, raw") as exc:
        store.read(root)
    assert exc.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize("clock", ["aligned", "raw"])
def test_read_each_cuts_one_read_into_the_partitions_read_alone(tmp_path: Path, clock: str) -> None:
    """A fleet task covering several ranks reads them once (one clock shift) and gets each rank's trace as
    store.read(only={rank}) gives it: rows in order, meta with its own partition.json's health and notes."""
    from ktrace.testing import assert_trace_equal

    raw = generate_fleet(FleetConfig(ranks=8, hosts=2, steps=3, step_gap_ns=1_000_000_000)).trace
    root = store.write(raw.with_meta(dataclasses.replace(raw.meta, clock_alignment=align_trace(raw))), tmp_path / "r")
    part = root / "node=node1" / "rank=5" / "partition.json"  # one partition's own health and note
    secret = "HF_TOKEN=hf_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z"
    part.write_text(json.dumps({"health": {"dropped_events": 3}, "notes": [f"rank 5 lost 3 events ({secret})"]}))
    parts = [(n, r) for n, r, _ in store.partitions(root)]
    assert len(parts) == 8
    chosen = {parts[1], parts[4], parts[5], parts[7]}
    whole, each = store.read_each(root, chosen, clock=clock)
    assert_trace_equal(whole, store.read(root, only=chosen, clock=clock))
    assert [t.ranks for t in each] == [[p] for p in parts if p in chosen]
    for (node, rank), alone in zip(sorted(chosen), each, strict=True):
        reference = store.read(root, only={(node, rank)}, clock=clock)
        assert_trace_equal(alone, reference)
        assert alone.meta == reference.meta
    assert [t.meta.health.get("dropped_events", 0) for t in each] == [0, 0, 3, 0]
    assert "rank 5 lost 3 events" in each[2].meta.notes[-1] and secret not in each[2].meta.notes[-1]
