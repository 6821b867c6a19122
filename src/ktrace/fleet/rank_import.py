"""One rank file of a folder imported by one task: its partition written to disk, only small metadata returned.

The task (`import_rank`, run by any engine) decodes one Kineto file, scrubs its tables, writes the rank's
partition (its `<table>.parquet` files, those `store.write` writes under node=<host>/rank=<r>) into a folder under a
temporary name and renames it into place whole, with a `partition.json` that records the source's size, mtime and content_digest (a re-run keeps a
partition whose source did not change). What it returns (`RankImport`) is a few hundred bytes: the client of a
4,096-rank job holds that per rank, never a rank's rows.

Scrubbing equals the one-process import's exactly: that one scrubs the merged trace by distinct value per column,
so each task reports the digests of the values it redacted (never the values) and the client counts the union.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ktrace.importers.kineto import import_rank_file
from ktrace.importers.kineto_limits import file_caps
from ktrace.model.clock_estimate import COLLECTIVE_COLUMNS, RankClockInput, rank_clock_input
from ktrace.model.errors import ExitCode, KtraceError, TraceFormatError
from ktrace.model.layout import PARTITION_META_FILE
from ktrace.model.scrub import mark_scrubbed, rules_fingerprint
from ktrace.model.secrets import scrub_mapping, scrub_strings, scrub_text
from ktrace.model.store import write_partition
from ktrace.model.store_checks import load_json_object
from ktrace.model.string_columns import map_distinct_strings
from ktrace.model.trace import Trace, TraceMeta

IMPORT_KEY = "import"
"""partition.json key of the import record (the store's reader merges only "health" and "notes")."""


@dataclass(frozen=True)
class RankTask:
    """One file to import into the folder `entry` (created whole by rename). Paths as text: they travel."""

    path: str
    entry: str
    with_ops: bool = True
    caps: dict[str, int] = field(default_factory=dict)
    """The client's file caps (kineto_limits.file_caps): a worker that read others from its environment refuses."""
    durable: bool = False
    """Flush the entry's files before its rename (each file fsynced): on a Dask cluster, whose workers' page
    caches the client's one flush before publishing does not reach."""


@dataclass(frozen=True)
class RankImport:
    """What a task returns: the rank's place in the job, counts, health and notes (scrubbed), and what was
    scrubbed (digests). `skipped` is the reason when the file is not a readable trace (no partition then)."""

    source: str
    """The file's name (scrubbed in the record on disk, as the job's `files`: see `on_disk` and `of_file`)."""
    size: int
    mtime_ns: int
    with_ops: bool
    rules: str | None
    content: str = ""
    """content_digest of the source when it was imported (a rewrite keeping size and mtime is seen)."""
    node: str = ""
    rank: int = 0
    rank_from: str = ""
    world_size: int | None = None
    job: dict[str, Any] = field(default_factory=dict)
    health: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    redacted: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per "table/text column number": {digest of a redacted value: secrets in it}."""
    host_redacted: dict[str, int] = field(default_factory=dict)
    notes_redacted: int = 0
    skipped: str = ""
    collectives: list[list[Any]] = field(default_factory=list)
    """The rank's NCCL collective kernels as [name, group, seq, end_ns] rows (model.clock.COLLECTIVE_COLUMNS,
    names scrubbed): the clock estimator's input, so the client aligns hosts without reading any partition."""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values (partition.json)."""
        return {**dataclasses.asdict(self), "notes": list(self.notes)}

    def on_disk(self) -> RankImport:
        """The record as written to disk: the file's name scrubbed where it stands (source, the job's files), as
        the task scrubbed every other string of it. (A secret in a rank file's name stayed in partition.json.)"""
        job, _ = scrub_mapping(self.job)
        return dataclasses.replace(self, source=scrub_text(self.source)[0], job=job)

    def of_file(self, path: Path) -> RankImport:
        """A record read from disk that `matches` the file `path`, with its name back where `on_disk` scrubbed it
        (the client counts the secrets of the merged meta, as the one-process import does)."""
        job = {**self.job, "files": [path.name]} if "files" in self.job else self.job
        return dataclasses.replace(self, source=path.name, job=job)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RankImport:
        """Read a record written by `to_json`; TypeError/ValueError if it is not one."""
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            raise ValueError("not an import record")
        record = cls(**{**data, "notes": tuple(data.get("notes", ()))})
        if not (isinstance(record.source, str) and isinstance(record.size, int) and isinstance(record.rank, int)):
            raise ValueError("not an import record")
        return record

    def matches(self, path: Path, with_ops: bool) -> bool:
        """True if this record was made from `path` as it is now, with the same options and scrub rules."""
        try:
            st = path.stat()
        except OSError:
            return False
        now = (scrub_text(path.name)[0], st.st_size, st.st_mtime_ns)  # (a record read from disk: see on_disk)
        same_source = (self.source, self.size, self.mtime_ns) == now
        if not (same_source and self.with_ops == with_ops and self.rules == rules_fingerprint() and not self.skipped):
            return False
        try:
            return self.content == content_digest(path, st.st_size)
        except OSError:
            return False


def clock_inputs(records: Sequence[RankImport], ranks: Sequence[int]) -> list[RankClockInput]:
    """The clock estimator's input of each record, under its final rank in `ranks`: every record's rows made one
    frame and cut by record (a frame built per record, Categorical each, took ~0.1 s of the client at 256 ranks)."""
    rows = [row for record in records for row in record.collectives]
    owners = pl.Series("owner", [i for i, record in enumerate(records) for _ in record.collectives], pl.Int32)
    plain = {name: pl.String if dtype == pl.Categorical else dtype for name, dtype in COLLECTIVE_COLUMNS.items()}
    frame = pl.DataFrame(rows, schema=plain, orient="row").cast(COLLECTIVE_COLUMNS)  # type: ignore[arg-type]
    pieces = frame.with_columns(owners).partition_by("owner", as_dict=True, include_key=False, maintain_order=True)
    empty = frame.clear()
    return [
        RankClockInput(node=record.node, rank=rank, collectives=pieces.get((i,), empty))
        for i, (record, rank) in enumerate(zip(records, ranks, strict=True))
    ]


DIGEST_SPAN = 1 << 16
"""content_digest reads this many bytes at each end of a file (a gzip file's last 8 hold the CRC of all of it)."""


def content_digest(path: Path, size: int) -> str:
    """A digest of the first and last DIGEST_SPAN bytes of `path` and its `size`."""
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        h.update(f.read(DIGEST_SPAN))
        if size > DIGEST_SPAN:
            f.seek(max(DIGEST_SPAN, size - DIGEST_SPAN))
            h.update(f.read(DIGEST_SPAN))
    return h.hexdigest()[:32]


def digest(value: str) -> str:
    """A redacted value's digest: equal values count once across ranks, and no secret is written to disk."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def import_rank(task: RankTask) -> RankImport:
    """Import `task.path` and write its partition into `task.entry` (whole, or nothing); return its record."""
    _check_caps(task.caps)
    path, entry = Path(task.path), Path(task.entry)
    st = path.stat()
    content = content_digest(path, st.st_size)
    base = RankImport(path.name, st.st_size, st.st_mtime_ns, task.with_ops, rules_fingerprint(), content)
    try:
        trace, info = import_rank_file(path, with_ops=task.with_ops)
    except TraceFormatError as exc:
        return dataclasses.replace(base, skipped=str(exc))
    frames, redacted = _scrub_tables(trace)
    node, host_n = scrub_text(trace.meta.hosts[0] if trace.meta.hosts else "localhost")
    notes = [scrub_text(note) for note in trace.meta.notes]
    record = dataclasses.replace(
        base,
        node=node,
        rank=info.rank,
        rank_from=info.rank_from,
        world_size=info.world_size,
        job=dict(info.job),
        health=dict(trace.meta.health),
        notes=tuple(text for text, _ in notes),
        counts={name: frame.height for name, frame in frames.items()},
        redacted=redacted,
        host_redacted={digest(trace.meta.hosts[0]): host_n} if host_n else {},
        notes_redacted=sum(n for _, n in notes),
        collectives=_collective_rows(node, info.rank, frames["kernels"]),
    )
    trace = mark_scrubbed(Trace(**frames, meta=TraceMeta(source="kineto", hosts=(node,))))
    _write_entry(trace, entry, record, durable=task.durable)
    return record


def _check_caps(client: dict[str, int]) -> None:
    """A Dask worker does not see the client's environment: a cap raised there (KTRACE_MAX_EVENT_BYTES=...) must
    be raised on the workers too, else this worker would skip what the user asked to read."""
    mine = file_caps()
    differ = [name for name, value in sorted(client.items()) if mine.get(name) != value]
    if differ:
        name = differ[0]
        raise KtraceError(
            f"{name} is {client[name]} where ktrace import runs but {mine.get(name)} on worker {socket.gethostname()}: "
            "set it in the workers' environment too",
            ExitCode.USAGE,
        )


def _collective_rows(node: str, rank: int, kernels: pl.DataFrame) -> list[list[Any]]:
    """The rank's collectives (the clock estimator's input) as JSON rows."""
    rows = rank_clock_input(node, rank, kernels.drop("node", "rank", strict=False)).collectives.iter_rows()
    return [list(row) for row in rows]


def _scrub_tables(trace: Trace) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """Every table scrubbed as `scrub_trace` would, and the digests of what was redacted per text column."""
    frames: dict[str, Any] = {}
    redacted: dict[str, dict[str, int]] = {}
    for name in trace.counts():
        column = 0

        def changes_for(values: list[str], table: str = name) -> dict[str, str]:
            nonlocal column
            changes, _ = scrub_strings(values)
            if changes:
                redacted[f"{table}/{column}"] = {digest(v): scrub_text(v)[1] for v in changes}
            column += 1
            return changes

        frames[name] = map_distinct_strings(trace.table(name), changes_for)
    return frames, redacted


def _write_entry(trace: Trace, entry: Path, record: RankImport, *, durable: bool = False) -> None:
    """Write the rank's partition into a temporary folder beside `entry` and rename it to `entry` when complete:
    an interrupted task leaves only a `.ktrace-tmp-*` folder, which the next run removes.

    Nothing is fsynced here (it was 2 fsyncs a file, 18 a rank, ~1 ms each, a core idle): a killed process
    (Ctrl-C, kill -9, out of memory) leaves whole entries, the rename being atomic and the page cache the kernel's;
    after a power loss an entry may hold short or empty files, which `read_entry` refuses (each table's Parquet
    file must read whole with the rows its record counts), so the rank is imported again. The store is made durable
    once, before it is published (`folder_import`). `durable` (a Dask cluster's task): each file fsynced here."""
    tmp = entry.parent / f".ktrace-tmp-{secrets.token_hex(4)}-{entry.name}"
    try:
        try:
            write_partition(trace, tmp, durable=durable)
        except TraceFormatError as exc:
            raise TraceFormatError(f"{record.source}: {exc}") from None
        (tmp / PARTITION_META_FILE).write_bytes(_record_text(record))
        try:
            os.replace(tmp, entry)
        except OSError:
            if read_entry(entry) is None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # a cluster ran this task twice (a lost worker): one is enough
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _record_text(record: RankImport) -> bytes:
    return json.dumps({IMPORT_KEY: record.on_disk().to_json()}, indent=1, sort_keys=True).encode()


def read_entry(entry: Path) -> tuple[RankImport, Path] | None:
    """The record and partition folder of a complete entry, or None if it is not one (then it is rewritten): its
    partition.json reads, and each table it counts rows of has a Parquet file that reads whole with as many rows
    (a power loss may leave a file of the right size whose pages were never written: its footer alone reads)."""
    try:
        folder = entry_partition(entry)
        if folder is None:
            return None
        data = load_json_object(folder / PARTITION_META_FILE, PARTITION_META_FILE)
        record = RankImport.from_json(data[IMPORT_KEY])
        for table, rows in record.counts.items():
            if rows and pq.read_table(folder / f"{table}.parquet").num_rows != rows:
                return None
        return record, folder
    except (OSError, KeyError, TypeError, ValueError, TraceFormatError, pa.ArrowException):
        return None


def entry_partition(entry: Path) -> Path | None:
    """The partition folder of a rank's entry in the resume folder: the entry itself, whose files the client moves
    to node=<host>/rank=<r> of the store whole (nothing left to remove); None if it holds no partition.json (an
    entry of a ktrace before 2026-11-28 held node=/rank= folders: imported again)."""
    return entry if (entry / PARTITION_META_FILE).is_file() and not entry.is_symlink() else None
