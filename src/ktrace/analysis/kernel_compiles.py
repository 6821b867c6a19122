"""Hear when an analysis kernel is compiled by numba (first use on a large input, empty disk cache).

A first run on a large trace compiles each kernel once (0.2-5 s each; cached on disk afterwards), which
would otherwise be silence: the CLI subscribes and shows a status line. Analysis itself never prints.
"""

from __future__ import annotations

from collections.abc import Callable

from ktrace.analysis._kernels import compile_listeners


def subscribe(listener: Callable[[str, bool], None]) -> None:
    """Call `listener(kernel_name, False)` just before numba compiles a kernel (not when it loads from cache)
    and `listener(kernel_name, True)` when the compile ends (pairs may nest: a kernel compiles the kernels it
    calls inside its own compile)."""
    if listener not in compile_listeners:
        compile_listeners.append(listener)
