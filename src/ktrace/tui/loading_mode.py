"""Process settings that keep the event loop responsive while Python-heavy loader threads run (numba's import).

Two CPython effects stall the UI thread while another thread imports numba or reads a trace:

- the GIL hand-over: every await of the event loop gives the GIL up and must take it back, waiting up to
  ``sys.getswitchinterval()`` (5 ms) each time while a busy thread holds it; many awaits per frame add up to stalls.
  A 1 ms interval while loading bounds each wait.
- full cyclic-GC passes: numba's import creates hundreds of thousands of objects, and a full collection triggered
  by any allocation walks them all (50-100 ms, holding the GIL). The collector is paused while loading; at the end
  everything alive is moved to the permanent generation (``gc.freeze``) so later passes skip it.
"""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass

LOADING_SWITCH_INTERVAL_S = 0.001
"""sys.setswitchinterval while a trace loads."""


@dataclass
class LoadingMode:
    """Enter when loading starts, leave (idempotent) once every loader step is done or the app exits."""

    switch_interval: float = 0.005
    gc_was_enabled: bool = True
    active: bool = False

    def enter(self) -> None:
        """Shorten the GIL switch interval and pause the cyclic GC."""
        if self.active:
            return
        self.switch_interval = sys.getswitchinterval()
        self.gc_was_enabled = gc.isenabled()
        sys.setswitchinterval(min(self.switch_interval, LOADING_SWITCH_INTERVAL_S))
        gc.disable()
        self.active = True

    def leave(self) -> None:
        """Restore the switch interval; freeze what loading left alive and restart the GC if it was on."""
        if not self.active:
            return
        self.active = False
        sys.setswitchinterval(self.switch_interval)
        gc.freeze()
        if self.gc_was_enabled:
            gc.enable()
