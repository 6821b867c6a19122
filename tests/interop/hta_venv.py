"""A virtual environment with HTA (HolisticTraceAnalysis) apart from ktrace's, built once and cached between runs in
~/.cache/ktrace-interop (or $KTRACE_INTEROP_CACHE), one folder per HTA version and Python, so a second run starts at
once. HTA pins its own pandas/numpy, which ktrace's environment need not accept: it runs there by subprocess only."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HTA_VERSION = "0.5.0"
"""The HTA release checked (the newest on PyPI when written)."""
BUILD_TIMEOUT_S = 900
"""The venv and HTA's install from scratch: measured 130 s on a 2-core VM."""
_DONE = ".ktrace-complete"
"""Written last: a folder without it is a build that did not finish, started again."""


class VenvUnavailable(Exception):
    """The HTA venv could not be built (no network, no package index, no venv module): the reason in one line."""


def cache_folder() -> Path:
    return Path(os.environ.get("KTRACE_INTEROP_CACHE") or Path.home() / ".cache" / "ktrace-interop")


def hta_python() -> Path:
    """The HTA venv's interpreter, building the venv first when the cache has none (several test workers wait for
    one build under a lock).

    Raises:
        VenvUnavailable: it cannot be built here.
    """
    folder = cache_folder() / f"hta-{HTA_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
    python = folder / "bin" / "python"
    if (folder / _DONE).exists():
        return python
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / ".build-lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / _DONE).exists():
                _build(folder, python)
    except OSError as exc:
        raise VenvUnavailable(f"cannot write the venv under {folder.parent}: {exc}") from None
    return python


def _build(folder: Path, python: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    started = time.monotonic()
    pip = [str(python), "-m", "pip", "install", "-q", "--retries", "1", "--timeout", "30"]
    for what, command in (
        ("python -m venv", [sys.executable, "-m", "venv", str(folder)]),
        (f"pip install HolisticTraceAnalysis=={HTA_VERSION}", [*pip, f"HolisticTraceAnalysis=={HTA_VERSION}"]),
        ("import hta", [str(python), "-c", "import hta.trace_analysis"]),
    ):
        left = BUILD_TIMEOUT_S - (time.monotonic() - started)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(left, 1), check=False)
        except subprocess.TimeoutExpired:
            raise VenvUnavailable(f"{what} took over {BUILD_TIMEOUT_S} s") from None
        if done.returncode:
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            errors = [line for line in lines if "ERROR" in line] or lines
            raise VenvUnavailable(f"{what} failed (exit {done.returncode}): {errors[-1] if errors else 'no output'}")
    (folder / _DONE).write_text(f"built in {time.monotonic() - started:.0f} s\n")
