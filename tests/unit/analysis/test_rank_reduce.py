"""reduce_partials over per-partition rank_partials gives the Summary summarize() gives of the whole job."""

from __future__ import annotations

import dataclasses
import functools
import pickle
import random
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_traces import fixture_path

from ktrace.analysis.critical_path_summary import critical_path_notes
from ktrace.analysis.rank_activity import gpu_bins
from ktrace.analysis.rank_heatmap import rank_heatmap
from ktrace.analysis.rank_partials import RankPartial, rank_partial
from ktrace.analysis.rank_reduce import FleetResult, reduce_partials
from ktrace.analysis.summary import Summary, summarize
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.trace import Trace
from ktrace.testing.fleet_compare import fleet_differences
from ktrace.testing.synthetic import SyntheticConfig, generate

MULTI_NODE = SyntheticConfig(steps=5, kernels_per_step=40, ranks=8, nodes=2, slow_step_every=3)


def _store(trace: Trace, path: Path) -> Path:
    store.write(trace, path)
    return path


def _fleet(path: Path) -> FleetResult:
    """The map side by hand: one partial per partition, each read alone, with the job's span and heatmap bins."""
    return reduce_partials(_partials(path, [{(n, r)} for n, r, _ in store.partitions(path)]))


def _partials(path: Path, slices: list[set[tuple[str, int]]]) -> list[RankPartial]:
    whole = store.read(path)
    span, bins = whole.span_ns(), gpu_bins(whole)
    return [rank_partial(store.read(path, only=c), job_span=span, heatmap_bins=bins) for c in slices]


def _differences(path: Path, fleet: FleetResult) -> list[str]:
    """fleet_differences against the one-process summary and rank heatmap of the store."""
    return fleet_differences(_single(path), fleet, rank_heatmap(store.read(path)))


def _reduced_part(whole: Summary) -> Summary:
    """The one-process summary less what the rank-by-rank driver adds after the reduce (the job's critical path,
    computed by fleet.critical_path_map, and its notes): reduce_partials alone is compared here; the driver's
    whole result is in tests/unit/fleet/test_same_summary.py."""
    added = set(critical_path_notes(whole.critical_path))
    return dataclasses.replace(whole, critical_path=None, notes=tuple(n for n in whole.notes if n not in added))


@functools.cache
def _single(path: Path) -> Summary:
    return _reduced_part(summarize(store.read(path)))


@pytest.fixture(scope="module")
def dlrm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(load(fixture_path("dlrm")), tmp_path_factory.mktemp("dlrm") / "dlrm.ktrace")


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(generate(MULTI_NODE), tmp_path_factory.mktemp("synth") / "synth.ktrace")


def test_dlrm_8_ranks_reduce_to_the_single_process_summary(dlrm_store: Path) -> None:
    fleet = _fleet(dlrm_store)
    assert fleet.summary.ranks == 8
    assert _differences(dlrm_store, fleet) == []
    assert fleet.summary.load_balance is not None and fleet.summary.load_balance.histogram_distance is not None


def test_multi_node_synthetic_reduces_to_the_single_process_summary(synthetic_store: Path) -> None:
    fleet = _fleet(synthetic_store)
    assert (fleet.summary.ranks, sorted(set(fleet.summary.busy["node"].cast(pl.String)))) == (8, ["node0", "node1"])
    assert (
        fleet.summary.load_balance is not None and fleet.summary.load_balance.source == "counters"
    )  # node-level gpu.util
    assert _differences(synthetic_store, fleet) == []


def test_partials_merge_in_any_order(synthetic_store: Path) -> None:
    parts = _partials(synthetic_store, [{(n, r)} for n, r, _ in store.partitions(synthetic_store)])
    forward, backward = reduce_partials(parts), reduce_partials(parts[::-1])
    assert forward.summary.top_by_time.equals(backward.summary.top_by_time)
    assert forward.summary.latency.equals(backward.summary.latency)
    a, b = forward.summary.load_balance, backward.summary.load_balance
    assert a is not None and b is not None
    assert a.per_rank.equals(b.per_rank) and (a.histogram_distance, a.worst_pair) == (
        b.histogram_distance,
        b.worst_pair,
    )


def test_a_rank_whose_steps_lose_to_the_jobs_step_source_has_none(tmp_path: Path) -> None:
    """detect_steps picks one source for the whole job: rank 1 without ProfilerStep ranges has no steps in one
    process, although alone it would infer periodic steps; the reduce keeps the job's choice."""
    trace = generate(SyntheticConfig(steps=6, kernels_per_step=30, ranks=2))
    lost = (pl.col("rank") == 1) & (pl.col("domain").cast(pl.String) == "profiler_step")
    trace = dataclasses.replace(trace, ranges=trace.ranges.filter(~lost))
    path = _store(trace, tmp_path / "mixed.ktrace")
    fleet = _fleet(path)
    assert set(fleet.summary.step_stats["rank"].to_list()) == {0}
    assert _differences(path, fleet) == []
    # the rank views too: rank 1's periodic steps lose to rank 0's ProfilerStep ranges (no step column for it)
    assert fleet.rank_heatmap is not None and fleet.summary.stragglers is not None
    assert set(fleet.rank_heatmap.by_step["rank"].to_list()) == {0}
    assert (fleet.summary.stragglers.basis, fleet.summary.stragglers.table["rank"].to_list()) == ("steps", [0])


def test_fleet_differences_reports_a_changed_number(dlrm_store: Path) -> None:
    fleet = _fleet(dlrm_store)
    single = _reduced_part(summarize(store.read(dlrm_store)))
    assert fleet_differences(single, fleet) == []
    bumped = _with(fleet, busy=fleet.summary.busy.with_columns(pl.col("busy_ns") + 1))
    assert any(d.startswith("busy:") for d in fleet_differences(single, bumped))
    off = fleet.summary.latency.with_columns(pl.col("launch_latency_ns_p50") * 1.01)
    assert any("launch_latency_ns_p50" in d for d in fleet_differences(single, _with(fleet, latency=off)))
    mean = fleet.summary.top_by_time.with_columns(pl.col("mean_ns") * (1 + 1e-7))
    assert any(d.startswith("top_by_time:") for d in fleet_differences(single, _with(fleet, top_by_time=mean)))
    assert fleet.summary.operators is not None
    ops = dataclasses.replace(fleet.summary.operators, records=fleet.summary.operators.records + 1)
    assert any(d.startswith("operators.records") for d in fleet_differences(single, _with(fleet, operators=ops)))
    notes = fleet.summary.notes[:-1]
    assert any(d.startswith("notes:") for d in fleet_differences(single, _with(fleet, notes=notes)))


def _with(fleet: FleetResult, **changes: object) -> FleetResult:
    return dataclasses.replace(fleet, summary=dataclasses.replace(fleet.summary, **changes))  # type: ignore[arg-type]


def test_a_partial_is_small_and_picklable() -> None:
    """No frame of events: a rank's partial grows with kernel names, histogram bins and steps, not kernels."""
    one = generate(SyntheticConfig(steps=160, kernels_per_step=40, ranks=1))
    partial = rank_partial(one)
    frames = [v for v in vars(partial).values() if isinstance(v, pl.DataFrame)]
    for part in (partial.tables, partial.sequences, partial.operators, *partial.annotations):
        frames += [v for v in vars(part).values() if isinstance(v, pl.DataFrame)]
    assert max(f.height for f in frames) < one.kernels.height / 2
    again = pickle.loads(pickle.dumps(partial))
    assert again.kernel_totals.equals(partial.kernel_totals)


def test_folding_in_batches_gives_the_same_summary(synthetic_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client merges histograms and totals every few partials (bounded memory at thousands of ranks)."""
    import ktrace.analysis.rank_reduce as rank_reduce

    single = _reduced_part(summarize(store.read(synthetic_store)))
    monkeypatch.setattr(rank_reduce, "_COMPACT_EVERY", 3)
    assert fleet_differences(single, _fleet(synthetic_store), rank_heatmap(store.read(synthetic_store))) == []


def test_no_partial_is_an_error_not_an_empty_summary() -> None:
    with pytest.raises(ValueError, match="at least one rank"):
        reduce_partials([])


def test_ranks_without_gpu_work_reduce_like_one_process(tmp_path: Path) -> None:
    """A CPU-only rank among GPU ranks, and a job with no kernel at all, give the same tables as one process."""
    trace = generate(SyntheticConfig(steps=4, kernels_per_step=20, ranks=3))
    cpu_only = pl.col("rank") == 2
    mixed = dataclasses.replace(trace, kernels=trace.kernels.filter(~cpu_only), memory=trace.memory.filter(~cpu_only))
    no_gpu = dataclasses.replace(trace, kernels=trace.kernels.clear(), memory=trace.memory.clear())
    for name, job in (("mixed", mixed), ("no_gpu", no_gpu)):
        path = _store(job, tmp_path / f"{name}.ktrace")
        assert (
            fleet_differences(_reduced_part(summarize(store.read(path))), _fleet(path), rank_heatmap(store.read(path)))
            == []
        ), name


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.lists(st.integers(0, 3), min_size=7, max_size=7), order=st.randoms(use_true_random=False))
def test_any_grouping_of_whole_ranks_into_partials_reduces_alike(
    synthetic_store: Path, groups: list[int], order: random.Random
) -> None:
    """A partial may hold several whole ranks (a worker given a host's partitions): however the ranks are
    grouped and in whatever order the partials arrive, the reduce gives the one-process numbers."""
    pairs = [(n, r) for n, r, _ in store.partitions(synthetic_store)]
    chunks: dict[int, set[tuple[str, int]]] = {}
    for pair, g in zip(pairs, groups + [0] * len(pairs), strict=False):
        chunks.setdefault(g, set()).add(pair)
    parts = _partials(synthetic_store, list(chunks.values()))
    order.shuffle(parts)
    assert _differences(synthetic_store, reduce_partials(parts)) == []


def test_partials_cut_in_other_heatmap_bins_are_refused(synthetic_store: Path) -> None:
    """Each partition's own GPU span gives other bins than the job's: the reduce refuses to mix them rather than
    build a heatmap whose columns mean different times per rank."""
    span = store.read(synthetic_store).span_ns()
    parts = [
        rank_partial(store.read(synthetic_store, only={(n, r)}), job_span=span)
        for n, r, _ in store.partitions(synthetic_store)
    ]
    with pytest.raises(ValueError, match="different heatmap bins"):
        reduce_partials(parts)


def test_a_job_without_steps_has_span_stragglers_and_no_step_map(tmp_path: Path) -> None:
    """No rank has steps: every rank's GPU span is its one step, in the fleet as in one process."""
    trace = generate(SyntheticConfig(steps=4, kernels_per_step=20, ranks=4, nodes=2))
    trace = dataclasses.replace(trace, ranges=trace.ranges.clear())
    path = _store(trace, tmp_path / "nosteps.ktrace")
    fleet = _fleet(path)
    assert fleet.summary.stragglers is not None and fleet.summary.stragglers.basis == "span"
    assert fleet.rank_heatmap is not None and fleet.rank_heatmap.n_steps == 0
    assert _differences(path, fleet) == []
