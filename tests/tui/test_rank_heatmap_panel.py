"""The dashboard's rank heatmap at 64 ranks on 8 hosts (testing.fleet): one row per rank, never one line per host
(the old panel drew 8 identical host lines, so no rank could be seen), reached with `3` and moved with j/k without
Tab, every rank reachable by scrolling at 80x24 and 160x45, a step axis that zooms, the outlier ranks marked and
named first, and enter showing the rank's streams in the timeline."""

from __future__ import annotations

import asyncio
from functools import cache

import pytest

from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.tui.app import make_app
from ktrace.tui.rank_grid import HEADER_LINES, GridView, draw, grid_of, outlier_line
from ktrace.tui.widgets.rank_heatmap import RankHeatmap
from ktrace.tui.widgets.timeline import Timeline

CONFIG = FleetConfig(ranks=64, hosts=8, steps=6, kernels_per_step=6)
PLANTED = CONFIG.straggler_rank


@cache
def fleet64() -> Trace:
    """64 ranks on 8 hosts, rank 13 the straggler."""
    return generate_fleet(CONFIG).trace


def _labels() -> list[str]:
    return [f"{n}/{r}" for n, r in fleet64().kernels.select("node", "rank").unique().sort("node", "rank").iter_rows()]


def _rows(heat: RankHeatmap) -> list[str]:
    """The rank labels drawn now (the lines after the outlier and axis lines)."""
    return [line[1:].split(" ")[0] for line in heat.drawn.plain.splitlines()[2:]]


def test_the_grid_has_one_distinct_row_per_rank_and_names_the_straggler() -> None:
    from ktrace.analysis.dashboard import build_dashboard

    dashboard = build_dashboard(fleet64())
    assert dashboard.rank_heatmap is not None
    grid = grid_of(dashboard.rank_heatmap, dashboard.summary.stragglers)
    assert grid.labels == _labels() and grid.busy.shape == (64, CONFIG.steps)  # rank x step
    assert PLANTED in [o.rank for o in grid.outliers]
    everything = draw(grid, GridView(rows=64), 78).plain.splitlines()
    assert len(everything) == 2 + 64 and all(len(line) <= 78 for line in everything)
    assert [line[1:].split(" ")[0] for line in everything[2:]] == _labels()
    planted = everything[2 + grid.labels.index(f"node1/{PLANTED}")]
    assert planted.startswith("!")  # the outlier mark
    assert everything[0].startswith("outliers: rank ") and f"rank {PLANTED} (" in outlier_line(grid).plain


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_every_rank_is_reachable_with_keys_and_the_step_axis_zooms(size: tuple[int, int], settled) -> None:  # type: ignore[no-untyped-def]
    app = make_app(trace=fleet64())

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settled(pilot)
            await pilot.press("3")  # no Tab: the heatmap takes the keys
            await settled(pilot)
            heat = app.query_one(RankHeatmap)
            assert heat.has_focus
            seen = _rows(heat)
            assert len(seen) < 64  # a window of the ranks: they scroll
            assert heat.chosen == ("node0", 0)
            await pilot.press("j", "j", "k")
            assert heat.chosen == ("node0", 1)
            for _ in range(63):
                await pilot.press("j")
                seen += _rows(heat)
            assert sorted(set(seen)) == sorted(_labels()) and heat.chosen == ("node7", 63)
            await pilot.press("home")
            assert heat.chosen == ("node0", 0) and _rows(heat)[0] == "node0/0"
            await pilot.press("pagedown")
            assert heat.chosen[1] == heat.view.rows  # a page of rows down
            await pilot.press("end")
            assert heat.chosen == ("node7", 63) and _rows(heat)[-1] == "node7/63"
            axis, cells = _axis_and_cells(heat)
            assert axis.startswith(f"steps 0-{CONFIG.steps - 1} of {CONFIG.steps}, 1 step a column")
            await pilot.press("minus")  # zoom out: more steps a column, fewer columns
            zoomed_out, fewer = _axis_and_cells(heat)
            assert "2 steps a column" in zoomed_out and fewer == cells // 2
            await pilot.press("plus")
            assert _axis_and_cells(heat) == (axis, cells)

    asyncio.run(main())


def _axis_and_cells(heat: RankHeatmap) -> tuple[str, int]:
    """The axis line and the columns of the first row's cells."""
    lines = heat.drawn.plain.splitlines()
    cells = lines[2][2 + heat.grid.label_width :].rstrip()
    return lines[1], len(cells.split()) if " " in cells else len(cells) // 2


def test_enter_on_a_heatmap_row_shows_that_ranks_streams(settled) -> None:  # type: ignore[no-untyped-def]
    app = make_app(trace=fleet64())

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot)
            await pilot.press("3")
            await settled(pilot)
            for _ in range(PLANTED):
                await pilot.press("j")
            await pilot.press("enter")
            await settled(pilot)
            timeline = app.query_one(Timeline)
            assert app.index is not None and timeline.has_focus
            shown = app.index.tracks[timeline.rows[timeline.cursor]]
            assert (shown.node, shown.rank, shown.kind) == ("node1", PLANTED, "stream")
            await pilot.press("3")
            await settled(pilot)
            heat = app.query_one(RankHeatmap)
            row = heat.view.top + 2
            await pilot.click(RankHeatmap, offset=(4, 1 + HEADER_LINES + 2))  # the border, the header, 3rd row
            await settled(pilot)
            shown = app.index.tracks[timeline.rows[timeline.cursor]]
            assert (shown.node, shown.rank) == heat.grid.ranks[row] and timeline.has_focus

    asyncio.run(main())


def test_the_straggler_panel_shows_who_was_waited_for_first_then_step_time() -> None:
    """stragglers.waited_for (the rank the others waited for) leads, tied ranks on one line, and today's table
    follows labelled "step time"; enter on a waited-for line shows its (first) rank."""
    from types import SimpleNamespace

    import polars as pl

    from ktrace.analysis.dashboard import build_dashboard
    from ktrace.tui.rank_panels import straggler_panel

    lag = build_dashboard(fleet64()).summary.stragglers
    assert lag is not None
    waited = pl.DataFrame(
        {
            "node": ["node0", "node1"],
            "rank": [5, PLANTED],
            "waited_ns_per_step": [2_000_000.0, 1_000_000.0],
            "late_collectives": [12, 3],
            "why": ["compute kernels +2 ms/step", "sync calls +1 ms/step"],
            "nodes": [["node0", "node2"], ["node1"]],
            "ranks": [[5, 21, 29, 37, 45, 53], [PLANTED]],
        }
    )
    panel = straggler_panel(SimpleNamespace(step_time=lag.step_time, basis=lag.basis, waited_for=waited))  # type: ignore[arg-type]
    lines = panel.body.plain.splitlines()
    assert panel.title.startswith("stragglers (waited for, then step time")
    assert lines[0].startswith("waited for:") and "ranks 5, 21, 29, 37 +2" in lines[2]
    assert f"node1/{PLANTED}" in lines[3] and lines[4].startswith("step time:")
    assert panel.ranks[2:4] == [("node0", 5), ("node1", PLANTED)]


def test_without_steps_the_columns_are_time_bins_that_zoom() -> None:
    from dataclasses import replace

    from ktrace.analysis.dashboard import build_dashboard
    from ktrace.model.units import format_ns
    from ktrace.tui.rank_grid import cell_columns, fit_group

    heat = build_dashboard(fleet64()).rank_heatmap
    assert heat is not None
    grid = grid_of(replace(heat, by_step=heat.by_step.clear()), None)
    assert grid.axis == "time" and grid.n_bins == heat.bins.n_bins and grid.title.endswith("over time")
    fit = fit_group(grid, 78)
    assert -(-grid.n_bins // fit) <= cell_columns(grid, 78)  # every bin fits the width
    whole, half = (draw(grid, GridView(rows=3, group=g), 78).plain.splitlines() for g in (fit, max(1, fit // 2)))
    span = format_ns(grid.bin_ns * grid.n_bins)
    assert whole[1].startswith(f"0 ns-{span} of {span}, {format_ns(grid.bin_ns * fit)} a column")
    assert half[1].startswith("0 ns-") and f" of {span}, {format_ns(grid.bin_ns * (fit // 2))} a column" in half[1]
