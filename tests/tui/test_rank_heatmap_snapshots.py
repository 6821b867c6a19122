"""SVG snapshots of the dashboard's rank heatmap at 64 ranks on 8 hosts (testing.fleet, rank 13 the straggler),
after `3` and a few j: one row per rank with the cursor, the outlier line, the step axis, at 80x24 and 160x45.

Regenerate only after looking at the result: pytest tests/tui/test_rank_heatmap_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest
from test_rank_heatmap_panel import fleet64
from textual.pilot import Pilot

from ktrace.tui.app import make_app


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_rank_heatmap_of_64_ranks(size: tuple[int, int], snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("3")
        await settled(pilot)
        await pilot.press(*"j" * 14)  # past the planted rank: the rows scrolled at 80x24
        await settled(pilot)
        await pilot.wait_for_scheduled_animations()  # the tab bar's underline slides to the tab

    assert snap_compare(make_app(trace=fleet64()), terminal_size=size, run_before=run_before)
