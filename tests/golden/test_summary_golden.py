"""Golden files of `ktrace summary` (JSON and text) on a small real trace (nsys, power iteration on a T4).

Update deliberately: KTRACE_UPDATE_GOLDEN=1 pytest tests/golden/test_summary_golden.py, then review the diff.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from golden_compare import compare_golden

GOLDEN = Path(__file__).parent
TRACE = "power_iteration"


@pytest.fixture(scope="module")
def summary(real_trace_path):  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.analysis.summary import summarize

    return summarize(ktrace.open(real_trace_path(TRACE)), top=8)


def test_json_golden(summary) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_json import summary_to_dict

    compare_golden(
        GOLDEN / "summary_power_iteration.json", json.dumps(summary_to_dict(summary), indent=1, sort_keys=True) + "\n"
    )


def test_text_golden(summary) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from ktrace.report.terminal import render_summary

    out = io.StringIO()
    render_summary(summary, Console(file=out, width=140, color_system=None, force_terminal=False))
    compare_golden(GOLDEN / "summary_power_iteration.txt", out.getvalue())


def test_top_kernels_agree_with_stats_json(summary, shared_traces) -> None:  # type: ignore[no-untyped-def]
    """STATS.json was counted by a separate script straight from the SQLite file."""
    stats = json.loads((shared_traces / "nsys-sqlite-power-iteration-t4" / "STATS.json").read_text())
    expected = next(iter(stats.values()))["top_kernels_by_time"]
    rows = summary.top_by_time.head(len(expected)).iter_rows(named=True)
    for (short, count, ms), row in zip(expected, rows, strict=True):
        assert short in row["name"] and row["count"] == count
        assert row["total_ns"] / 1e6 == pytest.approx(ms, abs=1e-3)
    assert summary.kernels == next(iter(stats.values()))["table_rows"]["CUPTI_ACTIVITY_KIND_KERNEL"]
