"""The HTML and Markdown reports are two layouts of one Page (presentation.report_page): the same sections in the
same order with the same numbers in their tables, and a header naming the store, hosts, ranks and GPUs. Fails on
the old code: Markdown lacked the idle-by-cause table, the latency p99 and the per-rule plots' numbers, HTML the
dashboard tables, the two ordered the rules differently, and neither header named the ranks."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from ktrace.presentation.report_model import Report

NUMBER = re.compile(r"^[-+]?[\d,]+(\.\d+)?( ?(ns|µs|ms|s|%|B|KB|MB|GB|TB|GB/s))?$")


@pytest.fixture(scope="module")
def report(synthetic_trace) -> Report:  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report

    return build_report(synthetic_trace, annotations=("forward",))


class _Sections(HTMLParser):
    """Per <section>: its id, its <h2> title and the text of every <td>, table by table."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[tuple[str, str, list[str]]] = []
        self._text: list[str] | None = None
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.sections.append((dict(attrs).get("id") or "", "", []))
        elif tag == "h2" and self.sections:
            self._in_h2 = True
        elif tag == "td":
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._text is not None:
            self.sections[-1][2].append("".join(self._text).replace("\xa0", " ").strip())
            self._text = None
        elif tag == "h2":
            self._in_h2 = False

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            key, title, cells = self.sections[-1]
            self.sections[-1] = (key, title + data, cells)
        if self._text is not None:
            self._text.append(data)


def _markdown_sections(text: str) -> list[tuple[str, list[str]]]:
    """Per "## " heading: its title and every table cell (header and rule rows left out)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line[3:], []))
        elif out and line.startswith("| ") and not line.startswith("|---"):
            out[-1][1].extend(c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1])
    return out


def _numbers(cells: list[str]) -> list[str]:
    return [c for c in cells if NUMBER.match(c)]


def test_html_and_markdown_show_the_same_sections_in_the_same_order_with_the_same_numbers(report: Report) -> None:
    from ktrace.presentation.page import Figure
    from ktrace.presentation.report_page import report_page
    from ktrace.report.html import render_html
    from ktrace.report.markdown import MarkdownRenderer, render_markdown

    page = report_page(report)
    parser = _Sections()
    parser.feed(render_html(report))
    html_titles = [html.unescape(title) for _, title, _ in parser.sections]
    md = render_markdown(report)
    md_titles = [title for title, _ in _markdown_sections(md)]
    assert html_titles == md_titles == [s.title for s in page.sections]
    assert [key for key, _, _ in parser.sections] == [s.key for s in page.sections]
    assert any(t.startswith("Rule: ") for t in html_titles) and "Ranks" in html_titles

    class TablesOnly(MarkdownRenderer):
        def figure(self, figure: Figure) -> None:  # the HTML draws plots; their numbers are not in its tables
            pass

    from ktrace.presentation.layout import lay_out

    tables_md = lay_out(page, TablesOnly())
    md_cells = {title: _numbers(cells) for title, cells in _markdown_sections(tables_md)}
    compared = 0
    for key, title, cells in parser.sections:
        numbers = _numbers([html.unescape(c) for c in cells])
        assert numbers == md_cells[html.unescape(title)], key
        compared += len(numbers)
    assert compared > 200


def test_every_figure_is_drawn_in_html_and_its_numbers_are_in_markdown(report: Report) -> None:
    from ktrace.presentation.page import Figure
    from ktrace.presentation.report_page import report_page
    from ktrace.report.html import all_sections
    from ktrace.report.markdown import render_markdown

    page = report_page(report)
    drawn = {s.anchor: len(s.figures) for s in all_sections(report)}
    md = render_markdown(report)
    for section in page.sections:
        figures = [b for b in section.blocks if isinstance(b, Figure)]
        assert drawn.get(section.key, 0) == len(figures), section.key
        for f in figures:
            shown_in = f.data.get("shown_in")
            if shown_in:  # a table of the page holds the same numbers
                assert any(t.key == shown_in for t in page.tables()), shown_in
            else:
                assert f"### {f.title.split(' (')[0]}" in md, f.title


def test_the_header_names_the_hosts_ranks_and_gpus_in_both(report: Report, synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.report.html import render_html
    from ktrace.report.markdown import render_markdown

    ranks = report.dashboard.summary.ranks
    head = render_markdown(report).split("## ", 1)[0]
    assert f"**ranks** {ranks}" in head and "**GPU**" in head and "**host**" in head
    page = render_html(report)
    header = page[page.index("<header>") : page.index("</header>")]
    assert f"<b>ranks</b> {ranks}" in header
    assert all(h in head and h in header for h in synthetic_trace.meta.hosts)


def test_repeated_notes_are_one_line_in_both(report: Report) -> None:
    """64 ranks lacking sync records are one note with a count, not 64 lines (the old reports printed each)."""
    import dataclasses

    from ktrace.analysis.summary import NO_OPERATORS
    from ktrace.report.html import render_html
    from ktrace.report.markdown import render_markdown

    said = tuple(f"rank {r}: the trace has no sync records" for r in range(64))
    summary = dataclasses.replace(report.dashboard.summary, notes=(NO_OPERATORS, *said))
    noted = dataclasses.replace(report, dashboard=dataclasses.replace(report.dashboard, summary=summary))
    md = render_markdown(noted)
    job = md[md.index("## Training job summary") : md.index("\n## ", md.index("## Training job summary") + 1)]
    assert job.count("the trace has no sync records") == 1
    assert "_rank 0: the trace has no sync records (and 63 more like it)_" in job
    assert job.index("no sync records") < job.index(NO_OPERATORS.split(":")[0].replace("_", "\\_"))  # absent last
    page = render_html(noted)
    section = page[page.index('<section id="job">') : page.index("</section>", page.index('<section id="job">'))]
    assert section.count("the trace has no sync records") == 1 and "(and 63 more like it)" in section


def test_the_json_report_prints_the_page_document_byte_for_byte(report: Report) -> None:
    """The page every report format comes from stands for the JSON document (made only when read)."""
    from ktrace.report.content import page, report_document
    from ktrace.report.json_report import dump_json, render_json

    the_page = page(report)
    assert [s.key for s in the_page.sections][:3] == ["job", "system", "framework"]
    assert render_json(report) == dump_json(report_document(report)) == dump_json(dict(the_page.document))


def test_evidence_values_keep_four_significant_digits() -> None:
    """An evidence value is each rule's own quantity (ms, %, counts): 0.004 ms must not read "0.00", nor 1.951 ms
    "1.95" (the previous commit wrote them with the 2 decimals of a number column)."""
    from ktrace.analysis.rules.base import Evidence
    from ktrace.presentation.report_rules import evidence_table
    from ktrace.report.markdown import MarkdownRenderer

    table = evidence_table(
        [Evidence("gap", value=0.004123), Evidence("gap", value=1.9514), Evidence("gap", value=123456.7)]
    )
    assert table is not None
    renderer = MarkdownRenderer()
    renderer.table(table)
    text = renderer.end()
    assert "| 0.004123 |" in text and "| 1.951 |" in text and "| 123,457 |" in text
