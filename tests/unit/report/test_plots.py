"""Report figures: every bar its own category, distinct tick names with the full name on hover, clean legends,
a one-bin histogram that does not fill the width."""

from __future__ import annotations

import html

from ktrace.report import plots

_CLOVER = (
    "void clover::par_ranged2d_kernel<{fn}(int, int, clover::Buffer2D<double> &)::"
    "[lambda(int, int) (instance {i})]>(clover::Range2d, T1)"
)


def test_bars_never_share_a_category_and_hover_shows_the_full_name() -> None:
    names = [_CLOVER.format(fn="advec_mom_kernel", i=i) for i in (1, 2, 3)] + ["other"]
    fig = plots.hbar("Top kernels by launch count", names, [740.0, 370.0, 370.0, 9.0], "launches")
    bar = fig["data"][0]
    assert len(set(bar["y"])) == len(names)  # plotly stacks bars that share a y value
    ticks = fig["layout"]["yaxis"]["ticktext"]
    assert len(set(ticks)) == len(names) and "other" in ticks
    assert all(len(html.unescape(t)) <= plots.MAX_TICK_CHARS for t in ticks)
    assert html.escape(names[0]) in bar["hovertext"]
    assert dict(zip(fig["layout"]["yaxis"]["tickvals"], ticks, strict=True))[bar["y"][-1]] == ticks[-1]


def test_pie_legend_drops_placeholder_words() -> None:
    fig = plots.pie("GPU memory operations", ["memset - -", "memcpy HtoD pinned"], [1.0, 2.0])
    assert fig["data"][0]["labels"] == ["memset", "memcpy HtoD pinned"]
    assert fig["data"][0]["textposition"] == "inside"


def test_one_bin_histogram_is_a_bar_from_zero() -> None:
    fig = plots.histogram("Step time distribution", [1210.3, 1211.3], [1], "ms")
    xaxis = fig["layout"]["xaxis"]
    assert xaxis["range"][0] == 0.0 and xaxis["range"][1] > 1211.3
    assert fig["data"][0]["width"][0] >= xaxis["range"][1] / 40
    assert fig["layout"]["yaxis"]["dtick"] == 1


def _heatmap(x: list[float] | list[int], x_title: str) -> plots.Figure:
    ranks = [("localhost", r) for r in range(8)]
    z: list[list[int | None]] = [[50] * len(x) for _ in ranks]
    return plots.heatmap("busy", z, z, ranks, list(x), x_title)


def test_step_heatmaps_have_whole_step_ticks_and_room_for_the_rank_labels() -> None:
    """Chromium showed one step as an axis from -0.4 to 0.4, and "ocalhost/0": the labels were cut on the left by a
    fixed margin. Fails on the old code (no tick settings, no automargin)."""
    one = _heatmap([0], "step")["layout"]
    assert one["xaxis"]["tickformat"] == "d" and one["xaxis"]["dtick"] == 1 and one["xaxis"]["tick0"] == 0
    assert one["yaxis"]["automargin"] is True
    many = _heatmap(list(range(100)), "step")["layout"]["xaxis"]
    assert many["dtick"] == 9 and 100 / many["dtick"] <= plots.MAX_INT_TICKS  # whole steps, at most 12 ticks
    timed = _heatmap([0.0005, 0.0015], "seconds")["layout"]["xaxis"]
    assert "dtick" not in timed and "tickformat" not in timed  # a time axis keeps plotly's own ticks


def test_heatmap_rows_of_long_host_names_stay_apart_and_whole() -> None:
    """Hosts whose names share their first 40 characters: cut at the end, every rank of both hosts read the same
    "host…" and plotly's category axis merged their rows; cut where they differ, a user could not read the host.
    Each row is labelled with its whole (escaped) name."""
    hosts = [f"{'gpu-node-in-a-very-long-cluster-domain-name-'}<{h}>.example.org" for h in ("east", "west")]
    ranks = [(h, 0) for h in hosts]
    fig = plots.heatmap("busy", [[50], [60]], [[1], [2]], ranks, [0], "step")
    names = fig["data"][0]["y"]
    assert names == [html.escape(f"{h}/0") for h in hosts] == fig["layout"]["yaxis"]["ticktext"]


def test_thousands_of_ranks_stay_under_the_canvas_limit_and_keep_labels_apart() -> None:
    ranks = [(f"node{r // 8:03d}", r) for r in range(4096)]
    z: list[list[int | None]] = [[50] for _ in ranks]
    fig = plots.heatmap("busy", z, z, ranks, [0], "step")
    assert fig["layout"]["height"] <= plots.MAX_PLOT_PX + 200
    ticks = fig["layout"]["yaxis"]["tickvals"]
    assert len(fig["data"][0]["y"]) == 4096 and fig["layout"]["height"] / len(ticks) >= plots.ROW_PX - 1


def test_line_names_that_differ_at_the_end_stay_apart() -> None:
    series = [(f"{'x' * 100} GPU{d}", [0.0], [1.0]) for d in range(3)]
    names = [s["name"] for s in plots.xy_lines("util", series, "%")["data"]]
    assert len(set(names)) == 3 and all(len(n) <= plots.LABEL_CHARS for n in names), names
