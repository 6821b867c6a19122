"""Hand-made broken .ktrace folders (a generated corpus): each one is a one-line TraceFormatError (exit 3).

Every variant starts from a valid store and breaks one thing the reader must check: meta.json (type, depth,
folder, version, field types), its absence, partition.json, rank names beyond int32, and the Parquet tables'
columns (extra, missing, wrong type, truncated, a folder in place of a file).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc  # noqa: F401 - pa.ipc
import pyarrow.parquet as pq
import pytest

from ktrace.cli import main
from ktrace.model import TraceFormatError, store
from ktrace.testing import SyntheticConfig, generate

KERNELS = Path("node=node0/rank=0/kernels.parquet")


def _meta(root: Path, **changes: object) -> None:
    meta = json.loads((root / "meta.json").read_text())
    (root / "meta.json").write_text(json.dumps({**meta, **changes}))


def _kernels(root: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    path = root / KERNELS
    pq.write_table(change(pq.read_table(path)), path)


def _replace(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)


def _as_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _bad_capture_stream(root: Path) -> None:
    w = store.CaptureWriter(root, "node0", 5)
    w.append("kernels", pa.table({"start_ns": [1], "end_ns": [2], "device": pa.array([0], pa.int32()), "name": ["k"]}))
    w.close()
    stream = root / "node=node0" / "rank=5" / "kernels.arrows"
    with pa.OSFile(str(stream), "wb") as f, pa.ipc.new_stream(f, pa.schema([("start_ns", pa.string())])) as out:
        out.write_table(pa.table({"start_ns": ["soon"]}))


def _big_rank(root: Path) -> None:
    shutil.copytree(root / "node=node0" / "rank=0", root / "node=node0" / f"rank={2**31}")


VARIANTS: dict[str, tuple[Callable[[Path], None], str]] = {
    "meta_list": (lambda r: _replace(r, "meta.json", "[1, 2]"), "holds a JSON list"),
    "meta_nested": (lambda r: _replace(r, "meta.json", "[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "meta_folder": (lambda r: _as_folder(r / "meta.json"), "is a folder"),
    "meta_not_json": (lambda r: _replace(r, "meta.json", '{"source": '), "not valid JSON"),
    "meta_missing": (lambda r: (r / "meta.json").unlink(), "incomplete .ktrace store"),
    "schema_999": (lambda r: _meta(r, schema_version=999), "schema_version 999"),
    "schema_string": (lambda r: _meta(r, schema_version="1"), "schema_version is a str"),
    "schema_absent": (lambda r: _replace(r, "meta.json", '{"source": "kineto"}'), "no schema_version"),
    "hosts_string": (lambda r: _meta(r, hosts="node0"), "hosts is a str"),
    "health_text": (lambda r: _meta(r, health={"dropped": "many"}), "health['dropped']"),
    "notes_numbers": (lambda r: _meta(r, notes=[1, 2]), "notes holds a int"),
    "job_list": (lambda r: _meta(r, job=[]), "job is a list"),
    "partition_list": (lambda r: _replace(r, "node=node0/rank=0/partition.json", "[]"), "partition.json holds"),
    "partition_health": (lambda r: _replace(r, "node=node0/rank=0/partition.json", '{"health": 3}'), "health is a int"),
    "rank_beyond_int32": (_big_rank, "out of range"),
    "meta_fifo": (lambda r: _fifo(r / "meta.json"), "is not a regular file"),
    "capture_stream_wrong_type": (_bad_capture_stream, "column start_ns is string"),
    "extra_column": (
        lambda r: _kernels(r, lambda t: t.append_column("bogus", pa.array([1] * t.num_rows))),
        "unknown column(s) bogus",
    ),
    "missing_column": (lambda r: _kernels(r, lambda t: t.drop_columns(["start_ns"])), "required column(s) start_ns"),
    "wrong_type": (
        lambda r: _kernels(
            r,
            lambda t: t.set_column(
                t.schema.get_field_index("start_ns"), "start_ns", t.column("start_ns").cast(pa.string())
            ),
        ),
        "column start_ns is string",
    ),
    "int_overflow": (
        lambda r: _kernels(
            r,
            lambda t: t.replace_schema_metadata({}).set_column(
                t.schema.get_field_index("device"), "device", pa.array([2**40] * t.num_rows, pa.int64())
            ),
        ),
        "does not fit schema",
    ),
    "truncated_table": (lambda r: (r / KERNELS).write_bytes((r / KERNELS).read_bytes()[:100]), "unreadable Parquet"),
    "table_folder": (lambda r: _as_folder(r / KERNELS), "unreadable Parquet"),
}


@pytest.fixture(scope="module")
def valid_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return store.write(
        generate(SyntheticConfig(steps=2, kernels_per_step=10)), tmp_path_factory.mktemp("v") / "v.ktrace"
    )


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_broken_store_is_one_line_error(
    variant: str, valid_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / f"{variant}.ktrace"
    shutil.copytree(valid_store, root)
    break_it, message = VARIANTS[variant]
    break_it(root)
    with pytest.raises(TraceFormatError, match=None) as err:
        store.read(root)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert main(["summary", str(root)]) == 3
    out = capsys.readouterr()
    assert out.err.count("\n") == 1 and message in out.err and not out.out


def test_the_valid_store_reads(valid_store: Path) -> None:
    assert store.read(valid_store).kernels.height == 20
