"""The rank-by-rank Summary of a store equals the single-process Summary, on every engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from real_traces import fixture_path

from ktrace.analysis.rank_heatmap import RankHeatmap, rank_heatmap
from ktrace.analysis.stragglers import Stragglers
from ktrace.analysis.summary import summarize
from ktrace.fleet.early_start import FLEET_MIN_RANKS, store_ranks, wants_fleet
from ktrace.fleet.engines import Engine, InProcessEngine, ProcessEngine, open_engine
from ktrace.fleet.folder_import import import_folder
from ktrace.fleet.summary_map import fleet_summary, same_results, summarize_store
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.errors import TraceFormatError
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.fleet_compare import fleet_differences
from ktrace.testing.fleet_job import generate_fleet_job
from ktrace.testing.synthetic import SyntheticConfig, generate


@pytest.fixture(scope="module")
def dlrm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dlrm") / "dlrm.ktrace"
    store.write(load(fixture_path("dlrm")), path)
    return path


@pytest.fixture(scope="module")
def multi_node_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "synth.ktrace"
    store.write(generate(SyntheticConfig(steps=4, kernels_per_step=30, ranks=6, nodes=3)), path)
    return path


@pytest.fixture(scope="module")
def fleet_job() -> Any:
    return generate_fleet(FleetConfig(ranks=32, hosts=8, steps=4, kernels_per_step=8))


@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory, fleet_job: Any) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "fleet.ktrace"
    store.write(fleet_job.trace, path)
    return path


@pytest.fixture(scope="module")
def fleet_planted(fleet_job: Any) -> tuple[str, int]:
    planted: tuple[str, int] = fleet_job.straggler
    return planted


@pytest.fixture(scope="module")
def dask_client() -> Iterator[object]:
    distributed = pytest.importorskip(
        "distributed",
        reason="LOUD SKIP: dask[distributed] (the ktrace[dask] extra) is missing; the Dask path is untested",
    )
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _engine(kind: str, request: pytest.FixtureRequest) -> Engine:
    if kind == "dask":
        return open_engine(cluster=request.getfixturevalue("dask_client"))
    return InProcessEngine() if kind == "in-process" else ProcessEngine(2)


@pytest.mark.parametrize("kind", ["in-process", "processes", "dask"])
def test_dlrm_store_summarized_rank_by_rank_equals_one_process(kind: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue("dlrm_store")
    with _engine(kind, request) as engine:
        fleet = summarize_store(path, engine)
    assert fleet.engine.startswith(kind)
    assert fleet.summary.ranks == 8
    whole = store.read(path)
    assert fleet_differences(summarize(whole), fleet, rank_heatmap(whole)) == []
    assert fleet.rank_heatmap is not None and fleet.summary.stragglers is not None
    assert fleet.summary.stragglers.basis == "steps" and fleet.summary.stragglers.table.height == 8


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_multi_node_store_equals_one_process(kind: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue("multi_node_store")
    with _engine(kind, request) as engine:
        fleet = summarize_store(path, engine, steps_pattern="ProfilerStep")
    whole = store.read(path)
    assert fleet_differences(summarize(whole, steps_pattern="ProfilerStep"), fleet, rank_heatmap(whole)) == []
    alone = fleet_summary(path, workers=1, steps_pattern="ProfilerStep")  # the benchmark's hook
    assert alone.engine == "in-process" and same_results(alone, fleet)
    more = dataclasses.replace(fleet.summary, kernels=fleet.summary.kernels + 1)
    assert not same_results(alone, dataclasses.replace(fleet, summary=more))
    assert fleet.rank_heatmap is not None and fleet.summary.stragglers is not None
    other_cell = fleet.rank_heatmap.by_time.with_columns(pl.col("busy_share").reverse())
    assert not same_results(alone, dataclasses.replace(fleet, rank_heatmap=_with(fleet.rank_heatmap, other_cell)))
    slower = fleet.summary.stragglers.table.with_columns(pl.col("slower_pct") + 1.0)
    lag = dataclasses.replace(fleet.summary, stragglers=_with(fleet.summary.stragglers, slower))
    assert not same_results(alone, dataclasses.replace(fleet, summary=lag))


def _with(view: RankHeatmap | Stragglers, frame: pl.DataFrame) -> Any:
    """`view` with its by_time (a heatmap) or table (stragglers) replaced."""
    if isinstance(view, RankHeatmap):
        return dataclasses.replace(view, by_time=frame)
    return dataclasses.replace(view, table=frame)


@pytest.mark.parametrize("kind", ["in-process", "processes", "dask"])
def test_synthetic_8_host_job_rank_views_equal_one_process(kind: str, request: pytest.FixtureRequest) -> None:
    """generate_fleet's multi-host job (clocks aligned on read): the fleet's heatmap and straggler tables equal
    rank_heatmap(trace) / stragglers(trace) of the whole store, and the planted straggler heads the table."""
    path: Path = request.getfixturevalue("fleet_store")
    with _engine(kind, request) as engine:
        fleet = summarize_store(path, engine)
    whole = store.read(path)
    assert fleet_differences(summarize(whole), fleet, rank_heatmap(whole)) == []
    assert fleet.summary.stragglers is not None and fleet.rank_heatmap is not None
    top = fleet.summary.stragglers.table.row(0, named=True)
    assert (top["node"], top["rank"]) == request.getfixturevalue("fleet_planted")
    assert len(fleet.rank_heatmap.hosts()) == 8


def test_many_ranks_or_an_engine_option_choose_the_map_reduce_path(tmp_path: Path, dlrm_store: Path) -> None:
    wide = tmp_path / "wide.ktrace"
    store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2, ranks=FLEET_MIN_RANKS, nodes=2)), wide)
    assert (store_ranks(wide), wants_fleet(wide, None, None)) == (FLEET_MIN_RANKS, True)
    assert (store_ranks(dlrm_store), wants_fleet(dlrm_store, None, None)) == (8, False)
    assert wants_fleet(dlrm_store, 2, None) and wants_fleet(dlrm_store, None, "tcp://sched:8786")
    assert store_ranks(fixture_path("alexnet")) == 0


def test_a_file_is_not_summarized_rank_by_rank(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="needs a .ktrace store"), InProcessEngine() as engine:
        summarize_store(fixture_path("alexnet"), engine)


def test_tiled_dlrm_job_of_16_ranks_on_2_hosts_equals_one_process(
    tmp_path: Path, real_trace_path: Callable[[str], Path]
) -> None:
    """The real DLRM folder tiled to 16 ranks on 2 hosts (clocks off by a planted offset, rank 13's compute kernels
    1.5x longer), imported rank by rank: the fleet summary at the default threshold equals one process's, and the
    rank table carries the planted straggler's extra kernel time."""
    job = generate_fleet_job(real_trace_path("dlrm"), tmp_path / "job", ranks=16, steps=2, straggler_rank=13)
    import_folder(job.folder, tmp_path / "job.ktrace", workers=1)
    path = tmp_path / "job.ktrace"
    assert wants_fleet(path, None, None)
    fleet = fleet_summary(path, workers=2)
    whole = store.read(path)
    assert fleet_differences(summarize(whole), fleet, rank_heatmap(whole)) == []
    assert fleet.summary.stragglers is not None and fleet.rank_heatmap is not None
    assert len(fleet.rank_heatmap.hosts()) == 2
    # the job's steps are replayed as recorded, so the planted rank's longer kernels fill its GPU idle time: it
    # stays among the slowest (as rank 5, which it replays), with a compute kernel among its causes
    lag = {r["rank"]: r for r in fleet.summary.stragglers.table.iter_rows(named=True)}
    assert lag[13]["slower_pct"] > 10.0 and lag[13]["slower_pct"] == lag[5]["slower_pct"]
    causes = fleet.summary.stragglers.causes.filter(pl.col("rank") == 13)
    assert "kernel" in causes["kind"].to_list()
    busy = {r["rank"]: r for r in fleet.summary.busy.iter_rows(named=True)}
    # rank 13 replays rank 5's file (13 % 8) with its compute kernels 1.5x longer: more GPU time, the same NCCL
    assert busy[13]["busy_ns"] > busy[5]["busy_ns"]
    assert busy[13]["node"] != busy[5]["node"]


def test_the_clients_clock_mode_travels_with_each_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Dask worker does not see the client's KTRACE_CLOCK: the mode is read once, on the client, and each task
    carries it; a bad value is one usage error, not one per partition ("store: node=.../rank=...: KTRACE_CLOCK=")."""
    from ktrace.fleet.summary_map import PartitionTask, partition_span
    from ktrace.model.clock_estimate import align_trace
    from ktrace.model.errors import KtraceError
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    raw = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=2)).trace
    alignment = align_trace(raw)
    root = store.write(raw.with_meta(dataclasses.replace(raw.meta, clock_alignment=alignment)), tmp_path / "t")
    node, rank = next((n, r) for n, r, _ in store.partitions(root) if n != alignment.reference_host)
    spans = {
        mode: partition_span(PartitionTask(str(root), ((node, rank),), clock=mode)).span for mode in ("raw", "aligned")
    }
    assert spans["raw"] == store.read(root, clock="raw", only={(node, rank)}).span_ns() != spans["aligned"]
    monkeypatch.setenv("KTRACE_CLOCK", "bogus")
    with pytest.raises(KtraceError, match="^KTRACE_CLOCK='bogus': expected one of aligned, raw$"):
        summarize_store(root, InProcessEngine())
