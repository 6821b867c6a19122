"""Bad nsys input: one clear TraceFormatError (exit 3) or a partial import that says what it dropped."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from real_traces import fixture_path

import ktrace
from ktrace.importers.nsys import import_nsys
from ktrace.model.errors import ExitCode, TraceFormatError

FIXTURE = fixture_path("power_iteration")


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def sqlite_with(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return path


def test_not_sqlite(tmp_path: Path) -> None:
    bad = write(tmp_path / "x.sqlite", b"this is not a database at all\n" * 100)
    with pytest.raises(TraceFormatError, match="not a readable SQLite database"):
        import_nsys(bad)
    with pytest.raises(TraceFormatError):
        ktrace.open(bad)


def test_sqlite_header_then_garbage(tmp_path: Path) -> None:
    bad = write(tmp_path / "x.sqlite", b"SQLite format 3\x00" + bytes(range(256)) * 64)
    with pytest.raises(TraceFormatError) as err:
        ktrace.open(bad)
    assert err.value.exit_code == ExitCode.BAD_INPUT


def test_sqlite_without_nsys_tables(tmp_path: Path) -> None:
    db = sqlite_with(tmp_path / "other.sqlite", "CREATE TABLE users (id, name)")
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export"):
        import_nsys(db)


def test_nsys_export_without_event_tables(tmp_path: Path) -> None:
    db = sqlite_with(
        tmp_path / "empty.sqlite",
        "CREATE TABLE StringIds (id, value)",
        "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs, utcTime, localTime)",
    )
    with pytest.raises(TraceFormatError, match="without CUDA, NVTX or GPU-metric tables"):
        import_nsys(db)


def test_unknown_schema_version(tmp_path: Path) -> None:
    db = sqlite_with(
        tmp_path / "future.sqlite",
        "CREATE TABLE META_DATA_EXPORT (name, value)",
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '9.0.1')",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId)",
    )
    with pytest.raises(TraceFormatError, match="unknown nsys export schema '9.0.1'"):
        import_nsys(db)


def test_missing_and_folder(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError) as err:
        import_nsys(tmp_path / "nope.sqlite")
    assert err.value.exit_code == ExitCode.NOT_FOUND
    with pytest.raises(TraceFormatError, match="folder"):
        import_nsys(tmp_path)


def test_every_event_table_unreadable(tmp_path: Path) -> None:
    db = sqlite_with(tmp_path / "k.sqlite", "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (begin, finish)")
    with pytest.raises(TraceFormatError, match="no event table could be read.*start"):
        import_nsys(db)


def test_truncated_real_export_keeps_its_events(tmp_path: Path) -> None:
    data = FIXTURE.read_bytes()
    trace = import_nsys(write(tmp_path / "cut.sqlite", data[: int(len(data) * 0.98)]))
    assert trace.kernels.height == 3689  # the CUDA tables lie before the cut ...
    assert trace.meta.health["nsys_tables_unreadable"] == 2  # ... the metadata tables behind it
    assert {n.split(":")[0] for n in trace.meta.notes if "dropped" in n} == {"META_DATA_EXPORT", "META_DATA_CAPTURE"}


def test_truncated_table_keeps_the_rows_before_the_cut(tmp_path: Path) -> None:
    db = sqlite_with(
        tmp_path / "big.sqlite",
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, pad)",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000) "
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT i * 10, i * 10 + 5, 0, 'x' FROM n",
    )
    data = db.read_bytes()
    trace = import_nsys(write(tmp_path / "cut.sqlite", data[: len(data) * 2 // 3]))
    assert 0 < trace.kernels.height < 60000
    assert trace.meta.health["nsys_tables_truncated"] == 1
    assert any(f"only the first {trace.kernels.height} row(s)" in n for n in trace.meta.notes)


@pytest.mark.parametrize("content", [b"garbage" * 50, b"SQLite format 3\x00" + b"\xff" * 5000])
def test_cli_prints_one_line_and_exits_3(tmp_path: Path, content: bytes) -> None:
    bad = write(tmp_path / "bad.sqlite", content)
    done = subprocess.run(
        [sys.executable, "-m", "ktrace", "info", str(bad)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == ExitCode.BAD_INPUT
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "bad.sqlite" in done.stderr


def test_a_folder_holding_one_export_opens_it_and_two_are_refused(tmp_path: Path) -> None:
    import shutil

    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(FIXTURE, one / "run.sqlite")
    (one / "STATS.json").write_text("{}")  # a JSON file that is not a trace must not make it "Kineto"
    assert ktrace.open(one).kernels.height == import_nsys(FIXTURE).kernels.height
    shutil.copy(FIXTURE, one / "other.sqlite")
    with pytest.raises(TraceFormatError, match="2 nsys exports .*open one of them"):
        ktrace.open(one)


@pytest.mark.parametrize("name", ["rank0.json", "worker0.pt.trace.json"])
def test_a_folder_holding_an_export_beside_a_kineto_trace_is_refused(tmp_path: Path, name: str) -> None:
    import shutil

    shutil.copy(FIXTURE, tmp_path / "run.sqlite")
    (tmp_path / name).write_text('{"schemaVersion": 1, "traceEvents": []}')  # a trace whatever its name
    with pytest.raises(TraceFormatError, match=f"both Kineto traces \\({name}\\) and nsys exports \\(run.sqlite\\)"):
        ktrace.open(tmp_path)
