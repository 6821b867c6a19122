"""The track-index numba kernels agree with their naive twins in tests/reference/tracks_reference.py."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference import tracks_reference as ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)

from ktrace.analysis._kernels import tracks

N_TRACKS = 3


@st.composite
def slices(draw: st.DrawFn, max_size: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(track, start, end, colour) of slices in any order, small integer times."""
    rows = draw(
        st.lists(
            st.tuples(st.integers(0, N_TRACKS - 1), st.integers(0, 60), st.integers(0, 25), st.integers(0, 5)),
            max_size=max_size,
        )
    )
    arr = np.array([(t, s, s + d, c) for t, s, d, c in rows], np.int64).reshape(-1, 4)
    return arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), arr[:, 3].copy()


keys = st.lists(
    st.tuples(
        st.integers(-3, 3),
        st.integers(-1, 2),
        st.sampled_from([0, 7, 2**40, -(2**50)]),
        st.integers(0, 2),
        st.integers(0, 1),
    ),
    min_size=1,
    max_size=60,
)


@given(keys)
def test_key_ids_match_reference(rows: list[tuple[int, ...]]) -> None:
    cols = [np.array([r[j] for r in rows], np.int64) for j in range(5)]
    cols[1] = cols[1].astype(np.int32)
    ids, first = tracks.key_ids(*cols)
    want_ids, want_first = ref.key_ids(rows)
    assert ids.tolist() == want_ids and first.tolist() == want_first


def test_key_ids_grow_past_the_initial_table_and_broadcast_constants() -> None:
    a = np.arange(5000, dtype=np.int64) % 700
    ids, first = tracks.key_ids(a, np.zeros(1, np.int64), a // 7, np.zeros(1, np.int64), np.zeros(1, np.int64))
    assert ids.tolist() == (a % 700).tolist() and first.tolist() == list(range(700))


@given(slices(), st.integers(-10, 30), st.integers(1, 17), st.integers(1, 9))
def test_overview_bins_match_reference(data: tuple[np.ndarray, ...], t0: int, bin_ns: int, n_bins: int) -> None:
    track, start, end, colour = data
    n = track.size
    out = tracks.overview_bins(
        track, np.arange(N_TRACKS), start, end, np.arange(n), colour, N_TRACKS, t0, bin_ns, n_bins
    )
    busy, first, last, counts = ref.overview_bins(
        track.tolist(), start.tolist(), end.tolist(), colour.tolist(), N_TRACKS, t0, bin_ns, n_bins
    )
    assert out.busy.tolist() == busy and out.counts.tolist() == counts
    assert out.first_colour.tolist() == first and out.last_colour.tolist() == last


@given(slices(), st.integers(0, 30))
def test_sort_and_track_arrays_match_reference(data: tuple[np.ndarray, ...], split: int) -> None:
    track, start, end, colour = data
    order, offsets = tracks.sort_by_track(track, start, N_TRACKS)
    want_order, want_offsets = ref.sort_by_track(track.tolist(), start.tolist(), N_TRACKS)
    assert order.tolist() == want_order and offsets.tolist() == want_offsets
    arrays = tracks.track_arrays(order, offsets, start, end, colour, split)
    assert arrays.starts.tolist() == start[order].tolist() and arrays.colour.tolist() == colour[order].tolist()
    for t in range(N_TRACKS):
        lo, hi = offsets[t], offsets[t + 1]
        s, e = start[order[lo:hi]], end[order[lo:hi]]
        assert arrays.max_end[lo:hi].tolist() == np.maximum.accumulate(e).tolist()
        assert arrays.cum_ns[lo + t : hi + t + 1].tolist() == [0, *np.cumsum(e - s).tolist()]
        assert int(arrays.busy_ns[t]) == ref.busy_union(s.tolist(), e.tolist())
        assert (arrays.pos[order[lo:hi]] == np.arange(hi - lo)).all()
    assert arrays.rows.tolist() == [r - split if r >= split else r for r in order.tolist()]
    assert arrays.table.tolist() == [int(r >= split) for r in order.tolist()]
    assert tracks.take(colour, np.arange(colour.size)[::-1]).tolist() == colour[::-1].tolist()
    assert tracks.concat(start, end).tolist() == start.tolist() + end.tolist()


@st.composite
def keyed_slices(draw: st.DrawFn) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Rows with 5-part keys (enough distinct keys to grow the table past 64), times, colour codes, chunk cuts."""
    n = draw(st.integers(0, 400))
    many = draw(st.booleans())
    key = st.tuples(
        st.integers(0, 150 if many else 3), st.integers(-1, 1), st.integers(0, 2), st.integers(0, 1), st.integers(0, 1)
    )
    rows = draw(st.lists(key, min_size=n, max_size=n))
    start = np.array(draw(st.lists(st.integers(-5, 80), min_size=n, max_size=n)), np.int64).reshape(-1)
    dur = np.array(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), np.int64).reshape(-1)
    codes = np.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), np.uint32).reshape(-1)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    return rows, start, start + dur, codes, [0, *cuts, n]


@given(keyed_slices(), st.integers(-10, 20), st.integers(1, 9), st.integers(1, 12), st.booleans())
def test_chunked_track_scan_matches_reference(data: tuple, t0: int, bin_ns: int, n_bins: int, with_ids: bool) -> None:  # type: ignore[type-arg]
    from ktrace.analysis._kernels.track_scan import ChunkRows, TrackScan

    rows, start, end, codes, cuts = data
    keys = [np.array([r[j] for r in rows], np.int64).reshape(-1) for j in range(5)]
    keys[0], keys[1] = keys[0].astype(np.uint32), keys[1].astype(np.int32)  # the TUI's physical dtypes
    scan = TrackScan(len(rows), t0, bin_ns, n_bins, 7, with_ids=with_ids)
    chunks = [
        ChunkRows(*(k[a:b] for k in keys), start[a:b], end[a:b], codes[a:b])
        for a, b in zip(cuts, cuts[1:], strict=False)
        if b > a
    ]
    for chunk in chunks:
        scan.add(chunk)
    got = scan.result()
    want_ids, want_first = ref.key_ids(rows)
    assert got.first_row.tolist() == want_first and got.keys.tolist() == [list(rows[r]) for r in want_first]
    assert got.ids.tolist() == (want_ids if with_ids else [])
    n_keys = len(want_first)
    busy, first, last, counts = ref.overview_bins(
        want_ids, start.tolist(), end.tolist(), codes.tolist(), n_keys, t0, bin_ns, n_bins
    )
    assert got.busy.tolist() == (busy or np.zeros((0, n_bins)).tolist()) and got.counts.tolist() == counts
    assert got.first_code.reshape(-1).tolist() == sum(first, []) and got.last_code.reshape(-1).tolist() == sum(last, [])
    assert got.code_row.tolist() == ref.first_row_of_codes(codes.tolist(), 8)
    remap = np.arange(n_keys, dtype=np.int64)[::-1].copy()
    out = np.full(len(rows), -7, np.int64)
    at = 0
    for chunk in chunks:
        scan.track_of_rows(chunk, remap, out, at)
        at += chunk.start.size
    assert out.tolist() == [int(remap[i]) for i in want_ids]


@given(st.lists(st.integers(0, 9), max_size=20), st.integers(0, 5))
def test_copy_into_and_take_into_fill_a_slice(values: list[int], at: int) -> None:
    from ktrace.analysis._kernels.track_scan import copy_into, take_into

    src = np.array(values, np.uint32)
    out = np.full(len(values) + at + 2, -1, np.int64)
    copy_into(out, at, src)
    assert out.tolist() == [-1] * at + values + [-1, -1]
    lut = np.arange(10, dtype=np.int64) * 3
    take_into(out, at, lut, src)
    assert out.tolist() == [-1] * at + [3 * v for v in values] + [-1, -1]
