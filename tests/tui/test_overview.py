"""The loader's steps: the first-screen overview draws the same busy columns, pending tracks know their counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ktrace.tui.index_build import build_links, build_tracks, plan_index
from ktrace.tui.overview import Overview, paint_overview
from ktrace.tui.viewmodel import Viewport

spans = st.lists(st.tuples(st.integers(0, 999), st.integers(0, 300)), min_size=0, max_size=40)


def _overview(items: list[tuple[int, int]], bin_ns: int, n_bins: int) -> Overview:
    from ktrace.analysis._kernels.tracks import overview_bins

    s = np.array([a for a, _ in items], np.int64)
    e = np.array([a + d for a, d in items], np.int64)
    n = s.size
    out = overview_bins(
        np.zeros(n, np.int64), np.zeros(1, np.int64), s, e, np.arange(n), np.arange(n) % 5, 1, 0, bin_ns, n_bins
    )
    return Overview.from_bins(0, bin_ns, out.busy, out.first_colour, out.last_colour)


@given(spans, st.sampled_from([1, 2, 5]), st.integers(1, 20))
def test_overview_busy_columns_match_brute_force(items: list[tuple[int, int]], bins_per_col: int, width: int) -> None:
    bin_ns = 10
    ov = _overview(items, bin_ns, 100)
    vp = Viewport(0, width * bins_per_col * bin_ns, width)  # columns are whole, aligned bins
    paint = paint_overview(ov, 0, vp)
    b = vp.bounds()
    for c in range(width):
        hit = any(s < b[c + 1] and (s + d > b[c] or s >= b[c]) for s, d in items)
        assert (paint.glyphs[c] != " ") == hit, c
        assert (paint.colour[c] >= 0) == hit, c


def test_solid_where_fully_covered_and_colour_of_the_first_start() -> None:
    ov = _overview([(0, 100), (100, 100)], 10, 20)
    paint = paint_overview(ov, 0, Viewport(0, 400, 4))
    assert paint.glyphs == ["█", "█", " ", " "] and paint.solid.tolist() == [True, True, False, False]
    assert paint.colour.tolist()[:2] == [0, 1]


def test_pending_tracks_know_counts_then_match_the_built_ones(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    index, plan = plan_index(synthetic_trace)
    pending = [(t.key, t.size, t.kernel_count) for t in index.tracks]
    assert not index.ready and index.locate("kernels", 0) is None
    index.attach(build_tracks(plan))
    assert index.ready and pending == [(t.key, t.size, t.kernel_count) for t in index.tracks]
    streams = [t for t in index.tracks if t.kind == "stream"]
    assert sum(t.kernel_count for t in streams) == synthetic_trace.kernels.height
    # before the links are in there is no lookup (and no whole-table scan): nothing is linked yet
    picks = (("kernels", 0), ("kernels", 77), ("api", 5))
    assert not index.links_ready and all(index.linked_rows(table, row) == [] for table, row in picks)
    index.attach_links(build_links(synthetic_trace))
    assert index.links_ready and all(index.linked_rows(table, row) for table, row in picks)


def test_colour_lut_of_rows_matches_colour_lut(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.tui.tracks import colour_lut, colour_lut_of_rows

    names = synthetic_trace.kernels["name"]
    codes = names.to_physical().to_numpy()
    code_row = np.full(int(codes.max()) + 2, -1, np.int64)  # one spare code: the stand-in for nulls
    for row in range(codes.size - 1, -1, -1):
        code_row[codes[row]] = row
    want = colour_lut(names)
    got = colour_lut_of_rows(names, code_row)
    assert got[: want.size].tolist() == want.tolist() and got[want.size :].tolist() == [0] * (got.size - want.size)


def test_loading_mode_restores_the_switch_interval_and_gc() -> None:
    import gc
    import sys

    from ktrace.tui.loading_mode import LOADING_SWITCH_INTERVAL_S, LoadingMode

    before = sys.getswitchinterval()
    mode = LoadingMode()
    mode.enter()
    mode.enter()  # idempotent
    try:
        assert sys.getswitchinterval() == min(before, LOADING_SWITCH_INTERVAL_S) and not gc.isenabled()
    finally:
        mode.leave()
    mode.leave()
    assert sys.getswitchinterval() == before and gc.isenabled()
    gc.unfreeze()
