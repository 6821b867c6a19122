"""One Summary at every rank count (issue 25): rank by rank, the Summary equals summarize() of the whole job (counts
exact, means within 1e-9, percentiles within log_histogram.RELATIVE_ERROR) at 8, 15, 16 and 64 ranks on the
in-process and local-process engines, and `ktrace summary --json` has the same keys at 8, 15, 16, 64 and 256 ranks
(one process below 16 ranks, rank by rank from 16 on)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.analysis.annotation_histograms import DEFAULT_ANNOTATION_PATTERNS
from ktrace.analysis.rank_heatmap import rank_heatmap
from ktrace.analysis.summary import summarize
from ktrace.cli import main
from ktrace.fleet.early_start import FLEET_MIN_RANKS
from ktrace.fleet.engines import InProcessEngine, ProcessEngine
from ktrace.fleet.summary_map import summarize_store
from ktrace.importers import load
from ktrace.model import store
from ktrace.testing.fleet_compare import fleet_differences, key_paths
from ktrace.testing.synthetic import SyntheticConfig, generate

NODES = {8: 2, 15: 3, 16: 4, 64: 8, 256: 32}
ANNOTATIONS = ("forward", "^backward$|optimizer")


def _job(ranks: int, root: Path, kernels_per_step: int = 12) -> Path:
    """A small synthetic job: operators (its CPU ranges), counters, memory copies, NCCL kernels, step ranges."""
    path = root / f"job{ranks}.ktrace"
    config = SyntheticConfig(steps=2, kernels_per_step=kernels_per_step, ranks=ranks, nodes=NODES[ranks], seed=ranks)
    trace = generate(config)
    store.write(trace, path)
    return path


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("jobs")
    return {n: _job(n, root) for n in (8, 15, 16, 64)}


@pytest.mark.parametrize("ranks", [8, 15, 16, 64])
@pytest.mark.parametrize("kind", ["in-process", "processes"])
def test_rank_by_rank_summary_equals_one_process(jobs: dict[int, Path], ranks: int, kind: str) -> None:
    path = jobs[ranks]
    with InProcessEngine() if kind == "in-process" else ProcessEngine(2) as engine:
        fleet = summarize_store(path, engine, annotations=ANNOTATIONS, by_shape=True)
    whole = store.read(path)
    single = summarize(whole, annotations=ANNOTATIONS, by_shape=True)
    assert fleet_differences(single, fleet, rank_heatmap(whole)) == []
    s = fleet.summary
    assert s.ranks == ranks and s.operators is not None and s.counters.height and s.kernel_sequences is not None
    assert [a.count for a in s.annotations] == [a.count for a in single.annotations] and s.annotations[0].count
    assert s.collectives is not None and s.roofline is not None and s.critical_path is not None
    assert not any("--one-process" in n for n in s.notes)


@pytest.mark.parametrize("ranks_per_task", [1, 3, 16])
def test_any_cut_of_the_ranks_into_tasks_gives_the_same_summary_and_rules(
    jobs: dict[int, Path], ranks_per_task: int
) -> None:
    """A task reads several partitions at once and runs the analyses over all of them; where a task's cut falls
    (one rank a task, 3 across a host's boundary, the whole job in one) changes no number, no rule verdict and no
    rank's finding: the "per rank" rules and the critical path's parts still judge each rank alone."""
    from ktrace.fleet.summary_map import same_results
    from ktrace.fleet.task_groups import partition_groups
    from ktrace.presentation.rules_json import report_to_dict

    path = jobs[16]
    n = len(list(store.partitions(path)))  # the 16 ranks and each host's own partition (its counters)
    cut_at = [len(g) for g in partition_groups(path, 1, ranks_per_task)]
    assert cut_at == [ranks_per_task] * (n // ranks_per_task) + ([n % ranks_per_task] if n % ranks_per_task else [])
    with InProcessEngine() as engine:
        cut = summarize_store(path, engine, annotations=ANNOTATIONS, rules_config=True, ranks_per_task=ranks_per_task)
        alone = summarize_store(path, engine, annotations=ANNOTATIONS, rules_config=True, ranks_per_task=1)
    whole = store.read(path)
    assert fleet_differences(summarize(whole, annotations=ANNOTATIONS), cut, rank_heatmap(whole)) == []
    assert same_results(cut, alone)
    assert cut.rules is not None and alone.rules is not None
    assert report_to_dict(cut.rules) == report_to_dict(alone.rules)


def test_without_patterns_the_reports_default_annotations_are_histogrammed(jobs: dict[int, Path]) -> None:
    """annotations=None: the patterns dashboard.default_annotations picks (forward, backward, optimizer.step)."""
    with InProcessEngine() as engine:
        fleet = summarize_store(jobs[16], engine, annotations=None)
    single = summarize(store.read(jobs[16]), annotations=DEFAULT_ANNOTATION_PATTERNS)
    assert [a.pattern for a in fleet.summary.annotations] == list(DEFAULT_ANNOTATION_PATTERNS)
    assert fleet_differences(single, fleet) == []


def test_fleet_differences_sees_a_wrong_field_of_the_new_ones(jobs: dict[int, Path]) -> None:
    """The comparison is not blind to the fields added to the rank-by-rank Summary."""
    import dataclasses

    import polars as pl

    with InProcessEngine() as engine:
        fleet = summarize_store(jobs[8], engine, annotations=ANNOTATIONS)
    single = summarize(store.read(jobs[8]), annotations=ANNOTATIONS)
    s = fleet.summary
    assert s.kernel_sequences is not None and s.annotations
    changed = {
        "counters": s.counters.with_columns(pl.col("samples") + 1),
        "precision": s.precision.with_columns(pl.col("kernels") + 1),
        "kernel_sequences": dataclasses.replace(s.kernel_sequences, distinct=s.kernel_sequences.distinct + 1),
        "annotations": (dataclasses.replace(s.annotations[0], counts=s.annotations[0].counts[::-1]),),
        "critical_path": None,
    }
    for name, value in changed.items():
        wrong = dataclasses.replace(fleet, summary=dataclasses.replace(s, **{name: value}))
        assert any(d.startswith(name) for d in fleet_differences(single, wrong)), name


def _json_keys(path: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    assert main(["summary", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return key_paths(doc)


def test_summary_json_has_the_same_keys_at_every_rank_count(
    jobs: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """8 and 15 ranks are summarized in one process, 16, 64 and 256 rank by rank (the default path): the JSON
    has the same keys, nested ones included."""
    assert FLEET_MIN_RANKS == 16
    paths = {**jobs, 256: _job(256, tmp_path, kernels_per_step=4)}
    keys = {n: _json_keys(p, capsys) for n, p in paths.items()}
    assert {"operators.top_by_gpu_time[].gpu_ns", "roofline.reason", "collectives.skew.per_rank[].rank"} <= keys[8]
    for n, found in keys.items():
        assert found == keys[8], (n, sorted(found ^ keys[8]))


def test_no_ops_reaches_the_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--no-ops: the workers read no ops table, as one process reads none: the DLRM job (Kineto) then has no
    operators and no roofline on both paths."""
    path = tmp_path / "dlrm.ktrace"
    store.write(load(fixture_path("dlrm")), path)
    docs = []
    for extra in ([], ["--workers", "1"]):
        assert main(["summary", str(path), "--json", "--no-ops", *extra]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    assert docs[0]["operators"] is None and docs[1]["operators"] is None
    assert docs[0]["roofline"] == docs[1]["roofline"]


def test_a_rules_files_gpu_peaks_reach_the_rank_by_rank_roofline(tmp_path: Path) -> None:
    """summarize(gpu_peaks=) (a rules file's [gpu_peaks."NAME"] rows): the same peaks rank by rank."""
    from ktrace.analysis.gpu_peaks import GpuPeaks

    path = tmp_path / "dlrm.ktrace"
    store.write(load(fixture_path("dlrm")), path)
    peaks = {"V100": GpuPeaks("test V100", 1.0, 2.0, 3.0, None, None, 4.0, None, "test")}
    with InProcessEngine() as engine:
        fleet = summarize_store(path, engine, gpu_peaks=peaks)
    single = summarize(store.read(path), gpu_peaks=peaks)
    assert fleet.summary.roofline is not None and fleet.summary.roofline.peaks == peaks["V100"]
    assert fleet_differences(single, fleet) == []


@pytest.mark.parametrize("kind", ["in-process", "processes"])
def test_the_critical_path_rule_is_exact_from_the_jobs_critical_path(tmp_path: Path, kind: str) -> None:
    """Rank by rank, the Summary holds the job's critical path (fleet.critical_path_map, one process's) and
    CPUBoundCriticalPath reads it: its result is run_rules' on the whole store, not a per-rank tally."""
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.testing.fleet_compare import critical_path_differences

    path = tmp_path / "job.ktrace"
    store.write(generate(SyntheticConfig(steps=3, kernels_per_step=8, ranks=4, nodes=2)), path)
    with InProcessEngine() if kind == "in-process" else ProcessEngine(2) as engine:
        fleet = summarize_store(path, engine, rules_config=True)
    whole = store.read(path)
    assert critical_path_differences(summarize(whole).critical_path, fleet.summary.critical_path) == []
    got, alone = fleet.rules.result("CPUBoundCriticalPath"), run_rules(whole).result("CPUBoundCriticalPath")
    assert got == alone and got.skipped is None and "on 4 ranks" in got.details["window"]


def test_dropped_records_rank_by_rank_count_the_stores_health_and_each_ranks_own(tmp_path: Path) -> None:
    """Every partition has dropped records of its own (partition.json, as `ktrace run` writes it): the driver
    passes the store's health to the rules' fold, so DroppedRecords counts what one process counts (rebuilt
    from the ranks' counts alone, min(own) > 0 is counted once instead of per rank)."""
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.model.layout import PARTITION_META_FILE

    path = tmp_path / "job.ktrace"
    store.write(generate(SyntheticConfig(steps=3, kernels_per_step=4, ranks=4, nodes=1)), path)
    for i, (_, _, folder) in enumerate(store.partitions(path)):
        health = {"health": {"cupti_dropped_records": 2 + i}, "notes": []}
        (folder / PARTITION_META_FILE).write_text(json.dumps(health))
    whole = run_rules(store.read(path)).result("DroppedRecords")
    with InProcessEngine() as engine:
        got = summarize_store(path, engine, rules_config=True).rules.result("DroppedRecords")
    assert got == whole and whole.triggered == sum(2 + i for i in range(len(list(store.partitions(path)))))
