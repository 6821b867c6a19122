"""ops.input_dims: whatever the spacing of the trace's JSON, each operator's shapes read back as one normalized text
(the compact encoding with ", " between items), and absent or null shapes read as null."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from ktrace.importers.kineto_shapes import shapes_array

DIMS = st.lists(st.lists(st.integers(-1, 1 << 40), max_size=5), max_size=6)
VALUE = st.one_of(st.none(), DIMS)


@given(st.lists(st.tuples(VALUE, st.sampled_from([None, 0, 1, 2]), st.booleans()), max_size=30))
def test_any_spacing_reads_as_the_compact_text(items: list[tuple[object, int | None, bool]]) -> None:
    values: list[object] = []
    for value, indent, raw in items:  # raw: the fast path's unparsed text; else the slow path's decoded lists
        values.append(msgspec.Raw(json.dumps(value, indent=indent).encode()) if raw else value)
    expected = [None if v is None else json.dumps(v, separators=(", ", ": ")) for v, _, _ in items]
    out = shapes_array(values)
    assert out.to_pylist() == expected
    assert len(set(out.dictionary.to_pylist())) == len(out.dictionary)  # one code per distinct shape text
