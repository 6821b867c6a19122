"""The dashboard tab lays out the report's page: at 80x24 and 160x45 it shows the top kernels of `ktrace report -f md`
of the same trace, under the same title, with the same times, shares and counts, row by row."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.cli import main

FIXTURE = fixture_path("power_iteration")
TITLE = "Top kernels by total time"


def _markdown_rows(tmp_path: Path) -> list[dict[str, str]]:
    """The rows of the report's top-kernels table, cells unescaped."""
    out = tmp_path / "report.md"
    assert main(["report", str(FIXTURE), "-f", "md", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    at = lines.index(f"### {TITLE}")
    header = [c.strip() for c in lines[at + 2].strip("|").split("|")]
    rows = []
    for line in lines[at + 4 :]:
        if not line.startswith("|"):
            break
        cells = [html.unescape(c.strip().replace("\\", "")) for c in line.strip("|").split("|")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _panel_lines(size: tuple[int, int], settle) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """The title and text lines of the dashboard tab's top-kernels panel at that terminal size."""
    from textual.widgets import Static

    from ktrace.tui.app import make_app
    from ktrace.tui.widgets.dashboard import Dashboard

    app = make_app(FIXTURE, analyses=True)

    async def run() -> tuple[str, list[str]]:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await pilot.press("3")
            await settle(pilot)
            panel = next(s for s in app.query_one(Dashboard).query(Static) if str(s.border_title) == TITLE)
            lines = [panel.render_line(y).text for y in range(panel.size.height)]
            return str(panel.border_title), [line.strip("│ ") for line in lines if line.strip("│ ╭╰─")]

    return asyncio.run(run())


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_top_kernels_are_the_markdown_reports(size: tuple[int, int], tmp_path: Path, settled) -> None:  # type: ignore[no-untyped-def]
    rows = _markdown_rows(tmp_path)
    title, lines = _panel_lines(size, settled)
    assert title == TITLE and len(rows) > 5
    assert len(lines) == len(rows), lines
    for row, line in zip(rows, lines, strict=True):
        total = line.index(f" {row['total']} ")
        assert line[total:].split() == [*row["total"].split(), *row["time share"].split(), f"×{row['count']}"], line
        label = line[:total].rstrip(" █▏▎▍▌▋▊▉")
        first = re.match(r"\w+", label)
        assert first is not None and first.group() in row["name"], (label, row["name"])
        assert len(line) <= size[0] - 4


def test_findings_panel_lists_the_reports_findings_in_its_order(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """Each finding of the report's page, in the page's order, with a jump to its first evidence window."""
    from rich.console import Console

    from ktrace.presentation.findings import first_window, page_findings
    from ktrace.presentation.report_model import build_report
    from ktrace.presentation.report_page import report_page
    from ktrace.tui.dashboard_data import compute_dashboard
    from ktrace.tui.dashboard_panels import FINDINGS_TITLE

    listed = page_findings(report_page(build_report(synthetic_trace)))
    panel = next(p for p in compute_dashboard(synthetic_trace).panels if p.title == FINDINGS_TITLE)
    console = Console(width=400, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(panel.body)
    lines = [line.split(None, 1) for line in console.export_text().splitlines() if line.strip()]
    shown = [(word.lower(), rest) for word, *rest in lines[1:] if word in ("ERROR", "WARNING", "INFO")]
    assert shown == [(f.severity, [f"{f.rule}: {f.message}"]) for f in listed]
    assert " ".join(lines[0]).endswith(f"from {len(build_report(synthetic_trace).dashboard.rules.results)} rules.")
    windows = [first_window(f) for f in listed]
    assert [(s, e) for _, s, e in panel.evidence] == [(w.start_ns, w.end_ns) for w in windows if w is not None]


def test_a_failed_dashboard_still_shows_the_summarys_panels(synthetic_trace, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The series, histogram and rules failed: the summary's panels are drawn, the others say why."""
    from ktrace.tui.dashboard_data import compute_dashboard

    def failing(*args: object, **kwargs: object) -> None:
        raise ValueError("broken")

    monkeypatch.setattr("ktrace.analysis.dashboard.build_dashboard", failing)
    panels = {p.title: p for p in compute_dashboard(synthetic_trace).panels}
    assert panels["Active time"].available and panels["Top kernels by total time"].available
    for title in ("Utilization over time", "Step time distribution", "Rule findings"):
        assert not panels[title].available and "ValueError: broken" in str(panels[title].body), title
