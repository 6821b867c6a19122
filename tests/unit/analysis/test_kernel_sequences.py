"""Kernel sequences, counted by hand.

stream 7: a b c a b c a b   (10 ns each)   windows abc@0 bca@1 cab@2 abc@3 bca@4 cab@5
stream 8: a b c             (10 ns each)   abc
stream 9: x x x x x x       (20 ns each)   xxx@0..3: only @0 and @3 count (occurrences never overlap)
"""

from __future__ import annotations

import pytest

from ktrace.analysis.kernel_sequences import SEQUENCE_COLUMNS, kernel_sequences
from ktrace.model import Trace, TraceBuilder


def _trace() -> Trace:
    names, streams, starts, ends = [], [], [], []
    for stream, seq, dur in ((7, "abcabcab", 10), (8, "abc", 10), (9, "xxxxxx", 20)):
        for i, name in enumerate(seq):
            names.append(name)
            streams.append(stream)
            starts.append(1000 * stream + 100 * i)
            ends.append(1000 * stream + 100 * i + dur)
    b = TraceBuilder("n0", 0)
    b.add(
        "kernels",
        {
            "start_ns": starts[::-1],
            "end_ns": ends[::-1],
            "device": [0] * len(names),  # not in time order
            "stream": streams[::-1],
            "name": names[::-1],
        },
    )
    return b.build()


def test_sequences_by_hand() -> None:
    found = kernel_sequences(_trace(), length=3)
    assert found is not None and found.distinct == 4
    assert found.top.columns == list(SEQUENCE_COLUMNS)
    rows = found.top.select("kernels", "count", "streams", "total_ns").rows()
    assert rows == [
        (["a", "b", "c"], 3, 2, 90),
        (["x", "x", "x"], 2, 1, 120),
        (["b", "c", "a"], 2, 1, 60),
        (["c", "a", "b"], 2, 1, 60),
    ]
    assert found.top["time_share"][0] == pytest.approx(90 / 230)
    assert found.top["mean_ns"][1] == 60.0


def test_top_and_too_short() -> None:
    assert kernel_sequences(_trace(), length=3, top=1).top.height == 1  # type: ignore[union-attr]
    assert kernel_sequences(_trace(), length=9) is None  # no stream has 9 kernels
    with pytest.raises(ValueError, match="length"):
        kernel_sequences(_trace(), length=0)
