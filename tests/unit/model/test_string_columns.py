"""map_distinct_strings: the one pass that rewrites a frame's text (scrubbing, printable text), by distinct value."""

from __future__ import annotations

import polars as pl

from ktrace.model.scrub import scrub_frame
from ktrace.model.secrets import REDACTED
from ktrace.model.string_columns import map_distinct_strings

SECRET = "Pw" + "x7Kq2" * 3


def test_the_function_sees_each_text_columns_distinct_values_once_not_its_rows() -> None:
    rows = 10_000
    frame = pl.DataFrame(
        {
            "name": pl.Series(["gemm", "relu", None, "gemm"] * (rows // 4), dtype=pl.Categorical),
            "host": ["a", "b"] * (rows // 2),
            "kind": pl.Series(["x", "y"] * (rows // 2), dtype=pl.Enum(["x", "y"])),
            "n": range(rows),
        }
    )
    seen: list[list[str]] = []

    def changes_for(values: list[str]) -> dict[str, str]:
        seen.append(sorted(values))
        return {}

    assert map_distinct_strings(frame, changes_for) is frame
    assert seen == [["gemm", "relu"], ["a", "b"], ["x", "y"]]


def test_only_changed_values_change_nulls_stay_and_dtypes_are_kept_an_enum_becoming_categorical() -> None:
    frame = pl.DataFrame(
        {
            "name": pl.Series(["gemm", "relu", None], dtype=pl.Categorical),
            "host": ["a", None, "b"],
            "kind": pl.Series(["x", "y", "x"], dtype=pl.Enum(["x", "y"])),
        }
    )
    out = map_distinct_strings(frame, lambda values: {v: v.upper() for v in values if v in ("relu", "b", "y")})
    assert out.to_dict(as_series=False) == {
        "name": ["gemm", "RELU", None],
        "host": ["a", None, "B"],
        "kind": ["x", "Y", "x"],
    }
    assert [out.schema[c] for c in ("name", "host", "kind")] == [pl.Categorical, pl.String, pl.Categorical]


def test_an_empty_frame_or_one_without_text_is_returned_without_a_call() -> None:
    def never(values: list[str]) -> dict[str, str]:
        raise AssertionError(values)

    empty = pl.DataFrame(schema={"name": pl.String})
    numbers = pl.DataFrame({"n": [1, 2]})
    assert map_distinct_strings(empty, never) is empty and map_distinct_strings(numbers, never) is numbers


def test_scrub_frame_scrubs_an_enum_column_too() -> None:
    frame = pl.DataFrame({"kind": pl.Series(["ok", f"token={SECRET}"], dtype=pl.Enum(["ok", f"token={SECRET}"]))})
    clean, n = scrub_frame(frame)
    assert n == 1 and clean["kind"].to_list() == ["ok", f"token={REDACTED}"]
