"""summarize()'s sections one at a time, each timed, for benchmarks/stage_split.py (issue 29's published split).

`sections_timed(timed)` is a timing hook, in this process only (no library file is edited): while the block runs,
every function analysis.summary calls from another ktrace module is wrapped in `timed(name)`, and its thread pool
runs each task at once in the calling thread. So summarize() itself runs, in its own order with its own arguments,
and a section added to it is timed with no change here; what the TraceIndex shares is charged to the first section
that asks for it, and each numba kernel's cache load to the first section that runs it. (summarize runs latency,
idle and the critical path in threads beside the rest: the split adds them up, the command overlaps them.)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from typing import Any

Timed = Callable[[str], AbstractContextManager[None]]


class InlineExecutor:
    """A ThreadPoolExecutor stand-in that runs each submitted call at once, in the caller's thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """`fn(*args, **kwargs)` run now, its result (or exception) in a finished Future."""
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future, as a pool does
            future.set_exception(exc)
        return future


def hooked_names(module: Any) -> list[str]:
    """The functions `module` calls from other ktrace modules (its sections and helpers), by their name there."""
    return [
        name
        for name, value in vars(module).items()
        if inspect.isfunction(value)
        and value.__module__.startswith("ktrace.")
        and value.__module__ != module.__name__
        and not name.startswith("_")
    ]


def _timed_call(name: str, fn: Callable[..., Any], timed: Timed) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with timed(name):
            return fn(*args, **kwargs)

    return call


@contextmanager
def sections_timed(timed: Timed) -> Iterator[None]:
    """Inside the block, summarize() runs its sections one at a time, each inside `timed(its name)`."""
    from ktrace.analysis import summary as module

    saved = {name: getattr(module, name) for name in [*hooked_names(module), "ThreadPoolExecutor"]}
    try:
        for name, fn in saved.items():
            setattr(module, name, InlineExecutor if name == "ThreadPoolExecutor" else _timed_call(name, fn, timed))
        yield
    finally:
        for name, fn in saved.items():
            setattr(module, name, fn)


def totals(rows: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """Rows of the same name added up (a section called twice), in the order each name first came."""
    summed: dict[str, tuple[float, float]] = {}
    for name, wall, cpu in rows:
        w, c = summed.get(name, (0.0, 0.0))
        summed[name] = (w + wall, c + cpu)
    return [(name, w, c) for name, (w, c) in summed.items()]
