"""The traced process's side of `ktrace ctl`: check the capture marker for new requests and apply them.

Run by the session's writer thread about once a second (its flush interval); the answer goes into the process's
partition.json (ktrace.model.control). Applying a request opens or closes the session's capture window, which
turns detailed recording (GPU activity, and whatever subscribed to the session's recording changes) on or off;
the launcher's counters keep running.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol

from ktrace.model.control import ControlAnswer, ControlRequest, read_requests
from ktrace.model.outputs import CAPTURE_MARKER


class Controllable(Protocol):
    """What a request acts on (ktrace.tracer.session.CaptureSession)."""

    step_index: int

    def record_from_now(self) -> None:
        """Open the capture window now, forgetting any step window."""

    def stop_recording(self) -> None:
        """Close the capture window now, forgetting any step window."""

    def record_steps(self, steps: tuple[int, int]) -> None:
        """Record steps [A, B) from now on, counted by ktrace.step(); close the window until step A."""


class ControlPoller:
    """Applies the requests of the capture marker at `root` that this process has not applied yet."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.applied = 0
        """seq of the newest request applied."""
        self.answer: ControlAnswer | None = None
        """The answer to the newest request applied (None before the first)."""
        self._seen: tuple[int, int, int] | None = None
        """(inode, size, mtime_ns) of the marker when last read: unchanged, it is not read again."""

    def poll(self, target: Controllable) -> bool:
        """Apply new requests to `target`; True when there were any (the answer changed)."""
        try:
            st = os.stat(self.root / CAPTURE_MARKER)
        except OSError:
            return False
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return False
        self._seen = seen
        fresh = [r for r in read_requests(self.root) if r.seq > self.applied]
        for request in fresh:
            ok, message = apply_request(request, target)
            self.applied = request.seq
            self.answer = ControlAnswer(request.seq, ok, message, os.getpid())
        return bool(fresh)


def apply_request(request: ControlRequest, target: Controllable) -> tuple[bool, str]:
    """Do what `request` asks of `target`: (done, one line saying what was done or why not)."""
    now = target.step_index
    at = f" (at step {now})" if now >= 0 else ""
    if request.action == "start":
        target.record_from_now()
        return True, f"recording from {time.strftime('%H:%M:%S')}{at}"
    if request.action == "stop":
        target.stop_recording()
        return True, f"stopped recording at {time.strftime('%H:%M:%S')}{at}"
    assert request.steps is not None  # ControlRequest.from_dict guarantees it
    first, stop = request.steps
    if now >= first:
        return False, f"step {first} already began (this process is at step {now}); choose A > {now}"
    target.record_steps(request.steps)
    return True, f"recording steps {first}..{stop - 1} when they come{at}"
