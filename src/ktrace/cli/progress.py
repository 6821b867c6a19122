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
