"""The findings the report lists and the marks drawn of them (presentation.findings)."""

from __future__ import annotations

from ktrace.analysis.rules.base import Evidence, RuleResult
from ktrace.analysis.rules.base import Finding as RuleFinding
from ktrace.analysis.rules.engine import RulesReport
from ktrace.presentation.findings import first_window, marks, page_findings, rules_findings
from ktrace.presentation.page import Finding, Window
from ktrace.presentation.report_rules import MAX_EVIDENCE_ROWS


def _result(rule: str, *findings: RuleFinding) -> RuleResult:
    return RuleResult(
        rule, "timeline", f"{rule} looks at gaps", {}, datapoints=10, triggered=len(findings), findings=findings
    )


def test_marks_one_per_window_own_times_once_else_job_wide() -> None:
    windows = (Window(10, 20, "n0", 0), Window(30, None, "n1", 3))
    table_less = Finding("GPUGaps", "warning", "gaps", windows=windows)
    own = Finding("StepOutlier", "error", "slow step", start_ns=5, end_ns=9, node="n0", rank=1, windows=windows)
    untimed = Finding("FP32Matmul", "info", "fp32 matmuls")
    got = [(m.rule, m.start_ns, m.end_ns, m.node, m.rank) for m in marks((table_less, own, untimed))]
    assert got == [
        ("GPUGaps", 10, 20, "n0", 0),
        ("GPUGaps", 30, None, "n1", 3),
        ("StepOutlier", 5, 9, "n0", 1),
        ("FP32Matmul", None, None, None, None),
    ]
    assert all(m.evidence is None and not m.windows for m in marks((table_less, own, untimed)))
    assert first_window(table_less) == windows[0] and first_window(own) == Window(5, 9, "n0", 1)
    assert first_window(untimed) is None


def test_every_timed_evidence_item_is_a_window_not_only_the_tables_rows() -> None:
    """The evidence table shows MAX_EVIDENCE_ROWS rows; the marks are every timed item (the export drew them all)."""
    n = MAX_EVIDENCE_ROWS + 5
    evidence = (*(Evidence("gap", 100 * i, 100 * i + 50, "n0", 0) for i in range(n)), Evidence("rank", rank=2))
    found = rules_findings(RulesReport((_result("GPUGaps", RuleFinding("GPUGaps", "warning", "gaps", "", evidence)),)))
    assert len(found) == 1
    assert found[0].evidence is not None and len(found[0].evidence.rows) == MAX_EVIDENCE_ROWS
    assert [(m.start_ns, m.end_ns) for m in marks(found)] == [(100 * i, 100 * i + 50) for i in range(n)]


def test_rules_findings_in_the_reports_order() -> None:
    """Rules whose worst finding is an error first, as the report's rule sections are ordered."""
    info = _result("FP32Matmul", RuleFinding("FP32Matmul", "info", "fp32", ""))
    error = _result("StepOutlier", RuleFinding("StepOutlier", "error", "slow", ""))
    quiet = _result("GPUGaps")
    found = rules_findings(RulesReport((info, quiet, error)))
    assert [f.rule for f in found] == ["StepOutlier", "FP32Matmul"]


def test_the_findings_of_the_rules_are_the_reports(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report
    from ktrace.presentation.report_page import report_page

    report = build_report(synthetic_trace)
    listed = page_findings(report_page(report))
    assert listed and any(f.windows for f in listed)  # the synthetic job fires rules with timed evidence
    assert rules_findings(report.dashboard.rules) == listed
