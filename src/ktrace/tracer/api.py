"""The Python capture API: ktrace.annotate(), ktrace.step(), ktrace.start(), ktrace.stop().

Each call emits NVTX (domain "ktrace"), so nsys or any CUPTI tool sees it; under `ktrace run` the
ranges are also recorded directly into the capture (exact CPU times, no CUPTI needed, works without a
GPU). Without `ktrace run` they are NVTX only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ktrace.tracer.session import CaptureSession

NVTX_DOMAIN = "ktrace"


class _ProcessState:
    """The process-wide tracer state: one capture per process is a fact of CUPTI, not a design choice."""

    def __init__(self) -> None:
        self.session: CaptureSession | None = None
        self.local = threading.local()
        self.step_index = -1
        self.step_range: Any = None
        self.nvtx: Any = None
        self.nvtx_failed = False

    def domain(self) -> Any:
        if self.nvtx is None and not self.nvtx_failed:
            try:
                import nvtx  # deferred: only when the API is used

                self.nvtx = nvtx.get_domain(NVTX_DOMAIN)
            except Exception:  # nvtx missing or broken: the API still records under ktrace run
                self.nvtx_failed = True
        return self.nvtx


_STATE = _ProcessState()


def attach(session: CaptureSession | None) -> None:
    """Route the API to `session` (called by the startup hook; None detaches)."""
    _STATE.session = session


def current_session() -> CaptureSession | None:
    """The capture of this process, if it runs under `ktrace run` and is still alive."""
    session = _STATE.session
    return session if session is not None and session.alive else None


def _depth_stack() -> list[int]:
    stack: list[int] | None = getattr(_STATE.local, "stack", None)
    if stack is None:
        stack = _STATE.local.stack = []
    return stack


@contextmanager
def annotate(name: str, color: str | None = None) -> Iterator[None]:
    """Mark a named range of the program (e.g. "forward"); nest freely.

    Args:
        name: the range's name.
        color: an NVTX color name ("blue", "green", ...), shown by NVTX viewers.

    Example:
        >>> with ktrace.annotate("forward"):
        ...     loss = model(batch)
    """
    domain = _STATE.domain()
    attrs = None
    if domain is not None:
        try:
            attrs = domain.get_event_attributes(message=name, color=color)
            domain.push_range(attrs)
        except Exception:
            attrs = None
    stack = _depth_stack()
    session = current_session()
    depth = len(stack) + (session.step_depth(threading.get_native_id()) if session is not None else 0)
    start = time.time_ns()
    stack.append(start)
    try:
        yield
    finally:
        end = time.time_ns()
        stack.pop()
        if attrs is not None:
            domain.pop_range()
        session = current_session()
        if session is not None:
            session.record_range(name, NVTX_DOMAIN, start, end, threading.get_native_id(), depth)


class StepIndex(int):
    """The index `ktrace.step()` returns, which is also a context manager: `with ktrace.step():` ends the step
    at the end of the block (the marker form, a bare `ktrace.step()`, ends it at the next call)."""

    def __enter__(self) -> StepIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        session = current_session()
        if session is not None:
            session.end_step()
        _end_nvtx_step()


def _end_nvtx_step() -> None:
    domain = _STATE.domain()
    if domain is not None and _STATE.step_range is not None:
        try:
            domain.end_range(_STATE.step_range)
        except Exception:
            pass
    _STATE.step_range = None


def step() -> StepIndex:
    """Begin the next training step; returns its index. Two forms:

    - marker: call `ktrace.step()` once per iteration, at its top; step N runs to the next call, and the last
      step ends with the last `ktrace.annotate` range inside it (or when the program ends, if it has none);
    - block: `with ktrace.step(): ...` ends the step exactly at the end of the block.

    The ranges are named "ProfilerStep#N" like torch.profiler's; ranges opened inside a step are nested
    under it. `ktrace run --steps A:B` records steps A to B-1 only.
    """
    domain = _STATE.domain()
    session = current_session()
    if session is not None:
        index = session.step()
    else:
        _STATE.step_index += 1
        index = _STATE.step_index
    _end_nvtx_step()
    if domain is not None:
        try:
            _STATE.step_range = domain.start_range(domain.get_event_attributes(message=f"ProfilerStep#{index}"))
        except Exception:
            _STATE.step_range = None
    return StepIndex(index)


def start() -> bool:
    """Start (or resume) recording under `ktrace run`; True if recording was off and is now on."""
    session = current_session()
    _mark("ktrace.start")
    return session.windows.open() if session is not None else False


def stop() -> bool:
    """Pause recording under `ktrace run` (resume with start()); True if it was recording."""
    session = current_session()
    _mark("ktrace.stop")
    return session.windows.close() if session is not None else False


def _mark(message: str) -> None:
    domain = _STATE.domain()
    if domain is not None:
        try:
            domain.mark(domain.get_event_attributes(message=message))
        except Exception:
            pass
