"""The job's critical path computed rank by rank (fleet.critical_path_map) equals critical_path of the whole store,
field by field, on every local engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from fleet_traces import user_step_ranges
from real_traces import fixture_path

from ktrace.analysis.breakdown import communication_names
from ktrace.analysis.critical_path import CriticalPath, critical_path
from ktrace.fleet.critical_path_map import job_critical_path
from ktrace.fleet.engines import Engine, InProcessEngine, ProcessEngine, open_engine
from ktrace.fleet.folder_import import import_folder
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.errors import KtraceError, TraceFormatError
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.fleet_job import generate_fleet_job


def differences(whole: CriticalPath | None, fleet: CriticalPath | None) -> list[str]:
    """The fields of two critical paths that differ (frames and arrays compared whole)."""
    if whole is None or fleet is None:
        return [] if whole is fleet else ["one of them is None"]
    out = []
    for f in dataclasses.fields(whole):
        a, b = getattr(whole, f.name), getattr(fleet, f.name)
        if isinstance(a, pl.DataFrame):
            same = isinstance(b, pl.DataFrame) and a.equals(b)
        elif isinstance(a, np.ndarray):
            same = np.array_equal(a, b)
        else:
            same = a == b
        if not same:
            out.append(f.name)
    return out


def _engine(kind: str) -> Engine:
    return InProcessEngine() if kind == "in-process" else ProcessEngine(2)


def _write(trace: Trace, path: Path) -> Path:
    store.write(trace, path)
    return path


@pytest.fixture(scope="module")
def fleet_trace() -> Trace:
    return generate_fleet(FleetConfig(ranks=8, hosts=2, steps=6, kernels_per_step=8)).trace


@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory: pytest.TempPathFactory, fleet_trace: Trace) -> Path:
    return _write(fleet_trace, tmp_path_factory.mktemp("cp") / "fleet.ktrace")


@pytest.fixture(scope="module")
def dlrm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(load(fixture_path("dlrm")), tmp_path_factory.mktemp("cp") / "dlrm.ktrace")


@pytest.fixture(scope="module")
def tiled_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DLRM job tiled to 16 ranks on 2 hosts with planted clock offsets and a straggler, imported."""
    root = tmp_path_factory.mktemp("cp")
    generate_fleet_job(fixture_path("dlrm"), root / "job", ranks=16, steps=2)
    import_folder(root / "job", root / "job.ktrace")
    return root / "job.ktrace"


@pytest.mark.parametrize("kind", ["in-process", "processes"])
@pytest.mark.parametrize("name", ["fleet_store", "dlrm_store", "tiled_store"])
def test_rank_by_rank_path_equals_the_whole_store_path(kind: str, name: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(name)
    whole = critical_path(store.read(path))
    with _engine(kind) as engine:
        fleet = job_critical_path(path, engine)
    assert whole is not None and whole.ranks > 1 and whole.what_if.height
    assert differences(whole, fleet) == []


def test_an_annotation_instance_and_a_steps_pattern_choose_as_one_process(dlrm_store: Path) -> None:
    whole = store.read(dlrm_store)
    with InProcessEngine() as engine:
        annotated = job_critical_path(dlrm_store, engine, annotation="Profiler", instance=3)
        missing = job_critical_path(dlrm_store, engine, annotation="Profiler", instance=10_000)
        patterned = job_critical_path(dlrm_store, engine, steps_pattern=r"^ProfilerStep#(\d+)$")
    assert differences(critical_path(whole, annotation="Profiler", instance=3), annotated) == []
    assert annotated is not None and annotated.scope == "annotation"
    assert missing is None and critical_path(whole, annotation="Profiler", instance=10_000) is None
    assert differences(critical_path(whole, steps_pattern=r"^ProfilerStep#(\d+)$"), patterned) == []


def _without_first_collectives(trace: Trace, rank: int, count: int) -> Trace:
    """`trace` with rank `rank`'s first `count` communication kernels left out (it ran fewer than the others)."""
    comm = communication_names(trace)
    rows = trace.kernels.with_row_index("row")
    mine = rows.filter(pl.col("name").cast(pl.String).is_in(comm) & (pl.col("rank") == rank)).sort("start_ns")
    drop = set(mine["row"].head(count).to_list())
    keep = [i for i in range(trace.kernels.height) if i not in drop]
    return dataclasses.replace(trace, kernels=trace.kernels[keep])


@pytest.mark.parametrize(
    "variant",
    [
        "collectives missing on one rank",  # order_keys corrects that rank's order by a lag (collective_lags)
        "no step ranges",  # periodic steps: the first rank's window is its launch window
        "no steps and no kernels",  # the whole first rank
        "no CPU events",
        # the graphs built in the first pass for rank 0's step are not the job's (one process takes the other
        # ranks' ProfilerStep ranges): every rank's graph is built again for the right step
        "the first rank's steps are user annotations",
    ],
)
def test_step_choices_and_collective_orders_match_one_process(variant: str, fleet_trace: Trace, tmp_path: Path) -> None:
    t = fleet_trace
    variants: dict[str, Callable[[], Trace]] = {
        # the planted straggler (rank 5) ran fewer: its collectives are the late ones the path crosses to
        "collectives missing on one rank": lambda: _without_first_collectives(t, 5, 2),
        "no step ranges": lambda: dataclasses.replace(t, ranges=t.ranges.clear()),
        "no steps and no kernels": lambda: dataclasses.replace(t, ranges=t.ranges.clear(), kernels=t.kernels.clear()),
        "no CPU events": lambda: dataclasses.replace(t, ops=t.ops.clear(), api=t.api.clear()),
        "the first rank's steps are user annotations": lambda: user_step_ranges(t, 0),
    }
    trace = variants[variant]()
    path = _write(trace, tmp_path / "job.ktrace")
    whole = critical_path(store.read(path))
    with InProcessEngine() as engine:
        fleet = job_critical_path(path, engine)
    assert differences(whole, fleet) == []
    expected: dict[str, Any] = {
        "collectives missing on one rank": "step",
        "no step ranges": "step",
        "no steps and no kernels": "trace",
        "no CPU events": None,
        "the first rank's steps are user annotations": "step",
    }
    assert (None if fleet is None else fleet.scope) == expected[variant]


def test_the_dask_engine_gives_the_same_path_and_progress_counts_the_ranks(dlrm_store: Path) -> None:
    distributed = pytest.importorskip(
        "distributed",
        reason="LOUD SKIP: dask[distributed] (the ktrace[dask] extra) is missing; the Dask path is untested",
    )
    seen: list[tuple[int, int]] = []
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
        open_engine(cluster=client) as engine,
    ):
        fleet = job_critical_path(dlrm_store, engine, progress=lambda done, total: seen.append((done, total)))
    assert differences(critical_path(store.read(dlrm_store)), fleet) == []
    assert seen == [(i, 8) for i in range(1, 9)]


def test_a_path_that_is_not_a_store_is_one_line_error(tmp_path: Path) -> None:
    with InProcessEngine() as engine, pytest.raises(TraceFormatError, match="needs a .ktrace store"):
        job_critical_path(tmp_path, engine)
    with InProcessEngine() as engine, pytest.raises(KtraceError):
        job_critical_path(tmp_path / "missing.ktrace", engine)
