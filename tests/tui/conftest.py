"""TUI test fixtures: deterministic apps (no cursor blink) and `drive`, which runs a pilot scenario to the end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input
from textual.worker import WorkerCancelled

SIZE = (140, 40)
"""Terminal size of every pilot and snapshot test."""

Scenario = Callable[[Pilot], Awaitable[None]]  # type: ignore[type-arg]


@pytest.fixture(autouse=True)
def _no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Input, "cursor_blink", False)


async def settle(pilot: Pilot) -> None:  # type: ignore[type-arg]
    """Wait until every worker finished and the resulting messages were handled, and no handler started new
    work: a worker's result starts the next worker (load -> tracks -> steps -> details), and on a loaded
    machine that chain can outlast any fixed number of rounds, so wait for two quiet rounds in a row."""
    quiet = 0
    for _ in range(200):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:  # the app exited (e.g. on a bad trace) and cancelled its workers
            return
        await pilot.pause()
        busy = any(not w.is_finished for w in pilot.app.workers)
        quiet = 0 if busy else quiet + 1
        if quiet >= 2:
            return


@pytest.fixture
def drive() -> Callable[[App, Scenario], None]:  # type: ignore[type-arg]
    """Run `scenario(pilot)` on a headless app of SIZE once its trace is loaded (no pytest-asyncio needed)."""

    def run(app: App, scenario: Scenario) -> None:  # type: ignore[type-arg]
        async def main() -> None:
            async with app.run_test(size=SIZE) as pilot:
                await settle(pilot)
                await scenario(pilot)

        asyncio.run(main())

    return run


@pytest.fixture
def settled() -> Callable[[Pilot], Awaitable[None]]:  # type: ignore[type-arg]
    """The `settle` coroutine function, for scenarios that start workers."""
    return settle
