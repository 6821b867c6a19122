"""`ktrace import DIR` resumes from what a power loss left: a rank's files are written unsynced (the store is
flushed once, before it is published), so an entry renamed into place can come back with short or empty files.
Such an entry is imported again; the others are kept, and the store equals the one-process import's."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from folder_imports import assert_same_store

from ktrace.cli import main
from ktrace.fleet.folder_import import resume_folder
from ktrace.fleet.rank_import import RankTask, import_rank, read_entry
from ktrace.importers.kineto_limits import file_caps


def _entries_of_a_finished_run(folder: Path, out: Path) -> list[Path]:
    """The resume folder a run killed after importing every rank leaves (the entries its tasks rename into place)."""
    resume = resume_folder(out)
    resume.mkdir()
    entries = []
    for path in sorted(folder.glob("*.json.gz")):
        entries.append(resume / f"file={path.name}")
        import_rank(RankTask(str(path.absolute()), str(entries[-1]), True, file_caps()))
    return entries


def _partition(entry: Path) -> Path:
    found = read_entry(entry)
    assert found is not None
    return found[1]


def test_entries_with_short_or_empty_files_are_imported_again(
    real_trace_path: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, out = tmp_path / "ranks", tmp_path / "job.ktrace"
    shutil.copytree(real_trace_path("dlrm"), folder)
    entries = _entries_of_a_finished_run(folder, out)
    assert len(entries) == 8 and all(read_entry(entry) is not None for entry in entries)
    kernels = _partition(entries[0]) / "kernels.parquet"
    kernels.write_bytes(kernels.read_bytes()[: kernels.stat().st_size // 2])  # its data half on disk
    (_partition(entries[1]) / "ops.parquet").write_bytes(b"")  # renamed in the journal, its data never written
    (_partition(entries[2]) / "memory.parquet").unlink()
    (_partition(entries[3]) / "partition.json").write_text('{"import": {')
    kernels = _partition(entries[4]) / "kernels.parquet"
    data = bytearray(kernels.read_bytes())
    data[8 : len(data) // 2] = bytes(len(data) // 2 - 8)  # the right size, its footer whole, its pages never written
    kernels.write_bytes(bytes(data))
    assert [read_entry(entry) is None for entry in entries] == [True] * 5 + [False] * 3

    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "--no-progress"]) == 0
    assert "resumed: 3 rank file(s) kept from the interrupted import" in capsys.readouterr().out
    assert not resume_folder(out).exists()
    assert_same_store(out, folder, tmp_path)


def test_an_interrupt_while_the_ranks_are_merged_keeps_every_rank(
    real_trace_path: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the client's serial tail (the metadata merged, the store flushed) loses no imported rank: the
    partitions leave the resume folder only after it, and the same command resumes from all of them."""
    from ktrace.fleet import folder_import

    folder, out = tmp_path / "ranks", tmp_path / "job.ktrace"
    shutil.copytree(real_trace_path("dlrm"), folder)
    merge = folder_import.folder_meta

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(folder_import, "folder_meta", interrupted)
    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "--no-progress"]) != 0
    assert not out.exists()
    kept = sorted(resume_folder(out).iterdir())
    assert len(kept) == 8 and all(read_entry(entry) is not None for entry in kept)
    monkeypatch.setattr(folder_import, "folder_meta", merge)
    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "--no-progress"]) == 0
    assert_same_store(out, folder, tmp_path)
