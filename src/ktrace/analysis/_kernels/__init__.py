"""numba kernels for interval work: numpy in, numpy out. The only place that imports numba.

Every kernel is decorated with `jit` from here. A `Kernel` runs its own Python source on small inputs
and a numba compilation of it (nogil, so a Textual worker running one does not freeze the UI; cached on
disk, so the next process loads it in ~0.1 s) on large ones. The two give the same results (the kernels
are written in the subset of Python that numba compiles, and the property tests run both against the
naive twins), so the choice is only about time: compiling all kernels costs 10-25 s on a first run after
install, while a trace of a few thousand rows takes milliseconds in plain Python. Small traces, which are
what most users have, never import numba at all.

A test rejects any other `@njit(` in the package.
"""

from __future__ import annotations

import functools
import os
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from ktrace.model.errors import ExitCode, KtraceError


def _rows_setting(name: str, default: int) -> int:
    """A row count from the environment variable `name` (`default` when unset); a one-line error if it is not one."""
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else default
    except ValueError:
        raise KtraceError(f"{name}={value!r} is not a whole number of rows (e.g. {default})", ExitCode.USAGE) from None


PYTHON_MAX_ROWS = _rows_setting("KTRACE_PYTHON_KERNEL_ROWS", 20000)
"""Inputs of at most this many rows (the longest array argument) run as Python; larger ones compiled.
Set KTRACE_PYTHON_KERNEL_ROWS=0 to always compile (as before), or a large value never to."""
LIGHT_FACTOR = 5
"""Light kernels (`@jit_light`: one cheap pass, ~1 us a row as Python) run as Python up to this many times
PYTHON_MAX_ROWS while numba is not loaded yet (once it is, they compile past PYTHON_MAX_ROWS like the others). With operators imported by default, the README demo's 24 k operator rows took such kernels
past 20,000 and loaded numba for them alone (~0.5 s and ~90 MB: demo 1.85 -> 3.08 s first run); a uniform
50,000 limit was measured too and slowed nccl x10 by 0.9 s (order statistics and type coverage cost
~10 us a row as Python)."""

NUMPY_MAX_ROWS = _rows_setting("KTRACE_NUMPY_KERNEL_ROWS", 1 << 20)
"""Kernels with a path of their own beside numba (a numpy twin, or their Python source where one pass is cheap:
first_fit's over numpy arrays, the longest path's over array.array; a wrapper asking `skips_numba`) take it on inputs of at most this many rows while numba is
not loaded yet, and on inputs of at most PYTHON_MAX_ROWS rows at any time: at 1.3 M events (owlv2 x10) the
summary then never loads numba, whose import and first cache load cost ~0.45 CPU s and ~110 MB of a ~400 MB
peak (issue 29: <= 100 B/event). Set KTRACE_NUMPY_KERNEL_ROWS=-1 never to take such a path."""

compile_listeners: list[Callable[[str, bool], None]] = []
"""Called as (kernel name, False) just before numba compiles a kernel (not when it loads from the disk cache)
and (kernel name, True) when that compile ends: the CLI shows a status, since a first compile can take
seconds. A kernel calling another may compile it inside its own compile (nested start/end pairs)."""

_LOCK = threading.RLock()
_numba_loaded = False
"""Set once a kernel has made its numba dispatcher: numba's fixed cost (import, first cache load) is paid, a
further kernel loads from the cache in ~5 ms, so light kernels stop running as Python past PYTHON_MAX_ROWS."""


def numba_loaded() -> bool:
    """Whether a kernel has loaded numba in this process (its compiled kernels then run past PYTHON_MAX_ROWS)."""
    return _numba_loaded


def _rows(args: tuple[Any, ...]) -> int:
    """The length of the longest array among the arguments (arrays inside named tuples included)."""
    rows = 0
    for arg in args:
        if isinstance(arg, np.ndarray):
            rows = max(rows, arg.shape[0] if arg.ndim else 1)
        elif isinstance(arg, tuple):
            rows = max(rows, _rows(arg))
    return rows


class Kernel:
    """One numba kernel: Python on small inputs, compiled on first use with a large one."""

    def __init__(self, func: Callable[..., Any], *, light: bool = False) -> None:
        self.py_func = func
        self.light = light
        self._compiled: Any = None
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any) -> Any:
        return self.sized(_rows(args), *args)

    def sized(self, rows: int, *args: Any) -> Any:
        """Run on `args` as `rows` rows of work: for kernels whose loops follow a number argument (bins, say)
        rather than the length of an array."""
        if self.runs_as_python(rows):
            return self.py_func(*args)
        return self.compiled()(*args)

    def runs_as_python(self, rows: int) -> bool:
        """Whether `rows` rows of work run as the kernel's Python source (a wrapper may then take a numpy path)."""
        return rows <= PYTHON_MAX_ROWS * (LIGHT_FACTOR if self.light and not _numba_loaded else 1)

    def skips_numba(self, rows: int) -> bool:
        """Whether a wrapper with a path of its own beside this kernel (NUMPY_MAX_ROWS) takes it on `rows` rows:
        small inputs always, large ones (up to NUMPY_MAX_ROWS) while numba is not loaded, so as not to load it."""
        return rows <= NUMPY_MAX_ROWS and (not _numba_loaded or self.runs_as_python(rows))

    def compiled(self) -> Any:
        """The numba dispatcher (made once; compiled, or loaded from the disk cache, on its first call)."""
        if self._compiled is None:
            with _LOCK:
                if self._compiled is None:
                    self._compiled = _dispatcher(self.py_func)
        return self._compiled


def _dispatcher(func: Callable[..., Any]) -> Any:
    """numba.njit of `func`, with every Kernel it calls replaced by that kernel's own dispatcher."""
    import numba  # noqa: PLC0415 - only when a large input needs it (~0.6 s)

    global _numba_loaded  # noqa: PLW0603 - one flag: numba's fixed cost is paid once per process
    _numba_loaded = True

    _listen_for_compiles()
    names = dict(func.__globals__)
    for name in func.__code__.co_names:
        if isinstance(names.get(name), Kernel):
            names[name] = names[name].compiled()
    clone = types.FunctionType(func.__code__, names, func.__name__, func.__defaults__, func.__closure__)
    clone.__qualname__, clone.__module__, clone.__doc__ = func.__qualname__, func.__module__, func.__doc__
    return numba.njit(nogil=True, cache=True)(clone)


@functools.cache
def _listen_for_compiles() -> None:
    from numba.core import event  # noqa: PLC0415

    class Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            self._tell(ev, done=False)

        def on_end(self, ev: Any) -> None:
            self._tell(ev, done=True)

        @staticmethod
        def _tell(ev: Any, *, done: bool) -> None:
            dispatcher = ev.data.get("dispatcher")
            module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
            if module.startswith(__name__):
                for listener in list(compile_listeners):
                    listener(dispatcher.py_func.__name__.lstrip("_"), done)

    event.register("numba:compile", Listener())  # type: ignore[no-untyped-call]


def jit(func: Callable[..., Any]) -> Kernel:
    """Decorator of every kernel in this package (see the module docstring)."""
    return Kernel(func)


def jit_light(func: Callable[..., Any]) -> Kernel:
    """`jit` for a kernel whose Python run is cheap (one pass, ~1 us a row): Python up to LIGHT_FACTOR times
    PYTHON_MAX_ROWS rows."""
    return Kernel(func, light=True)
