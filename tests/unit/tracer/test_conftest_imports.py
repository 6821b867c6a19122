"""No test imports from a conftest by name: which `conftest` module that name means depends on which conftest
pytest loaded last (e.g. `pytest tests/unit/tracer tests/unit/rules` gave the rules' one), so shared helpers live
in importable modules beside tests/conftest.py (real_traces.py, cupti_support.py)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_no_test_module_imports_a_conftest_by_name() -> None:
    pattern = re.compile(r"^\s*(from conftest import|import conftest\b)", re.MULTILINE)
    offenders = [str(p.relative_to(TESTS)) for p in sorted(TESTS.rglob("*.py")) if pattern.search(p.read_text())]
    assert offenders == []
