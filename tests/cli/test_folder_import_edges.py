"""`ktrace import DIR` rank by rank on the folders a user really has: symbolic links to rank files, long non-ASCII
names, files rewritten between two runs, secrets in file names (issue 27 section 2)."""

from __future__ import annotations

import json
import os
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


def _rank_file(path: Path, rank: int, kernel: str) -> None:
    """A small Kineto rank file (under content_digest's span: a change anywhere in it is seen)."""
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 1000, "dur": 2},
        {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 1005, "dur": 4},
    ]
    events[0]["args"] = {"correlation": 100, "cbid": 211}
    events[1]["args"] = {"correlation": 100, "device": 0, "stream": 7}
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 3}, "traceEvents": events}
    path.write_text(json.dumps(doc))


def _interrupted_at_the_third_rank(folder: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Import `folder` as if Ctrl-C came while its third rank was imported: the first two stay in the resume folder."""
    from ktrace.fleet import folder_import

    imported = folder_import.import_rank
    calls = []

    def interrupted_at_the_third(task: folder_import.RankTask) -> folder_import.RankImport:
        calls.append(task)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return imported(task)

    with monkeypatch.context() as patch:
        patch.setattr(folder_import, "import_rank", interrupted_at_the_third)
        assert _import(folder, out) == 130


def test_resume_imports_again_a_rank_file_rewritten_with_the_same_size_and_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, out = tmp_path / "job", tmp_path / "job.ktrace"
    folder.mkdir()
    files = [folder / f"rank{r}.json" for r in range(3)]
    for rank, path in enumerate(files):
        _rank_file(path, rank, f"gemm_{rank}")
    _interrupted_at_the_third_rank(folder, out, monkeypatch)
    assert len(list(resume_folder(out).iterdir())) == 2  # ranks 0 and 1 kept
    stat = files[0].stat()
    _rank_file(files[0], 0, "conv_0")  # rewritten: the same size, then the same mtime
    assert files[0].stat().st_size == stat.st_size
    os.utime(files[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    capsys.readouterr()
    assert _import(folder, out) == 0
    names = sorted(store.read(out).kernels["name"].cast(str).to_list())
    assert names == ["conv_0", "gemm_1", "gemm_2"]  # the old entry of rank 0 (gemm_0) was reused
    assert "resumed: 1 rank file(s) kept from the interrupted import" in capsys.readouterr().out


SECRET = "hunter2SECRETvalue"


def _files_holding(root: Path, text: str) -> list[str]:
    """Every file or folder under `root` whose name or bytes hold `text`."""
    found = []
    for path in sorted(root.rglob("*")):
        if text in path.name or (path.is_file() and text.encode() in path.read_bytes()):
            found.append(str(path.relative_to(root)))
    return found


def test_no_rank_file_name_secret_reaches_the_store_or_the_resume_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """partition.json held the import record with the file name as it was (`--password=X.json.gz`) while meta.json
    had it redacted; the resume folder's entries were named after it."""
    folder, out = tmp_path / "job", tmp_path / "job.ktrace"
    folder.mkdir()
    names = [f"a-run --password={SECRET}.json", "rank1.json", "rank2.json"]  # (the secret one is resumed)
    for rank, name in enumerate(names):
        _rank_file(folder / name, rank, f"gemm_{rank}")
    _interrupted_at_the_third_rank(folder, out, monkeypatch)
    assert len(list(resume_folder(out).iterdir())) == 2
    assert _files_holding(resume_folder(out), SECRET) == []
    assert _import(folder, out) == 0
    resumed = store.read(out)
    assert resumed.kernels.height == 3
    assert _files_holding(out, SECRET) == []
    assert _import(folder, out, "--force") == 0  # counted as when nothing is resumed
    assert store.read(out).meta.health["secrets_scrubbed"] == resumed.meta.health["secrets_scrubbed"] > 0
