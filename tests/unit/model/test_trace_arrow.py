"""frame_to_arrow's string columns: the dictionary a store writes, built without a string per row (issue 29)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import polars as pl
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ktrace.model import SCHEMAS
from ktrace.model.trace import frame_to_arrow

NAMES = st.sampled_from(["", "aten::mm", "aten::linear", "[[1, 5185, 1024], [1024, 1024]]", "ä ü", "x" * 300])


def naive_dictionary(col: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    """The reference: every row's string, dictionary-encoded (the order of first use), as `typ`."""
    return col.cast(pa.string()).dictionary_encode().cast(typ)


def ops_frame(chunks: list[list[str | None]]) -> pl.DataFrame:
    """An ops frame whose `input_dims` holds `chunks` (one polars chunk each, so the Arrow column has several)."""
    parts = [
        pl.DataFrame(
            {
                "start_ns": pl.Series(range(len(rows)), dtype=pl.Int64),
                "end_ns": pl.Series(range(1, len(rows) + 1), dtype=pl.Int64),
                "name": pl.Series(["aten::mm"] * len(rows), dtype=pl.String),
                "input_dims": pl.Series(rows, dtype=pl.Categorical),
            }
        )
        for rows in chunks
    ]
    return pl.concat(parts, rechunk=False) if len(parts) > 1 else parts[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.none() | NAMES, max_size=12), min_size=1, max_size=4))
@example(chunks=[[None], [""], [], []])
def test_string_columns_are_the_dictionary_encoding_of_their_rows(chunks: list[list[str | None]]) -> None:
    frame = ops_frame(chunks)
    table = frame_to_arrow(frame, "ops")
    typ = SCHEMAS["ops"].field("input_dims").type
    expected = naive_dictionary(frame.select("input_dims").to_arrow().column(0), typ)
    got = table.column("input_dims")
    assert got.type == typ and got.equals(expected)
    # every chunk shares one dictionary: the strings in the order of their first use. How many chunks there are is
    # polars' choice (selecting every column or one may split rows differently: [[None], [""], [], []] gave one
    # chunk in the table and two in the one-column reference), so the chunks are not compared one by one.
    first_use = list(dict.fromkeys(v for rows in chunks for v in rows if v is not None))
    assert all(c.dictionary.to_pylist() == first_use for c in got.chunks if len(c))
    assert table.column("input_dims").to_pylist() == [v for rows in chunks for v in rows]


def test_string_columns_are_converted_without_a_string_per_row() -> None:
    # 200,000 rows of one 1,000-byte shape string: a string per row is 200 MB in Arrow's pool; the dictionary
    # (one string) and the indices (4 bytes a row) are under 4 MB. In a fresh process: the pool's peak is its own.
    code = textwrap.dedent(
        """
        import polars as pl, pyarrow as pa
        from ktrace.model.trace import frame_to_arrow
        n = 200_000
        frame = pl.DataFrame({"start_ns": range(n), "end_ns": range(1, n + 1), "name": ["aten::mm"] * n,
                              "input_dims": pl.Series(["[1, 2]" * 166] * n, dtype=pl.Categorical)})
        pool = pa.default_memory_pool()
        before = pool.max_memory()
        table = frame_to_arrow(frame, "ops")
        assert table.column("input_dims").to_pylist()[-1] == "[1, 2]" * 166
        print(pool.max_memory() - before)
        """
    )
    peak = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert peak < 40_000_000, f"Arrow's pool peaked {peak / 1e6:.0f} MB higher converting 200,000 rows"
