"""The dashboard shown again while its last panels are still there (a live capture re-read, issue 31): the new
panels replace the old, evidence buttons and their ids included, with no DuplicateIds."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.widgets import Button, Static

from ktrace.tui.dashboard_panels import Panel
from ktrace.tui.messages import SummaryReady
from ktrace.tui.widgets.dashboard import Dashboard


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Dashboard(id="dashboard")


def _ready(label: str) -> SummaryReady:
    findings = Panel("Rule findings", label, evidence=[(f"{label} evidence {i}", i, i + 1) for i in range(3)])
    return SummaryReady(dashboard=None, panels=[Panel("GPU", f"{label} body"), findings])


def test_a_summary_shown_twice_at_once_replaces_the_first() -> None:
    async def main() -> None:
        app = _Host()
        async with app.run_test(size=(100, 40)) as pilot:
            dashboard = app.query_one(Dashboard)
            dashboard.show(_ready("first"))
            dashboard.show(_ready("second"))  # the first one's widgets are not removed yet
            await pilot.pause()
            await pilot.pause()
            buttons = list(dashboard.query(Button))
            assert [str(b.label) for b in buttons] == [f"show: second evidence {i}" for i in range(3)]
            assert len({b.id for b in buttons}) == 3
            assert "second body" in [str(s.render()) for s in dashboard.query(Static) if not isinstance(s, Button)]

    asyncio.run(main())
