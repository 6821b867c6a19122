"""The self-contained HTML report: one file, plotly.js inlined once, no network, every trace string escaped."""

from __future__ import annotations

import json
from typing import Any

from ktrace.report import critical_path_view
from ktrace.report.content import Report
from ktrace.report.identity import identity_line
from ktrace.report.memory import memory_section
from ktrace.report.operator_section import operators_section
from ktrace.report.rank_sections import ranks_section
from ktrace.report.sections import Section, dashboard, esc, framework_metrics, job_summary, rule_section, rules_summary
from ktrace.report.system_section import system_section
from ktrace.report.verdicts import triggered_first

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


def all_sections(report: Report) -> list[Section]:
    """Every section in report order: job, system, framework, rules summary, dashboard, ranks (2+ ranks),
    operators, memory timeline, one per rule (rules that found something first)."""
    ordered = triggered_first(report.dashboard.rules.results)
    ranks = ranks_section(report)
    return [
        job_summary(report),
        system_section(report),
        framework_metrics(report),
        rules_summary(report, ordered),
        dashboard(report),
        *([ranks] if ranks else []),
        critical_path_view.html_section(report),
        operators_section(report),
        memory_section(report.dashboard.summary),
        *(rule_section(r) for r in ordered),
    ]


def render_html(report: Report) -> str:
    """The whole report as one HTML document."""
    sections = all_sections(report)
    nav = "".join(
        f'<a href="#{esc(s.anchor)}">{esc(s.title)}</a>' for s in sections if not s.anchor.startswith("rule-")
    )
    body = "".join(
        f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>{"".join(s.body)}</section>' for s in sections
    )
    figures = {s.anchor: s.figures for s in sections if s.figures}
    title = esc(report.title)
    about = "".join(f"<span><b>{esc(k)}</b> {esc(v)}</span>" for k, v in identity_line(report.identity))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style>'
        f"<script>{plotly_js()}</script></head><body><header><h1>{title}</h1>"
        f'<div class="trace">{about}</div>'
        f"<div>report format v{report.version}, made by ktrace</div></header><nav>{nav}</nav>"
        f"<main>{body}</main>"
        f'<script type="application/json" id="ktrace-figures">{script_json(figures)}</script>'
        f"<script>{DRAW}</script></body></html>"
    )
