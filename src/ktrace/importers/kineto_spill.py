"""One big Kineto file opened in bounded memory: imported into a temporary store as it is read, then read back.

`load(FILE)` (every reading verb, `ktrace.open`) builds a Kineto file's trace in memory while its tables stay under
SPILL_BYTES (96 MiB) of columns, as it always did (fastest for most traces). Once they pass it, the rest of the file is
written as it is read into a store under the temporary folder (`$TMPDIR`, else the system's), the streaming import
of `ktrace import FILE` (kineto_streaming.import_or_spill), and the verb reads that store as it reads any store:
decoding the file no longer holds the whole file's columns (`ktrace info` of 20 M small kernel events: 1.5 GB in
memory, ~0.5 GB spilled), and `ktrace info` answers from the store's footers without reading its rows.

The temporary store is private to the user (mode 0700), named after the process (`ktrace-open-<pid>-<random>`),
and removed when the verb is done with it, also on an error or Ctrl-C; one left by a killed process is removed by
the next Kineto file opened (a listing of the temporary folder). A full disk is one line naming the folder and
$TMPDIR, exit code 1. Where the temporary folder is a tmpfs (often /tmp), the spilled store lives in memory as
shared pages: point $TMPDIR to a disk for the bound to hold.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ktrace.importers.kineto_combine import release_memory
from ktrace.importers.kineto_streaming import Imported, import_or_spill
from ktrace.model.errors import ExitCode, KtraceError, ProgressFn, no_progress
from ktrace.model.trace import Trace

SPILL_ENV = "KTRACE_SPILL_BYTES"
SPILL_BYTES = 96 << 20
"""Bytes of decoded columns past which a Kineto file is read through a temporary store (SPILL_ENV overrides).

Measured (`ktrace info`, whole process, owlv2 tiled; ~47 B of columns an event): in memory the peak grows with the
file (x10, 61 MB of columns: 364 MB; x30, 186 MB: 482 MB; 20 M small kernels: 1.5 GB); spilled it is flat but
for the first flush, which builds everything held so far at once (x30 spilled at 48 / 96 / 128 MiB: 397 / 451 /
512 MB). Spilling costs ~13 % more CPU (the store written and read back: x10 summary 6.2-6.5 vs 5.4-5.8 s), so
the tiled x10 traces (<= 61 MB) stay in memory and the peak stays under ~450 MB either way."""
TEMP_PREFIX = "ktrace-open-"


def spill_bytes() -> int:
    """SPILL_BYTES, or the value of $KTRACE_SPILL_BYTES (read on each call).

    Raises:
        KtraceError: the variable is not a whole number of bytes (exit code 2)."""
    text = os.environ.get(SPILL_ENV, "").strip()
    if not text:
        return SPILL_BYTES
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise KtraceError(f"{SPILL_ENV}={text!r}: expected a number of bytes (0 or more)", ExitCode.USAGE)
    return value


@contextmanager
def kineto_opened(path: Path, *, progress: ProgressFn = no_progress, with_ops: bool = True) -> Iterator[Trace | Path]:
    """The Kineto file `path` as a Trace built in memory (a file under SPILL_BYTES of columns), or as the path of
    the temporary store it was written to, which is removed when the block ends.

    Raises:
        TraceFormatError: the file is not a readable Kineto trace (one line, exit code 3).
        KtraceError: the temporary folder is full or cannot be written (exit code 1).
    """
    folder = Path(tempfile.gettempdir())
    root = folder / f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"  # the store, made at the first write
    try:
        _remove_abandoned(folder)
        try:
            result = import_or_spill(path, root, progress=progress, with_ops=with_ops, spill_above=spill_bytes())
        except OSError as exc:
            if not _full(exc) and not str(exc.filename or "").startswith(str(root)):
                raise
            raise _write_error(exc, path, folder) from None
        if isinstance(result, Imported):
            del result
            release_memory()  # (the import's freed columns, before the store is read)
            yield root
        else:
            yield result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def load_kineto_file(path: Path, *, progress: ProgressFn = no_progress, with_ops: bool = True) -> Trace:
    """The trace of one Kineto file, equal to `import_kineto(path)`: built in memory, or read back from the
    temporary store it was written to when it is big (see the module docstring)."""
    with kineto_opened(path, progress=progress, with_ops=with_ops) as opened:
        if isinstance(opened, Trace):
            return opened
        from ktrace.model.store import read  # (only for a spilled file: a small one never imports the store)

        return read(opened)


def _full(exc: OSError) -> bool:
    """Whether `exc` says the disk is full (Arrow's writers say it only in their message)."""
    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc) or "os error 28" in str(exc)


def _write_error(exc: OSError, path: Path, folder: Path) -> KtraceError:
    """One line for an OSError while writing the temporary store (disk full, permission)."""
    why = "the disk is full" if _full(exc) else (exc.strerror or str(exc))
    return KtraceError(
        f"{path.name}: a big trace is read through a temporary store in {folder}, which cannot be written ({why}); "
        "point $TMPDIR to a folder with room (a few bytes per event), or import it first: ktrace import FILE -o "
        "OUT.ktrace",
        ExitCode.FAILURE,
    )


def _remove_abandoned(folder: Path) -> None:
    """Remove the temporary stores of this user's ktrace processes that no longer run (killed while reading)."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)]
    except OSError:
        return
    if not names:
        return
    from ktrace.model.live import pid_alive

    for name in names:
        pid_text = name.removeprefix(TEMP_PREFIX).partition("-")[0]
        candidate = folder / name
        try:
            mine = candidate.lstat().st_uid == os.getuid() and candidate.is_dir() and not candidate.is_symlink()
        except OSError:
            continue
        if mine and pid_text.isdigit() and int(pid_text) != os.getpid() and not pid_alive(int(pid_text)):
            shutil.rmtree(candidate, ignore_errors=True)
