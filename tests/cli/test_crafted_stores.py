"""Hand-made .ktrace stores and Kineto ids no writer makes: one line and an exit code in every reading verb, never a
traceback (issue 27 section 2). Each case here was a traceback before."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from real_traces import fixture_path

from ktrace.cli import main
from ktrace.model import store

RANK = "node=localhost/rank=0"
VERBS = [["info"], ["summary", "--json"], ["check"], ["export", "-f", "chrome", "-o", "{tmp}/out.json.gz"]]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("base") / "base.ktrace"
    assert main(["import", str(fixture_path("alexnet")), "-o", str(path), "-q", "--no-progress"]) == 0
    return path


def _meta(edit: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        meta = json.loads((root / "meta.json").read_text())
        edit(meta)
        (root / "meta.json").write_text(json.dumps(meta))

    return apply


def _column(table: str, column: str, values: Callable[[pa.Field, int], pa.Array]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / RANK / f"{table}.parquet"
        data = pq.read_table(path)
        field = data.schema.field(column)
        data = data.set_column(data.schema.get_field_index(column), field.with_nullable(True), values(field, len(data)))
        pq.write_table(data, path)

    return apply


CRAFTED = {
    # meta.json: a clock alignment host without its name ("HostClock.__init__() missing 1 required argument")
    "alignment_host_without_name": _meta(
        lambda m: m.update(clock_alignment={"method": "collectives", "reference": "a", "hosts": [{"offset_ns": 1}]})
    ),
    # a Parquet column the schema requires, empty ("int() argument must be ... not 'NoneType'")
    "kernel_start_empty": _column("kernels", "start_ns", lambda f, n: pa.nulls(n, f.type)),
    # a time no clock gives ("Python int too large to convert to C long" in the critical path)
    "kernel_end_at_int64_max": _column("kernels", "end_ns", lambda f, n: pa.array([2**63 - 1] * n, f.type)),
    # one rank twice, under a name ktrace never writes (its rows were read twice, silently)
    "rank_folder_with_a_leading_zero": lambda root: shutil.copytree(root / RANK, root / "node=localhost/rank=00"),
}


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: v[0])
@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_store_is_one_line_and_exit_3(
    case: str, verb: list[str], base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / f"{case}.ktrace"
    shutil.copytree(base, root)
    CRAFTED[case](root)
    assert main([verb[0], str(root), *(a.format(tmp=tmp_path) for a in verb[1:])]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(root) in err, err


@pytest.mark.parametrize("tid", [-(10**30), -(2**63) - 1, 2**64, "main", "-99999999999999999999"])
def test_a_kineto_id_that_is_no_64_bit_integer_imports(tid: object, tmp_path: Path) -> None:
    """A tid (or pid) of -10**30 or "main" became a null in a required column: "api: required column 'tid' is
    missing", a traceback; it is thread 0, as an id of no id type already was."""
    launch = {"correlation": 100, "cbid": 211}
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": 1000, "dur": 2},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": tid, "tid": 7, "ts": 1005, "dur": 4},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": tid, "ts": 990, "dur": 20},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": tid, "tid": tid, "ts": 990, "dur": 20},
    ]
    events[0]["args"] = launch
    events[1]["args"] = {"correlation": 100, "device": 0, "stream": 7}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    out = tmp_path / "t.ktrace"
    assert main(["import", str(path), "-o", str(out), "-q", "--no-progress"]) == 0
    trace = store.read(out)
    assert trace.api["tid"].to_list() == [0] and set(trace.ops["tid"].to_list()) == {0}
    assert main(["summary", str(out)]) == 0


def test_a_rank_folder_named_with_other_digits_is_not_a_rank(base: Path, tmp_path: Path) -> None:
    root = tmp_path / "t.ktrace"
    shutil.copytree(base, root)
    (root / RANK).rename(root / "node=localhost/rank=\u0661")  # ARABIC-INDIC DIGIT ONE: was read as rank 1
    assert list(store.partitions(root)) == []
