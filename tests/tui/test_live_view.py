"""`ktrace view` on a capture in progress: the view follows it as the capture's real writer appends batches.

The capture is written by ktrace.model.capture.CaptureWriter, the writer every traced process uses: a CPU-only
training loop's threads, ktrace.step/annotate ranges and counters, one batch of steps at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from live_capture import LOADER, PID, CpuLoop
from textual.pilot import Pilot
from textual.widgets import Static

from ktrace.tui.app import KtraceApp, make_app
from ktrace.tui.widgets.dashboard import Dashboard
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.timeline import Timeline


async def until(pilot: Pilot, done: Callable[[], bool], what: str) -> None:  # type: ignore[type-arg]
    """Let the app run until `done()` (the follow worker looks every 20 ms here); fail saying `what` did not come."""
    for _ in range(3000):
        if done():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"{what} did not happen")


def status(app: KtraceApp) -> str:
    return str(app.query_one("#status", Static).render())


def run(app: KtraceApp, scenario: Callable[[Pilot], object]) -> None:  # type: ignore[type-arg]
    async def main() -> None:
        async with app.run_test(size=(120, 36)) as pilot:
            await scenario(pilot)  # type: ignore[misc]
            app.exit()

    asyncio.run(main())


@pytest.fixture
def capture(tmp_path: Path) -> tuple[Path, CpuLoop]:
    root = tmp_path / "run.ktrace"
    loop = CpuLoop(root)
    loop.append_steps(3)
    return root, loop


def test_view_extends_twice_as_the_capture_grows(capture: tuple[Path, CpuLoop]) -> None:
    root, loop = capture
    app = make_app(root, follow_every_s=0.02)
    seen: list[tuple[int, int]] = []

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await until(pilot, lambda: app.index is not None and app.index.links_ready, "the first load")
        assert "live" in status(app) and "held" not in status(app)
        timeline = app.query_one(Timeline)
        seen.append((app.index.t1, len(app.index.tracks)))  # type: ignore[union-attr]
        loop.append_steps(2)
        await until(pilot, lambda: app.index.t1 > seen[-1][0], "the first extension")  # type: ignore[union-attr]
        seen.append((app.index.t1, len(app.index.tracks)))  # type: ignore[union-attr]
        assert timeline.viewport.end_ns >= app.index.t1  # type: ignore[union-attr]  # the window followed
        loop.add_loader()
        loop.append_steps(2)
        await until(pilot, lambda: app.index.t1 > seen[-1][0], "the second extension")  # type: ignore[union-attr]
        seen.append((app.index.t1, len(app.index.tracks)))  # type: ignore[union-attr]
        assert timeline.viewport.end_ns >= app.index.t1  # type: ignore[union-attr]
        # the new thread's range row was added to the timeline, and the tree holds its track
        loader = app.index.by_key[f"host-a/0/p{PID}/t{LOADER}/nvtx0"]  # type: ignore[union-attr]
        assert loader in timeline.rows
        tree = app.query_one(HostDeviceTree)
        assert any(loader in n.data.track_ids for n in tree.root.children if n.data is not None)
        await until(pilot, lambda: app.steps.ready and len(app.steps) == 7, "the steps of the grown capture")
        await until(pilot, lambda: _dashboard_steps(app) == 7, "the dashboard of the grown capture")
        await pilot.press("3", "pagedown")  # the reader's place in the dashboard survives its next refresh
        dashboard = app.query_one(Dashboard)
        await until(pilot, lambda: dashboard.scroll_y > 0, "the dashboard's scroll")
        place = dashboard.scroll_y
        loop.add_rank()  # a second traced process joins: the tree grows a rank
        loop.append_steps(1)
        await until(pilot, lambda: _dashboard_steps(app) >= 8, "the dashboard of the grown capture")
        assert "2 ranks" in str(tree.root.children[0].label)
        await until(pilot, lambda: dashboard.scroll_y == place, "the dashboard at the same place")
        loop.finish(root)
        await until(pilot, lambda: app.follow.ended, "the end of the capture")
        assert "capture ended" in status(app)

    run(app, scenario)
    assert seen[0][0] < seen[1][0] < seen[2][0]
    assert seen[2][1] > seen[1][1]  # the loader thread's tracks


def test_end_resumes_the_follow_after_a_zoom_held_it(capture: tuple[Path, CpuLoop]) -> None:
    root, loop = capture
    app = make_app(root, follow_every_s=0.02, analyses=False)

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await until(pilot, lambda: app.index is not None and app.index.links_ready, "the first load")
        timeline = app.query_one(Timeline)
        timeline.focus()
        await pilot.press("plus", "h")  # zoom in and pan left: the newest records leave the window
        assert "held" in status(app)
        held_at, window = app.index.t1, timeline.viewport  # type: ignore[union-attr]
        loop.append_steps(2)
        await pilot.pause(0.3)  # several looks of the worker: none re-reads while held
        assert app.index.t1 == held_at and timeline.viewport == window  # type: ignore[union-attr]
        await pilot.press("end")
        assert "held" not in status(app) and timeline.viewport.end_ns >= held_at
        await until(pilot, lambda: app.index.t1 > held_at, "the re-read after End")  # type: ignore[union-attr]
        assert timeline.viewport.end_ns >= app.index.t1  # type: ignore[union-attr]
        assert timeline.viewport.span_ns == window.span_ns  # zoomed in: the same span, slid to the end

    run(app, scenario)


def test_a_finished_store_is_not_followed(capture: tuple[Path, CpuLoop]) -> None:
    root, loop = capture
    loop.finish(root)
    app = make_app(root, follow_every_s=0.02, analyses=False)

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await until(pilot, lambda: app.index is not None and app.index.links_ready, "the load")
        assert "live" not in status(app)
        assert not any(w.group == "follow" for w in app.workers)
        await pilot.press("end")  # says there is nothing to follow

    run(app, scenario)


def _dashboard_steps(app: KtraceApp) -> int:
    shown = app.query_one(Dashboard).last_shown
    if shown is None or shown.dashboard is None:
        return -1
    return int(shown.dashboard.summary.steps.height)


def test_a_held_view_stays_put_and_says_when_the_capture_ended(capture: tuple[Path, CpuLoop]) -> None:
    root, loop = capture
    app = make_app(root, follow_every_s=0.02, analyses=False)

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await until(pilot, lambda: app.index is not None and app.index.links_ready, "the first load")
        timeline = app.query_one(Timeline)
        timeline.focus()
        await pilot.press("plus", "h")
        window = timeline.viewport
        loop.append_steps(2)
        loop.finish(root)
        await until(pilot, lambda: app.follow.ended, "the end of the capture")
        assert "capture ended" in status(app) and timeline.viewport == window
        assert app.index.t1 > window.end_ns  # type: ignore[union-attr]  # the whole capture, the window kept

    run(app, scenario)
