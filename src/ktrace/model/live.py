"""A store in progress: how to tell a capture `ktrace run` is still recording, and how much it has published.

A `ktrace run` capture is live while its root holds the capture marker (`.capture`), has no meta.json yet (the
launcher writes it last, when it finalizes) and someone still writes it: the launcher holds the store's output
lock, or a traced process that owns a partition runs on this host and has not closed it.

Each traced process publishes what it recorded every `--publish` seconds: its partition.json gains a
"published" object naming, per capture stream, how many bytes of it hold complete batches, and the time span of
those rows. A reader reads each stream only up to that length, so it never sees a half-written batch; the newest
record minus the first over every partition is how long the capture has recorded so far.

Stdlib only: the traced processes import the model, and every verb asks this before it reads anything.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ktrace.model.layout import META_FILE, PARTITION_META_FILE
from ktrace.model.outputs import CAPTURE_MARKER, writer_pid

__all__ = [
    "PUBLISHED_KEY",
    "LiveStatus",
    "Published",
    "live_capture_of",
    "live_status",
    "owner_pid",
    "pid_alive",
    "published",
    "recording_partitions",
]

PUBLISHED_KEY = "published"
"""The key of partition.json that holds what its process has published."""
OWNER_FILE = ".owner"
"""The pid of the traced process that claimed a partition (tracer.hook.claim_partition)."""


@dataclass(frozen=True)
class Published:
    """What one partition has published: complete bytes per stream, and the time span of those rows."""

    stream_bytes: Mapping[str, int]
    """Capture stream name (table) -> bytes of it that hold only complete batches."""
    first_ns: int | None
    """Earliest timestamp among the published rows (None: no timed row yet)."""
    last_ns: int | None
    """Latest timestamp (an end where rows have one) among the published rows."""
    at_ns: int
    """When it was published (CLOCK_REALTIME)."""

    def to_dict(self) -> dict[str, Any]:
        """The partition.json form."""
        return {
            "streams": dict(self.stream_bytes),
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "at_ns": self.at_ns,
        }

    @classmethod
    def from_dict(cls, raw: object) -> Published | None:
        """Parse the partition.json form; None when it is absent or malformed (the streams are read whole)."""
        if not isinstance(raw, dict):
            return None
        streams, first, last, at = raw.get("streams"), raw.get("first_ns"), raw.get("last_ns"), raw.get("at_ns")
        if not isinstance(streams, dict) or not all(_is_int(v) and v >= 0 for v in streams.values()):
            return None
        if not all(v is None or _is_int(v) for v in (first, last)) or not _is_int(at):
            return None
        return cls({str(k): int(v) for k, v in streams.items()}, first, last, int(at))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class LiveStatus:
    """A capture still being recorded, as published so far."""

    first_ns: int | None
    """Earliest published record over every partition (None: nothing timed published yet)."""
    last_ns: int | None
    """Newest published record over every partition."""
    published_ns: int | None
    """When the newest publication happened (None: no process has published yet)."""
    partitions: int
    """Partitions (traced processes, and the launcher's counters) present so far."""
    recording: int
    """Traced processes seen running on this host that have not closed their partition."""
    writer_pid: int | None
    """The `ktrace run` launcher holding the store (0: held, pid unknown; None: not held)."""

    @property
    def recorded_s(self) -> float:
        """Newest record minus first, in seconds (0 before anything timed was published)."""
        if self.first_ns is None or self.last_ns is None:
            return 0.0
        return max(0.0, (self.last_ns - self.first_ns) / 1e9)

    def lag_s(self, now_ns: int | None = None) -> float | None:
        """Seconds since the newest publication (None before the first)."""
        if self.published_ns is None:
            return None
        now = time.time_ns() if now_ns is None else now_ns
        return max(0.0, (now - self.published_ns) / 1e9)

    @property
    def line(self) -> str:
        """The words every verb shows: "live, 42 s recorded"."""
        return f"live, {self.recorded_s:.0f} s recorded"

    @property
    def note(self) -> str:
        """One line for a trace's notes: the status, and that the view is of what was published so far."""
        who = f" (pid {self.writer_pid})" if self.writer_pid else ""
        return (
            f"{self.line}: `ktrace run`{who} is still recording; this is what it had published when read "
            "(read it again for more)"
        )


def published(partition: Path) -> Published | None:
    """What the partition folder's process has published (None: nothing yet, or a tracer that does not publish)."""
    raw = _json_object(partition / PARTITION_META_FILE)
    return None if raw is None else Published.from_dict(raw.get(PUBLISHED_KEY))


def live_status(path: str | os.PathLike[str]) -> LiveStatus | None:
    """The status of a capture `ktrace run` is still recording at `path`; None for anything else (a finished
    store, an interrupted capture nobody writes any more, a file, a missing path). Reads a few small files;
    never writes."""
    root = Path(path)
    if not (root / CAPTURE_MARKER).is_file() or (root / META_FILE).exists():
        return None
    folders = list(_partition_folders(root))
    recording = sum(_owner_recording(folder) for folder in folders)
    pid = writer_pid(root)
    if pid is None and not recording:
        return None
    pubs = [p for p in map(published, folders) if p is not None]
    firsts = [p.first_ns for p in pubs if p.first_ns is not None]
    lasts = [p.last_ns for p in pubs if p.last_ns is not None]
    return LiveStatus(
        first_ns=min(firsts) if firsts else None,
        last_ns=max(lasts) if lasts else None,
        published_ns=max((p.at_ns for p in pubs), default=None),
        partitions=len(folders),
        recording=recording,
        writer_pid=pid,
    )


def live_capture_of(path: str | os.PathLike[str]) -> Path | None:
    """The live capture that `ktrace run -o PATH` records: PATH itself, or, under `--force` (the old store stays in
    place until the new one is complete), the temporary folder beside it that it records into. None: neither."""
    target = Path(path)
    if live_status(target) is not None:
        return target
    if not (target / META_FILE).exists() or writer_pid(target) is None:
        return None
    try:
        staged = sorted(target.parent.glob(f".ktrace-tmp-*-{target.name}"))
    except OSError:
        return None
    return next((folder for folder in staged if live_status(folder) is not None), None)


def recording_partitions(root: Path) -> list[Path]:
    """The partition folders whose traced process runs on this host and has not closed its partition yet."""
    return [folder for folder in _partition_folders(root) if _owner_recording(folder)]


def _partition_folders(root: Path) -> Iterator[Path]:
    """node=*/rank=* folders (names not checked here: store.read checks them)."""
    try:
        for node in sorted(root.glob("node=*")):
            for rank in sorted(node.glob("rank=*")):
                if rank.is_dir() and not rank.is_symlink():
                    yield rank
    except OSError:
        return


def owner_pid(folder: Path) -> int | None:
    """The pid of the traced process that claimed the partition folder (None: no owner recorded)."""
    try:
        return int((folder / OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _owner_recording(folder: Path) -> bool:
    """True when the partition's owner runs on this host and has not closed its partition."""
    pid = owner_pid(folder)
    if pid is None:
        return False
    meta = _json_object(folder / PARTITION_META_FILE)
    health = meta.get("health") if meta is not None else None
    if isinstance(health, dict) and not health.get("processes_not_closed"):
        return False  # closed (a final partition.json), or none written yet: then its pid decides
    return pid_alive(pid)


def pid_alive(pid: int) -> bool:
    """True while `pid` runs on this host (a zombie waiting for its parent counts as ended)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, owned by someone else
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[:1] not in ([b"Z"], [b"X"])
    except OSError:
        return True


def _json_object(path: Path) -> dict[str, Any] | None:
    """A small JSON object file (written atomically by its writer), or None when absent or unreadable."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as f:
            value = json.loads(f.read(1 << 20))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
