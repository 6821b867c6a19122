"""Golden files of `ktrace report --format md|json` on a small seeded synthetic trace (2 ranks, counters).

Update deliberately: KTRACE_UPDATE_GOLDEN=1 pytest tests/golden/test_report_golden.py, then review the diff:
a change here is a change to the report's output contract.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_compare import compare_golden

GOLDEN = Path(__file__).parent


@pytest.fixture(scope="module")
def content():  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report
    from ktrace.testing import SyntheticConfig, generate

    trace = generate(SyntheticConfig(steps=6, kernels_per_step=30, ranks=2, seed=3, counter_interval_ns=100_000_000))
    return build_report(trace, title="golden synthetic report")


def test_markdown_golden(content) -> None:  # type: ignore[no-untyped-def]
    from ktrace.report.markdown import render_markdown

    compare_golden(GOLDEN / "report_synthetic.md", render_markdown(content))


def test_json_golden(content) -> None:  # type: ignore[no-untyped-def]
    from ktrace.report.json_report import render_json

    text = render_json(content)
    assert json.loads(text)["version"] == 1
    compare_golden(GOLDEN / "report_synthetic.json", text)
