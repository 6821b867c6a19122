"""Outputs written safely: one writer at a time, complete or not there at all, and --force only over ktrace's work.

Every verb that writes goes through here (stdlib only: the tracer's traced processes import the model):

- `Output(target, fmt, force=, inputs=)` checks the target and takes its lock, a `.NAME.lock` sibling held with
  flock: a second writer gets a one-line error instead of mixing its tables into the first one's.
- Files are written to a temporary sibling and renamed over the target only when complete (`atomic_file`), so
  Ctrl-C, a crash or a full disk leave the old output as it was.
- Folders (a .ktrace store, Parquet/CSV tables) are written to a temporary sibling folder and swapped in; the old
  folder is moved aside only once the new one is complete, and deleted after.
- An existing output is replaced only with --force, and only when ktrace can prove it wrote it: a store holding
  nothing but store entries, a tables folder holding only table files, a file that opens with the bytes of the
  format about to be written. Never an input, a symbolic link, or what is neither a regular file nor a folder.
  An empty folder holds nothing to lose and is written into without --force. The formats, and how an existing
  output is recognised as ktrace's, are in `output_formats`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from ktrace.model.errors import ExitCode, KtraceError
from ktrace.model.output_formats import (
    CAPTURE_MARKER,
    CHROME,
    HTML_REPORT,
    JSON_REPORT,
    MD_REPORT,
    PERFETTO,
    STORE,
    OutputFormat,
    table_folder,
)
from ktrace.model.output_lock import LockFileError, OutputLock, lock_path, writer_pid

__all__ = [  # the formats are output_formats', here too: the verbs name them as outputs.STORE, outputs.CHROME
    "CAPTURE_MARKER",
    "CHROME",
    "HTML_REPORT",
    "JSON_REPORT",
    "MD_REPORT",
    "PERFETTO",
    "STORE",
    "Output",
    "OutputFormat",
    "OutputLock",
    "atomic_file",
    "atomic_path",
    "check_target",
    "lock_path",
    "sync_filesystem",
    "table_folder",
    "write_atomically",
    "write_error",
    "writer_pid",
]


def _same_or_inside(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def _real(path: Path) -> str:
    """The resolved path, resolving the parent only when `path` itself is a link or missing."""
    if path.is_symlink() or not path.exists():
        return os.path.join(os.path.realpath(path.parent), path.name)
    return os.path.realpath(path)


def _check_not_input(target: Path, inputs: Sequence[Path]) -> None:
    real = _real(target)
    for src in inputs:
        src_real = os.path.realpath(src)
        if _same_or_inside(src_real, real):
            raise KtraceError(
                f"{target}: is the input {src}{'' if src_real == real else ' or holds it'}; write the output elsewhere",
                ExitCode.USAGE,
            )
        if src.is_dir() and _same_or_inside(real, src_real) and (src / "meta.json").exists():
            raise KtraceError(f"{target}: is inside the input store {src}; write the output elsewhere", ExitCode.USAGE)


def check_target(target: Path, fmt: OutputFormat, *, force: bool, inputs: Sequence[Path] = ()) -> bool:
    """Refuse (KtraceError) a target that must not be written; True when an existing output will be replaced.

    Raises:
        KtraceError: the target is a link, not a regular file or folder, an input (or holds one, or sits
            inside an input store), exists without --force, or holds something ktrace did not write.
    """
    _check_not_input(target, inputs)
    if target.is_symlink():
        raise KtraceError(
            f"{target}: is a symbolic link; ktrace writes only to a plain path (give the link's target)", ExitCode.USAGE
        )
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise KtraceError(f"{target}: cannot be written ({exc.strerror})", ExitCode.FAILURE) from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise KtraceError(f"{target}: is not a regular file or folder; ktrace does not write to it", ExitCode.USAGE)
    if stat.S_ISDIR(mode) and not any(target.iterdir()):
        if not fmt.folder:
            raise KtraceError(f"{target}: is a folder; {fmt.what} is one file", ExitCode.USAGE)
        return True
    foreign = fmt.foreign_part(target)
    if not force:
        hint = "add --force to replace it" if foreign is None else "choose another output"
        raise KtraceError(f"{target}: exists ({hint})", ExitCode.USAGE)
    if foreign is not None:
        raise KtraceError(
            f"{target}: not replacing it, {foreign}: --force replaces only {fmt.what} written by ktrace", ExitCode.USAGE
        )
    return True


def write_error(exc: OSError, target: Path, kept: str = "nothing was written") -> KtraceError:
    """A one-line error for a failed write (disk full, permission, I/O)."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or "os error 28" in reason:
        reason = "disk full"
    return KtraceError(f"cannot write {target}: {reason}; {kept}", ExitCode.FAILURE)


def temp_sibling(target: Path, kind: str = "tmp") -> Path:
    """A fresh temporary name beside `target` that keeps its name's ending (so `.gz` still means gzip)."""
    return target.parent / f".ktrace-{kind}-{secrets.token_hex(4)}-{target.name}"


def _siblings(target: Path, kind: str) -> list[Path]:
    """The temp_sibling(target, kind) names that exist beside `target` (symbolic links left alone)."""
    name = re.compile(rf"^\.ktrace-{kind}-[0-9a-f]{{8}}-{re.escape(target.name)}$")
    return sorted(p for p in target.parent.iterdir() if name.match(p.name) and not p.is_symlink())


def _recover_moved_aside(target: Path) -> None:
    """A writer killed while publishing a folder can leave the previous output moved aside (`.ktrace-old-*`):
    with the target in place it is what was being deleted (finish that); without one it is the user's previous
    output, which is put back before the target is checked. We hold the target's lock: no writer is alive."""
    with contextlib.suppress(OSError):
        for entry in _siblings(target, "old"):
            if not entry.is_dir():
                continue
            if not target.exists() and not target.is_symlink():
                os.replace(entry, target)  # killed between the two renames of publish(): the old output returns
            else:
                shutil.rmtree(entry)


def remove_stale_temporaries(target: Path) -> None:
    """Remove what killed writers of `target` left beside it (we hold its lock: none of them is alive)."""
    with contextlib.suppress(OSError):
        for entry in _siblings(target, "tmp"):
            if (entry / CAPTURE_MARKER).exists():
                _keep_partial(entry, target)  # a killed `ktrace run --force`'s recording: the user's data
            else:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _keep_partial(folder: Path, target: Path) -> Path:
    """Move `folder` to NAME.partial (or NAME.partial-2, ...) beside `target`; the new path."""
    kept, n = target.with_name(f"{target.name}.partial"), 2
    while kept.exists() or kept.is_symlink():
        kept, n = target.with_name(f"{target.name}.partial-{n}"), n + 1
    os.replace(folder, kept)
    return kept


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def sync_filesystem(folder: Path) -> None:
    """Flush to disk every file written to the filesystem that holds `folder` (syncfs(2) on Linux; elsewhere each
    file under `folder` fsynced, as sync(2) may return before the data is written): one call makes a folder of
    files written unsynced durable (a folder import's ranks, 8 files each) where an fsync per file cost ~1 ms of
    disk wait apiece.

    Raises:
        OSError: the flush failed (an I/O error or a full disk found as the pages were written)."""
    if sys.platform.startswith("linux"):
        import ctypes  # (here: the traced processes import this module, and never sync)

        syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
        if syncfs is not None:
            fd = os.open(folder, os.O_RDONLY)
            try:
                if syncfs(fd) == 0:
                    return
                code = ctypes.get_errno()
            finally:
                os.close(fd)
            if code != errno.ENOSYS:
                raise OSError(code, os.strerror(code), str(folder))
    for parent, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(parent, name), "rb+") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(parent))  # its entries (the renames; a no-op where folders cannot be opened)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside `target` to write; it replaces `target` (fsynced first) only when the block ends
    without an error, and is removed otherwise. For writers that take a path (pyarrow, polars)."""
    path = Path(target)
    tmp = temp_sibling(path)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file that replaces `target` only when the block ends without an error."""
    with atomic_path(target) as tmp, tmp.open("xb") as f:
        yield f


def write_atomically(target: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `target`: all of it or, on any error, the old file untouched."""
    with atomic_file(target) as f:
        f.write(data)


class Output:
    """One output being written by a verb: checked, locked, staged, then published whole (or discarded).

    Files: write `target` with `atomic_file` (the exporters do). Folders: write into `staging`, then `publish()`.
    Use as a context manager: a normal exit publishes, an error discards what was staged; an OSError becomes
    a one-line KtraceError that says the old output was kept. The target is checked once, under the lock, when
    the Output is made: a verb makes it before its long work (inside `preparing()`), so a refused target costs
    nothing.

    Args:
        target: the output path.
        fmt: its format (which existing outputs --force may replace).
        force: replace an existing output ktrace wrote.
        inputs: paths the verb reads: never written over, never inside the output.
        in_place: folders: when the target does not exist yet, write into it directly (`ktrace run`, whose
            traced processes write while the command runs); an existing one is still replaced only when done.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        fmt: OutputFormat,
        *,
        force: bool = False,
        inputs: Sequence[Path] = (),
        in_place: bool = False,
    ) -> None:
        self.target, self.fmt = Path(target), fmt
        self._lock = OutputLock(self.target)
        self._done = False
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError as exc:  # mkdir(exist_ok=True) says so of a file where a folder must be
            raise KtraceError(
                f"cannot create the folder of {self.target}: {exc.filename}: Not a directory", ExitCode.FAILURE
            ) from None
        except OSError as exc:
            reason = "Not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc  # a file on the way
            raise KtraceError(f"cannot create the folder of {self.target}: {reason}", ExitCode.FAILURE) from None
        try:
            self._lock.acquire()
        except LockFileError:
            check_target(self.target, fmt, force=force, inputs=inputs)  # a target never to be written says why
            raise
        try:
            _recover_moved_aside(self.target)
            self.replaces = check_target(self.target, fmt, force=force, inputs=inputs)  # once, as it is while held
            remove_stale_temporaries(self.target)
            self.in_place = in_place and fmt.folder and not self.replaces
            self.staging = self.target if self.in_place or not fmt.folder else temp_sibling(self.target)
            if fmt.folder:
                self.staging.mkdir()
        except BaseException:
            self._lock.release()
            raise

    @contextlib.contextmanager
    def preparing(self) -> Iterator[None]:
        """The work before writing (a long import or analysis), done while the lock is held: an error in it
        discards the output and propagates unchanged (an OSError reading the input is not a failed write)."""
        try:
            yield
        except BaseException:
            self.discard()
            raise

    def publish(self) -> Path:
        """Put the staged folder in place of the target (the old one is removed after); release the lock."""
        try:
            if self.fmt.folder and self.staging != self.target:
                _fsync_dir(self.staging)
                old = None
                if self.target.exists():
                    old = temp_sibling(self.target, "old")  # not a stale temporary: never removed unseen
                    os.replace(self.target, old)
                os.replace(self.staging, self.target)
                _fsync_dir(self.target.parent)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            self._done = True
        finally:
            self._lock.release()
        return self.target

    def discard(self) -> None:
        """Remove what was staged (a temporary folder, or the in-place folder this Output created); release."""
        try:
            if self.fmt.folder and not self._done:
                shutil.rmtree(self.staging, ignore_errors=True)
            self._done = True
        finally:
            self._lock.release()

    def keep(self) -> None:
        """Keep the staged folder (a capture worth keeping) under a visible name beside the target when it was
        a temporary one (NAME.partial, NAME.partial-2, ...); release the lock."""
        try:
            if self.fmt.folder and self.staging != self.target and self.staging.exists():
                self.staging = _keep_partial(self.staging, self.target)
            self._done = True
        finally:
            self._lock.release()

    def __enter__(self) -> Output:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._done:
            return
        if kind is None:
            self.publish()
            return
        self.discard()
        if isinstance(exc, OSError):
            kept = "the old output is kept" if self.replaces else "nothing was written"
            raise write_error(exc, self.target, kept) from None
