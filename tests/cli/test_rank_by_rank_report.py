"""`ktrace check|report` of a store of 16 ranks or more: every rule runs, and the report has the shape of a 15-rank
one (the same renderers, sections and JSON keys) with a title that names the store, hosts, ranks and GPUs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ktrace.analysis.rules.engine import RULE_ORDER, all_rules
from ktrace.analysis.rules.rank_rules import MAX_RANK_FINDINGS
from ktrace.cli import main
from ktrace.fleet.early_start import FLEET_MIN_RANKS
from ktrace.model import store
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.fleet_compare import key_paths
from ktrace.testing.synthetic import SyntheticConfig, generate

OLD_SKIP = "needs the single-process path"
"""What the rank-by-rank check said of the 19 rules it did not run."""


def _fleet_store(path: Path, ranks: int, hosts: int) -> Path:
    store.write(generate_fleet(FleetConfig(ranks=ranks, hosts=hosts, steps=6, kernels_per_step=8)).trace, path)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The same generated job at 15 ranks (one process) and 16 ranks (rank by rank)."""
    folder = tmp_path_factory.mktemp("jobs")
    return {
        FLEET_MIN_RANKS - 1: _fleet_store(folder / "job15.ktrace", FLEET_MIN_RANKS - 1, 3),
        FLEET_MIN_RANKS: _fleet_store(folder / "job16.ktrace", FLEET_MIN_RANKS, 4),
    }


@pytest.fixture(scope="module")
def counters_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 ranks on 2 nodes with node counters, memcpys and slow steps: most rules have data."""
    path = tmp_path_factory.mktemp("counters") / "job.ktrace"
    store.write(generate(SyntheticConfig(steps=4, kernels_per_step=10, ranks=FLEET_MIN_RANKS, nodes=2)), path)
    return path


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(args) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_check_of_16_ranks_runs_all_25_rules(counters_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(counters_store), "-v", "--fail-on", "never"]) == 0
    out, err = capsys.readouterr()
    assert OLD_SKIP not in out and "rank by rank on" in err and err.startswith(f"{len(RULE_ORDER)} rules:")
    listed = [line.split()[1].rstrip(":") for line in out.splitlines()]
    assert set(listed) == set(RULE_ORDER) and len(RULE_ORDER) == 25
    doc = _json(["check", str(counters_store), "--json", "--fail-on", "never"], capsys)
    rules = {r["rule"]: r for r in doc["rules"]}  # type: ignore[attr-defined]
    assert list(rules) == list(RULE_ORDER)
    assert sum(r["status"] != "skipped" for r in rules.values()) >= 12  # the per-rank rules ran on the ranks' data
    whole = _json(["check", str(counters_store), "--json", "--fail-on", "never", "--one-process"], capsys)
    alone = {r["rule"]: r for r in whole["rules"]}  # type: ignore[attr-defined]
    for rule in all_rules():
        if rule.fleet_mode == "exact":
            assert rules[rule.name] == alone[rule.name], rule.name


def test_check_names_the_rank_of_a_per_rank_finding(counters_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(counters_store), "--set", "ExcessiveSync.max_time_pct=0", "--fail-on", "never"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if " ExcessiveSync: " in ln]
    assert len(lines) == 1 + MAX_RANK_FINDINGS  # the job-wide verdict, then the first ranks' findings, each named
    assert f"ExcessiveSync: fired on {FLEET_MIN_RANKS} of the {FLEET_MIN_RANKS} ranks it ran on (" in lines[0]
    assert all(re.search(r"ExcessiveSync: node\d/rank\d+: ", ln) for ln in lines[1:]), lines[:2]


def test_list_rules_says_how_each_rule_runs_rank_by_rank(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--list-rules"]) == 0
    out = capsys.readouterr().out
    assert "StepOutlier [sagemaker, warning; rank by rank: exact]" in out
    assert "GPUGaps [timeline, warning; rank by rank: per rank]" in out


LATE_RANKS = "### critical path: late ranks"
"""A table of the critical path shown only where the path crosses to a late rank: the 15- and 16-rank jobs differ
there (rank by rank and one process agree on each, test_summary_map / test_same_summary)."""


def _headings(markdown: str) -> list[str]:
    """The report's headings, their numbers as N (a heading may count the job's calls)."""
    lines = markdown.splitlines()
    return [re.sub(r"\d[\d,.]*", "N", ln) for ln in lines if ln.startswith("##") and not ln.startswith(LATE_RANKS)]


DETAILS = "rules.rules[].details."
"""A rule's details: keys that are data (ranks' names), and a per-rank rule's job result adds ranks_evaluated and
ranks_skipped (rules.rank_rules_fold): not compared."""


CROSSINGS = "summary.critical_path.crossings[]."
"""The rows of LATE_RANKS' table (an empty list where the path crosses to no late rank)."""


def _keys(doc: dict[str, object]) -> set[str]:
    return {k for k in key_paths(doc) if not k.startswith((DETAILS, CROSSINGS))}


def test_report_of_16_ranks_has_the_shape_of_15(
    stores: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md = {}
    for ranks, path in stores.items():
        target = tmp_path / f"{ranks}.md"
        assert main(["report", str(path), "-o", str(target)]) == 0
        md[ranks] = target.read_text()
    assert _headings(md[FLEET_MIN_RANKS]) == _headings(md[FLEET_MIN_RANKS - 1])
    assert sum(line.startswith("## Rule: ") for line in _headings(md[FLEET_MIN_RANKS])) == len(RULE_ORDER)
    docs = {n: _json(["report", str(p), "-f", "json"], capsys) for n, p in stores.items()}
    few, many = docs[FLEET_MIN_RANKS - 1], docs[FLEET_MIN_RANKS]
    assert many.keys() == few.keys() and "fleet" not in many
    assert _keys(many) == _keys(few)  # every key, nested ones too
    assert [r["rule"] for r in many["rules"]["rules"]] == list(RULE_ORDER)  # type: ignore[index]
    assert all(OLD_SKIP not in str(r["skipped"]) for r in many["rules"]["rules"])  # type: ignore[index]
    assert many["rule_docs"] == few["rule_docs"]
    assert len(many["rank_heatmap"]["ranks"]) == FLEET_MIN_RANKS  # type: ignore[index]
    whole = _json(["report", str(stores[FLEET_MIN_RANKS]), "-f", "json", "--one-process"], capsys)
    assert many["steps_histogram"] == whole["steps_histogram"] and many["rank_heatmap"] == whole["rank_heatmap"]
    for key in ("utilization", "system_usage"):  # the events' curves and statistics, each rank's in the job's bins
        assert many[key] == whole[key], key
    assert many["summary"]["critical_path"] == whole["summary"]["critical_path"]  # type: ignore[index]


def test_report_title_names_the_store_hosts_ranks_and_gpus(
    stores: dict[int, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for ranks, path in stores.items():
        doc = _json(["report", str(path), "-f", "json"], capsys)
        title = str(doc["title"])
        hosts = len(doc["trace"]["hosts"])  # type: ignore[index]
        assert title.startswith(f"ktrace profiling report: {path.name} (") and f"{ranks} ranks" in title, title
        assert f"{hosts} hosts" in title or all(h in title for h in doc["trace"]["hosts"]), title  # type: ignore[index]
        assert doc["trace"]["gpus"] and all(g in title for g in doc["trace"]["gpus"]), title  # type: ignore[index]
    named = _json(["report", str(stores[FLEET_MIN_RANKS]), "-f", "json", "--title", "mine"], capsys)
    assert named["title"] == "mine"
