"""SVG snapshots of the rank-level views on the hand-built 4-rank, 2-host trace with a planted straggler, and of
the tree of a host with 130 ranks (blocks of 64).

Regenerate only after looking at the result: pytest tests/tui/test_fleet_snapshots.py --snapshot-update
"""

from __future__ import annotations

from fleet_traces import fleet_trace
from textual.pilot import Pilot

from ktrace.tui.app import make_app
from ktrace.tui.tree_model import RANK_BLOCK

SIZE = (140, 40)
SMALL = (80, 24)


def _dashboard_scenario(settled):  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("3")
        await settled(pilot)
        await pilot.wait_for_scheduled_animations()  # the tab bar's underline slides to the tab

    return run_before


def test_rank_panels_in_the_dashboard(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(trace=fleet_trace()), terminal_size=SIZE, run_before=_dashboard_scenario(settled))


def test_rank_panels_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(trace=fleet_trace()), terminal_size=SMALL, run_before=_dashboard_scenario(settled))


def test_tree_of_a_host_with_many_ranks_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    layout = tuple(("h", r) for r in range(2 * RANK_BLOCK + 2))

    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("t")
        await settled(pilot)
        # the tree may scroll to a node revealed while the index loads (timing): the top of the tree, always
        await pilot.press("home")
        await settled(pilot)

    app = make_app(trace=fleet_trace(layout=layout, straggler=None), analyses=False)
    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)
