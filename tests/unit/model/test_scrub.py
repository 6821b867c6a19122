"""The table-level scrub pass: by distinct value, schema kept, nothing rewritten when nothing held a secret."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ktrace.model import store, store_files
from ktrace.model.builder import TraceBuilder
from ktrace.model.scrub import scrub_frame, scrub_table, scrub_trace
from ktrace.model.secrets import REDACTED
from ktrace.model.trace import Trace, TraceMeta
from ktrace.testing import SyntheticConfig, generate

SECRET = "Pw" + "x7Kq2" * 3


def test_an_arrow_table_keeps_its_schema_and_nulls_and_only_secret_values_change() -> None:
    names = pa.array(["gemm", f"--password={SECRET}", None, "gemm", "key_padding_mask"]).dictionary_encode()
    table = pa.table(
        {
            "name": names.cast(pa.dictionary(pa.int32(), pa.string())),
            "uuid": ["a", f"HF_TOKEN={SECRET}", None, "b", "c"],
            "n": [1, 2, 3, 4, 5],
        }
    )
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
    b = TraceBuilder(
        node="n",
        rank=0,
        meta=TraceMeta(
            source="synthetic", health={"secrets_scrubbed": 2}, job={"command": ["python", "--api-key", SECRET]}
        ),
    )
    b.add("kernels", {"start_ns": [10, 20], "end_ns": [15, 25], "device": [0, 0], "name": ["gemm", f"Bearer {SECRET}"]})
    b.add("threads", {"pid": [1], "tid": [2], "name": [f"worker HF_TOKEN={SECRET}"]})
    trace = b.build()
    clean = scrub_trace(trace)
    assert SECRET not in clean.meta.to_json() and SECRET not in str(clean.kernels["name"].to_list())
    assert SECRET not in str(clean.threads["name"].to_list())
    assert clean.meta.health["secrets_scrubbed"] == 2 + 3
    assert any("redacted from names in the tables" in n for n in clean.meta.notes)
    assert scrub_trace(clean) is clean


# ----- scrubbing once per call path: the store's per-file mark and the Trace's `scrubbed` -----


def _dirty_trace() -> Trace:
    b = TraceBuilder(node="n", rank=0)
    b.add("kernels", {"start_ns": [10, 20], "end_ns": [15, 25], "device": [0, 0], "name": ["gemm", f"Bearer {SECRET}"]})
    return b.build()


def _count_scrubs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = store.scrub_table

    def counted(table: pa.Table) -> tuple[pa.Table, int]:
        calls.append(table.num_rows)
        return real(table)

    monkeypatch.setattr(store, "scrub_table", counted)  # reading
    monkeypatch.setattr(store_files, "scrub_table", counted)  # writing (store_files.write_table)
    return calls


def test_a_store_ktrace_wrote_is_not_scrubbed_again_when_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = store.write(_dirty_trace(), tmp_path / "x.ktrace")
    calls = _count_scrubs(monkeypatch)
    trace = store.read(root)
    assert calls == [] and trace.scrubbed
    assert trace.kernels["name"].cast(pl.String).to_list() == ["gemm", f"Bearer {REDACTED}"]


@pytest.mark.parametrize("mark", [None, b"0" * 32])
def test_a_table_without_the_current_rules_mark_is_scrubbed_when_read(tmp_path: Path, mark: bytes | None) -> None:
    """A table of an older ktrace (no mark), of other rules (another digest), or copied in from either."""
    root = store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2)), tmp_path / "x.ktrace")
    path = next(root.glob("node=*/rank=*/kernels.parquet"))
    table = pq.read_table(path)
    names = pa.array([f"token={SECRET}"] * table.num_rows).dictionary_encode()
    table = table.set_column(table.schema.get_field_index("name"), "name", names)
    metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != b"ktrace.scrubbed"}
    pq.write_table(table.replace_schema_metadata({**metadata, **({b"ktrace.scrubbed": mark} if mark else {})}), path)
    assert set(store.read(root).kernels["name"].cast(pl.String).to_list()) == {f"token={REDACTED}"}


def test_a_capture_stream_is_scrubbed_when_read_whatever_its_schema_says(tmp_path: Path) -> None:
    w = store.CaptureWriter(tmp_path / "c.ktrace", "host", 0)
    w.append(
        "kernels",
        pa.table({"start_ns": [0], "end_ns": [5], "device": pa.array([0], pa.int32()), "name": [f"HF_TOKEN={SECRET}"]}),
    )
    w.close()
    assert SECRET not in str(store.read(tmp_path / "c.ktrace").kernels["name"].to_list())


def test_write_skips_the_scrub_only_for_a_trace_marked_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean = scrub_trace(_dirty_trace())
    calls = _count_scrubs(monkeypatch)
    store.write(clean, tmp_path / "clean.ktrace")
    assert calls == []
    changed = dataclasses.replace(clean, kernels=_dirty_trace().kernels)  # a new Trace: not marked
    assert not changed.scrubbed
    root = store.write(changed, tmp_path / "changed.ktrace")
    assert calls
    on_disk = pq.read_table(next(root.glob("node=*/rank=*/kernels.parquet")))
    assert SECRET not in str(on_disk.column("name").to_pylist())


def test_an_imported_trace_reaches_the_store_marked_scrubbed() -> None:
    from real_traces import fixture_path

    from ktrace.importers import load

    assert load(fixture_path("alexnet")).scrubbed
