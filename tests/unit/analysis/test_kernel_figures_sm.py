"""kernel_figures' blocks per SM takes each kernel's device SM count through the few (rank, device) pairs, as the
former join of every kernel row on its node string did (that join held ~2 GB at 20 M small kernels)."""

from __future__ import annotations

import polars as pl
import pytest

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import efficiency_sum_exprs, efficiency_sums, kernel_figures
from ktrace.model import TraceBuilder
from ktrace.model.trace import Trace


def two_rank_trace(devices: bool = True, grids: bool = True) -> Trace:
    """Two ranks of two devices each; rank 1's device 1 has no SM count, rank 0's device 0 is listed twice
    (`devices`); launch grids (`grids`)."""
    n = 40
    b = TraceBuilder()
    b.add(
        "kernels",
        {
            "start_ns": [i * 1000 for i in range(n)],
            "end_ns": [i * 1000 + 500 + i for i in range(n)],
            "rank": [i % 2 for i in range(n)],
            "device": [(i // 2) % 2 for i in range(n)],
            "stream": [7] * n,
            "name": ["k"] * n,
            **({"grid_x": [i + 1 for i in range(n)], "grid_y": [2] * n, "grid_z": [1] * n} if grids else {}),
        },
    )
    if devices:
        b.add("devices", {"rank": [0, 0, 1, 1, 0], "device": [0, 1, 0, 1, 0], "sm_count": [108, 80, 132, None, 1]})
    return b.build()


def test_blocks_per_sm_use_each_kernels_own_device() -> None:
    trace = two_rank_trace()
    sm = trace.devices.select("rank", "device", "sm_count").unique(
        ["rank", "device"], keep="first", maintain_order=True
    )
    naive = (
        trace.kernels.select(
            "rank", "device", blocks=pl.col("grid_x").cast(pl.Float64) * pl.col("grid_y") * pl.col("grid_z")
        )
        .join(sm, on=["rank", "device"], how="left", maintain_order="left")
        .select(pl.when(pl.col("sm_count") > 0).then(pl.col("blocks") / pl.col("sm_count")).alias("blocks_per_sm"))
    )
    found = kernel_figures(trace, index=TraceIndex(trace))
    assert found["blocks_per_sm"].to_list() == naive["blocks_per_sm"].to_list()
    assert found["blocks_per_sm"].null_count() == 10  # rank 1, device 1
    assert found["w"].to_list() == (trace.kernels["end_ns"] - trace.kernels["start_ns"]).to_list()


def test_no_sm_counts_give_null_blocks_per_sm() -> None:
    bare = two_rank_trace(devices=False)
    assert kernel_figures(bare, index=TraceIndex(bare))["blocks_per_sm"].null_count() == bare.kernels.height


@pytest.mark.parametrize("devices", [True, False])
def test_efficiency_sums_equal_grouping_every_kernel(devices: bool) -> None:
    """With and without figures to sum (no SM counts: blocks per SM and every other figure null), the sums
    per name are those of a group_by of every kernel's figures (the former path, kept as the naive twin)."""
    trace = two_rank_trace(devices, grids=devices)
    figures = kernel_figures(trace, index=TraceIndex(trace))
    naive = (
        pl.concat([trace.kernels.select(pl.col("name").cast(pl.Categorical)), figures], how="horizontal")
        .group_by("name")
        .agg(efficiency_sum_exprs())
        .with_columns(pl.col("name").cast(pl.String))
        .sort("name", nulls_last=True)
    )
    assert efficiency_sums(trace, index=TraceIndex(trace)).equals(naive)
