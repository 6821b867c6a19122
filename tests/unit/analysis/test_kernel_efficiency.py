"""Kernel efficiency (blocks per SM, est. achieved occupancy, registers, shared memory) in the summary's top kernels:
time-weighted per name, the same rank by rank as in one process."""

from __future__ import annotations

import polars as pl
import pytest
from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS, OTHER, kernel_efficiency
from ktrace.analysis.summary import summarize
from ktrace.presentation.summary_json import summary_to_dict


@pytest.fixture(scope="module")
def resnet50() -> ktrace.Trace:
    return ktrace.open(fixture_path("resnet50"))


def test_top_kernels_carry_the_time_weighted_launch_figures(resnet50: ktrace.Trace) -> None:
    summary = summarize(resnet50, top=5)
    eff = kernel_efficiency(resnet50)
    for table in (summary.top_by_time, summary.top_by_count):
        named = table.filter(pl.col("name") != OTHER)
        joined = named.join(eff, on="name", suffix="_eff")
        assert joined.height == named.height == 5
        for c in EFFICIENCY_COLUMNS:
            assert joined[c].to_list() == joined[f"{c}_eff"].to_list()
        assert table.filter(pl.col("name") == OTHER).select(EFFICIENCY_COLUMNS).null_count().row(0) == (1,) * 4
    row = summary_to_dict(summary)["top_by_time"][0]
    assert set(EFFICIENCY_COLUMNS) <= set(row)


def test_figures_match_kinetos_own_per_kernel_args(resnet50: ktrace.Trace) -> None:
    """Read independently of kernel_efficiency: the raw JSON's `blocks per SM` and `est. achieved occupancy %` of the
    top kernel, time-weighted by hand."""
    import gzip
    import json

    name = summarize(resnet50, top=1).top_by_time["name"][0]
    with gzip.open(fixture_path("resnet50"), "rt") as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "Kernel" and e.get("name") == name]
    assert events
    total = sum(e["dur"] for e in events)
    blocks = sum(e["args"]["blocks per SM"] * e["dur"] for e in events) / total
    occupied = [e for e in events if e["args"]["est. achieved occupancy %"] > 0]
    occupancy = sum(e["args"]["est. achieved occupancy %"] * e["dur"] for e in occupied) / sum(
        e["dur"] for e in occupied
    )
    row = kernel_efficiency(resnet50).filter(pl.col("name") == name).row(0, named=True)
    assert row["blocks_per_sm"] == pytest.approx(blocks, rel=1e-3)  # Kineto writes blocks per SM as a C float
    assert row["est_occupancy_pct"] == pytest.approx(occupancy, rel=1e-3)  # µs durations in the file vs ns


def test_operators_carry_their_kernels_time_weighted_figures(resnet50: ktrace.Trace) -> None:
    """Each operator's figures are the duration-weighted means over the kernels it launched (innermost operator),
    computed here by hand from the records, for every operator of the summary's top table and by shape."""
    import numpy as np

    from ktrace.analysis.index import TraceIndex
    from ktrace.analysis.operators import operator_of_records

    ix = TraceIndex(resnet50)
    summary = summarize(resnet50, by_shape=True, index=ix)
    assert summary.operators is not None and summary.operators.by_shape is not None
    k = resnet50.kernels
    op = operator_of_records(resnet50, index=ix)[: k.height]
    names = resnet50.ops["name"].cast(pl.String).to_numpy()
    dur = (k["end_ns"] - k["start_ns"]).to_numpy().astype(float)
    occ = k["est_occupancy_pct"].fill_null(0).to_numpy().astype(float)
    regs = k["registers_per_thread"].to_numpy().astype(float)
    for row in summary.operators.top_by_gpu_time.iter_rows(named=True):
        mine = (op >= 0) & (names[np.maximum(op, 0)] == row["name"])
        if not mine.any():
            assert row["registers_per_thread"] is None
            continue
        assert row["registers_per_thread"] == pytest.approx(np.average(regs[mine], weights=dur[mine]), rel=1e-9)
        est = mine & (occ > 0)
        expected = np.average(occ[est], weights=dur[est]) if est.any() else None
        assert row["est_occupancy_pct"] == (pytest.approx(expected, rel=1e-9) if expected is not None else None)
    shaped = summary.operators.by_shape.filter(pl.col("kernels") > 0)
    assert shaped["est_occupancy_pct"].null_count() < shaped.height
    assert set(EFFICIENCY_COLUMNS) <= set(summary_to_dict(summary)["operators"]["top_by_gpu_time"][0])
