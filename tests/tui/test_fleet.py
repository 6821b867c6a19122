"""The TUI at many ranks: ranks grouped per host (in blocks past 64), a small overview, a first screen of a few rows
at 1,024 ranks, and the dashboard's rank heatmap and stragglers leading to a rank's timeline."""

from __future__ import annotations

import asyncio

import numpy as np
from fleet_traces import LAYOUT, STRAGGLER, fleet_trace
from textual.pilot import Pilot

from ktrace.testing.synthetic import SyntheticConfig, generate
from ktrace.tui.app import make_app
from ktrace.tui.index_build import MIN_OVERVIEW_BINS, overview_bins, plan_index
from ktrace.tui.overview import N_BINS
from ktrace.tui.tree_model import RANK_BLOCK, tree_roots
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.rank_heatmap import RankHeatmap
from ktrace.tui.widgets.rank_lines import RankLines
from ktrace.tui.widgets.timeline import Timeline

MANY_ON_ONE_HOST = tuple(("h", r) for r in range(2 * RANK_BLOCK + 2))


def test_a_host_with_many_ranks_lists_them_in_blocks() -> None:
    index, _ = plan_index(fleet_trace(layout=MANY_ON_ONE_HOST, straggler=None))
    (root,) = tree_roots(index)
    assert root.label.startswith(f"h ({len(MANY_ON_ONE_HOST)} ranks · ")
    assert root.expand is not None
    blocks = root.expand()
    assert [b.label for b in blocks] == ["ranks 0-63 (64 ranks)", "ranks 64-127 (64 ranks)", "ranks 128-129 (2 ranks)"]
    assert blocks[2].expand is not None
    assert [r.label.split(" · ")[0] for r in blocks[2].expand()] == ["rank 128", "rank 129"]
    few, _ = plan_index(fleet_trace())
    assert [r.label.split(" (")[0] for r in tree_roots(few)] == ["a", "b"]
    assert [c.label.split(" · ")[0] for c in tree_roots(few)[0].expand()] == ["rank 0", "rank 1"]  # type: ignore[misc]


def test_overview_bins_shrink_with_the_rank_count() -> None:
    assert overview_bins(fleet_trace(layout=LAYOUT)) == N_BINS
    many = fleet_trace(layout=MANY_ON_ONE_HOST, straggler=None)
    assert overview_bins(many) == MIN_OVERVIEW_BINS
    index, _ = plan_index(many)
    assert index.overview is not None and index.overview.n_bins == MIN_OVERVIEW_BINS


def test_dashboard_rank_line_shows_that_rank_in_the_timeline(drive, settled) -> None:  # type: ignore[no-untyped-def]
    app = make_app(trace=fleet_trace())

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("3")
        await settled(pilot)
        heat, lag = app.query_one(RankHeatmap), app.query_one(RankLines)
        assert heat.grid.title.startswith("ranks:") and lag.panel.title.startswith("stragglers")
        assert lag.chosen == STRAGGLER  # the first straggler line is the planted one
        lag.focus()
        await pilot.press("enter")
        await settled(pilot)
        timeline = app.query_one(Timeline)
        assert app.index is not None
        shown = app.index.tracks[timeline.rows[timeline.cursor]]
        assert (shown.node, shown.rank, shown.kind) == (*STRAGGLER, "stream")
        heat.focus()
        await pilot.press("3", "j", "j", "enter")  # the third rank row
        await settled(pilot)
        shown = app.index.tracks[timeline.rows[timeline.cursor]]
        assert (shown.node, shown.rank) == LAYOUT[2]
        tree = app.query_one(HostDeviceTree)
        assert tree.cursor_node is not None and tree.cursor_node.data is not None
        assert tree.cursor_node.data.key.startswith(f"{LAYOUT[2][0]}/{LAYOUT[2][1]}/")

    drive(app, scenario)


def test_one_rank_has_no_rank_panels(drive, settled) -> None:  # type: ignore[no-untyped-def]
    app = make_app(trace=fleet_trace(layout=(("a", 0),)))

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("3")
        await settled(pilot)
        assert not app.query(RankLines)

    drive(app, scenario)


def test_1024_ranks_open_with_a_few_rows_and_collapsed_hosts() -> None:
    """First screen of a 1,024-rank, 128-host job: drawn from the track list and a 256-bin overview, the timeline
    rows that fit the screen (20 at 140x40), hosts collapsed but the cursor's; the time to it is printed (see
    benchmarks/fleet_tui.py for figures)."""
    trace = generate(SyntheticConfig(ranks=1024, nodes=128, steps=2, kernels_per_step=4, streams=1))
    app = make_app(trace=trace, analyses=False)

    async def main() -> None:
        async with app.run_test(size=(140, 40)):
            for _ in range(6000):  # 60 s at most: a first screen that never comes fails, not hangs
                if "first_screen" in app.timings:
                    break
                await asyncio.sleep(0.01)
            assert "first_screen" in app.timings
            print(f"1,024 ranks: first screen {app.timings['first_screen'] - app.timings['mount']:.2f} s wall")
            assert app.index is not None and app.index.overview is not None
            assert app.index.overview.n_bins == MIN_OVERVIEW_BINS
            assert len(app.query_one(Timeline).rows) <= 40 - 5 - 1 - 14  # screen less chrome, ruler, details
            hosts = app.query_one(HostDeviceTree).root.children
            assert len(hosts) == 128
            assert sum(h.is_expanded for h in hosts) <= 1  # the timeline cursor's host, revealed

    asyncio.run(main())


def test_heatmap_has_a_row_per_rank_at_many_ranks() -> None:
    """320 ranks on 40 hosts: one heatmap row per rank (the old panel drew one line per run of hosts), the straggler
    panel led by the planted rank, the 319 ranks of equal step times on one line (Stragglers.step_time)."""
    from ktrace.analysis.dashboard import build_dashboard
    from ktrace.tui.rank_grid import RankGrid
    from ktrace.tui.rank_panels import RankPanel, rank_panels

    layout = tuple((f"host{h:02d}", 8 * h + r) for h in range(40) for r in range(8))
    heat, lag = rank_panels(build_dashboard(fleet_trace(layout=layout, straggler=layout[100])))
    assert isinstance(heat, RankGrid) and isinstance(lag, RankPanel)
    assert heat.ranks == list(layout) and len(set(heat.labels)) == len(layout)
    assert layout[100] in [(o.node, o.rank) for o in heat.outliers]
    assert layout[100] in lag.ranks
    assert "ranks 0, 1, 2, 3 +315" in lag.body.plain and "more ranks" not in lag.body.plain


def test_small_chunks_of_a_large_table_run_compiled(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The scan picks Python or compiled by the whole table's rows, not each chunk's: a 1,024-rank trace comes in
    1,024 small chunks, which ran as Python one by one."""
    from ktrace.analysis import _kernels
    from ktrace.analysis._kernels import track_scan
    from ktrace.analysis.timeline_tracks import ChunkRows, TrackScan

    monkeypatch.setattr(_kernels, "PYTHON_MAX_ROWS", 1000)

    calls: list[int] = []
    real = track_scan._scan_chunk.compiled
    monkeypatch.setattr(track_scan._scan_chunk, "compiled", lambda: calls.append(1) or real())
    one = np.zeros(1, np.int64)
    start = np.arange(10, dtype=np.int64)
    rows = ChunkRows(one, one, one, one, one, start, start + 1, np.zeros(10, np.int64))
    TrackScan(10, 0, 5, 4, 0, with_ids=False).add(rows)
    assert calls == []
    large = TrackScan(1010, 0, 5, 4, 0, with_ids=False)
    large.add(rows)
    assert calls == [1]
    assert large.result().counts.tolist() == [10]


def test_rank_lines_answer_keys_as_soon_as_the_dashboard_shows(drive, settled) -> None:  # type: ignore[no-untyped-def]
    """j/k/enter used to do nothing on the dashboard until tab had moved the focus to a rank panel."""
    app = make_app(trace=fleet_trace())

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("3")
        await settled(pilot)
        heat, lag = app.query_one(RankHeatmap), app.query_one(RankLines)
        assert heat.has_focus
        await pilot.press("tab")  # the stragglers, as help says
        assert lag.has_focus
        await pilot.press("shift+tab")
        assert heat.has_focus
        await pilot.press("j", "j", "k", "j", "enter")  # the third rank line
        await settled(pilot)
        timeline = app.query_one(Timeline)
        assert app.index is not None and timeline.has_focus
        shown = app.index.tracks[timeline.rows[timeline.cursor]]
        assert (shown.node, shown.rank) == LAYOUT[2]

    drive(app, scenario)


def test_rank_lines_take_the_keys_when_the_dashboard_arrives_on_screen(drive, settled) -> None:  # type: ignore[no-untyped-def]
    """The dashboard tab shown before the analyses finished: the rank panel takes the focus once it is mounted."""
    app = make_app(trace=fleet_trace())

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        from ktrace.tui.widgets.dashboard import Dashboard

        dashboard = app.query_one(Dashboard)
        message = dashboard.last_shown
        assert message is not None
        await pilot.press("3")
        dashboard.set_pending()
        await pilot.pause()
        assert dashboard.has_focus
        dashboard.show(message)
        await settled(pilot)
        assert app.query_one(RankHeatmap).has_focus

    drive(app, scenario)
