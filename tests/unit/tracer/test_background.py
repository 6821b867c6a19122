"""ktrace's threads in a traced program block the asynchronous signals, so the program's main thread gets them."""

from __future__ import annotations

import signal
import threading

from ktrace.tracer.background import ASYNCHRONOUS_SIGNALS, start_background


def test_a_background_thread_blocks_the_programs_signals_and_the_caller_keeps_its_mask() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen: list[set[signal.Signals]] = []
    thread = threading.Thread(target=lambda: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    start_background(thread)
    thread.join()
    blocked = seen[0]
    assert {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGCHLD} <= blocked
    assert not {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE} & blocked  # faults stay with the thread that raises them
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_faults_kill_and_stop_are_never_in_the_blocked_set() -> None:
    names = {s.name for s in ASYNCHRONOUS_SIGNALS if isinstance(s, signal.Signals)}
    assert "SIGTERM" in names and "SIGALRM" in names
    assert not names & {"SIGSEGV", "SIGKILL", "SIGSTOP", "SIGABRT", "SIGILL"}
