"""Every renderer takes the typed Report (the Dashboard model), and says the same as the JSON document of it."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from ktrace.presentation.report_model import Report


@pytest.fixture(scope="module")
def report(synthetic_trace) -> Report:  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report

    return build_report(synthetic_trace, annotations=("forward",))


def _without_column(report: Report, frame: str, column: str) -> Report:
    """`report` with one column gone from a summary frame (what a rename in the analysis would do)."""
    summary = report.dashboard.summary
    renamed = dataclasses.replace(summary, **{frame: getattr(summary, frame).drop(column)})
    return dataclasses.replace(report, dashboard=dataclasses.replace(report.dashboard, summary=renamed))


@pytest.mark.parametrize(
    ("frame", "column"),
    [("latency", "queue_delay_ns_p50"), ("idle", "gaps"), ("top_by_time", "mean_ns"), ("counters", "instance")],
)
def test_a_column_the_renderers_read_is_never_rendered_blank(report: Report, frame: str, column: str) -> None:
    """A renamed summary column stops the report (KeyError) instead of printing "-" or "" in its cells."""
    from ktrace.report.html import render_html
    from ktrace.report.markdown import render_markdown

    assert getattr(report.dashboard.summary, frame).height, frame  # the frame has rows, so its cells are read
    broken = _without_column(report, frame, column)
    with pytest.raises(KeyError, match=column):
        render_markdown(broken) if frame != "idle" else render_html(broken)


def test_verdicts_and_counts_match_the_json_document(report: Report) -> None:
    from ktrace.presentation.verdicts import finding_counts, rule_status, triggered_first, verdict
    from ktrace.report.content import report_document

    document = report_document(report)["rules"]
    results = report.dashboard.rules.results
    assert [rule_status(r) for r in results] == [r["status"] for r in document["rules"]]
    assert dataclasses.asdict(finding_counts(report.dashboard.rules)) == document["counts"]
    worst = [
        max((f["severity"] for f in r["findings"]), key=("info", "warning", "error").index)
        if r["findings"]
        else r["status"]
        for r in document["rules"]
    ]
    assert [verdict(r) for r in results] == worst
    assert "error" in worst or "warning" in worst or "info" in worst  # some rule fired on the synthetic job
    order = [verdict(r) for r in triggered_first(results)]
    ranks = [("error", "warning", "info", "ok", "skipped").index(v) for v in order]
    assert ranks == sorted(ranks)


def test_markdown_shows_the_typed_numbers(report: Report) -> None:
    from ktrace.model.units import format_ns
    from ktrace.report.markdown import render_markdown

    text = render_markdown(report)
    summary = report.dashboard.summary
    assert f"| training loop | {format_ns(summary.phases.training_ns)} | {summary.phases.training_pct:.1f} % |" in text
    assert f"| kernels | {summary.kernels:,} |" in text
    for result in report.dashboard.rules.results:
        assert f"## Rule: {result.rule}\n" in text


def test_report_header_names_the_trace_from_its_identity(report: Report) -> None:
    from ktrace.presentation.identity import TraceIdentity
    from ktrace.report.markdown import render_markdown

    named = dataclasses.replace(
        report,
        identity=TraceIdentity(
            files=("a.json.gz", "b.json.gz"), more_files=3, folder="run7", hosts=("node<1>",), gpus=("H100 ×8",)
        ),
    )
    head = render_markdown(named).split("## ", 1)[0]
    assert "run7/: a.json.gz, b.json.gz and 3 more" in head
    assert "node&lt;1&gt;" in head and "H100 ×8" in head
    assert named.identity.to_dict() == {
        "files": ["a.json.gz", "b.json.gz"],
        "more_files": 3,
        "folder": "run7",
        "hosts": ["node<1>"],
        "gpus": ["H100 ×8"],
    }


def test_terminal_summary_keeps_control_characters_out(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary

    summary = dataclasses.replace(summarize(synthetic_trace), source="evil\x1b[31m", notes=("note\x07",))
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=200, color_system=None, force_terminal=False))
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b[31m" in text and "note\\x07" in text
