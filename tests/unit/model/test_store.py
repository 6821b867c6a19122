"""The .ktrace store: round trips, partitions, capture streams and recovery after SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given

from ktrace.model import TraceFormatError, store, store_files
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, assert_trace_equal, generate
from ktrace.testing.strategies import traces


@given(trace=traces())
def test_round_trip_equals_original(trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("rt") / "t.ktrace"
    store.write(trace, path)
    assert_trace_equal(trace, store.read(path), check_meta=False)


def test_layout_is_hive_partitioned_and_readable_by_polars(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=20, ranks=2))
    root = store.write(trace, tmp_path / "run.ktrace")
    assert (root / "meta.json").exists()
    assert sorted(p.name for p in (root / "node=node0").iterdir()) == ["rank=-1", "rank=0", "rank=1"]
    assert json.loads((root / "meta.json").read_text())["schema_version"] == 1
    # Other tools read every rank as one dataset through the hive partition names.
    df = pl.read_parquet(root / "**/kernels.parquet", hive_partitioning=True)
    assert df.height == trace.kernels.height
    assert sorted(df["rank"].unique().to_list()) == [0, 1]


def test_strings_are_dictionary_encoded_and_compressed_on_disk(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    root = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=50)), tmp_path / "x.ktrace")
    md = pq.ParquetFile(root / "node=node0" / "rank=0" / "kernels.parquet").metadata
    col = md.row_group(0).column(md.schema.names.index("name"))
    assert "RLE_DICTIONARY" in col.encodings or "PLAIN_DICTIONARY" in col.encodings
    assert col.compression == "ZSTD"


def test_reading_a_missing_or_foreign_path_raises_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no such file"):
        store.read(tmp_path / "nope.ktrace")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceFormatError, match="not a .ktrace folder"):
        store.read(tmp_path / "empty")


def test_corrupt_parquet_is_a_user_error(tmp_path: Path) -> None:
    root = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=5)), tmp_path / "x.ktrace")
    (root / "node=node0" / "rank=0" / "kernels.parquet").write_bytes(b"PAR1garbage")
    with pytest.raises(TraceFormatError, match="unreadable Parquet"):
        store.read(root)


def test_capture_writer_streams_finalize_to_parquet(tmp_path: Path) -> None:
    w = store.CaptureWriter(tmp_path / "c.ktrace", "host", 5)
    for i in range(3):
        w.append(
            "kernels",
            pa.table(
                {"start_ns": [i * 10], "end_ns": [i * 10 + 5], "device": pa.array([0], pa.int32()), "name": [f"k{i}"]}
            ),
        )
    w.write_partition_meta({"dropped_records": 2}, ["cupti dropped 2 records"])
    w.close()
    before = store.read(tmp_path / "c.ktrace")
    assert before.kernels.height == 3 and before.meta.health["recovered_tables"] == 1
    assert before.meta.health["dropped_records"] == 2
    store.finalize(tmp_path / "c.ktrace")
    after = store.read(tmp_path / "c.ktrace")
    assert "recovered_tables" not in after.meta.health
    assert after.kernels["name"].cast(pl.String).to_list() == ["k0", "k1", "k2"]
    assert after.kernels["rank"].to_list() == [5, 5, 5]


def _capture(root: Path) -> None:
    w = store.CaptureWriter(root, "host", 0)
    w.append("kernels", pa.table({"start_ns": [0], "end_ns": [5], "device": pa.array([0], pa.int32()), "name": ["k"]}))
    w.close()


def test_every_store_file_is_fsynced_before_its_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Capture metadata, finalized Parquet and written tables go through outputs.atomic_path (temporary sibling,
    fsync, rename): after a power cut a renamed file is never empty or half there."""
    synced: list[str] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), fsync(fd)))
    root = tmp_path / "c.ktrace"
    _capture(root)
    store.CaptureWriter(root, "host", 0).write_partition_meta({}, [])
    store.finalize(root)
    written = store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2)), tmp_path / "w.ktrace")
    names = {Path(p).name for p in synced}
    assert any(n.endswith("-partition.json") for n in names)
    assert sum(n.endswith("-kernels.parquet") for n in names) == 2  # finalize's and write's
    assert all(Path(p).name.startswith(".ktrace-tmp-") or Path(p).is_dir() for p in synced)
    assert not list(root.rglob("*.tmp")) and not list(written.rglob(".ktrace-tmp-*"))


def test_finalize_that_fails_midway_keeps_the_stream_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "c.ktrace"
    _capture(root)

    def disk_full(table: pa.Table, where: object, **options: object) -> None:
        Path(str(where)).write_bytes(b"PAR1half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.pq, "write_table", disk_full)
    with pytest.raises(OSError):
        store.finalize(root)
    folder = root / "node=host" / "rank=0"
    assert sorted(p.name for p in folder.iterdir()) == ["kernels.arrows"]
    monkeypatch.undo()
    store.finalize(root)  # finalized again once there is room
    assert store.read(root).kernels.height == 1


def test_finalize_removes_what_a_killed_finalize_left_in_the_rank_folder(tmp_path: Path) -> None:
    """A finalize killed between writing `.ktrace-tmp-XXXXXXXX-kernels.parquet` and its rename leaves that file
    beside the stream; the next finalize (the launcher's, or `ktrace info`'s recovery) removes it."""
    root = tmp_path / "c.ktrace"
    _capture(root)
    folder = root / "node=host" / "rank=0"
    (folder / ".ktrace-tmp-0123abcd-kernels.parquet").write_bytes(b"PAR1half")
    (folder / ".ktrace-tmp-0123abcd-notes.txt").write_bytes(b"not ours to judge")  # not a table: left alone
    store.finalize(root)
    assert sorted(p.name for p in folder.iterdir()) == [".ktrace-tmp-0123abcd-notes.txt", "kernels.parquet"]
    assert store.read(root).kernels.height == 1


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    import pyarrow as pa
    from ktrace.model.store import CaptureWriter
    w = CaptureWriter(sys.argv[1], "h", 0)
    for i in range(int(sys.argv[2])):
        w.append("kernels", pa.table({"start_ns": [i], "end_ns": [i + 1], "device": pa.array([0], pa.int32()),
                                      "name": ["k"]}))
    print("flushed", flush=True)
    while True:
        time.sleep(1)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_capture_killed_with_sigkill_keeps_every_flushed_batch(tmp_path: Path) -> None:
    root = tmp_path / "killed.ktrace"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(root), "25"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "flushed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    trace = store.read(root)
    assert trace.kernels.height == 25
    assert trace.meta.health["recovered_tables"] == 1
    assert any("un-finalized" in n for n in trace.meta.notes)


def test_torn_last_batch_is_dropped_not_fatal(tmp_path: Path) -> None:
    w = store.CaptureWriter(tmp_path / "t.ktrace", "h", 0)
    for i in range(4):
        w.append(
            "api",
            pa.table(
                {
                    "start_ns": [i],
                    "end_ns": [i + 1],
                    "pid": [1],
                    "tid": [1],
                    "domain": ["runtime"],
                    "name": ["cudaLaunchKernel"],
                }
            ),
        )
    w.close()
    f = tmp_path / "t.ktrace" / "node=h" / "rank=0" / "api.arrows"
    f.write_bytes(f.read_bytes()[:-40])
    assert 1 <= store.read(tmp_path / "t.ktrace").api.height < 4


def test_many_ranks_read_as_one_trace(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=10, ranks=4, nodes=2))
    back = store.read(store.write(trace, tmp_path / "m.ktrace"))
    assert sorted(back.ranks) == sorted(trace.ranks)
    assert_trace_equal(trace, back, check_meta=False)


def test_constant_and_null_columns_are_filled_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    trace = generate(SyntheticConfig(steps=3, kernels_per_step=20, ranks=2))
    root = store.write(trace, tmp_path / "c.ktrace")
    meta = pq.ParquetFile(root / "node=node0" / "rank=0" / "kernels.parquet").schema_arrow.metadata
    constants = json.loads(meta[b"ktrace.constant_columns"])
    nulls = json.loads(meta[b"ktrace.null_columns"])
    assert {"device", "context_id"} <= set(constants) and "graph_id" in nulls
    assert "start_ns" not in constants and "name" not in constants

    decoded: list[list[str]] = []
    real_read = pq.ParquetFile.read

    def spy(self: pq.ParquetFile, columns: list[str], **kwargs: object) -> pa.Table:
        if "start_ns" in self.schema_arrow.names and "grid_x" in self.schema_arrow.names:  # a kernels file
            decoded.append(columns)
        return real_read(self, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    back = store.read(root)
    kernel_reads = decoded
    assert kernel_reads and all(not (set(cols) & (set(constants) | set(nulls))) for cols in kernel_reads)
    assert_trace_equal(trace, back, check_meta=False)


def test_a_table_of_only_constant_columns_keeps_its_row_count(tmp_path: Path) -> None:
    threads = pa.table(
        {
            "node": pa.array(["n"] * 3).dictionary_encode(),
            "rank": pa.array([0] * 3, pa.int32()),
            "pid": pa.array([7] * 3, pa.int64()),
            "tid": pa.array([7] * 3, pa.int64()),
            "name": pa.array(["main"] * 3).dictionary_encode(),
        }
    )
    trace = Trace.from_arrow({"threads": threads})
    back = store.read(store.write(trace, tmp_path / "t.ktrace"))
    assert back.threads.height == 3
    assert back.threads.select("pid", "tid").rows() == [(7, 7)] * 3
    assert_trace_equal(trace, back, check_meta=False)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([pa.array([1, 1]), pa.array([1])], [1]),
        ([pa.array([1, 1]), pa.array([2])], []),
        ([pa.array([1, None])], []),
        (
            [
                pa.array(["a", "b", "a"]).dictionary_encode().slice(0, 1),
                pa.DictionaryArray.from_arrays(pa.array([1, 1], pa.int32()), pa.array(["z", "a"])),
            ],
            ["a"],
        ),
        ([pa.array(["a", "b"]).dictionary_encode()], []),
        ([pa.array([1.0, 1.0])], []),
    ],
)
def test_constant_value_detection(chunks: list[pa.Array], expected: list[object]) -> None:
    assert store_files.constant_value(pa.chunked_array(chunks)) == expected


@pytest.mark.parametrize("name", ["nope.ktrace", "nope.json.gz", "nope.sqlite", "nope"])
def test_a_missing_path_is_a_file_not_found_error(tmp_path: Path, name: str) -> None:
    import ktrace
    from ktrace.model.errors import ExitCode

    with pytest.raises(FileNotFoundError, match="no such file") as caught:
        ktrace.open(tmp_path / name)
    assert caught.value.exit_code == ExitCode.NOT_FOUND  # type: ignore[attr-defined]
    assert isinstance(caught.value, TraceFormatError)


def test_an_empty_folder_names_every_format_it_looked_for(tmp_path: Path) -> None:
    import ktrace

    with pytest.raises(TraceFormatError) as caught:
        ktrace.open(tmp_path)
    message = str(caught.value)
    assert ".ktrace" in message and ".json" in message and ".sqlite" in message
