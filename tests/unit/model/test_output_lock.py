"""The lock of one output (model/output_lock): a lock whose writer is dead is taken over, a live one is not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ktrace.model.errors import KtraceError
from ktrace.model.output_lock import OutputLock, writer_pid

ORPHAN = """
import os, sys, time
from pathlib import Path
from ktrace.model.output_lock import OutputLock
OutputLock(Path(sys.argv[1])).acquire()
child = os.fork()  # (a decode worker): it shares the writer's flock
if child == 0:
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
os._exit(0)  # the writer dies; its child holds the lock on
"""

HOLDER = """
import sys, time
from pathlib import Path
from ktrace.model.output_lock import OutputLock
OutputLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(60)
"""


def _start(script: str, target: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", script, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_a_lock_held_by_the_child_of_a_dead_writer_is_taken_over(tmp_path: Path) -> None:
    target = tmp_path / "out.ktrace"
    proc, line = _start(ORPHAN, target)
    orphan = int(line)
    try:
        proc.wait(timeout=30)
        assert writer_pid(target) is None  # readers do not take the store for one being written
        lock = OutputLock(target)
        lock.acquire()  # refused before: "another ktrace is writing it (pid <the dead writer>)"
        assert writer_pid(target) == os.getpid()
        lock.release()
    finally:
        os.kill(orphan, signal.SIGKILL)
        if proc.stdout:
            proc.stdout.close()


def test_a_live_writer_keeps_its_lock(tmp_path: Path) -> None:
    target = tmp_path / "out.ktrace"
    proc, line = _start(HOLDER, target)
    try:
        assert line == "held"
        assert writer_pid(target) == proc.pid
        with pytest.raises(KtraceError, match=f"another ktrace is writing it \\(pid {proc.pid}\\)"):
            OutputLock(target).acquire()
    finally:
        proc.kill()
        proc.wait()
