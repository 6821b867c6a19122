"""What `ktrace run` did: built by `finalize` (or by the launcher when finalizing failed), returned by the launcher.

Its own module so that the launcher (which calls finalize) and finalize (which builds it) do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    """What `ktrace run` did."""

    exit_code: int
    """The command's exit code (128 + N when it died of signal N)."""
    root: Path
    processes: list[dict[str, object]] = field(default_factory=list)
    """One entry per traced process: node, rank, rows per table."""
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    printed: list[str] = field(default_factory=list)
    """Notes already shown to the user while the command ran."""
    finalize_error: str = ""
    """Why the capture could not be finalized (e.g. disk full); empty when the trace was written."""
