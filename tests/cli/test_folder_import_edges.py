"""`ktrace import DIR` rank by rank on the folders a user really has: symbolic links to rank files, long non-ASCII
names, files rewritten between two runs, secrets in file names (issue 27 section 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.cli import main
from ktrace.fleet.folder_import import resume_folder
from ktrace.model import store

DLRM = fixture_path("dlrm")


def _ranks(folder: Path, n: int = 3) -> list[Path]:
    """The first `n` DLRM rank files copied into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy(src, folder / src.name)) for src in sorted(DLRM.glob("worker*.json.gz"))[:n]]


def _import(folder: Path, out: Path, *extra: str) -> int:
    return main(["import", str(folder), "-o", str(out), "--workers", "1", "--no-progress", *extra])


def test_a_symlinked_rank_file_is_imported(tmp_path: Path) -> None:
    """The task named the link's target, the resume entry the link: "its imported partition vanished", every time."""
    folder = tmp_path / "job"
    files = _ranks(folder)
    elsewhere = tmp_path / "elsewhere" / "the-real-rank1.json.gz"
    elsewhere.parent.mkdir()
    files[1].rename(elsewhere)
    files[1].symlink_to(Path("..") / "elsewhere" / elsewhere.name)
    out = tmp_path / "job.ktrace"
    assert _import(folder, out) == 0
    assert sorted(rank for _, rank, _ in store.partitions(out)) == [0, 1, 2]
    assert not resume_folder(out).exists()


def test_a_long_non_ascii_rank_file_name_is_imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """123 characters but 238 bytes: its entry's temporary name (`.ktrace-tmp-XXXXXXXX-file=` + the name) went over
    the file system's 255 bytes: "File name too long", and the resume folder stayed behind."""
    folder = tmp_path / "job"
    files = _ranks(folder)
    long_name = folder / ("é" * 115 + ".json.gz")
    files[2].rename(long_name)
    assert len(long_name.name) <= 200 < len(long_name.name.encode())
    out = tmp_path / "job.ktrace"
    assert _import(folder, out) == 0, capsys.readouterr().err
    assert sorted(rank for _, rank, _ in store.partitions(out)) == [0, 1, 2]
    assert not resume_folder(out).exists()
