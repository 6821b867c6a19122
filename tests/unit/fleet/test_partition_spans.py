"""The partitions' spans read from their Parquet footers (model.partition_spans) equal what reading them gives
(Trace.span_ns and rank_activity.gpu_span of each partition's trace), in both clocks, with the tables a user
skips; and where the footers cannot say exactly, they say nothing."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.analysis.rank_activity import gpu_span
from ktrace.analysis.rank_heatmap import rank_heatmap
from ktrace.analysis.summary import summarize
from ktrace.fleet.engines import InProcessEngine
from ktrace.fleet.summary_map import summarize_store
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.clock_estimate import align_trace
from ktrace.model.partition_spans import PartitionSpans, footer_spans
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.fleet_compare import fleet_differences
from ktrace.testing.synthetic import SyntheticConfig, generate


def _read_spans(root: Path, clock: str, skip: tuple[str, ...]) -> list[PartitionSpans]:
    found = []
    for node, rank, _ in store.partitions(root):
        trace = store.read(root, clock=clock, only={(node, rank)}, skip=skip)
        found.append(PartitionSpans(trace.span_ns(), gpu_span(trace)))
    return found


def _folders(root: Path) -> list[tuple[str, Path]]:
    return [(node, folder) for node, _, folder in store.partitions(root)]


def _aligned(trace: Trace, applied: bool) -> Trace:
    alignment = dataclasses.replace(align_trace(trace), applied=applied)
    return trace.with_meta(dataclasses.replace(trace.meta, clock_alignment=alignment))


def _stores(tmp: Path) -> dict[str, Path]:
    drifting = generate_fleet(FleetConfig(ranks=8, hosts=4, steps=3, max_drift_ppm=40.0, step_gap_ns=200_000_000)).trace
    return {
        "dlrm": store.write(load(fixture_path("dlrm")), tmp / "dlrm"),
        "synthetic": store.write(generate(SyntheticConfig(steps=3, kernels_per_step=20, ranks=4, nodes=2)), tmp / "s"),
        "drift": store.write(_aligned(drifting, applied=False), tmp / "drift"),
    }


@pytest.mark.parametrize("skip", [(), ("ops",), ("kernels", "memory")])
def test_footer_spans_equal_the_read_partitions(tmp_path: Path, skip: tuple[str, ...]) -> None:
    for name, root in _stores(tmp_path).items():
        for clock in ("aligned", "raw"):
            found = footer_spans(root, _folders(root), clock=clock, skip=skip)
            assert found == _read_spans(root, clock, skip), (name, clock)
        if name == "drift":  # the shift is not nothing
            assert footer_spans(root, _folders(root), clock="raw") != footer_spans(root, _folders(root))


def test_footers_say_nothing_where_they_cannot_be_exact(tmp_path: Path) -> None:
    drifting = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=2, max_drift_ppm=40.0)).trace
    applied = store.write(store.read(store.write(_aligned(drifting, applied=False), tmp_path / "a")), tmp_path / "b")
    assert footer_spans(applied, _folders(applied), clock="aligned") == _read_spans(applied, "aligned", ())
    assert footer_spans(applied, _folders(applied), clock="raw") is None  # undoing the drift: not monotonic
    streamed = tmp_path / "c"
    shutil.copytree(applied, streamed)
    folder = _folders(streamed)[0][1]
    (folder / "kernels.arrows").write_bytes(b"")
    assert footer_spans(streamed, _folders(streamed)) is None  # a capture stream beside the Parquet


@pytest.mark.parametrize("clock", ["aligned", "raw"])
def test_summaries_from_the_footers_or_a_spans_pass_equal_one_process(
    tmp_path: Path, clock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drifting job rank by rank equals one process in either clock: from the footers (written unaligned), and
    from a pass reading the partitions (written aligned, read raw: the footers cannot say)."""
    drifting = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=3, max_drift_ppm=40.0)).trace
    unaligned = store.write(_aligned(drifting, applied=False), tmp_path / "a")
    applied = store.write(store.read(unaligned), tmp_path / "b")
    monkeypatch.setenv("KTRACE_CLOCK", clock)
    for root in (unaligned, applied):
        whole = store.read(root, clock=clock)
        fleet = summarize_store(root, InProcessEngine())
        assert fleet_differences(summarize(whole), fleet, rank_heatmap(whole)) == [], (root.name, clock)


def test_a_damaged_footer_or_meta_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The footers are read before any partition is: a table that is not Parquet, or a malformed meta.json, says
    so in one line (TraceFormatError) as store.read does."""
    from ktrace.model.errors import TraceFormatError

    root = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=2)), tmp_path / "s")
    kernels = next(root.rglob("kernels.parquet"))
    kernels.write_bytes(b"not parquet at all")
    with pytest.raises(TraceFormatError, match="kernels.parquet: unreadable Parquet"):
        footer_spans(root, _folders(root))
    (root / "meta.json").write_text('{"schema_version": "nope"')
    with pytest.raises(TraceFormatError, match="meta.json"):
        footer_spans(root, _folders(root))
