"""What every engine shares (in-process, worker processes, Dask): the context-manager base, how a task's item is
named, and the one-line error a failed task becomes.

Its own module so that `ktrace.fleet.dask_engine` can use it without importing `ktrace.fleet.engines`, which
imports the Dask engine (only for a cluster): the two would otherwise import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from ktrace.model.errors import KtraceError

T = TypeVar("T")
_E = TypeVar("_E", bound="EngineBase")


def task_error(label: str, exc: BaseException) -> KtraceError:
    """The one-line error for a failed task: the item's label, then the error (its exit code kept)."""
    if isinstance(exc, KtraceError):
        error = KtraceError(f"{label}: {exc}", exc.exit_code)
    else:
        text = " ".join(str(exc).split()) or type(exc).__name__
        error = KtraceError(f"{label}: {type(exc).__name__}: {text}")
    error.__cause__ = exc
    return error


def item_label(item: object, describe: Callable[[T], str] | None) -> str:
    """How a task is named in errors and progress: `describe(item)`, else the item itself (shortened)."""
    text = describe(item) if describe is not None else str(item)  # type: ignore[arg-type]
    return text if len(text) <= 200 else text[:197] + "..."


class EngineBase:
    """An engine's name, its workers, and `with engine:` closing it; subclasses add `map` (engines.Engine)."""

    name = "engine"
    workers = 1

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self: _E) -> _E:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
