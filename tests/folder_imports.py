"""What every folder-import test checks: a rank-by-rank import equals the one-process import of the same folder."""

from __future__ import annotations

import json
from pathlib import Path

from ktrace.importers.kineto import import_kineto
from ktrace.model import store
from ktrace.testing.compare import assert_trace_equal


def assert_same_store(imported: Path, folder: Path, tmp_path: Path) -> None:
    """`imported` (a rank-by-rank import of `folder`) reads back equal to the one-process import's store, and its
    meta.json is the same but for the time it was written."""
    one = tmp_path / "one-process.ktrace"
    if not one.exists():  # written once per test
        store.write(import_kineto(folder), one)
    assert_trace_equal(store.read(imported), store.read(one))
    metas = [json.loads((path / "meta.json").read_text()) for path in (imported, one)]
    for meta in metas:
        meta.pop("created")
    assert metas[0] == metas[1]
