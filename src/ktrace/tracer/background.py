"""Start ktrace's threads in a traced program so that they never take the program's signals.

A signal sent to a process (Slurm's SIGTERM, Ctrl-C, SIGUSR1 for a checkpoint) goes to any one of its threads that
does not block it. If the kernel picks one of ktrace's threads, CPython only flags the signal: the main thread, which
runs the program's Python handler, is not woken from a blocking call (`time.sleep`, a socket read, a barrier) and may
react minutes late. So ktrace's threads block every asynchronous signal from birth, and so do the native threads they
create (pyarrow's and polars' pools, created on first use by the writer thread, inherit the mask).
"""

from __future__ import annotations

import signal
import threading

_SYNCHRONOUS = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGSYS", "SIGABRT", "SIGKILL", "SIGSTOP"}
ASYNCHRONOUS_SIGNALS = frozenset(s for s in signal.valid_signals() if getattr(s, "name", "") not in _SYNCHRONOUS)
"""What ktrace's threads block: everything but the faults a thread raises on itself (and SIGKILL/SIGSTOP)."""


def start_background(thread: threading.Thread) -> None:
    """Start `thread` with the asynchronous signals blocked (it inherits the mask; the caller's is restored)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, ASYNCHRONOUS_SIGNALS)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
