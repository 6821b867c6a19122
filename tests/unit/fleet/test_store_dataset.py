"""The .ktrace store as a dataset for other engines: DuckDB's read_parquet and polars' scan_parquet over the hive
layout (node=<host>/rank=<r>/<table>.parquet) of a 16-rank, 2-host store give ktrace's own per-rank figures.

The store keeps every column in its files, constant and all-null ones included (their names in the file metadata
only let ktrace skip decoding them), so other readers see the full table; node and rank come from the folder names.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from ktrace.analysis.ranks import load_balance
from ktrace.fleet.folder_import import import_folder
from ktrace.model import store
from ktrace.model.outputs import STORE, Output
from ktrace.testing.fleet_job import generate_fleet_job

PER_RANK_SQL = """
select node, rank, count(*) as kernels, sum(end_ns - start_ns) as kernel_time_ns,
       count(distinct device) as devices, count(graph_id) as graph_ids
from read_parquet('{root}/**/kernels.parquet', hive_partitioning = true)
group by node, rank order by node, rank
"""


@pytest.fixture(scope="module")
def two_host_store(real_trace_path: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dataset")
    generate_fleet_job(real_trace_path("dlrm"), root / "job", ranks=16, steps=1)
    import_folder(root / "job", Output(root / "job.ktrace", STORE), workers=1)
    return root / "job.ktrace"


def _ktrace_per_rank(path: Path) -> list[tuple[str, int, int, int]]:
    per_rank = load_balance(store.read(path)).per_rank.sort("node", "rank")
    return [
        (str(n), int(r), int(k), int(t))
        for n, r, k, t in per_rank.select("node", "rank", "kernels", "kernel_time_ns").iter_rows()
    ]


def test_duckdb_reads_the_store_with_ktraces_per_rank_figures(two_host_store: Path) -> None:
    duckdb = pytest.importorskip(
        "duckdb",
        reason="LOUD SKIP: duckdb is not installed (pip install 'ktrace[test]'): the store is not checked "
        "as a DuckDB dataset",
    )
    rows = duckdb.sql(PER_RANK_SQL.format(root=two_host_store)).fetchall()
    expected = _ktrace_per_rank(two_host_store)
    assert len(expected) == 16 and {n for n, *_ in expected} == {"node000", "node001"}
    assert [row[:4] for row in rows] == expected
    # the constant device column and the all-null graph_id column are in the files, not only in their metadata
    assert {row[4] for row in rows} == {1} and {row[5] for row in rows} == {0}
    devices = duckdb.sql(
        f"select distinct rank, device from read_parquet('{two_host_store}/**/kernels.parquet', "
        "hive_partitioning = true) order by rank"
    ).fetchall()
    kernels = store.read(two_host_store).kernels
    assert devices == sorted(set(kernels.select("rank", "device").iter_rows()))


def test_polars_scan_parquet_reads_the_store_with_ktraces_per_rank_figures(two_host_store: Path) -> None:
    frame = (
        pl.scan_parquet(
            f"{two_host_store}/**/kernels.parquet",
            hive_partitioning=True,
            hive_schema={"node": pl.String, "rank": pl.Int32},  # a host named 0123 would read as the integer 123
        )
        .group_by("node", "rank")
        .agg(kernels=pl.len(), kernel_time_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        .sort("node", "rank")
        .collect()
    )
    assert [(n, r, k, t) for n, r, k, t in frame.iter_rows()] == _ktrace_per_rank(two_host_store)
