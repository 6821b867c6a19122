"""`ktrace summary|check STORE` rank by rank: chosen by rank count or --workers, the engine named, numbers equal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.analysis.rules.engine import all_rules
from ktrace.cli import main
from ktrace.fleet.early_start import FLEET_MIN_RANKS
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.errors import ExitCode
from ktrace.testing.synthetic import SyntheticConfig, generate


@pytest.fixture(scope="module")
def dlrm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dlrm") / "dlrm.ktrace"
    store.write(load(fixture_path("dlrm")), path)
    return path


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(args) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    return data


def test_summary_with_workers_is_the_same_summary_with_the_same_numbers(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    single = _json(["summary", str(dlrm_store), "--json"], capsys)
    fleet = _json(["summary", str(dlrm_store), "--json", "--workers", "2"], capsys)
    assert fleet.keys() == single.keys() and "fleet" not in fleet  # one JSON shape on both paths
    exact = ("ranks", "kernels", "phases", "busy", "idle", "step_stats", "overlap", "load_balance", "stragglers")
    for key in (*exact, "active", "precision", "activity", "memory", "operators", "kernel_sequences"):
        assert fleet[key] == single[key], key
    strip = {"p50_ns", "p95_ns"}
    assert [{k: v for k, v in r.items() if k not in strip} for r in fleet["top_by_time"]] == [  # type: ignore[union-attr]
        {k: v for k, v in r.items() if k not in strip}
        for r in single["top_by_time"]  # type: ignore[union-attr]
    ]


def test_summary_text_rank_by_rank_is_the_one_process_text(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", str(dlrm_store), "--workers", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the terminal wraps long lines
    assert "ranks, slowest first" not in out and "GPU busy / idle per device" in out and "job phases" in out
    assert "stragglers (work = step time less communication" in out and "critical_path: computed on one" not in out
    assert "critical path of ProfilerStep#10 (the only step) on 8 ranks" in out  # the job's, rank by rank


def test_a_store_of_many_ranks_is_summarized_rank_by_rank_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wide.ktrace"
    store.write(generate(SyntheticConfig(steps=2, kernels_per_step=4, ranks=FLEET_MIN_RANKS, nodes=4)), path)
    fleet = _json(["summary", str(path), "--json", "--workers", "1"], capsys)
    assert fleet["ranks"] == FLEET_MIN_RANKS and fleet["critical_path"] is not None
    assert _json(["summary", str(path), "--json"], capsys).keys() == fleet.keys()
    # --one-process: the whole store in this process, the same critical path
    whole = _json(["summary", str(path), "--json", "--one-process"], capsys)
    assert (
        "fleet" not in whole and whole["ranks"] == FLEET_MIN_RANKS and whole["critical_path"] == fleet["critical_path"]
    )
    assert main(["summary", str(path), "--one-process", "--workers", "2"]) == ExitCode.USAGE
    assert "--one-process contradicts" in capsys.readouterr().err


def test_check_runs_every_rule_the_exact_ones_alike(dlrm_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    single = _json(["check", str(dlrm_store), "--json", "--fail-on", "never"], capsys)
    fleet = _json(["check", str(dlrm_store), "--json", "--fail-on", "never", "--workers", "2"], capsys)
    by_rule = {r["rule"]: r for r in fleet["rules"]}  # type: ignore[attr-defined]
    alone = {r["rule"]: r for r in single["rules"]}  # type: ignore[attr-defined]
    assert list(by_rule) == list(alone)
    for rule in all_rules():
        if rule.fleet_mode == "exact":
            assert by_rule[rule.name] == alone[rule.name], rule.name
        else:  # run on each rank: skipped only where one process skips it too
            assert (by_rule[rule.name]["status"] == "skipped") == (alone[rule.name]["status"] == "skipped"), rule.name


def test_annotation_and_by_shape_with_workers_are_computed_rank_by_rank(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["summary", str(dlrm_store), "--json", "--annotation", "ProfilerStep", "--by-shape"]
    single, fleet = _json(args, capsys), _json([*args, "--workers", "2"], capsys)
    assert fleet["annotations"][0]["counts"] == single["annotations"][0]["counts"]  # type: ignore[index]
    assert fleet["operators"] == single["operators"]


def test_workers_on_a_trace_file_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(fixture_path("alexnet")), "--workers", "2"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a .ktrace store" in err and "Traceback" not in err


@pytest.mark.parametrize(("fmt", "marker"), [("md", "## Ranks"), ("html", '<section id="ranks"><h2>Ranks</h2>')])
def test_report_of_a_store_rank_by_rank(
    dlrm_store: Path, tmp_path: Path, fmt: str, marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / f"fleet.{fmt}"
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(target)]) == 0
    text = target.read_text()
    assert marker in text and "Rule: CPUBoundCriticalPath" in text and "needs the single-process path" not in text
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(target), "--force"]) == 0  # its own output


def test_report_json_rank_by_rank_has_the_single_process_keys(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _json(["report", str(dlrm_store), "--workers", "2", "-f", "json"], capsys)
    single = _json(["report", str(dlrm_store), "-f", "json"], capsys)
    assert doc.keys() == single.keys() and "fleet" not in doc
    summary, alone = doc["summary"], single["summary"]
    assert isinstance(summary, dict) and isinstance(alone, dict) and summary.keys() == alone.keys()
    assert summary["busy"] == alone["busy"] and summary["stragglers"] == alone["stragglers"]
    assert doc["rank_heatmap"] == single["rank_heatmap"] and len(doc["rank_heatmap"]["busy_pct"]) == 8  # type: ignore[index, arg-type]
    assert doc["rule_docs"] == single["rule_docs"] and doc["steps_histogram"] == single["steps_histogram"]


def _ranks_part(markdown: str) -> str:
    """The "## Ranks" section of a Markdown report, up to the next section."""
    start = markdown.index("\n## Ranks\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end >= 0 else len(markdown)]


def test_report_rank_views_rank_by_rank_are_the_single_process_ones(dlrm_store: Path, tmp_path: Path) -> None:
    """The fleet report draws the heatmaps and straggler tables with the single-process report's renderers, from
    the reduced views: the Markdown Ranks section is the same text, the HTML has the heatmap figures."""
    single, fleet = tmp_path / "single.md", tmp_path / "fleet.md"
    assert main(["report", str(dlrm_store), "-o", str(single)]) == 0
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(fleet)]) == 0
    section = _ranks_part(fleet.read_text())
    assert section == _ranks_part(single.read_text())
    assert "### Stragglers" in section and "### GPU busy outside communication % per rank" in section
    page = tmp_path / "fleet.html"
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(page)]) == 0
    html = page.read_text()
    assert '<section id="ranks"><h2>Ranks</h2>' in html and 'data-fig="3"' in html and "Plotly.newPlot" in html
