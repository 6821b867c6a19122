"""The golden-file comparison shared by every output format's golden test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def compare_golden(path: Path, text: str) -> None:
    """Assert `text` equals the golden file whole; KTRACE_UPDATE_GOLDEN=1 rewrites it (then review the diff)."""
    if os.environ.get("KTRACE_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"{path.name} missing: run with KTRACE_UPDATE_GOLDEN=1 and review it")
    assert text == path.read_text(encoding="utf-8")
