"""The report's Ranks section as the page holds it (presentation.report_ranks): built once, for the HTML and the
Markdown reports to lay out."""

from __future__ import annotations

import pytest
from fleet_traces import LAYOUT, STEPS, STRAGGLER, fleet_trace

from ktrace.presentation.page import Figure, Section, Table, Text


@pytest.fixture(scope="module")
def section() -> Section:
    from ktrace.presentation.report_model import build_report
    from ktrace.presentation.report_page import report_page

    found = report_page(build_report(fleet_trace())).section("ranks")
    assert found is not None
    return found


def test_the_heatmap_then_waited_for_then_step_time_then_per_step(section: Section) -> None:
    """The page's Ranks section was empty (the renderers filled it from report.rank_sections and rank_rows):
    fails on the old code."""
    kinds = [type(b).__name__ if not isinstance(b, Table) else b.key for b in section.blocks]
    assert kinds == ["Text", "Figure", "waited_for", "stragglers", "slowest_fastest"]
    waited, step_time, per_step = (b for b in section.blocks if isinstance(b, Table))
    first = waited.rows[0]
    assert first["ranks"] == f"{STRAGGLER[0]}/{STRAGGLER[1]}" and first["why"].startswith("compute kernels")
    assert [c.key for c in waited.columns][-1] == "why" and [c.key for c in step_time.columns][-1] == "causes"
    assert step_time.rows[0]["ranks"] == "b/2" and len(step_time.rows) == 2  # the three others tie: one row
    assert len(per_step.rows) == STEPS and all(r["slowest"] == "b/2" for r in per_step.rows)
    assert isinstance(section.blocks[0], Text) and f"{len(LAYOUT)} ranks on 2 hosts" in section.blocks[0].text


def test_the_figure_has_a_row_per_rank_and_busy_outside_communication(section: Section) -> None:
    figure = next(b for b in section.blocks if isinstance(b, Figure))
    d = figure.data
    assert figure.kind == "heatmap" and d["rows"] == [f"{n}/{r}" for n, r in LAYOUT]
    assert d["columns"] == list(range(STEPS)) and d["x_title"] == "step"
    busy, comm = d["hover"]["busy"], d["hover"]["comm"]
    assert comm == [[30 if key == STRAGGLER else 70] * STEPS for key in LAYOUT]
    assert d["z"] == [[b - c for b, c in zip(*rows, strict=True)] for rows in zip(busy, comm, strict=True)]


def test_one_rank_has_no_ranks_section() -> None:
    from ktrace.presentation.report_model import build_report
    from ktrace.presentation.report_page import report_page

    assert report_page(build_report(fleet_trace(layout=(("a", 0),)))).section("ranks") is None
