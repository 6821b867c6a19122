"""`ktrace import`: Kineto files and folders to .ktrace, one clear error line and exit code on bad input."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.cli import main
from ktrace.model.errors import ExitCode
from ktrace.model.store import read

ALEXNET = fixture_path("alexnet")


def test_import_writes_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.ktrace"
    assert main(["import", str(ALEXNET), "-o", str(out), "--no-progress"]) == 0
    trace = read(out)
    assert trace.meta.source == "kineto"
    assert (trace.kernels.height, trace.api.height, trace.syncs.height) == (79, 361, 41)
    printed = capsys.readouterr().out
    assert "79 kernels" in printed and "launches_without_gpu_record=2" in printed


def test_import_ops_by_default_no_ops_and_force(tmp_path: Path) -> None:
    out = tmp_path / "run.ktrace"
    assert main(["import", str(ALEXNET), "-o", str(out), "-q"]) == 0
    assert read(out).ops.height == 359  # cpu_op events in the file (STATS.json), kept by default (issue #15)
    assert main(["import", str(ALEXNET), "-o", str(out), "-q"]) == ExitCode.USAGE  # exists
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--force", "--no-ops"]) == 0
    assert read(out).ops.height == 0
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--force", "--with-ops"]) == 0  # the old spelling
    assert read(out).ops.height == 359
    assert main(["import", str(ALEXNET), "-o", str(out), "-q", "--force", "--with-ops", "--no-ops"]) == ExitCode.USAGE


def test_import_folder_of_ranks(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in range(2):
        (folder / f"worker{r}.pt.trace.json.gz").write_bytes(ALEXNET.read_bytes())
    out = tmp_path / "job.ktrace"
    assert main(["import", str(folder), "-o", str(out), "-q"]) == 0
    trace = read(out)
    # both files say distributedInfo.rank 0: ranks fall back to file order, with a note
    assert [r for _, r in trace.ranks] == [0, 1]
    assert any("collide" in n for n in trace.meta.notes)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"traceEvents": [', "truncated"),
        (b"{nope", "invalid JSON"),
        (b'{"hello": "world"}', "not a Kineto trace"),
        (b'{"schemaVersion": 99, "traceEvents": []}', "unknown Kineto schemaVersion"),
    ],
)
def test_bad_input_one_line_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, expected: str
) -> None:
    src = tmp_path / "bad.json"
    src.write_bytes(data)
    assert main(["import", str(src), "-o", str(tmp_path / "x.ktrace")]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and expected in err and "Traceback" not in err
    assert not (tmp_path / "x.ktrace").exists()


def test_missing_input(tmp_path: Path) -> None:
    assert main(["import", str(tmp_path / "nope.json"), "-o", str(tmp_path / "x.ktrace")]) == ExitCode.NOT_FOUND


def test_truncated_gzip_in_a_subprocess(tmp_path: Path) -> None:
    """The real command line: a truncated .json.gz imports what it can, with notes, and no traceback."""
    data = gzip.decompress(ALEXNET.read_bytes())
    src = tmp_path / "cut.json.gz"
    src.write_bytes(gzip.compress(data)[:12000])
    out = tmp_path / "cut.ktrace"
    proc = subprocess.run(
        [sys.executable, "-m", "ktrace", "import", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "truncated" in proc.stderr
    assert read(out).meta.health["truncated_input"] == 1
    garbage = tmp_path / "garbage.json.gz"
    garbage.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)
    proc = subprocess.run(
        [sys.executable, "-m", "ktrace", "import", str(garbage), "-o", str(out) + "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
