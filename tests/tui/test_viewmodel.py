"""The pure timeline viewmodel against brute-force twins: busy columns, hit tests, ruler, counters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktrace.tui.track_types import make_track
from ktrace.tui.viewmodel import (
    Viewport,
    format_offset,
    format_signed_offset,
    max_in_ranges,
    paint_track,
    ruler,
    slice_at,
    tick_step,
    visible,
)


def _track(starts: list[int], ends: list[int], kind: str = "stream", values: list[float] | None = None):  # type: ignore[no-untyped-def]
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    n = s.size
    return make_track(
        "k",
        "k",
        kind,
        "n",
        0,
        s,
        e,
        np.zeros(n, np.int8),
        np.arange(n, dtype=np.int64),
        np.arange(n, dtype=np.int64),
        None if values is None else np.asarray(values, float),
    )


def _naive_busy(starts: np.ndarray, ends: np.ndarray, vp: Viewport) -> np.ndarray:
    b = vp.bounds()
    out = np.zeros(vp.width, bool)
    for c in range(vp.width):
        for s, e in zip(starts, ends, strict=False):
            if s < b[c + 1] and (e > b[c] or s >= b[c]):
                out[c] = True
    return out


spans = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)), min_size=0, max_size=40)


@given(spans, st.integers(-2_000, 9_000), st.integers(1, 12_000), st.integers(1, 50))
def test_busy_columns_match_brute_force(items: list[tuple[int, int]], start: int, span: int, width: int) -> None:
    starts = np.array([s for s, _ in items], np.int64)
    ends = starts + np.array([d for _, d in items], np.int64)
    track = _track(starts.tolist(), ends.tolist())
    vp = Viewport(start, start + span, width)
    paint = paint_track(track, vp)
    busy = np.array([g != " " for g in paint.glyphs])
    np.testing.assert_array_equal(busy, _naive_busy(track.starts, track.ends, vp))
    assert ((paint.colour >= 0) == busy).all()


@given(spans, st.integers(0, 9_000), st.integers(1, 12_000))
def test_visible_is_exactly_the_intersecting_slices(items: list[tuple[int, int]], start: int, span: int) -> None:
    starts = np.array([s for s, _ in items], np.int64)
    track = _track(starts.tolist(), (starts + np.array([d for _, d in items], np.int64)).tolist())
    vp = Viewport(start, start + span, 10)
    vis = visible(track, vp)
    hits = {i for i in range(track.size) if track.starts[i] < vp.end_ns and track.ends[i] > vp.start_ns}
    inside = set(range(vis.first, vis.stop))
    assert hits <= inside
    for i in inside - hits:  # only starts-before-window slices hidden under a longer earlier one may be extra
        assert track.starts[i] < vp.end_ns


def test_one_long_slice_is_solid_and_labelled() -> None:
    track = _track([100], [900])
    paint = paint_track(track, Viewport(0, 1000, 10))
    assert paint.solid.tolist() == [False, True, True, True, True, True, True, True, True, False]
    assert paint.labels == [(1, 9, 0)]


def test_sparse_slices_draw_low_glyphs_not_solid() -> None:
    track = _track([0, 500], [10, 510])
    paint = paint_track(track, Viewport(0, 1000, 2))
    assert paint.glyphs == ["▁", "▁"] and not paint.solid.any()


def test_slice_at_picks_the_slice_under_the_column() -> None:
    track = _track([0, 300, 600], [200, 500, 1000])
    vp = Viewport(0, 1000, 10)
    assert [slice_at(track, vp, c) for c in range(10)] == [0, 0, None, 1, 1, None, 2, 2, 2, 2]
    assert slice_at(track, vp, 10) is None


def test_counter_sparkline_uses_the_max_per_column_and_holds_the_last_value() -> None:
    track = _track([0, 10, 20, 500], [0, 10, 20, 500], kind="counter", values=[1.0, 8.0, 2.0, 4.0])
    paint = paint_track(track, Viewport(0, 800, 8))
    # level = round(value / max * 7) + 1 eighths: 8 -> 8, 2 -> 3, 4 -> 5 (round half to even: 3.5 -> 4)
    assert paint.glyphs == ["█", "▃", "▃", "▃", "▃", "▅", " ", " "]


def test_max_in_ranges_matches_python() -> None:
    v = np.array([3.0, 1.0, 7.0, 2.0, 5.0])
    np.testing.assert_array_equal(max_in_ranges(v, np.array([0, 2, 4]), np.array([2, 3, 5])), [3.0, 7.0, 5.0])


def test_zoom_keeps_the_anchor_and_pan_moves_by_a_fraction() -> None:
    vp = Viewport(0, 1_000_000, 100)
    z = vp.zoom(2.0, anchor_col=25)
    assert z.span_ns == 500_000 and z.time_at(25) == pytest.approx(vp.time_at(25), abs=10_000)
    assert vp.pan(0.5).start_ns == 500_000


def test_ruler_ticks_are_round_and_labelled_relative_to_the_origin() -> None:
    vp = Viewport(2_000_000_000, 2_010_000_000, 100)
    assert tick_step(vp.span_ns, 100) == 2_000_000
    text = ruler(vp, origin_ns=0)
    assert len(text) == 100 and "|2.002s" in text and "|2.008s" in text
    assert format_offset(340_500_000, 100_000) == "340.5ms"


def test_within_keeps_the_window_inside_the_trace() -> None:
    v = Viewport(900, 1100, 80)
    assert v.within(0, 1000) == Viewport(800, 1000, 80)  # panned past the end: back to the last window
    assert Viewport(-300, -100, 80).within(0, 1000) == Viewport(0, 200, 80)
    assert Viewport(100, 300, 80).within(0, 1000) == Viewport(100, 300, 80)
    wide = Viewport(-5000, 5000, 80).within(0, 1000)
    assert wide.start_ns <= 0 and wide.end_ns >= 1000


def test_an_offset_before_the_trace_start_reads_minus_not_plus_minus() -> None:
    """The status line said "window +-23.884ms" on the H100 trace (its fitted window starts before t0)."""
    assert format_signed_offset(-23_884_000) == "-23.884ms"
    assert format_signed_offset(1_235_746_000) == "+1.235746s"
    assert format_signed_offset(0) == "+0"
