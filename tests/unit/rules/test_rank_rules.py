"""Every rule on the rank-by-rank path: "exact" rules report what run_rules reports on the whole trace, "per rank"
rules report run_rules' findings on each rank's own trace, named by their rank."""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
from collections import Counter
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.analysis.rules.base import SEVERITIES
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.engine import RULE_ORDER, RulesReport, all_rules, run_rules
from ktrace.analysis.rules.rank_rules import (
    MAX_RANK_FINDINGS,
    NO_RANK,
    RuleParts,
    rank_label,
    rank_rule_part,
    reduce_rule_parts,
)
from ktrace.analysis.rules.rank_rules_fold import COMPACT_EVERY, RuleFold
from ktrace.analysis.summary import summarize
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.layout import PARTITION_META_FILE
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.synthetic import SyntheticConfig, generate

EXACT = {r.name for r in all_rules() if r.fleet_mode == "exact"}


def _store(trace: Trace, path: Path) -> Path:
    store.write(trace, path)
    return path


@pytest.fixture(scope="module", params=["fleet", "synthetic", "dlrm"])
def job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated multi-host job with a straggler, a multi-node synthetic job with node counters, the real
    8-rank DLRM trace: each as a store, one partition per rank."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "fleet":
        trace = generate_fleet(FleetConfig(ranks=8, hosts=2, steps=6, kernels_per_step=8)).trace
    elif request.param == "synthetic":
        trace = generate(SyntheticConfig(steps=5, kernels_per_step=40, ranks=8, nodes=2, slow_step_every=3))
    else:
        trace = load(fixture_path("dlrm"))
    return _store(trace, folder / "job.ktrace")


def _ranks(path: Path) -> list[tuple[str, int]]:
    return [(n, r) for n, r, _ in store.partitions(path)]


def _parts(path: Path, config: RulesConfig | None = None) -> list[RuleParts]:
    return [rank_rule_part(store.read(path, only={key}), config) for key in _ranks(path)]


def _reduced(path: Path, config: RulesConfig | None = None) -> RulesReport:
    parts = _parts(path, config)
    return reduce_rule_parts(parts[::-1], summarize(store.read(path)), config)  # the arrival order does not matter


def test_every_rule_runs_in_rule_order_and_exact_rules_equal_the_whole_trace(job: Path) -> None:
    reduced = _reduced(job)
    whole = run_rules(store.read(job))
    assert tuple(r.rule for r in reduced.results) == RULE_ORDER
    for name in EXACT:
        assert reduced.result(name) == whole.result(name), name
    assert any(not reduced.result(n).skipped for n in EXACT)


def test_per_rank_rules_are_each_ranks_own_findings_named_by_the_rank(job: Path) -> None:
    reduced = _reduced(job)
    own = {key: run_rules(store.read(job, only={key})) for key in _ranks(job)}
    for rule in all_rules():
        if rule.name in EXACT:
            continue
        got = reduced.result(rule.name)
        ran = [(key, r.result(rule.name)) for key, r in sorted(own.items()) if not r.result(rule.name).skipped]
        assert got.datapoints == sum(r.datapoints for _, r in ran), rule.name
        assert got.triggered == sum(r.triggered for _, r in ran), rule.name
        fired = [(key, r) for key, r in ran if r.findings]
        verdict, *findings = got.findings or (None,)
        assert (verdict is not None) == bool(fired), rule.name
        shown = fired[:MAX_RANK_FINDINGS]
        assert [f.message for f in findings] == [
            f"{rank_label([key])}: {f.message}" for key, r in shown for f in r.findings
        ], rule.name
        assert [(f.severity, f.datapoints, len(f.evidence)) for f in findings] == [
            (f.severity, f.datapoints, len(f.evidence)) for _, r in shown for f in r.findings
        ]
        if verdict is not None:  # the job-wide verdict: which ranks it fired on, at their worst severity
            assert verdict.message.startswith(f"fired on {len(fired)} of the {len(ran)} ranks it ran on"), rule.name
            assert [(e.node, e.rank, e.value) for e in verdict.evidence] == [
                (n, r if r >= 0 else None, float(res.triggered)) for (n, r), res in fired
            ]
            worst = max((f.severity for _, r in fired for f in r.findings), key=SEVERITIES.index)
            assert verdict.severity == worst and (verdict.datapoints, verdict.triggered) == (
                got.datapoints,
                got.triggered,
            )
        assert (got.skipped is None) == bool(ran), rule.name
        for f in got.findings:
            assert all(e.node is not None for e in f.evidence), rule.name
    labels = tuple(f"{rank_label([key])}: " for key in own)
    assert all(f.message.startswith(labels) for r in reduced.results if r.rule not in EXACT for f in r.findings[1:])


def test_the_configuration_reaches_both_kinds_of_rules(job: Path) -> None:
    config = RulesConfig(
        params={"StepOutlier": {"stddev": 0.5, "n_outliers": 0}, "ExcessiveSync": {"max_time_pct": 0.0}},
        disabled=frozenset({"GPUGaps"}),
        severity={"ExcessiveSync": "error"},
    )
    reduced = _reduced(job, config)
    assert "GPUGaps" not in {r.rule for r in reduced.results} and len(reduced.results) == len(RULE_ORDER) - 1
    assert reduced.result("StepOutlier") == run_rules(store.read(job), config).result("StepOutlier")
    sync = reduced.result("ExcessiveSync")
    assert sync.params["max_time_pct"] == 0.0 and all(f.severity == "error" for f in sync.findings)


def test_parts_are_small_and_pickle(job: Path) -> None:
    for part in _parts(job):
        data = pickle.dumps(part)
        assert len(data) < 200_000
        back = pickle.loads(data)
        assert back.ranks == part.ranks and back.per_rank == part.per_rank
        assert len(part.ranks) == 1 and {r.rule for r in part.per_rank} == {
            r.name for r in all_rules() if r.name not in EXACT
        }


def test_no_rank_skips_every_rule_saying_so(job: Path) -> None:
    reduced = reduce_rule_parts([], summarize(store.read(job)))
    assert tuple(r.rule for r in reduced.results) == RULE_ORDER
    assert {r.skipped for r in reduced.results} == {NO_RANK}


def test_a_rule_skipped_on_every_rank_is_skipped_with_their_most_frequent_reason(tmp_path: Path) -> None:
    path = _store(generate(SyntheticConfig(steps=3, kernels_per_step=4, ranks=2, nodes=1)), tmp_path / "s.ktrace")
    reduced = _reduced(path)
    own = [run_rules(store.read(path, only={key})) for key in _ranks(path)]
    skipped = [n for n in RULE_ORDER if n not in EXACT and all(r.result(n).skipped for r in own)]
    assert skipped
    for name in skipped:
        reasons = Counter(r.result(name).skipped for r in own)
        assert reduced.result(name).skipped == reasons.most_common(1)[0][0], name


def _with_health(path: Path, own: list[int]) -> None:
    """Each partition's own cupti_dropped_records count (partition.json, as `ktrace run` writes it)."""
    for (_, _, folder), n in zip(store.partitions(path), own, strict=True):
        (folder / PARTITION_META_FILE).write_text(json.dumps({"health": {"cupti_dropped_records": n}, "notes": []}))


def test_dropped_records_count_the_stores_health_once(tmp_path: Path) -> None:
    """An import keeps the job's health in meta.json, which every rank read alone carries: counted once."""
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=4, ranks=4, nodes=1))
    trace = dataclasses.replace(trace, meta=trace.meta.with_health({"cupti_dropped_records": 7}))
    path = _store(trace, tmp_path / "s.ktrace")
    got, whole = _reduced(path).result("DroppedRecords"), run_rules(store.read(path)).result("DroppedRecords")
    assert got == whole and got.triggered == 7 and len(got.findings) == 1 and got.findings[0].severity == "error"


@pytest.mark.parametrize("own", [[0, 2, 3, 5, 1], [4, 2, 3, 5, 1]])
def test_dropped_records_add_each_ranks_own_counts(tmp_path: Path, own: list[int]) -> None:
    path = _store(generate(SyntheticConfig(steps=3, kernels_per_step=4, ranks=4, nodes=1)), tmp_path / "s.ktrace")
    _with_health(path, own)
    whole = run_rules(store.read(path)).result("DroppedRecords")
    assert whole.triggered == sum(own)
    parts, summary = _parts(path), summarize(store.read(path))
    job_health = store.read(path, skip=TABLES).meta.health
    assert reduce_rule_parts(parts, summary, job_health=job_health).result("DroppedRecords") == whole
    rebuilt = reduce_rule_parts(parts, summary).result("DroppedRecords")  # from the ranks' counts alone
    assert rebuilt.triggered == (sum(own) if min(own) == 0 else sum(own) - (len(own) - 1) * min(own))


def test_the_fold_holds_a_bounded_state_and_ignores_the_arrival_order(tmp_path: Path) -> None:
    """77 partitions (past COMPACT_EVERY): the exact inputs are merged as they come, a rule that fires on every
    rank keeps 8 ranks' findings, and any arrival order gives the report of the ordered parts."""
    path = _store(generate(SyntheticConfig(steps=3, kernels_per_step=4, ranks=70, nodes=7)), tmp_path / "s.ktrace")
    config = RulesConfig(params={"ExcessiveSync": {"max_time_pct": 0.0}})
    parts = _parts(path, config)
    assert len(parts) > COMPACT_EVERY
    summary = summarize(store.read(path))
    fold = RuleFold(config)
    for part in random.Random(7).sample(parts, len(parts)):
        fold.add(part)
        assert len(fold.exact) < COMPACT_EVERY
        assert all(len(t.findings) <= 2 * MAX_RANK_FINDINGS for t in fold.tallies.values())
    shuffled = fold.finish(summary)
    assert shuffled == reduce_rule_parts(parts, summary, config)
    whole = run_rules(store.read(path), config)
    for name in EXACT:
        assert shuffled.result(name) == whole.result(name), name
    sync = shuffled.result("ExcessiveSync")
    assert sync.triggered == 70 and len(sync.findings) == 1 + MAX_RANK_FINDINGS
    assert sync.findings[0].message.startswith("fired on 70 of the 70 ranks it ran on (node0/rank0, node0/rank1")
    assert [f.message.split(":")[0] for f in sync.findings[1:]] == [f"node0/rank{r}" for r in range(8)]
