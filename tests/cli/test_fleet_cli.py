"""`ktrace summary|check STORE` rank by rank: chosen by rank count or --workers, the engine named, numbers equal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.analysis.rules.fleet_rules import FLEET_CHECKS, NEEDS_ONE_PROCESS
from ktrace.cli import main
from ktrace.fleet.summary_map import FLEET_MIN_RANKS
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


def test_summary_with_workers_is_the_fleet_summary_with_the_same_numbers(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    single = _json(["summary", str(dlrm_store), "--json"], capsys)
    assert "fleet" not in single and "top_by_time" in single  # below the threshold: today's JSON, unchanged
    fleet = _json(["summary", str(dlrm_store), "--json", "--workers", "2"], capsys)["fleet"]
    assert isinstance(fleet, dict) and fleet["engine"] == "processes (2 workers)"
    for key in ("ranks", "kernels", "phases", "busy", "idle", "step_stats", "overlap", "load_balance", "stragglers"):
        assert fleet[key] == single[key], key
    strip = {"p50_ns", "p95_ns"}
    assert [{k: v for k, v in r.items() if k not in strip} for r in fleet["top_by_time"]] == [  # type: ignore[union-attr]
        {k: v for k, v in r.items() if k not in strip}
        for r in single["top_by_time"]  # type: ignore[union-attr]
    ]


def test_summary_text_names_the_engine(dlrm_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(dlrm_store), "--workers", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the terminal wraps long lines
    assert "engine in-process" in out and "ranks, slowest first" in out and "within 0.27 %" in out
    assert "stragglers (work = step time less communication" in out and "GPU idle +" in out


def test_a_store_of_many_ranks_is_summarized_rank_by_rank_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "wide.ktrace"
    store.write(generate(SyntheticConfig(steps=2, kernels_per_step=4, ranks=FLEET_MIN_RANKS, nodes=4)), path)
    fleet = _json(["summary", str(path), "--json", "--workers", "1"], capsys)["fleet"]
    assert isinstance(fleet, dict) and fleet["ranks"] == FLEET_MIN_RANKS
    assert "fleet" in _json(["summary", str(path), "--json"], capsys)
    # --one-process: the whole store in this process, with every section the rank-by-rank path leaves out
    whole = _json(["summary", str(path), "--json", "--one-process"], capsys)
    assert "fleet" not in whole and whole["ranks"] == FLEET_MIN_RANKS and "critical_path" in whole
    assert main(["summary", str(path), "--one-process", "--workers", "2"]) == ExitCode.USAGE
    assert "--one-process contradicts" in capsys.readouterr().err


def test_check_runs_the_reduced_rules_alike_and_skips_the_others_saying_why(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    single = _json(["check", str(dlrm_store), "--json", "--fail-on", "never"], capsys)
    fleet = _json(["check", str(dlrm_store), "--json", "--fail-on", "never", "--workers", "2"], capsys)
    by_rule = {r["rule"]: r for r in fleet["rules"]}  # type: ignore[attr-defined]
    alone = {r["rule"]: r for r in single["rules"]}  # type: ignore[attr-defined]
    assert by_rule.keys() == alone.keys()
    for name, result in by_rule.items():
        if name in FLEET_CHECKS:
            assert result == alone[name], name
        else:
            assert result["skipped"] == NEEDS_ONE_PROCESS, name


def test_annotation_with_workers_is_a_usage_error_not_a_silent_single_process(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", str(dlrm_store), "--annotation", "forward", "--workers", "2"]) == ExitCode.USAGE
    assert "--annotation needs the single-process path" in capsys.readouterr().err


def test_workers_on_a_trace_file_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(fixture_path("alexnet")), "--workers", "2"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a .ktrace store" in err and "Traceback" not in err


@pytest.mark.parametrize(("fmt", "marker"), [("md", "## Ranks, slowest first"), ("html", "<h2>Load balance</h2>")])
def test_report_of_a_store_rank_by_rank(
    dlrm_store: Path, tmp_path: Path, fmt: str, marker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / f"fleet.{fmt}"
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(target)]) == 0
    text = target.read_text()
    assert marker in text and "processes (2 workers)" in text and "Rules on the reduced tables" in text
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(target), "--force"]) == 0  # its own output


def test_report_markdown_of_a_store_shows_units_not_raw_json_numbers(dlrm_store: Path, tmp_path: Path) -> None:
    """It printed 'launch_latency_ns_p99 | 3673155.295617' and 'idle_share | 0.938098': the JSON's numbers."""
    target = tmp_path / "fleet.md"
    assert main(["report", str(dlrm_store), "--workers", "1", "-o", str(target)]) == 0
    text = target.read_text()
    latency = text[text.index("## Launch-to-run latency") :].split("\n\n")[1].splitlines()
    assert latency[0] == "| kind | count | launch latency mean | launch latency p50 | launch latency p99 |"
    assert all(line.count(" µs |") + line.count(" ms |") == 3 for line in latency[2:]), latency
    idle = text[text.index("## GPU idle by cause") :].split("\n\n")[1].splitlines()
    assert idle[0] == "| idle category | idle | gaps | idle share |"
    assert all(line.rstrip(" |").endswith("%") for line in idle[2:]), idle
    assert "_ns" not in text.split("## Rules on the reduced tables")[0]


def test_report_json_has_the_fleet_where_one_process_has_the_summary(
    dlrm_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _json(["report", str(dlrm_store), "--workers", "2", "-f", "json"], capsys)
    single = _json(["report", str(dlrm_store), "-f", "json"], capsys)
    assert "summary" in single and "fleet" not in single
    fleet = doc["fleet"]
    assert isinstance(fleet, dict) and isinstance(single["summary"], dict)
    assert fleet["busy"] == single["summary"]["busy"] and fleet["engine"] == "processes (2 workers)"
    assert fleet["stragglers"] == single["summary"]["stragglers"] and fleet["stragglers"]["table"]
    assert doc["rank_heatmap"] == single["rank_heatmap"] and len(doc["rank_heatmap"]["busy_pct"]) == 8  # type: ignore[index, arg-type]
    assert doc["rule_docs"] == single["rule_docs"]


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
    assert "### Stragglers" in section and "### GPU busy share per rank over time" in section
    page = tmp_path / "fleet.html"
    assert main(["report", str(dlrm_store), "--workers", "2", "-o", str(page)]) == 0
    html = page.read_text()
    assert '<section id="ranks"><h2>Ranks</h2>' in html and 'data-fig="3"' in html and "Plotly.newPlot" in html
