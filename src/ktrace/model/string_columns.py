"""Rewrite the text of a polars frame by distinct value: the one way the model maps a function over the strings
of every text column (secret scrubbing in `scrub.py`, terminal-safe text in `display_text.py`).

The cost is one query for the distinct values of every text column, then a function call per distinct value,
never per row: a 10 M-row categorical column of 100 kernel names costs 100 calls. A column is rewritten only
when one of its values changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import polars as pl


def is_text(dtype: pl.DataType) -> bool:
    """True for the dtypes that hold trace text: String, Categorical and Enum."""
    return dtype == pl.String or dtype == pl.Categorical or isinstance(dtype, pl.Enum)


def map_distinct_strings(frame: pl.DataFrame, changes_for: Callable[[list[str]], Mapping[str, str]]) -> pl.DataFrame:
    """`frame` with its text columns rewritten; the same object when nothing changed.

    Args:
        frame: any polars frame; its String, Categorical and Enum columns are rewritten, nulls stay null.
        changes_for: a column's distinct non-null values -> {value: new value} for the values that change
            (called once per text column of a non-empty frame).

    A changed column keeps its dtype, except an Enum, which becomes Categorical (its new values are not in it).
    """
    columns = [name for name, dtype in frame.schema.items() if is_text(dtype)]
    if not columns or not frame.height:
        return frame
    # one query for the distinct values of every text column (a query per column cost ~1 ms each); distinct
    # before the cast to String: casting a 10 M-row categorical first costs seconds
    distinct = frame.select(pl.col(c).drop_nulls().unique().cast(pl.String).implode() for c in columns).row(0)
    replaced: list[pl.Series] = []
    for name, values in zip(columns, distinct, strict=True):
        changes = changes_for(values)
        if changes:
            series = frame.get_column(name)
            dtype = pl.Categorical if isinstance(series.dtype, pl.Enum) else series.dtype
            replaced.append(series.cast(pl.String).replace(dict(changes)).cast(dtype))
    return frame.with_columns(replaced) if replaced else frame
