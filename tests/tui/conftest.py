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
    """Wait until every worker finished and the resulting messages were handled."""
    for _ in range(4):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:  # the app exited (e.g. on a bad trace) and cancelled its workers
            return
        await pilot.pause()


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
