"""Capture windows: when a traced process records (whole run, --delay/--duration, --steps, profiler API)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ktrace.tracer.background import start_background
from ktrace.tracer.config import CaptureConfig

if TYPE_CHECKING:
    import numpy as np


class Windows:
    """Thread-safe list of [open, close) time windows; rows outside every window are dropped.

    Args:
        always_on: record from the start to the end (no window option given).
        on_change: called with True/False when recording starts/stops (toggles CUPTI kinds).
    """

    def __init__(self, always_on: bool, on_change: Callable[[bool], None] | None = None) -> None:
        self.always_on = always_on
        self._lock = threading.Lock()
        self._closed: list[tuple[int, int]] = []
        self._open_since: int | None = 0 if always_on else None
        self.on_change = on_change

    @property
    def active(self) -> bool:
        """True while recording."""
        return self._open_since is not None

    def open(self, now_ns: int | None = None) -> bool:
        """Start recording (no-op if already recording); True if it changed."""
        with self._lock:
            if self._open_since is not None:
                return False
            self._open_since = time.time_ns() if now_ns is None else now_ns
        if self.on_change:
            self.on_change(True)
        return True

    def close(self, now_ns: int | None = None) -> bool:
        """Stop recording (no-op if not recording); True if it changed."""
        with self._lock:
            if self._open_since is None:
                return False
            end = time.time_ns() if now_ns is None else now_ns
            self._closed.append((self._open_since, end))
            self._open_since = None
        if self.on_change:
            self.on_change(False)
        return True

    def spans(self) -> list[tuple[int, int | None]]:
        """Every window so far; the open one ends with None."""
        with self._lock:
            out: list[tuple[int, int | None]] = list(self._closed)
            if self._open_since is not None:
                out.append((self._open_since, None))
        return out

    def mask(self, starts: np.ndarray) -> np.ndarray:
        """Boolean mask of the rows whose start lies inside a window."""
        import numpy as np  # deferred: the startup hook must stay cheap in every Python process

        if self.always_on and not self._closed:
            return np.ones(len(starts), dtype=bool)
        keep = np.zeros(len(starts), dtype=bool)
        for lo, hi in self.spans():
            keep |= (starts >= lo) & (starts < (np.iinfo(np.int64).max if hi is None else hi))
        return keep


def time_window_timers(config: CaptureConfig, windows: Windows) -> list[threading.Timer]:
    """Daemon timers opening/closing the window at t0+delay and t0+delay+duration (started here)."""
    if config.steps is not None or config.capture_range != "none":
        return []
    t0 = config.t0_ns or time.time_ns()
    timers: list[threading.Timer] = []
    open_at = t0 + int(config.delay_s * 1e9)
    now = time.time_ns()
    if config.delay_s > 0:
        timers.append(threading.Timer(max(0.0, (open_at - now) / 1e9), windows.open))
    if config.duration_s is not None:
        close_at = open_at + int(config.duration_s * 1e9)
        timers.append(threading.Timer(max(0.0, (close_at - now) / 1e9), windows.close))
    for t in timers:
        t.daemon = True
        start_background(t)
    return timers


def initially_open(config: CaptureConfig) -> bool:
    """Whether recording starts with the process."""
    if config.steps is not None:
        return config.steps[0] == 0
    return config.capture_range == "none" and config.delay_s <= 0
