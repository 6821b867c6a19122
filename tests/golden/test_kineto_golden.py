"""Golden file: the Kineto export of rank 0 of the small two-rank trace of test_perfetto_golden, compared whole.

Regenerate (after checking the diff is intended) with: KTRACE_UPDATE_GOLDEN=1 pytest tests/golden
"""

from __future__ import annotations

from pathlib import Path

from golden_compare import compare_golden
from test_perfetto_golden import golden_trace

from ktrace.exporters.kineto_json import export_kineto
from ktrace.exporters.selection import select

HERE = Path(__file__).parent


def test_kineto_export_matches_golden_json(tmp_path: Path) -> None:
    path = tmp_path / "rank0.json"
    export_kineto(select(golden_trace(), ranks=[0]), path)
    compare_golden(HERE / "kineto_small.json", path.read_text())
