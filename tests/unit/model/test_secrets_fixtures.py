"""False positives of the secret scrubber on every real trace in fixtures/: no kernel, operator, range, thread or
process name, shape or path is redacted, and in the metadata only the real secrets are (counted here)."""

from __future__ import annotations

from collections.abc import Iterator
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
