"""`ktrace import DIR --workers N`: rank by rank on an engine, equal to the one-process folder import (tables,
health, notes, scrubbing), and resumable: a killed import leaves no partition that opens as valid, the same command
resumes from the ranks it completed, --force starts over."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from folder_imports import assert_same_store

from ktrace.cli import main
from ktrace.fleet.folder_import import resume_folder
from ktrace.fleet.rank_import import read_entry
from ktrace.importers.kineto import import_kineto
from ktrace.model import store
from ktrace.testing.compare import assert_trace_equal
from ktrace.testing.secrets_corpus import TEXT_FORMS


def test_dlrm_with_two_workers_equals_the_one_process_import(
    real_trace_path: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, out = real_trace_path("dlrm"), tmp_path / "job.ktrace"
    assert main(["import", str(folder), "-o", str(out), "--workers", "2", "--no-progress"]) == 0
    assert f"wrote {out} (kineto, 8 ranks)" in capsys.readouterr().out
    assert sorted(rank for _, rank, _ in store.partitions(out)) == list(range(8))
    assert not resume_folder(out).exists()
    assert_same_store(out, folder, tmp_path)


def _rank_doc(rank: int) -> dict[str, Any]:
    """A small Kineto rank file whose kernel names and host name hold planted secrets (the same in every rank)."""
    texts = [p.text for p in TEXT_FORMS[:4]]
    events: list[dict[str, Any]] = []
    for i, text in enumerate([*texts, f"gemm_rank{rank}"]):
        ts = 1000 + 100 * i
        launch = {"correlation": 100 + i, "cbid": 211}
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2})
        events[-1].update(ts=ts, dur=2, args=launch)
        kernel = {"correlation": 100 + i, "device": 0, "stream": 7, "grid": [1, 1, 1], "block": [32, 1, 1]}
        events.append({"ph": "X", "cat": "kernel", "name": text, "pid": 0, "tid": 7, "ts": ts + 5, "dur": 4})
        events[-1]["args"] = kernel
    return {
        "schemaVersion": 1,
        "hostname": f"node-{texts[0]}",
        "distributedInfo": {"rank": rank, "world_size": 3},
        "deviceProperties": [{"id": 0, "name": "GPU-X", "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
        "traceEvents": events,
    }


def test_secrets_scrubbed_and_counted_as_the_one_process_import(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(3):
        (folder / f"rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps(_rank_doc(rank)).encode()))
    out = tmp_path / "job.ktrace"
    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "-q"]) == 0
    trace = store.read(out)
    assert trace.meta.health["secrets_scrubbed"] > 0
    assert_same_store(out, folder, tmp_path)
    written = b"".join(path.read_bytes() for path in out.rglob("*") if path.is_file())
    for planted in TEXT_FORMS[:4]:
        assert planted.secret.encode() not in written


def _ktrace_import(folder: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "ktrace", "import", str(folder), "-o", str(out), "--no-progress", *extra]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def test_killed_import_keeps_only_whole_ranks_and_resumes(
    real_trace_path: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for copy in range(2):  # 16 rank files: ranks collide, so they are numbered in file order (as in one process)
        for source in sorted(real_trace_path("dlrm").glob("worker*.json.gz")):
            shutil.copy2(source, folder / f"copy{copy}_{source.name}")
    out = tmp_path / "job.ktrace"
    resume = resume_folder(out)
    proc = _ktrace_import(folder, out, "--workers", "2")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if resume.is_dir() and len([e for e in resume.iterdir() if e.name.startswith("file=")]) >= 2:
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"the import ended before it could be killed: {proc.communicate()}"
    os.killpg(proc.pid, signal.SIGKILL)  # the client and its workers, mid-write
    proc.wait(timeout=30)

    assert not out.exists()
    entries = [e for e in resume.iterdir() if e.name.startswith("file=")]
    assert 2 <= len(entries) < 16
    for entry in entries:  # every entry with a final name is a whole partition
        found = read_entry(entry)
        assert found is not None
        assert found[1] == entry and (entry / "kernels.parquet").is_file()  # the entry is the partition folder
    for other in resume.iterdir():  # what a killed task left has a temporary name, never a partition's
        assert other in entries or other.name.startswith(".ktrace-tmp-")
        assert not (other / "meta.json").exists()

    capsys.readouterr()
    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "--no-progress"]) == 0
    assert f"resumed: {len(entries)} rank file(s) kept" in capsys.readouterr().out
    assert not resume.exists()
    assert_same_store(out, folder, tmp_path)

    assert main(["import", str(folder), "-o", str(out), "-q", "--workers", "2"]) != 0  # exists: needs --force
    resume.mkdir()
    (resume / "file=stale").mkdir()
    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "--force", "--no-progress"]) == 0
    assert not resume.exists()
    assert_same_store(out, folder, tmp_path)


def test_a_failed_start_leaves_nothing_beside_the_output(
    real_trace_path: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "job.ktrace"
    assert main(["import", str(real_trace_path("dlrm")), "-o", str(out), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no resume folder, no lock
    argv = ["import", str(real_trace_path("dlrm")), "-o", str(out), "--workers", "2", "--cluster", "tcp://h:8786"]
    assert main(argv) == 2
    assert "--workers and --cluster contradict" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    one_file = next(real_trace_path("dlrm").glob("worker0_*"))  # one rank: nothing to spread, and it was ignored
    assert main(["import", str(one_file), "-o", str(out), "--workers", "4"]) == 2
    assert "spread the ranks of a folder of Kineto files" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_resume_folder_holding_foreign_files_is_refused_and_kept(
    real_trace_path: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "job.ktrace"
    resume = resume_folder(out)
    resume.mkdir()
    (resume / "notes.txt").write_text("mine")
    for force in ([], ["--force"]):
        assert main(["import", str(real_trace_path("dlrm")), "-o", str(out), *force]) == 2
        assert "notes.txt, which ktrace did not write there" in capsys.readouterr().err
    assert (resume / "notes.txt").read_text() == "mine" and not out.exists()


def test_two_hosts_are_aligned_as_the_one_process_import_aligns_them(
    real_trace_path: Callable[[str], Path], tmp_path: Path
) -> None:
    """Ranks from two hosts on clocks 1 ms-2 s apart: the rank tasks hand back their collectives, the client
    estimates the offsets once all are in, and meta.json carries them, applied on read; the store reads back equal
    to the one-process import's, which shifted the timestamps before writing."""
    from ktrace.testing.fleet_job import generate_fleet_job

    job = generate_fleet_job(real_trace_path("dlrm"), tmp_path / "job", ranks=16, steps=1)
    out = tmp_path / "job.ktrace"
    assert main(["import", str(tmp_path / "job"), "-o", str(out), "--workers", "2", "--no-progress", "-q"]) == 0
    stored = json.loads((out / "meta.json").read_text())["clock_alignment"]
    assert stored["applied"] is False  # partitions keep each host's own clock
    node001 = next(h for h in stored["hosts"] if h["host"] == "node001")
    assert abs(node001["offset_ns"] - job.offsets_ns["node001"]) <= 10_000
    one = tmp_path / "one-process.ktrace"
    store.write(import_kineto(tmp_path / "job"), one)
    assert_trace_equal(store.read(out), store.read(one))
    assert store.read(out).meta.clock_alignment == store.read(one).meta.clock_alignment


@pytest.mark.parametrize("engine", [[], ["--workers", "1"], ["--workers", "2"]])
def test_a_broken_rank_file_is_skipped_with_a_note_that_names_it_once(tmp_path: Path, engine: list[str]) -> None:
    """The note read "skipped rank1.json.gz: rank1.json.gz: truncated ..." (the error already names the file)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 2):
        (folder / f"rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps(_rank_doc(rank)).encode()))
    (folder / "rank1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", garbage'))
    out = tmp_path / "job.ktrace"
    assert main(["import", str(folder), "-o", str(out), "-q", *engine]) == 0
    notes = [n for n in store.read(out).meta.notes if "rank1.json.gz" in n]
    assert len(notes) == 1 and notes[0].startswith("skipped rank1.json.gz: ") and notes[0].count("rank1.json") == 1
