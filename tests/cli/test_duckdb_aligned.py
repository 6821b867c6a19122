"""The store as data for other engines, on one clock: README's DuckDB query over `ktrace export -f parquet` of a
multi-host store (planted clock offsets and drifts, written raw with its alignment in meta.json, as an import writes
it) gives ktrace's own per-rank figures, and first kernel starts in true time; the store's own files do not.

The query is read from README.md, so the README cannot drift from what is tested.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

import ktrace
from ktrace.analysis.ranks import load_balance
from ktrace.cli import main
from ktrace.model import store
from ktrace.model.clock_estimate import align_trace
from ktrace.testing import SyntheticConfig, generate
from ktrace.testing.fleet import FleetConfig, FleetTrace, generate_fleet

duckdb = pytest.importorskip(
    "duckdb",
    reason="LOUD SKIP: duckdb is not installed (pip install 'ktrace[test]'): README's DuckDB query is not checked",
)

README = Path(__file__).resolve().parents[2] / "README.md"
EXPORT_FOLDER = "job-tables/"
"""The export folder README's query reads; the test puts its own in its place."""


def readme_query() -> str:
    """README's one ```sql block that reads the exported kernels."""
    blocks = [b for b in re.findall(r"```sql\n(.*?)```", README.read_text(), re.S) if EXPORT_FOLDER in b]
    assert len(blocks) == 1, f"README.md should have one ```sql block reading {EXPORT_FOLDER}: {len(blocks)}"
    return blocks[0]


@pytest.fixture(scope="module")
def fleet() -> FleetTrace:
    return generate_fleet(FleetConfig(ranks=16, hosts=4, steps=4, max_drift_ppm=20.0, step_gap_ns=200_000_000, seed=3))


@pytest.fixture(scope="module")
def raw_store(fleet: FleetTrace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each host's times as recorded, the estimated alignment in meta.json ("applied": false)."""
    raw = fleet.trace
    meta = dataclasses.replace(raw.meta, clock_alignment=align_trace(raw))
    root = store.write(raw.with_meta(meta), tmp_path_factory.mktemp("store") / "job.ktrace")
    assert json.loads((root / "meta.json").read_text())["clock_alignment"]["applied"] is False
    return root


def _export(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["export", str(root), "-f", "parquet", "-o", str(out), "--no-progress"]) == 0
    return capsys.readouterr().out


def _run_readme_query(tables: Path) -> list[tuple[str, int, int, int, int]]:
    sql = readme_query().replace(EXPORT_FOLDER, f"{tables}/")
    return [(str(n), int(r), int(k), int(t), int(f)) for n, r, k, t, f in duckdb.sql(sql).fetchall()]


def _ktrace_per_rank(root: Path) -> list[tuple[str, int, int, int, int]]:
    """Kernels, kernel time (analysis.ranks) and first kernel start per rank, of the store as ktrace reads it."""
    trace = store.read(root)
    per_rank = load_balance(trace).per_rank.with_columns(pl.col("node").cast(pl.String))
    first = trace.kernels.group_by("node", "rank").agg(first_kernel_ns=pl.col("start_ns").min())
    joined = per_rank.join(first.with_columns(pl.col("node").cast(pl.String)), on=["node", "rank"]).sort("rank")
    return [
        (n, int(r), int(k), int(t), int(f))
        for n, r, k, t, f in joined.select("node", "rank", "kernels", "kernel_time_ns", "first_kernel_ns").iter_rows()
    ]


def test_readme_duckdb_query_on_the_export_gives_ktraces_aligned_figures(
    fleet: FleetTrace, raw_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = _export(raw_store, tmp_path / "tables", capsys)
    assert "times on node0's clock (4 hosts aligned)" in said, said
    rows = _run_readme_query(tmp_path / "tables")
    assert len(rows) == 16 and rows == _ktrace_per_rank(raw_store)
    # on one clock: each rank's first kernel starts when it truly did (the planted clocks inverted), within what
    # the estimate leaves (µs), where the hosts' clocks were up to 2 s apart
    raw_first = fleet.trace.kernels.group_by("node", "rank").agg(pl.col("start_ns").min()).sort("rank")
    for (node, rank, *_, first_ns), (raw_node, raw_rank, raw_ns) in zip(rows, raw_first.iter_rows(), strict=True):
        assert (node, rank) == (str(raw_node), raw_rank)
        true_ns = int(fleet.true_ns(node, np.array([raw_ns], dtype=np.int64))[0])
        assert abs(first_ns - true_ns) < 20_000, (node, rank, first_ns - true_ns)
    # polars over the same file, and ktrace.open on the store (README), give the same aligned table
    exported = pl.read_parquet(tmp_path / "tables" / "kernels.parquet").with_columns(pl.col("node").cast(pl.String))
    opened = ktrace.open(raw_store).kernels.with_columns(pl.col("node").cast(pl.String))
    key = ["rank", "start_ns", "end_ns", "correlation_id"]
    assert exported.select(["node", *key]).sort(key).equals(opened.select(["node", *key]).sort(key))
    kernels = pq.read_schema(tmp_path / "tables" / "kernels.parquet").metadata
    assert kernels[b"ktrace.clock"] == b"aligned"
    assert json.loads(kernels[b"ktrace.clock_alignment"])["applied"] is True


def test_the_stores_own_files_are_on_each_hosts_clock(
    fleet: FleetTrace, raw_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Why README points at the export: the store's files, read directly, are off by the hosts' offsets."""
    _export(raw_store, tmp_path / "tables", capsys)
    exported = {(n, r): f for n, r, *_, f in _run_readme_query(tmp_path / "tables")}
    direct = duckdb.sql(
        f"select node, rank, min(start_ns) from read_parquet('{raw_store}/**/kernels.parquet', "
        "hive_partitioning = true, hive_types = {'node': VARCHAR, 'rank': INTEGER}) group by all"
    ).fetchall()
    off = {fleet.host_of(int(r)): abs(int(f) - exported[(str(n), int(r))]) for n, r, f in direct}
    planted = {h: abs(o) for h, o in fleet.offsets_ns.items()}
    assert off["node0"] < 20_000 and all(abs(off[h] - planted[h]) < 20_000 for h in planted if h != "node0")
    assert max(planted.values()) > 100_000_000


def test_a_raw_clock_export_and_a_one_host_export_say_so(
    raw_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KTRACE_CLOCK", "raw")
    said = _export(raw_store, tmp_path / "raw", capsys)
    assert "times as each host recorded them (KTRACE_CLOCK=raw)" in said, said
    assert pq.read_schema(tmp_path / "raw" / "kernels.parquet").metadata[b"ktrace.clock"] == b"as_recorded"
    monkeypatch.delenv("KTRACE_CLOCK")
    one = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=5)), tmp_path / "one.ktrace")
    said = _export(one, tmp_path / "one", capsys)
    assert "times" not in said.split("files", 1)[1], said
    assert pq.read_schema(tmp_path / "one" / "kernels.parquet").metadata[b"ktrace.clock"] == b"one_host"
