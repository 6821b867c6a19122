"""time_order_with_times of one group already in time order hands back the start array itself (no 160 MB copy at
20 M records); any other input gets the stable (group, start) order as before."""

from __future__ import annotations

import numpy as np
import pytest

from ktrace.analysis.columns import time_order_with_times


def naive_order(gid: np.ndarray, start: np.ndarray) -> np.ndarray:
    return np.lexsort((np.arange(gid.size), start, gid))


def test_one_sorted_group_is_not_copied() -> None:
    start = np.array([1, 1, 2, 5, 9], np.int64)
    perm, bounds, ordered = time_order_with_times(np.zeros(5, np.int64), 1, start)
    assert ordered is start
    assert perm.tolist() == [0, 1, 2, 3, 4] and bounds.tolist() == [0, 5]


@pytest.mark.parametrize(("groups", "seed"), [(1, 0), (1, 1), (3, 2), (3, 3)])
def test_order_equals_a_stable_lexsort(groups: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    gid = rng.integers(0, groups, 200).astype(np.int64)
    start = rng.integers(0, 50, 200).astype(np.int64)
    before = start.copy()
    perm, _, ordered = time_order_with_times(gid, groups, start)
    assert perm.tolist() == naive_order(gid, start).tolist()
    assert ordered.tolist() == start[perm].tolist()
    assert (start == before).all()  # the input is never written
