"""A CPU training loop under `ktrace run --publish 1`, read and steered while it runs (issue 31): the store grows
and says live; `ktrace ctl --steps A:B` records exactly those steps; ctl on anything else is one line."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ktrace.model import store
from ktrace.model.live import live_status
from ktrace.model.output_lock import OutputLock
from ktrace.model.outputs import CAPTURE_MARKER

PY = sys.executable
PATIENCE_S = 120.0
"""How long a test waits for the job to get somewhere (a loaded machine is slow; nothing here is timed)."""

LOOP = """
import pathlib, sys, time, ktrace
here = pathlib.Path(sys.argv[1])
hold_at, steps = int(sys.argv[2]), int(sys.argv[3])
for i in range(steps):
    ktrace.step()
    with ktrace.annotate("forward"):
        sum(range(20000))
    if i == hold_at:  # the test says when to go on (a file), so that nothing depends on timing
        while not (here / "go").exists():
            time.sleep(0.02)
    time.sleep(0.01)
"""


@contextlib.contextmanager
def running_job(tmp_path: Path, *run_args: str, hold_at: int, steps: int) -> Iterator[subprocess.Popen[str]]:
    """`ktrace run -o live.ktrace RUN_ARGS -- python loop.py`, started; the loop waits at step `hold_at` until the
    test writes the file `go`; killed if the test fails."""
    (tmp_path / "loop.py").write_text(LOOP)
    cmd = [PY, "-m", "ktrace", "run", "-o", "live.ktrace", "--no-gpu", *run_args, "--", PY, "loop.py", str(tmp_path)]
    job = subprocess.Popen(
        [*cmd, str(hold_at), str(steps)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield job
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)  # the launcher and the loop it started, if the test failed
        job.communicate()


def wait_until(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not ready():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def ktrace(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "ktrace", *args], capture_output=True, text=True, timeout=PATIENCE_S, cwd=cwd, env=dict(os.environ)
    )


def step_names(root: Path) -> list[str]:
    names = store.read(root).ranges["name"].cast(str).to_list()
    return [n for n in names if n.startswith("ProfilerStep#")]


def test_a_reader_sees_the_capture_grow_while_it_runs(tmp_path: Path) -> None:
    root = tmp_path / "live.ktrace"
    with running_job(tmp_path, "--publish", "1", hold_at=10**9, steps=10**9) as job:
        wait_until("the capture to start", lambda: live_status(root) is not None)
        sizes = [0]
        for _ in range(3):  # something is published, then the store grows twice while the job runs
            wait_until("a publish", lambda: len(step_names(root)) > sizes[-1])
            sizes.append(len(step_names(root)))
        info = ktrace("info", str(root), cwd=tmp_path)
        assert info.returncode == 0, info.stderr
        assert "live, " in info.stdout and " s recorded" in info.stdout
        assert f"ktrace info: {root}: live, " in info.stderr
        trace = store.read(root)
        assert "processes_not_closed" not in trace.meta.health and "recovered_tables" not in trace.meta.health
        assert job.poll() is None
        job.terminate()  # forwarded to the loop, whose tracer writes its last rows; then the store is finalized
        job.wait(timeout=PATIENCE_S)
    assert live_status(root) is None
    assert not any("live, " in n for n in store.read(root).meta.notes)


def test_ctl_steps_records_exactly_that_window_without_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "live.ktrace"
    with running_job(tmp_path, "--steps", "0:1", hold_at=3, steps=20) as job:
        wait_until("the capture to start", lambda: live_status(root) is not None)
        ctl = ktrace("ctl", str(root), "--steps", "10:15", "--timeout", str(PATIENCE_S), cwd=tmp_path)
        assert ctl.returncode == 0, ctl.stderr
        assert "record steps 10..14: applied by 1 process" in ctl.stdout
        (tmp_path / "go").touch()
        _, err = job.communicate(timeout=PATIENCE_S)
        assert job.returncode == 0, err
    assert step_names(root) == ["ProfilerStep#0", *(f"ProfilerStep#{i}" for i in range(10, 15))]
    finished = ktrace("ctl", str(root), "--stop", cwd=tmp_path)
    assert finished.returncode == 3 and "this capture has finished" in finished.stderr
    assert len(finished.stderr.splitlines()) == 1


def test_ctl_on_what_is_not_a_running_capture_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    cases = [
        (["notes.txt", "--start"], 3, "not a capture `ktrace run` is recording"),
        (["nowhere.ktrace", "--start"], 4, "no such file or directory"),
        (["notes.txt", "--steps", "5:2"], 2, "--steps '5:2'"),
    ]
    for args, code, message in cases:
        res = ktrace("ctl", *args, cwd=tmp_path)
        assert (res.returncode, len(res.stderr.splitlines())) == (code, 1), res.stderr
        assert message in res.stderr
    root = tmp_path / "held.ktrace"  # a capture whose launcher holds it, but no traced process answers
    root.mkdir()
    (root / CAPTURE_MARKER).touch()
    lock = OutputLock(root)
    lock.acquire()
    try:
        res = ktrace("ctl", str(root), "--start", "--timeout", "0.3", cwd=tmp_path)
    finally:
        lock.release()
    assert res.returncode == 1 and "no traced process answered within 0.3 s" in res.stderr
    assert len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("value", ["0.1", "4000", "nan"])
def test_publish_out_of_range_is_a_usage_error(tmp_path: Path, value: str) -> None:
    res = ktrace("run", "--publish", value, "--", "true", cwd=tmp_path)
    assert res.returncode == 2 and "--publish" in res.stderr and "between 0.5 and 3600" in res.stderr
