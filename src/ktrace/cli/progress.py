"""A rich progress bar for long CLI work, handed to lower layers as a plain (done, total) callback."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(description: str, *, enabled: bool | None = None) -> Iterator[Callable[[int, int], None]]:
    """Yield a ProgressFn drawing a bar on stderr (only when stderr is a terminal, unless `enabled`)."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        yield update


_STATUS_SHOWN = False


def show_kernel_compiles() -> None:
    """On a terminal, a one-line status on stderr while numba compiles an analysis kernel (first run only)."""
    if not sys.stderr.isatty():
        return
    import atexit

    from ktrace.analysis.kernel_compiles import subscribe

    def status(kernel: str) -> None:
        global _STATUS_SHOWN
        if not _STATUS_SHOWN:
            _STATUS_SHOWN = True
            atexit.register(lambda: (sys.stderr.write("\r\x1b[K"), sys.stderr.flush()))
        sys.stderr.write(f"\r\x1b[Kktrace: compiling the {kernel} kernel for a large trace "
                         "(first run after install only; cached afterwards)")
        sys.stderr.flush()

    subscribe(status)
