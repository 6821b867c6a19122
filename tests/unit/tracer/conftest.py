"""Tracer test fixtures: `make_record`, parametrized over faithful fakes and cupti-python's own record classes
(the factories and HAVE_CUPTI live in tests/cupti_support.py, importable by name)."""

from __future__ import annotations

from typing import Any

import pytest
from cupti_support import HAVE_CUPTI, fake_record, real_record


@pytest.fixture(
    params=[
        "fake",
        pytest.param(
            "cupti",
            marks=pytest.mark.skipif(
                not HAVE_CUPTI, reason="cupti-python not installed: its own record classes are not available"
            ),
        ),
    ]
)
def make_record(request: pytest.FixtureRequest) -> Any:
    """kind name, **fields -> a record (parametrized over faithful fakes and cupti-python's classes)."""
    return fake_record if request.param == "fake" else real_record
