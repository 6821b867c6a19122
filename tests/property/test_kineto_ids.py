"""int_array's fallback (ids of mixed or string types) converts each distinct value once, with to_int's results."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ktrace.importers.kineto_events import _to_ints, int_array, to_int

_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["7", "stream 7", "25738", "-3", " 12", "1_000", "+5", "x", "", "12345678901234567890"]),
    st.text(max_size=6),
)
_JSON_VALUES = st.one_of(_JSON_SCALARS, st.lists(st.integers(), max_size=3), st.dictionaries(st.text(), st.integers()))


@given(st.lists(_JSON_SCALARS, max_size=60))
def test_distinct_values_convert_like_to_int(values: list[Any]) -> None:
    assert _to_ints(values) == [to_int(v) for v in values]


@given(st.lists(_JSON_VALUES, max_size=30))
def test_unhashable_values_convert_like_to_int(values: list[Any]) -> None:
    assert int_array(values).to_pylist() == [to_int(v) for v in values]


def test_equal_numbers_of_different_types_stay_apart() -> None:
    # True == 1 == 1.0 as dict keys, but a bool is not an id
    assert _to_ints([1, True, 1.0, False, 0, "1"]) == [1, None, 1, None, 0, 1]
    assert _to_ints(["25738"] * 3 + ["stream 7"]) == [25738] * 3 + [7]
