"""The lock of one output: `.NAME.lock` beside it, held with flock, so one ktrace at a time writes an output.

The kernel releases a flock when its holder dies, so a killed writer never leaves an output locked; the file it
leaves is reused and removed by the next writer. Readers probe it (`writer_pid`) to refuse a store mid-write.
A process forked by the writer shares its flock: one that outlives it (a decode worker) would hold the lock for
good, so a lock whose recorded writer is dead (in this pid namespace) is taken over, and readers ignore it.
Stdlib only: the tracer's traced processes import the model.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from ktrace.model.errors import ExitCode, KtraceError

_LOCK_WAIT_S = 1.0
"""How long a writer retries a held lock (covers a reader's instant probe) before saying it is busy."""


class LockFileError(KtraceError):
    """The lock file could not be made (a read-only folder, /proc): nothing can be written there."""


class OutputLock:
    """The lock of one output: `.NAME.lock` beside it, held with flock (released by the kernel if we die)."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.path = lock_path(target)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise KtraceError saying who holds it."""
        deadline = time.monotonic() + _LOCK_WAIT_S
        orphaned: tuple[int, int] | None = None
        """(inode, pid) of a held lock file that named a dead writer when first seen."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise LockFileError(f"cannot write {self.target}: {exc.strerror or exc}", ExitCode.FAILURE) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                seen = _orphan(fd)
                os.close(fd)
                orphaned = orphaned or seen
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                if orphaned is not None and seen == orphaned:  # dead all along, not a writer just starting
                    with contextlib.suppress(OSError):
                        os.unlink(self.path)  # (its survivor keeps a lock on a file nobody looks at)
                    orphaned, deadline = None, time.monotonic() + _LOCK_WAIT_S
                    continue
                holder = _holder(self.path)
                raise KtraceError(
                    f"{self.target}: another ktrace is writing it{holder}; wait for it to finish", ExitCode.FAILURE
                ) from None
            if _same_file(fd, self.path):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n{_pid_namespace()}".encode())
                self._fd = fd
                return
            os.close(fd)  # the holder removed that file as we opened it: take the new one

    def release(self) -> None:
        """Remove the lock file and let go (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                if _same_file(self._fd, self.path):
                    os.unlink(self.path)
            os.close(self._fd)
            self._fd = None


def lock_path(target: Path) -> Path:
    """Where the lock of output `target` lives."""
    return target.parent / f".{target.name}.lock"


def writer_pid(target: Path) -> int | None:
    """The pid of the ktrace writing `target` now (0 if unknown), or None when nobody is."""
    path = lock_path(target)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        if _orphan(fd) is not None:
            return None  # its writer is dead: what holds the lock is a process it forked
        pid, _ = _recorded(fd)
        return pid or 0
    finally:
        os.close(fd)
    return None


def _recorded(fd: int) -> tuple[int | None, str]:
    """The pid and the pid namespace a lock file names (None, "" where it does not)."""
    try:
        text = os.pread(fd, 128, 0).decode(errors="replace")
    except OSError:
        return None, ""
    pid, _, namespace = text.partition("\n")
    return (int(pid) if pid.strip().isdigit() else None), namespace.strip()


def _orphan(fd: int) -> tuple[int, int] | None:
    """(inode, pid) when the held lock file `fd` names a writer of this pid namespace that is dead, else None."""
    pid, namespace = _recorded(fd)
    if pid is None or not namespace or namespace != _pid_namespace():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return os.fstat(fd).st_ino, pid
    except OSError:
        return None
    return None


def _pid_namespace() -> str:
    """This process's pid namespace ("pid:[4026531836]"; "" where unknown): pids mean nothing outside it."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError):
        pid = path.read_text().partition("\n")[0].strip()
        if pid.isdigit():
            return f" (pid {pid})"
    return ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
