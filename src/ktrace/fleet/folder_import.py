"""`ktrace import DIR`: a folder of per-rank Kineto files imported rank by rank on an engine, resumable.

Each rank file is one task (`rank_import.import_rank`) that writes its partition into a resume folder beside the
output (`.ktrace-resume-NAME`, one complete `file=<name>` entry per rank) and returns only metadata; the client
merges the metadata (ranks, health, notes, job: what `importers.kineto` does for the one-process folder import),
moves the partitions into the output's staging folder, flushes the store to disk once (syncfs: the tasks write
unsynced), writes meta.json and publishes through `model.outputs`.
Interrupted, the resume folder keeps the ranks that were complete; the same command resumes (an entry is kept
when its source's size, mtime and the digest of its two ends, the options and the scrub rules are unchanged, and
each of its tables reads whole with the rows its record counts: what a power loss cut short or left unwritten
is imported again), `--force` starts over. On a Dask cluster each task flushes its own entry (the client's flush
reaches its own machine only).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ktrace.fleet.engines import BYTES_PER_WORKER as BYTES_PER_WORKER  # (its home before: re-exported)
from ktrace.fleet.engines import Engine, auto_workers, check_engine_options, open_engine
from ktrace.fleet.rank_import import RankImport, RankTask, clock_inputs, entry_partition, import_rank, read_entry
from ktrace.importers.kineto import assign_ranks, folder_meta, skip_reason
from ktrace.importers.kineto_file_meta import RankFile
from ktrace.importers.kineto_limits import file_caps
from ktrace.importers.kineto_stream import kineto_files
from ktrace.model.clock_estimate import estimate_offsets
from ktrace.model.errors import ExitCode, KtraceError, ProgressFn, TraceFormatError, no_progress
from ktrace.model.layout import partition_dir
from ktrace.model.outputs import STORE, Output, sync_filesystem
from ktrace.model.scrub import scrub_meta
from ktrace.model.secrets import scrub_text
from ktrace.model.store import write_meta
from ktrace.model.trace import TraceMeta

RESUME_PREFIX = ".ktrace-resume-"


@dataclass(frozen=True)
class FolderImport:
    """What the import wrote: the store's meta, rows per table, ranks, and how many ranks a previous run kept."""

    meta: TraceMeta
    counts: dict[str, int]
    ranks: int
    resumed: int
    engine: str
    workers: int


def resume_folder(target: Path) -> Path:
    """Where the complete ranks of an import into `target` wait for the rest (beside it, under its lock)."""
    return target.parent / f"{RESUME_PREFIX}{target.name}"


ENTRY_NAME_BYTES = 200
"""A rank file's entry is `file=<its name>` up to this many bytes (the prefix counted), else `file=<sha256>`: the
entry's temporary name adds 21 bytes (`.ktrace-tmp-XXXXXXXX-`) and a name may have 255 (a name of 123 characters
was 238 bytes of UTF-8: "File name too long")."""


def _entry_name(source: Path) -> str:
    """`file=<name>`, or `file=<sha256 of name>` for a long name or one that holds a secret (no secret on disk)."""
    name = os.fsencode(source.name)
    entry = b"file=" + name
    if len(entry) <= ENTRY_NAME_BYTES and scrub_text(source.name)[0] == source.name:
        return os.fsdecode(entry)
    return f"file={hashlib.sha256(name).hexdigest()}"


def import_folder(
    folder: str | os.PathLike[str],
    output: Output | str | os.PathLike[str],
    *,
    with_ops: bool = True,
    force: bool = False,
    workers: int | None = None,
    cluster: str | object | None = None,
    progress: ProgressFn = no_progress,
    engine: Engine | None = None,
    files: Sequence[Path] | None = None,
) -> FolderImport:
    """Import the per-rank Kineto files of `folder` into `output` (a path, or an `Output` the caller checked and
    locked), one task per file on the engine `open_engine(workers=, cluster=)` picks; publish it when every rank is
    written. `cluster`: a scheduler address, a dask Client, or a cluster object (LocalCluster, SLURMCluster).
    `engine`: one the caller opened (and closes) instead, e.g. with its workers started early (`warm_up`).
    `files`: the folder's `kineto_files`, when the caller listed them already (`importers.locate_listed`).

    Raises:
        TraceFormatError: no Kineto file in `folder`, or none readable (one line, exit 3).
        KtraceError: a task failed for another reason (naming the file)."""
    folder = Path(folder)
    if not isinstance(output, Output):
        output = Output(Path(output), STORE, force=force, inputs=[folder])
    try:
        with output.preparing():  # an error or Ctrl-C: nothing published, the lock released, finished ranks kept
            check_engine_options(workers, cluster)  # also when every rank is resumed and no engine opens
            listed = kineto_files(folder) if files is None else list(files)
            found = _import_ranks(
                listed,
                folder,
                output.target,
                with_ops,
                force,
                progress,
                workers=workers,
                cluster=cluster,
                engine=engine,
            )
            meta, counts, ranks = _stage(folder, found, resume_folder(output.target), output)
    except BaseException:
        with contextlib.suppress(OSError):
            resume_folder(output.target).rmdir()  # only if no rank was kept in it
        raise
    output.publish()
    shutil.rmtree(resume_folder(output.target), ignore_errors=True)
    return FolderImport(meta, counts, ranks, found.resumed, found.engine, found.workers)


@dataclass(frozen=True)
class _Ranks:
    files: list[Path]
    records: list[RankImport]
    """One per file, in the same order."""
    resumed: int
    engine: str
    workers: int


def _import_ranks(
    files: list[Path],
    folder: Path,
    target: Path,
    with_ops: bool,
    force: bool,
    progress: ProgressFn,
    *,
    workers: int | None,
    cluster: str | object | None,
    engine: Engine | None,
) -> _Ranks:
    """The record of every rank file `files` of `folder`, in file order: kept from the resume folder, or imported
    on `engine`, or on one opened here with `workers` and `cluster`."""
    if not files:
        raise TraceFormatError(f"{folder}: no Kineto trace (.json or .json.gz) in this folder")
    resume = resume_folder(target)
    _check_resume_folder(resume)
    if force:
        shutil.rmtree(resume, ignore_errors=True)
    resume.mkdir(exist_ok=True)
    records, todo = _scan_resume(resume, files, with_ops)
    resumed = len(records)
    sizes = [p.stat().st_size for p in files]
    total = sum(sizes)
    done = sum(sizes[i] for i in records)
    progress(done, total)
    name, count = "in-process", 1
    if todo:
        caps = file_caps()
        todo.sort(key=lambda i: -sizes[i])  # largest first: the last tasks, which end the import, are the shortest
        with contextlib.ExitStack() as stack:
            if engine is None:
                if workers is None and cluster is None:
                    workers = auto_workers([sizes[i] for i in todo])
                # this process imports ranks too: it has the importer loaded while a worker process starts (~0.5 s)
                engine = stack.enter_context(
                    open_engine(workers=workers, cluster=cluster, tasks=len(todo), in_client=True)
                )
            name, count = engine.name, engine.workers
            # (absolute, not resolved: a rank file that is a symbolic link keeps its own name, which names its entry)
            tasks = [
                RankTask(str(files[i].absolute()), str(resume / _entry_name(files[i])), with_ops, caps, name == "dask")
                for i in todo
            ]
            for index, record in engine.map(import_rank, tasks, describe=lambda task: Path(task.path).name):
                records[todo[index]] = record
                done += sizes[todo[index]]
                progress(done, total)
    return _Ranks(files, [records[i] for i in range(len(files))], resumed, name, count)


def _check_resume_folder(resume: Path) -> None:
    """Refuse a resume folder ktrace did not make (a link, a file, or a folder holding anything but rank entries
    and temporaries): its content is removed as the import goes, so it must be ktrace's own."""
    if resume.is_symlink() or (resume.exists() and not resume.is_dir()):
        raise KtraceError(f"{resume}: is not a folder ktrace made to resume an import; move it away", ExitCode.USAGE)
    for entry in resume.iterdir() if resume.is_dir() else ():
        if not entry.name.startswith(("file=", ".ktrace-tmp-")) or entry.is_symlink():
            raise KtraceError(
                f"{resume}: holds {entry.name}, which ktrace did not write there; move it away to import",
                ExitCode.USAGE,
            )


def _scan_resume(resume: Path, files: Sequence[Path], with_ops: bool) -> tuple[dict[int, RankImport], list[int]]:
    """The records of the entries a previous run completed for these files as they are now, and the files left
    to import. Everything else in the resume folder (temporaries of killed tasks, stale entries) is removed."""
    wanted = {_entry_name(path): i for i, path in enumerate(files)}
    records: dict[int, RankImport] = {}
    for entry in sorted(resume.iterdir()):
        index = wanted.get(entry.name)
        found = read_entry(entry) if index is not None and entry.is_dir() and not entry.is_symlink() else None
        if index is not None and found is not None and found[0].matches(files[index], with_ops):
            records[index] = found[0].of_file(files[index])
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return records, [i for i in range(len(files)) if i not in records]


def _stage(folder: Path, found: _Ranks, resume: Path, output: Output) -> tuple[TraceMeta, dict[str, int], int]:
    """Move each partition into the staging folder under its final rank, merge the records as the one-process
    folder import does and write meta.json; the store is on disk when this returns. (meta, rows per table, ranks
    with rows)."""
    records = found.records
    entries = [resume / _entry_name(path) for path, r in zip(found.files, records, strict=True) if not r.skipped]
    imported = [r for r in records if not r.skipped]
    skipped = [skip_reason(r.source, r.skipped) for r in records if r.skipped]
    if not imported:
        raise TraceFormatError(
            records[0].skipped if len(records) == 1 else f"{folder}: no readable Kineto trace ({skipped[0]})"
        )
    ranks, notes = assign_ranks([r.rank for r in imported], skipped)
    # the ranks' files (written unsynced, rank_import._write_entry) flushed once, in a thread while this one merges
    # the metadata; the partitions are moved only then, so that an interrupt or an error before it (Ctrl-C in
    # this serial tail, a failed flush) leaves every rank in the resume folder
    with ThreadPoolExecutor(max_workers=1) as pool:
        flushed = pool.submit(sync_filesystem, resume)
        metas = [
            TraceMeta(source="kineto", job=r.job, hosts=(r.node,), health=r.health, notes=r.notes) for r in imported
        ]
        infos = [RankFile(r.rank, r.rank_from, r.world_size, r.job) for r in imported]
        meta = _scrubbed_meta(folder_meta(folder, metas, infos, ranks, notes), imported)
        if len({r.node for r in imported}) > 1:  # ranks from 2+ hosts: one clock, applied when the store is read
            alignment = estimate_offsets(clock_inputs(imported, ranks))
            meta = dataclasses.replace(meta, clock_alignment=dataclasses.replace(alignment, applied=False))
        flushed.result()
    made: set[Path] = set()
    for record, rank, entry in zip(imported, ranks, entries, strict=True):
        # (each entry is whole: renamed into place by its task, or read back by _scan_resume); moved whole, it
        # leaves nothing to remove (512 emptied folders did: 0.05-1.2 s of disk waits on a loaded disk)
        part = entry_partition(entry)
        if part is None:
            raise TraceFormatError(f"{record.source}: its imported partition vanished; import again")
        target = partition_dir(output.staging, record.node, rank)
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        os.replace(part, target)
    sync_filesystem(output.staging)  # the moves (only the folders' metadata is left to flush now)
    write_meta(output.staging, meta, {r.node for r in imported})  # (fsynced itself)
    counts: dict[str, int] = {}
    for record in imported:
        for table, rows in record.counts.items():
            counts[table] = counts.get(table, 0) + rows
    return meta, counts, sum(1 for r in imported if any(r.counts.values()))  # ranks with rows, as Trace.ranks


def _scrubbed_meta(meta: TraceMeta, records: list[RankImport]) -> TraceMeta:
    """`meta` scrubbed, with the secrets count `scrub_trace` gives the merged trace: table values counted once
    per distinct value and column across ranks (by digest), hosts once per distinct host, notes per note."""
    meta, n_meta = scrub_meta(meta)
    columns: dict[str, dict[str, int]] = {}
    hosts: dict[str, int] = {}
    for record in records:
        for column, values in record.redacted.items():
            columns.setdefault(column, {}).update(values)
        hosts.update(record.host_redacted)
    count = sum(sum(values.values()) for values in columns.values())
    total = count + n_meta + sum(hosts.values()) + sum(r.notes_redacted for r in records)
    if not total:
        return meta
    notes = (f"{count} secret-looking value(s) redacted from names in the tables",) if count else ()
    return meta.with_health({"secrets_scrubbed": total}, notes)
