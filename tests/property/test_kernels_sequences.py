"""The kernel-sequence numba kernel agrees with its naive twin in tests/reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from reference import sequences_ref
from reference.kernel_modes import kernel_mode  # noqa: F401  (both paths: Python and numba)

from ktrace.analysis._kernels import sequences


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), max_size=40), st.integers(1, 5))
def test_first_fit_occurrences_matches_reference(windows: list[tuple[int, int]], length: int) -> None:
    seq = [s for s, _ in windows]
    pos = np.cumsum([step for _, step in windows]).tolist()  # increasing, with gaps (stream boundaries)
    got = sequences.first_fit_occurrences(np.array(seq, np.int64), np.array(pos, np.int64), length, 4).tolist()
    assert got == sequences_ref.first_fit_occurrences(seq, pos, length)
