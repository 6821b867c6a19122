"""What `ktrace run` lets watch the command while it runs (the rules' follower of `--on-finding RULE=stop`).

The launcher knows nothing of rules (the tracer may not import analysis): the CLI hands it a JobWatch, which the
launcher starts with the command's process once it is spawned and finishes once the command ended, before the
capture is finalized. What `finish` returns joins the capture's notes (meta.json), so a stop is kept in the trace.
"""

from __future__ import annotations

import subprocess
from typing import Protocol


class JobWatch(Protocol):
    """Watches the command `ktrace run` records; may end it (SIGTERM, then SIGKILL)."""

    def start(self, child: subprocess.Popen[bytes]) -> None:
        """Begin watching (on a thread of its own, started here: it inherits the launcher's blocked signals)."""

    def finish(self) -> list[str]:
        """Stop watching (the command has ended); the notes for the capture's meta.json (none if it did nothing)."""
