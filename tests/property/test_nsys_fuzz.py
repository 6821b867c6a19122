"""Fuzz the nsys importer: >= 500 corrupted exports, and never anything but a Trace or a KtraceError.

The full fuzz is marked slow (`pytest -m slow`); the default run imports every 7th case of each family.

Corruptions: truncations, bit flips and garbage pages of the bytes; dropped tables; dropped columns;
cells of the wrong type or out of range; structure-aware ones (non-finite numbers, escape sequences and markup,
a 1 MB string in every column read, GPU metrics of inf, a decoy kernel table). The seed is a trimmed copy of the real
T4 export in fixtures/traces.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from real_traces import fixture_path

from ktrace.importers.nsys import import_nsys
from ktrace.model.errors import KtraceError

FIXTURE = fixture_path("power_iteration")
KEEP = (
    "CUPTI_ACTIVITY_KIND_",
    "NVTX_EVENTS",
    "StringIds",
    "META_DATA",
    "TARGET_INFO",
    "ThreadNames",
    "PROCESSES",
    "ENUM_CUDA_MEM",
    "ENUM_CUPTI_SYNC",
    "ENUM_NSYS_EVENT_CLASS",
)
READ = (
    "CUPTI_ACTIVITY_KIND_",
    "NVTX_EVENTS",
    "StringIds",
    "META_DATA",
    "TARGET_INFO_GPU",
    "TARGET_INFO_S",
    "ThreadNames",
    "PROCESSES",
)
"""Tables whose columns the importer reads: each of their columns is dropped and mistyped in turn."""
EVERY = [pytest.param(1, id="all", marks=pytest.mark.slow), pytest.param(7, id="every-7th")]
"""Which cases a run imports: all of them (slow), or every 7th (the default run)."""
WRONG_VALUES = (
    "'text'",
    "x'00ff'",
    "1e300",
    "9223372036854775807",
    "-9223372036854775808",
    "NULL",
    "-1",
    "'1.5'",
    "x''",
    "4294967295",
    "''",
    "-2147483649",
)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~250 KB export with the real schema: 40 rows per event table, the tables the importer reads."""
    path = tmp_path_factory.mktemp("nsys-seed") / "seed.sqlite"
    shutil.copyfile(FIXTURE, path)
    con = sqlite3.connect(path)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        if not name.startswith(KEEP):
            con.execute(f'DROP TABLE "{name}"')
        elif name not in ("StringIds", "META_DATA_EXPORT", "META_DATA_CAPTURE") and not name.startswith("ENUM"):
            con.execute(f'DELETE FROM "{name}" WHERE rowid > 40')
    con.execute("DELETE FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT%' AND rowid % 5 != 0")
    con.execute(
        "DELETE FROM StringIds WHERE id NOT IN (SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "UNION SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT textId FROM NVTX_EVENTS "
        "UNION SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT nameId FROM ThreadNames)"
    )
    con.commit()
    con.execute("VACUUM")
    con.close()
    assert import_nsys(path).kernels.height == 40
    return path


def outcome(path: Path) -> str:
    """ "ok" or "error" (a one-line KtraceError); anything else escapes and fails the test with its case."""
    try:
        trace = import_nsys(path)
    except KtraceError as exc:
        assert str(exc) and "\n" not in str(exc), repr(exc)
        return "error"
    trace.meta.to_json()
    trace.validate()  # consumers can inspect what came back without crashing
    return "ok"


def run_cases(cases: Iterator[tuple[str, Path]]) -> dict[str, int]:
    """Import every case; collect (never stop at) unexpected exceptions, then fail listing them."""
    tally: dict[str, int] = {}
    crashes: list[str] = []
    for label, path in cases:
        try:
            result = outcome(path)
        except Exception as exc:  # noqa: BLE001 - the point: report any escape with its case
            result = "crash"
            crashes.append(f"{label}: {type(exc).__name__}: {exc}")
        tally[result] = tally.get(result, 0) + 1
    assert not crashes, f"{len(crashes)} case(s) escaped as non-KtraceError:\n" + "\n".join(crashes[:10])
    return tally


def byte_cases(seed: Path, out: Path) -> Iterator[tuple[str, Path]]:
    """Truncations, bit flips and garbage pages of the seed's bytes (seeded, reproducible)."""
    data = seed.read_bytes()
    rng = np.random.default_rng(20261122)
    target = out / "case.sqlite"
    for i, cut in enumerate(np.linspace(0, len(data) - 1, 80).astype(int)):
        target.write_bytes(data[:cut])
        yield f"truncate[{i}] at {cut}", target
    for i in range(160):
        buf = bytearray(data)
        for pos in rng.integers(0, len(buf), size=int(rng.integers(1, 9))):
            buf[pos] ^= 1 << int(rng.integers(0, 8))
        target.write_bytes(bytes(buf))
        yield f"bitflip[{i}]", target
    page = 4096
    for i in range(40):
        buf = bytearray(data)
        at = int(rng.integers(0, len(buf) // page)) * page
        buf[at : at + page] = rng.integers(0, 256, page, dtype=np.uint8).tobytes() if i % 2 else bytes(page)
        target.write_bytes(bytes(buf))
        yield f"page[{i}] at {at}", target


def _mutated(seed: Path, target: Path, statement: str) -> Path | None:
    """A copy of the seed changed by one SQL statement; None where SQLite refuses it (a primary key)."""
    shutil.copyfile(seed, target)
    con = sqlite3.connect(target)
    try:
        con.execute("PRAGMA journal_mode = OFF")
        con.execute("PRAGMA synchronous = OFF")
        con.execute(statement)
        con.commit()
    except sqlite3.Error:
        return None
    finally:
        con.close()
    return target


def schema_cases(seed: Path, out: Path, every: int = 1) -> Iterator[tuple[str, Path]]:
    """Every table dropped; every column the importer reads dropped, and given cells of a wrong type or range
    (every `every`-th of those damages)."""
    con = sqlite3.connect(seed)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    con.close()
    target = out / "case.sqlite"
    statements = [(f"drop table {t}", f'DROP TABLE "{t}"') for t in tables]
    pairs = [(table, c) for table in tables if table.startswith(READ) for c in columns[table]]
    for k, (t, c) in enumerate(pairs):
        value = WRONG_VALUES[k % len(WRONG_VALUES)]
        statements.append((f"drop column {t}.{c}", f'ALTER TABLE "{t}" DROP COLUMN "{c}"'))
        statements.append((f"{t}.{c} = {value}", f'UPDATE "{t}" SET "{c}" = {value} WHERE rowid % 2 = 0'))
    for label, statement in statements[::every]:
        path = _mutated(seed, target, statement)
        if path is not None:
            yield label, path


@pytest.mark.parametrize("every", EVERY)
def test_corrupted_bytes_never_escape(seed: Path, tmp_path: Path, every: int) -> None:
    tally = run_cases(islice(byte_cases(seed, tmp_path), 0, None, every))
    assert sum(tally.values()) == len(range(0, 280, every))
    assert tally.get("error") and tally.get("ok")  # both outcomes happen: the cases are not all trivial


@pytest.mark.parametrize("every", EVERY)
def test_damaged_schemas_never_escape(seed: Path, tmp_path: Path, every: int) -> None:
    tally = run_cases(schema_cases(seed, tmp_path, every))
    assert sum(tally.values()) >= 300 // every
    assert tally.get("ok", 0) > tally.get("error", 0)  # most damage is local: the rest still imports


@given(flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 7)), min_size=1, max_size=16))
def test_bit_flips_property(seed: Path, tmp_path_factory: pytest.TempPathFactory, flips: list[tuple[int, int]]) -> None:
    buf = bytearray(seed.read_bytes())
    for pos, bit in flips:
        buf[pos % len(buf)] ^= 1 << bit
    target = tmp_path_factory.mktemp("flip") / "case.sqlite"
    target.write_bytes(bytes(buf))
    assert outcome(target) in ("ok", "error")


HOSTILE_VALUES = (
    "9e999",
    "-9e999",
    "0.0 * 9e999",
    "'\x1b]0;t\x07\x1b[2J[bold]x[/]'",
    "printf('%.*c', 1000000, 'A')",
    "-1e20",
    "1e300",
)
"""Non-finite numbers (SQLite REAL inf; inf * 0 is NULL), escape sequences and markup, a 1 MB string, huge floats."""


def structure_cases(seed: Path, out: Path) -> Iterator[tuple[str, Path]]:
    """Structure-aware damage: hostile values in every column the importer reads, GPU metrics with inf, a decoy
    kernel table beside the real one."""
    con = sqlite3.connect(seed)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    columns = {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    con.close()
    target = out / "case.sqlite"
    pairs = [(t, c) for t in tables if t.startswith(READ) for c in columns[t]]
    for k, (t, c) in enumerate(pairs[::3]):  # a third of the columns: a few seconds; the value cycles
        value = HOSTILE_VALUES[k % len(HOSTILE_VALUES)]
        path = _mutated(seed, target, f'UPDATE "{t}" SET "{c}" = {value} WHERE rowid % 3 = 1')
        if path is not None:
            yield f"{t}.{c} = {value[:20]}", path
    yield "gpu metrics with inf", _with_inf_metrics(seed, target)
    shutil.copyfile(seed, target)
    con = sqlite3.connect(target)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL_OLD AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1")
    con.commit()
    con.close()
    yield "decoy kernel table", target


def _with_inf_metrics(seed: Path, target: Path) -> Path:
    """The seed with GPU metric samples of +inf, -inf, NaN (NULL in SQLite) and one real value."""
    shutil.copyfile(seed, target)
    con = sqlite3.connect(target)
    start = con.execute("SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.executescript(
        "CREATE TABLE TARGET_INFO_GPU_METRICS (typeId, sourceId, typeName, metricId, metricName); "
        "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (0, 0, 'GPU', 1, 'GR Active [Throughput %]'); "
        "CREATE TABLE GPU_METRICS (timestamp, typeId, metricId, value); "
        f"INSERT INTO GPU_METRICS VALUES ({start}, 0, 1, 9e999), ({start + 10}, 0, 1, -9e999), "
        f"({start + 20}, 0, 1, 50.0), ({start + 30}, 0, 1, 0.0 * 9e999)"
    )
    con.close()
    return target


def test_structure_aware_damage_never_escapes(seed: Path, tmp_path: Path) -> None:
    tally = run_cases(structure_cases(seed, tmp_path))
    assert sum(tally.values()) >= 30 and tally.get("ok")


def test_non_finite_gpu_metrics_are_dropped_with_a_note(seed: Path, tmp_path: Path) -> None:
    trace = import_nsys(_with_inf_metrics(seed, tmp_path / "m.sqlite"))
    assert trace.counters["value"].to_list() == [50.0]
    assert any("2 infinite or NaN value(s) dropped" in n for n in trace.meta.notes)
