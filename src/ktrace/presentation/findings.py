"""The rules' findings as the report lists them, and the marks the views draw of them: the report's rule sections
(report_rules.rule_section, rules that found something first) walked for their findings, and one mark per evidence
window (what `ktrace export --findings` draws in Perfetto and the TUI's findings panel jumps to).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ktrace.analysis.rules.engine import RulesReport
from ktrace.presentation.page import Finding, Page, RuleVerdict, Section, Window
from ktrace.presentation.report_rules import rule_section
from ktrace.presentation.verdicts import triggered_first


def rule_sections(rules: RulesReport) -> tuple[Section, ...]:
    """One section per rule, in the report's order: the report page's rule sections."""
    return tuple(rule_section(r) for r in triggered_first(rules.results))


def page_verdicts(page: Page) -> tuple[RuleVerdict, ...]:
    """Every rule verdict of the page, in page order."""
    return tuple(v for s in page.sections for b in s.blocks if isinstance(b, tuple) for v in b)


def page_findings(page: Page) -> tuple[Finding, ...]:
    """Every finding the page lists, in page order."""
    return tuple(f for v in page_verdicts(page) for f in v.findings)


def rules_findings(rules: RulesReport) -> tuple[Finding, ...]:
    """The findings the report of these rules lists, in its order (without building the rest of the report)."""
    return page_findings(Page("rules", (), rule_sections(rules)))


def marks(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """What a timeline draws of `findings`: a finding with times of its own once, at them; else once per evidence
    window (its times and place); else once, job-wide at the trace start. Marks carry no evidence table (rule,
    severity, message, times and place are what is drawn), so an exporter never reads one for evidence items."""
    out: list[Finding] = []
    for f in findings:
        bare = replace(f, evidence=None, windows=())
        if f.start_ns is not None or not f.windows:
            out.append(bare)
            continue
        out += [replace(bare, start_ns=w.start_ns, end_ns=w.end_ns, node=w.node, rank=w.rank) for w in f.windows]
    return tuple(out)


def first_window(finding: Finding) -> Window | None:
    """The window to show first for a finding (its own times, else its evidence's first window)."""
    if finding.start_ns is not None:
        return Window(finding.start_ns, finding.end_ns, finding.node, finding.rank)
    return finding.windows[0] if finding.windows else None
