"""The synthetic multi-host job: layout, determinism, planted clock errors and the straggler."""

from __future__ import annotations

import polars as pl
import pytest

from ktrace.testing.compare import assert_trace_equal
from ktrace.testing.fleet import FleetConfig, generate_fleet


def test_layout_is_64_ranks_on_8_hosts_with_nccl_collectives() -> None:
    fleet = generate_fleet()
    trace = fleet.trace
    assert trace.validate() == []
    pairs = trace.ranks
    assert len(pairs) == 64 and len({n for n, _ in pairs}) == 8
    assert all(fleet.host_of(r) == n for n, r in pairs)
    assert trace.meta.hosts == tuple(sorted(fleet.offsets_ns))
    comm = trace.kernels.filter(pl.col("collective").is_not_null())
    assert comm["name"].cast(pl.String).str.contains("^nccl(Dev)?Kernel_").all()
    assert comm.group_by("rank").len()["len"].unique().to_list() == [12 * 3]
    assert fleet.offsets_ns["node0"] == 0 and len(set(fleet.offsets_ns.values())) == 8


def test_same_seed_same_trace_other_seed_other_offsets() -> None:
    config = FleetConfig(ranks=8, hosts=2, steps=3, seed=4)
    a, b = generate_fleet(config), generate_fleet(config)
    assert_trace_equal(a.trace, b.trace)
    assert a.offsets_ns == b.offsets_ns
    assert generate_fleet(FleetConfig(ranks=8, hosts=2, steps=3, seed=5)).offsets_ns != a.offsets_ns


@pytest.mark.parametrize("drift", [0.0, 20.0])
def test_collective_ends_coincide_once_the_planted_clocks_are_undone(drift: float) -> None:
    config = FleetConfig(ranks=16, hosts=4, steps=4, max_drift_ppm=drift, jitter_ns=2_000)
    fleet = generate_fleet(config)
    comm = fleet.trace.kernels.filter(pl.col("collective").is_not_null())
    host = pl.col("node").cast(pl.String)
    offset = host.replace_strict(fleet.offsets_ns, return_dtype=pl.Int64)
    ppm = host.replace_strict(fleet.drift_ppm, return_dtype=pl.Float64)
    # invert clock = true + offset + ppm * 1e-6 * (true - start): true = start + (clock - offset - start) / (1 + ppm)
    rel = pl.col("end_ns") - offset - config.start_ns
    true = comm.with_columns(true=(rel.cast(pl.Float64) / (1 + ppm * 1e-6)).round().cast(pl.Int64))
    spread = (
        true.with_columns(i=pl.int_range(pl.len()).over("rank"))
        .group_by("i")
        .agg(s=pl.col("true").max() - pl.col("true").min())
    )
    assert spread["s"].max() <= 2_000 + 2  # the jitter, plus rounding
    raw = (
        comm.with_columns(i=pl.int_range(pl.len()).over("rank"))
        .group_by("i")
        .agg(s=pl.col("end_ns").max() - pl.col("end_ns").min())
    )
    assert raw["s"].min() > 1_000_000  # the planted offsets really separate the hosts


def test_the_straggler_computes_slower() -> None:
    fleet = generate_fleet(FleetConfig(ranks=8, hosts=2, steps=4, straggler_rank=5))
    assert fleet.straggler == ("node1", 5)
    compute = fleet.trace.kernels.filter(pl.col("collective").is_null())
    busy = compute.group_by("rank").agg(pl.sum("end_ns") - pl.sum("start_ns")).sort("rank")["end_ns"].to_list()
    others = [b for r, b in enumerate(busy) if r != 5]
    assert busy[5] > 1.4 * max(others)
    assert generate_fleet(FleetConfig(ranks=8, hosts=2, steps=1, straggler_rank=None)).straggler is None
