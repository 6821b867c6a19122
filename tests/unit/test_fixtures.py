"""The repository tests itself: every real trace the tests read is in fixtures/traces, with its provenance, and
(when the project's shared collection is beside the repository) byte-identical to the shared copy."""

from __future__ import annotations

import json
import re

import pytest
from real_traces import FIXTURE_TRACES, REAL_TRACES, SHARED_TRACES, fixture_path


@pytest.mark.parametrize("name", sorted(REAL_TRACES))
def test_every_real_trace_is_in_the_repository(name: str) -> None:
    path = fixture_path(name)
    assert path.exists(), f"{name}: {path} is missing from the repository"
    folder = FIXTURE_TRACES / REAL_TRACES[name].split("/")[0]
    assert re.search(r"(?m)^(## )?Source\b", (folder / "PROVENANCE.md").read_text(encoding="utf-8"))
    assert json.loads((folder / "STATS.json").read_text(encoding="utf-8"))


def test_fixtures_are_the_shared_traces() -> None:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"no shared collection at {SHARED_TRACES} to compare fixtures/traces with")
    copied = sorted(p.relative_to(FIXTURE_TRACES) for p in FIXTURE_TRACES.rglob("*") if p.is_file())
    assert len(copied) >= 24  # 8 folders: PROVENANCE.md, STATS.json and at least one trace each
    changed = [str(rel) for rel in copied if (SHARED_TRACES / rel).read_bytes() != (FIXTURE_TRACES / rel).read_bytes()]
    assert changed == [], f"fixtures/traces differs from {SHARED_TRACES}: {changed}"
