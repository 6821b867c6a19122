"""False positives of the secret scrubber on every real trace in fixtures/: no kernel, operator, range, thread or
process name, shape or path is redacted, and in the metadata only the real secrets are (counted here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from real_traces import REAL_TRACES, fixture_path

from ktrace.importers import load
from ktrace.model.secrets import REDACTED, scrub_strings

META_SECRETS = {
    "tracelens": {"job/metadata/system/env/HF_TOKEN"},
    "cloverleaf": {"job/environment/PMI_SHARED_SECRET", "job/environment/SSH_AUTH_SOCK"},
}
"""The metadata values of the fixtures that are secrets (or, SSH_AUTH_SOCK, named as one): nothing else goes."""


def _redacted_paths(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _redacted_paths(item, f"{path}/{key}")
    elif isinstance(value, list):
        for item in value:
            yield from _redacted_paths(item, path)
    elif isinstance(value, str) and REDACTED in value:
        yield path


def _strings(frame: pl.DataFrame) -> list[str]:
    values: set[str] = set()
    for column, dtype in frame.schema.items():
        if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum):
            values |= {v for v in frame[column].cast(pl.String).unique().to_list() if v is not None}
    return sorted(values)


@pytest.mark.parametrize("name", list(REAL_TRACES))
def test_a_real_trace_has_no_name_redacted_and_only_its_real_secrets_in_metadata(name: str) -> None:
    trace = load(fixture_path(name))
    names = sorted({v for table in trace.counts() for v in _strings(trace.table(table))})
    assert names, name
    assert [v for v in names if REDACTED in v] == []  # nothing was redacted on import ...
    assert scrub_strings(names) == ({}, 0)  # ... and nothing would be
    meta = {"job": trace.meta.job, "capture": trace.meta.capture, "notes": list(trace.meta.notes)}
    found = {path.lstrip("/") for path in _redacted_paths(meta, "")}
    assert found == META_SECRETS.get(name, set())
    assert trace.meta.health.get("secrets_scrubbed", 0) == len(META_SECRETS.get(name, set()))


def test_a_store_scrubbed_under_older_rules_is_scrubbed_again_when_read(tmp_path: Path) -> None:
    """The store marks each file with the digest of the rules that scrubbed it; the digest covers every module the
    rules live in (a new vendor format in secret_formats.py alone re-scrubs old stores), and a file under another
    digest, such as one of the rules before issue 27, is scrubbed again: a form the old rules let through goes."""
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ktrace.model import store
    from ktrace.model.scrub import RULE_MODULES, rules_fingerprint
    from ktrace.testing.secrets_corpus import VENDOR_FORMS

    rule_modules = {m for name, m in sys.modules.items() if name.startswith("ktrace.model.secret")}
    assert rule_modules <= set(RULE_MODULES) and len(RULE_MODULES) >= 4
    planted = next(p for p in VENDOR_FORMS if p.form == "Groq gsk_")  # kept verbatim by the old rules
    root = _one_kernel_store(tmp_path / "old.ktrace")
    path = root / "node=n" / "rank=0" / "kernels.parquet"
    table = pq.read_table(path)
    stale = {**(table.schema.metadata or {}), b"ktrace.scrubbed": b"0" * 32}
    assert rules_fingerprint() != "0" * 32
    names = pa.array([planted.text] * table.num_rows).dictionary_encode()
    table = table.set_column(table.column_names.index("name"), "name", names).replace_schema_metadata(stale)
    pq.write_table(table, path)
    trace = store.read(root)
    assert planted.secret not in "".join(trace.kernels["name"].cast(pl.String).to_list())


def _one_kernel_store(path: Path) -> Path:
    from ktrace.model import store
    from ktrace.model.builder import TraceBuilder

    builder = TraceBuilder(node="n", rank=0)
    builder.add("kernels", {"start_ns": [10, 20], "end_ns": [15, 25], "device": [0, 0], "name": ["gemm", "gemv"]})
    store.write(builder.build(), path)
    return path
