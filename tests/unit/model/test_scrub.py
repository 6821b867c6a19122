"""The table-level scrub pass: by distinct value, schema kept, nothing rewritten when nothing held a secret."""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from ktrace.model.builder import TraceBuilder
from ktrace.model.scrub import scrub_frame, scrub_table, scrub_trace
from ktrace.model.secrets import REDACTED
from ktrace.model.trace import TraceMeta

SECRET = "Pw" + "x7Kq2" * 3


def test_an_arrow_table_keeps_its_schema_and_nulls_and_only_secret_values_change() -> None:
    names = pa.array(["gemm", f"--password={SECRET}", None, "gemm", "key_padding_mask"]).dictionary_encode()
    table = pa.table({"name": names.cast(pa.dictionary(pa.int32(), pa.string())),
                      "uuid": ["a", f"HF_TOKEN={SECRET}", None, "b", "c"], "n": [1, 2, 3, 4, 5]})
    clean, n = scrub_table(table)
    assert n == 2 and clean.schema == table.schema
    assert clean.column("name").to_pylist() == ["gemm", f"--password={REDACTED}", None, "gemm", "key_padding_mask"]
    assert clean.column("uuid").to_pylist() == ["a", f"HF_TOKEN={REDACTED}", None, "b", "c"]
    assert scrub_table(clean) == (clean, 0)


def test_a_frame_without_secrets_is_returned_as_it_is() -> None:
    frame = pl.DataFrame({"name": ["gemm", "tokenizer", None]}, schema={"name": pl.Categorical})
    same, n = scrub_frame(frame)
    assert same is frame and n == 0
    dirty = frame.with_columns(pl.Series("name", ["gemm", f"token={SECRET}", None], pl.Categorical))
    clean, n = scrub_frame(dirty)
    assert n == 1 and clean.schema == dirty.schema and clean["name"].to_list() == ["gemm", f"token={REDACTED}", None]


def test_a_trace_counts_what_its_tables_and_meta_held() -> None:
    b = TraceBuilder(node="n", rank=0, meta=TraceMeta(source="synthetic", health={"secrets_scrubbed": 2},
                                                      job={"command": ["python", "--api-key", SECRET]}))
    b.add("kernels", {"start_ns": [10, 20], "end_ns": [15, 25], "device": [0, 0],
                      "name": ["gemm", f"Bearer {SECRET}"]})
    b.add("threads", {"pid": [1], "tid": [2], "name": [f"worker HF_TOKEN={SECRET}"]})
    trace = b.build()
    clean = scrub_trace(trace)
    assert SECRET not in clean.meta.to_json() and SECRET not in str(clean.kernels["name"].to_list())
    assert SECRET not in str(clean.threads["name"].to_list())
    assert clean.meta.health["secrets_scrubbed"] == 2 + 3
    assert any("redacted from names in the tables" in n for n in clean.meta.notes)
    assert scrub_trace(clean) is clean
