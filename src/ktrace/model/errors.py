"""The errors ktrace reports to users, with the exit code each one maps to."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of the `ktrace` command (a contract: scripts and CI depend on them)."""

    OK = 0
    FAILURE = 1
    """Something failed that is not the input's fault."""
    USAGE = 2
    """Bad command line."""
    BAD_INPUT = 3
    """The input is not a readable trace (corrupt, truncated, unknown format)."""
    NOT_FOUND = 4
    """The input path does not exist."""
    FINDINGS = 5
    """`ktrace check`/`ktrace diff` found problems at or above the --fail-on level."""
    MISSING_DEPENDENCY = 6
    """An optional dependency (e.g. cupti-python) is needed and missing."""
    STOPPED = 7
    """`ktrace run --on-finding RULE=stop` ended the command because RULE fired (the trace says so)."""
    INTERRUPTED = 130


class KtraceError(Exception):
    """An error meant for the user: one line, and an exit code. The CLI prints it without a traceback."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class TraceFormatError(KtraceError):
    """The input is not a trace ktrace can read."""

    exit_code = ExitCode.BAD_INPUT


class TraceNotFoundError(TraceFormatError, FileNotFoundError):
    """The input path does not exist: a FileNotFoundError too, so `except FileNotFoundError` catches it."""

    exit_code = ExitCode.NOT_FOUND


ProgressFn = Callable[[int, int], None]
"""Progress callback: (done, total) in any unit (bytes, rows); total 0 means unknown."""


def no_progress(done: int, total: int) -> None:
    """A ProgressFn that shows nothing."""
