"""`ktrace view` on a real `ktrace run --no-gpu --publish 0.5` capture of a CPU training loop: opened while the job
runs, it extends as the job publishes, shows the steps the job reaches, and says "capture ended" once finalized.

The loop holds at a step until the test writes a file, so nothing depends on timing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from test_live_view import status, until
from textual.pilot import Pilot

from ktrace.model.live import live_status
from ktrace.tui.app import make_app

LOOP = """
import pathlib, sys, time, ktrace
here = pathlib.Path(sys.argv[1])
for i in range(12):
    ktrace.step()
    with ktrace.annotate("forward"):
        sum(range(20000))
    for hold, name in ((3, "go1"), (7, "go2")):
        if i == hold:
            while not (here / name).exists():
                time.sleep(0.02)
    time.sleep(0.01)
"""


@contextlib.contextmanager
def running_loop(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The loop under `ktrace run`, killed with its launcher if the test fails."""
    (tmp_path / "loop.py").write_text(LOOP)
    job = subprocess.Popen(
        [sys.executable, "-m", "ktrace", "run", "-o", "live.ktrace", "--no-gpu", "--publish", "0.5", "--",
         sys.executable, "loop.py", str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        yield job
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()


def steps_shown(app: object) -> int:
    trace = app.trace  # type: ignore[attr-defined]
    return 0 if trace is None else sum(n.startswith("ProfilerStep#") for n in trace.ranges["name"].cast(str))


def test_the_view_follows_a_running_ktrace_run_to_its_end(tmp_path: Path) -> None:
    root = tmp_path / "live.ktrace"
    with running_loop(tmp_path) as job:
        for _ in range(6000):  # the job starts and publishes its first steps
            status_now = live_status(root)
            if status_now is not None and status_now.last_ns is not None:
                break
            assert job.poll() is None, "ktrace run ended before it published"
            time.sleep(0.02)
        app = make_app(root, analyses=False, follow_every_s=0.1)
        seen: list[int] = []

        async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
            await until(pilot, lambda: app.index is not None and app.index.links_ready, "the first load")
            assert app.follow.live and "live" in status(app)
            seen.append(app.index.t1)  # type: ignore[union-attr]
            await until(pilot, lambda: steps_shown(app) >= 3, "the first steps")  # held in the 4th
            (tmp_path / "go1").touch()
            await until(pilot, lambda: steps_shown(app) >= 7, "the steps after the first hold")
            seen.append(app.index.t1)  # type: ignore[union-attr]
            (tmp_path / "go2").touch()
            await until(pilot, lambda: app.follow.ended, "the end of the capture")
            seen.append(app.index.t1)  # type: ignore[union-attr]
            assert steps_shown(app) >= 11 and "capture ended" in status(app)
            app.exit()

        async def main() -> None:
            async with app.run_test(size=(100, 30)) as pilot:
                await scenario(pilot)

        asyncio.run(main())
        assert job.wait(timeout=120) == 0
    assert seen[0] < seen[1] < seen[2]
