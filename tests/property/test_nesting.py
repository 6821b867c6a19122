"""model.nesting.nesting_depth (the importers' range depths) agrees with its naive twin in tests/reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference import nesting_ref

from ktrace.model.nesting import nesting_depth


@st.composite
def nested_ranges(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Properly nested ranges (each pair of one thread nested or disjoint, lengths >= 1), in any order."""
    candidates = draw(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12), st.integers(1, 6)), max_size=30))
    kept: list[tuple[int, int, int]] = []
    for t, s, d in candidates:
        e = s + d
        if all(t != kt or e <= ks or ke <= s or (ks <= s and e <= ke) or (s <= ks and ke <= e) for kt, ks, ke in kept):
            kept.append((t, s, e))
    kept = draw(st.permutations(kept))
    arr = np.array(kept, dtype=np.int64).reshape(-1, 3)
    return arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()


@given(nested_ranges())
def test_nesting_depth_matches_reference(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    thread, start, end = data
    got = nesting_depth(thread, start, end).tolist()
    assert got == nesting_ref.nesting_depth(thread.tolist(), start.tolist(), end.tolist())
