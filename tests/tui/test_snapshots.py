"""SVG snapshots of the main screens on a real trace (fixtures/traces: power iteration on a Tesla T4).

Regenerate only after looking at the result: pytest tests/tui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from real_traces import fixture_path
from textual.pilot import Pilot

from ktrace.tui.app import make_app

SIZE = (140, 40)
FIXTURE = fixture_path("power_iteration")


def _app(analyses: bool = False):  # type: ignore[no-untyped-def]
    return make_app(FIXTURE, analyses=analyses)


def test_timeline_after_load(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(), terminal_size=SIZE, run_before=settled)


def test_timeline_step_with_selected_kernel(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("n", "n", "j", "j", "j", "right_square_bracket", "right_square_bracket")
        await settled(pilot)
        pilot.app.clear_notifications()  # the step toasts last 2 s of wall time: on a loaded machine one may remain
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


def test_kernel_table_filtered(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("2", "slash", *"gemv", "enter")
        await settled(pilot)

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


def test_dashboard(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("3")
        await settled(pilot)

    assert snap_compare(_app(analyses=True), terminal_size=SIZE, run_before=run_before)


def test_help_screen(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("question_mark")

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


SMALL = (80, 24)
"""The smallest terminal we design for: tree, timeline rows, kernel names and help must all be usable."""


def test_timeline_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(), terminal_size=SMALL, run_before=settled)


def test_timeline_without_tree_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("T", "n", "right_square_bracket")
        await settled(pilot)

    assert snap_compare(_app(), terminal_size=SMALL, run_before=run_before)


def test_kernel_table_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("2", "j")
        await settled(pilot)

    assert snap_compare(_app(), terminal_size=SMALL, run_before=run_before)


def test_help_screen_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("question_mark")

    assert snap_compare(_app(), terminal_size=SMALL, run_before=run_before)


def test_timeline_with_allocator_memory(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    """The hand-built memory trace (tests/reference/memory_trace.py): its operators and the first GPU's allocated
    memory as a counter row (164 B rising to the 964 B peak under aten::mm, 350 B at the end)."""
    from reference.memory_trace import memory_trace

    assert snap_compare(make_app(trace=memory_trace(), analyses=False), terminal_size=SIZE, run_before=settled)
