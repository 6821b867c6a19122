"""A rich progress bar for long CLI work, handed to lower layers as a plain (done, total) callback."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_ACTIVE: list[tuple[Any, Any, str]] = []
"""The progress bars on screen now (innermost last): (Progress, task id, description)."""


@contextmanager
def progress_bar(description: str, *, enabled: bool | None = None) -> Iterator[Callable[[int, int], None]]:
    """Yield a ProgressFn drawing a bar on stderr (only when stderr is a terminal, unless `enabled`).

    Until the first (done, total) call the bar pulses, so work that reports no progress (an analysis) is
    still never silent; a numba compile during it shows in the bar's text (see show_kernel_compiles)."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        _ACTIVE.append((bar, task, description))
        try:
            yield update
        finally:
            _ACTIVE.remove((bar, task, description))


_COMPILING: list[str] = []
"""Kernels numba is compiling now (innermost last)."""
_STATUS_SHOWN = False


def _compile_status(kernel: str, done: bool) -> None:
    """Show the kernel being compiled in the innermost progress bar's text, else as a one-line status."""
    global _STATUS_SHOWN
    if done:
        if kernel in _COMPILING:
            _COMPILING.remove(kernel)
    else:
        _COMPILING.append(kernel)
    note = f"compiling the {_COMPILING[-1]} kernel (first run after install only)" if _COMPILING else ""
    if _ACTIVE:
        bar, task, description = _ACTIVE[-1]
        bar.update(task, description=f"{description}: {note}" if note else description)
        return
    if not _STATUS_SHOWN:
        import atexit

        _STATUS_SHOWN = True
        atexit.register(lambda: (sys.stderr.write("\r\x1b[K"), sys.stderr.flush()))
    sys.stderr.write(f"\r\x1b[Kktrace: {note}" if note else "\r\x1b[K")
    sys.stderr.flush()


def show_kernel_compiles() -> None:
    """On a terminal, say on stderr when numba compiles an analysis kernel (first run only, seconds each): in
    the text of the progress bar on screen, else as a one-line status."""
    if not sys.stderr.isatty():
        return
    from ktrace.analysis.kernel_compiles import subscribe

    subscribe(_compile_status)
