"""The index keeps a trace's modeled calls with their keys as codes (ModeledCalls.coded, Categorical as trace.ops);
readers that ask for `calls` get Strings, and the roofline's groups are the same from either (issue 29)."""

from __future__ import annotations

import polars as pl
from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.roofline import KEYS, NO_SHAPES, group_calls, modeled_calls


def test_codes_kept_strings_given_and_the_same_groups() -> None:
    owlv2 = ktrace.open(fixture_path("tracelens"))
    found = modeled_calls(owlv2, TraceIndex(owlv2))
    assert found.reason is None and found.coded.height > 0
    assert all(found.coded.schema[k] == pl.Categorical for k in KEYS)
    assert all(found.calls.schema[k] == pl.String for k in KEYS)
    assert found.calls.drop(KEYS).equals(found.coded.drop(KEYS))
    assert found.calls.select(KEYS).equals(found.coded.select(pl.col(KEYS).cast(pl.String)))
    assert group_calls(found.coded).equals(group_calls(found.calls))


def test_without_a_roofline_the_calls_are_an_empty_frame() -> None:
    trace = ktrace.open(fixture_path("alexnet"))  # operators without shapes
    found = modeled_calls(trace, TraceIndex(trace))
    assert found.reason == NO_SHAPES
    assert found.calls.shape == (0, 0) and found.coded.shape == (0, 0)
