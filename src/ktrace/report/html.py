"""The self-contained HTML report: one file, plotly.js inlined once, no network, every trace string escaped.

A renderer of the report's Page (presentation.report_page) through presentation.layout.lay_out: the Markdown
report lays out the same page, so both show the same sections in the same order with the same numbers.
"""

from __future__ import annotations

import json
from typing import Any

from ktrace.presentation.cells import format_value
from ktrace.presentation.layout import lay_out
from ktrace.presentation.page import Column, Figure, Page, RuleVerdict, Table, Text
from ktrace.presentation.page import Section as PageSection
from ktrace.presentation.report_model import Report
from ktrace.report import plots
from ktrace.report.content import page
from ktrace.report.sections import SEVERITY_CLASS, Section, esc, figure_spec, rest_line, table

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#232f3e;color:#fff;padding:16px 28px}header h1{margin:0;font-size:22px}
nav{padding:8px 28px;background:#eef1f5;font-size:14px}nav a{margin-right:14px}
main{padding:8px 28px 40px}section{background:#fff;border:1px solid #e1e4e8;border-radius:6px;margin:16px 0;
padding:8px 18px 16px;overflow-x:auto}h2{font-size:18px}
table{border-collapse:collapse;margin:8px 0;font-size:13px;width:100%}
td,th{border:1px solid #e1e4e8;padding:3px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
.long{overflow-wrap:anywhere}
th{background:#f3f5f8;overflow-wrap:normal;min-width:4em}
#rules td:nth-child(-n+2),#rules td:nth-child(n+5){white-space:nowrap;overflow-wrap:normal}
#rules td:nth-child(3),#rules td:nth-child(4){min-width:10em}
@media (max-width:1000px){main{padding:4px 8px 24px}section{padding:4px 8px 10px}header,nav{padding-left:10px}
#rules table{font-size:12px}}#rules td:nth-child(7){white-space:normal;overflow-wrap:break-word;min-width:8em}
#rules td.long:nth-child(7),#rules td:nth-child(7) .long{overflow-wrap:anywhere}
header .trace{font-size:13px;margin:4px 0;overflow-wrap:anywhere}header .trace span+span{margin-left:14px}
.plot{width:100%;min-height:300px}.finding{padding:8px;margin:8px 0;border-radius:4px}
.sev-error{color:#a40e26;font-weight:600}.sev-warning{color:#8a5300;font-weight:600}.sev-info{color:#1f5fa8}
.sev-ok{color:#1a7f37}.sev-skip{color:#6e7781}div.sev-error{background:#ffebe9}div.sev-warning{background:#fff8c5}
div.sev-info{background:#ddf4ff}.note{color:#6e7781}code{background:#eef1f5;padding:1px 4px}
"""

DRAW = """
(function(){
  var figs = JSON.parse(document.getElementById('ktrace-figures').textContent);
  document.querySelectorAll('section').forEach(function(sec){
    var list = figs[sec.id] || [];
    sec.querySelectorAll('.plot').forEach(function(div){
      var f = list[Number(div.getAttribute('data-fig'))];
      if (f) { Plotly.newPlot(div, f.data, f.layout, {responsive: true, displaylogo: false}); }
    });
  });
  document.body.setAttribute('data-plots-drawn', String(document.querySelectorAll('.js-plotly-plot').length));
})();
"""


def plotly_js() -> str:
    """The plotly.js bundle shipped with the plotly package (inlined: the report works offline)."""
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    return js.replace("</script", "<\\/script")


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element (no '<', '>' or '&' left raw)."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def cell_text(column: Column, value: Any) -> str:
    """A cell as the report writes it: the one cell formatter, without the padding of fixed-width views."""
    return format_value(column.kind, value).strip()


def verdict_html(verdict: str) -> str:
    """A rule's verdict as a coloured word: its worst severity, "ok" or "skipped"."""
    css = {"ok": "sev-ok", "skipped": "sev-skip"}.get(verdict) or SEVERITY_CLASS.get(verdict, "")
    return f'<span class="{css}">{esc(verdict)}</span>'


class HtmlRenderer:
    """Lays out a Page as HTML sections (presentation.layout.Renderer); `end` gives the whole document."""

    def __init__(self, *, document: bool = True) -> None:
        self.document = document
        """False: `end` gives "" (the sections alone are wanted, without reading plotly.js)."""
        self.sections: list[Section] = []
        self.page: Page | None = None
        self._current = Section("", "")

    def begin(self, page: Page) -> None:
        """Keep the page for its header."""
        self.page = page

    def section(self, section: PageSection) -> None:
        """A new HTML section."""
        self._current = Section(section.key, section.title)
        self.sections.append(self._current)

    def table(self, table_: Table) -> None:
        """The table's title, its rows (rule names linked, verdicts coloured), what it left out and its lines."""
        out = [f"<h3>{esc(table_.title)}</h3>"] if table_.title else []
        if table_.rows:
            raw = [i for i, c in enumerate(table_.columns) if c.key == "verdict" or table_.key == "rules_summary"]
            cells = [[self._cell(table_, c, row[c.key]) for c in table_.columns] for row in table_.rows]
            out.append(table([c.header for c in table_.columns], cells, raw=raw))
        if table_.rest:
            out.append(f'<p class="note">{esc(rest_line(table_.rest, table_.rest_what))}</p>')
        out += [f"<p>{esc(line)}</p>" for line in table_.lines]
        self._current.body.append("".join(out))

    @staticmethod
    def _cell(table_: Table, column: Column, value: Any) -> str:
        if column.key == "verdict":
            return verdict_html(str(value))
        text = cell_text(column, value)
        if table_.key != "rules_summary":
            return text
        return f'<a href="#rule-{esc(text)}">{esc(text)}</a>' if column.key == "rule" else esc(text)

    def figure(self, figure: Figure) -> None:
        """A placeholder where the plot is drawn, and its plotly spec; a figure taller than plots.SCROLL_PX (a
        heatmap of 60+ ranks) scrolls inside its section."""
        spec = figure_spec(figure)
        tall = spec["layout"].get("height", 0) > plots.SCROLL_PX
        if tall:
            style = f"max-height:{plots.SCROLL_PX}px;overflow-y:auto;overflow-x:hidden;scrollbar-gutter:stable"
            self._current.body.append(f'<div class="heatmap-scroll" style="{style}">')
        self._current.figure(spec)
        if tall:
            self._current.body.append("</div>")

    def text(self, text: Text) -> None:
        """A paragraph (notes and dim text greyed)."""
        css = ' class="note"' if text.style in ("note", "dim") else ""
        body = f"<b>{esc(text.text)}</b>" if text.style == "headline" else esc(text.text)
        self._current.body.append(f"<p{css}>{body}</p>")

    def rules(self, verdicts: tuple[RuleVerdict, ...]) -> None:
        """Each rule's verdict, then its findings with their recommendation and evidence (or why it is quiet)."""
        for v in verdicts:
            body = self._current.body
            body.append(f"<p>Verdict: {verdict_html(v.verdict)}</p>")
            if v.verdict == "skipped":
                body.append(f"<p>Skipped: {esc(v.why)}.</p>")
            for f in v.findings:
                body.append(
                    f'<div class="finding {SEVERITY_CLASS[f.severity]}"><b>{esc(f.severity)}</b>: '
                    f"{esc(f.message)}<br><i>Recommendation:</i> {esc(f.recommendation)}</div>"
                )
                if f.evidence is not None:
                    self.table(f.evidence)
            if v.verdict == "ok":
                body.append(f"<p>Did not fire: {v.triggered:,} of {v.datapoints:,} datapoints met the condition.</p>")

    def section_end(self, section: PageSection) -> None:
        """The section's notes."""
        self._current.body += [f'<p class="note">{esc(n.line)}</p>' for n in section.notes]

    def end(self) -> str:
        """The whole report as one HTML document."""
        if self.page is None or not self.document:
            return ""
        sections = self.sections
        nav = "".join(
            f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections if not s.anchor.startswith("rule-")
        )
        body = "".join(
            f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{"".join(s.body)}</section>' for s in sections
        )
        figures = {s.anchor: s.figures for s in sections if s.figures}
        title = esc(self.page.title)
        about = "".join(f"<span><b>{esc(k)}</b> {esc(v)}</span>" for k, v in self.page.facts)
        return (
            f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style>'
            f"<script>{plotly_js()}</script></head><body><header><h1>{title}</h1>"
            f'<div class="trace">{about}</div></header><nav>{nav}</nav>'
            f"<main>{body}</main>"
            f'<script type="application/json" id="ktrace-figures">{script_json(figures)}</script>'
            f"<script>{DRAW}</script></body></html>"
        )


def all_sections(report: Report) -> list[Section]:
    """Every HTML section of the report, in order (report_page's)."""
    renderer = HtmlRenderer(document=False)
    lay_out(page(report), renderer)
    return renderer.sections


def render_html(report: Report) -> str:
    """The whole report as one HTML document: report_page laid out by HtmlRenderer."""
    return lay_out(page(report), HtmlRenderer())
