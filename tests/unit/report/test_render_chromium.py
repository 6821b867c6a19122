"""Slow: the HTML report of a real trace, rendered in headless Chromium, draws every plot without errors."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_real_report_draws_every_plot(real_trace_path, tmp_path):  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.report.content import build_report
    from ktrace.report.html import render_html

    sys.path.insert(0, str(BENCHMARKS))
    try:
        from render_report import render
    finally:
        sys.path.remove(str(BENCHMARKS))
    html = tmp_path / "report.html"
    html.write_text(render_html(build_report(ktrace.open(real_trace_path("resnet50")))), encoding="utf-8")
    expected, drawn, errors = render(html, tmp_path)
    assert expected >= 8 and drawn == expected and not errors
    assert (tmp_path / "report.png").stat().st_size > 50_000
