"""Overlap lanes keep BEGIN/END nesting valid; counter names and units."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import CounterDescriptor

from ktrace.exporters.perfetto_layout import counter_descriptor
from ktrace.exporters.perfetto_slices import file_order
from ktrace.exporters.track_layout import counter_title, overlap_lanes
from ktrace.model.nesting import bracket_owner, nesting_lanes


def naive_owner(track: list[int], start: list[int], end: list[int]) -> list[int]:
    """Replay BEGIN(2i)/END(2i+1) events in (ts, position) order with a stack per track, as trace_processor does."""
    events = sorted(
        [(start[i], 2 * i, i, True) for i in range(len(start))]
        + [(end[i], 2 * i + 1, i, False) for i in range(len(start))]
    )
    stacks: dict[int, list[int]] = {}
    owner = [-1] * len(start)
    for _, _, i, is_begin in events:
        stack = stacks.setdefault(track[i], [])
        if is_begin:
            stack.append(i)
        else:
            owner[stack.pop()] = i
    return owner


intervals = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 30)), max_size=40)


def _sorted_columns(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = sorted(rows, key=lambda r: (r[1], -r[2]))
    track = np.array([r[0] for r in rows], np.int64)
    start = np.array([r[1] for r in rows], np.int64)
    return track, start, start + np.array([r[2] for r in rows], np.int64)


@given(intervals)
def test_bracket_owner_matches_a_stack_replay(rows: list[tuple[int, int, int]]) -> None:
    track, start, end = _sorted_columns(rows)
    assert bracket_owner(track, start, end).tolist() == naive_owner(track.tolist(), start.tolist(), end.tolist())


@given(intervals)
def test_bracket_owner_matches_a_stack_replay_in_any_row_order(rows: list[tuple[int, int, int]]) -> None:
    """Rows in any order (not only file order) pair as the replay does."""
    track = np.array([r[0] for r in rows], np.int64)
    start = np.array([r[1] for r in rows], np.int64)
    end = start + np.array([r[2] for r in rows], np.int64)
    assert bracket_owner(track, start, end).tolist() == naive_owner(track.tolist(), start.tolist(), end.tolist())


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 8), st.integers(0, 4)), min_size=50, max_size=300))
def test_bracket_owner_on_long_tracks_of_tied_timestamps(rows: list[tuple[int, int, int]]) -> None:
    """Deep stacks and many BEGINs and ENDs sharing a ts: ties replay by file position."""
    track, start, end = _sorted_columns(rows)
    assert bracket_owner(track, start, end).tolist() == naive_owner(track.tolist(), start.tolist(), end.tolist())


@given(intervals)
def test_lanes_make_every_track_nest(rows: list[tuple[int, int, int]]) -> None:
    track, start, end = _sorted_columns(rows)
    lanes = nesting_lanes(track, start, end)
    keyed = (lanes * 10 + track).tolist()
    owner = naive_owner(keyed, start.tolist(), end.tolist())
    assert [int(end[o]) for o in owner] == end.tolist()  # every slice rebuilt with its own end


@given(st.lists(st.tuples(st.sampled_from([0, 3, 70_000, -2]), st.integers(0, 60), st.integers(0, 12)), max_size=40))
def test_overlap_lanes_are_nesting_lanes_worked_out_where_slices_overlap(rows: list[tuple[int, int, int]]) -> None:
    track, start, end = _sorted_columns(rows)
    assert overlap_lanes(track, start, end).tolist() == nesting_lanes(track, start, end).tolist()


def test_back_to_back_tracks_skip_the_replay_and_overlapping_ones_do_not() -> None:
    track, start, end = _sorted_columns([(1, 0, 10), (1, 10, 5), (2, 0, 10), (2, 5, 10), (2, 12, 1)])
    assert overlap_lanes(track, start, end).tolist() == [0, 0, 1, 0, 0]  # file order: (start, -duration)


def test_an_overlap_between_rows_of_one_track_that_other_tracks_interleave_is_found() -> None:
    track, start, end = _sorted_columns([(2, 0, 6), (3, 3, 6), (2, 3, 1), (3, 6, 4)])
    assert overlap_lanes(track, start, end).tolist() == [0, 0, 0, 1]  # track 3: [3, 9) and [6, 10)


def test_nested_and_sequential_slices_stay_on_their_track() -> None:
    track, start, end = _sorted_columns([(1, 0, 100), (1, 0, 10), (1, 10, 5), (1, 50, 50), (1, 100, 0), (2, 5, 200)])
    assert nesting_lanes(track, start, end).tolist() == [0] * 6


def test_equal_ends_are_not_an_overlap() -> None:
    track, start, end = _sorted_columns([(1, 0, 100), (1, 50, 50), (1, 100, 0)])
    assert nesting_lanes(track, start, end).tolist() == [0, 0, 0]


def test_partial_overlap_moves_the_later_slice() -> None:
    track, start, end = _sorted_columns([(1, 0, 10), (1, 5, 10), (1, 12, 1)])
    assert nesting_lanes(track, start, end).tolist() == [0, 1, 0]


def test_counter_titles_and_units() -> None:
    assert counter_title("gpu.util", 0) == "GPU 0 utilization"
    assert counter_title("cpu.util", -1) == "CPU utilization"
    assert counter_title("cpu.core.util", 3) == "CPU core 3 utilization"
    assert counter_title("custom.metric", 2) == "custom.metric [2]"
    assert counter_descriptor("gpu.mem_used_bytes").unit == CounterDescriptor.UNIT_SIZE_BYTES
    assert counter_descriptor("gpu.util").unit_name == "%"
    assert counter_descriptor("gpu.util").y_axis_share_key == counter_descriptor("cpu.iowait_pct").y_axis_share_key
    assert counter_descriptor("gpu.power_w").unit_name == "W"


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), max_size=80))
def test_file_order_is_a_stable_sort_by_start_then_longest_first(rows: list[tuple[int, int]]) -> None:
    """Ties in start (and in duration) are frequent here; they keep their input order, as rank_slices needs."""
    start = np.array([r[0] for r in rows], np.int64)
    end = start + np.array([r[1] for r in rows], np.int64)
    expected = sorted(range(len(rows)), key=lambda i: (rows[i][0], -rows[i][1], i))
    assert file_order(start, end).tolist() == expected
