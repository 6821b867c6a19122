"""The JSON document of a report (presentation.report_model.Report): report_document, the stable contract that
report.json_report prints. It serializes the one Dashboard model, never a second computation; the HTML and Markdown
reports lay out the same Report as a Page (presentation.report_page).
"""

from __future__ import annotations

from typing import Any

from ktrace.analysis.rank_heatmap import RankHeatmap
from ktrace.analysis.rules.engine import all_rules
from ktrace.analysis.system_usage import SystemUsage
from ktrace.presentation.json_rows import frame_records
from ktrace.presentation.page import Page
from ktrace.presentation.report_model import Report
from ktrace.presentation.report_page import report_page
from ktrace.presentation.report_ranks import percent_matrix
from ktrace.presentation.rules_json import report_to_dict
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.presentation.summary_page import LazyDocument


def page(report: Report) -> Page:
    """The report's Page (presentation.report_page) standing for its JSON document (report_document, made only
    when read): what the HTML and Markdown reports lay out and the JSON report prints."""
    return report_page(report, LazyDocument(lambda: report_document(report)))


def report_document(report: Report) -> dict[str, Any]:
    """The Report as the JSON report's dict (the stable contract): {"version", "title", "trace", "summary",
    "steps_histogram", "utilization", "rank_heatmap", "system_usage", "rules", "rule_docs"}; the straggler tables
    are in summary.stragglers."""
    dashboard = report.dashboard
    return {
        "version": report.version,
        "title": report.title,
        "trace": report.identity.to_dict(),
        "summary": summary_to_dict(dashboard.summary),
        "steps_histogram": {
            "edges_ms": list(dashboard.step_histogram.edges_ms),
            "counts": list(dashboard.step_histogram.counts),
        },
        "utilization": {
            "bin_ms": dashboard.utilization_bin_ms,
            "series": [
                {"label": s.label, "source": s.source, "x_s": list(s.x_s), "y_pct": list(s.y_pct)}
                for s in dashboard.utilization
            ],
        },
        "rank_heatmap": rank_heatmap_dict(dashboard.rank_heatmap),
        "system_usage": system_usage_dict(report.system_usage),
        "rules": report_to_dict(dashboard.rules),
        "rule_docs": rule_docs(),
    }


def system_usage_dict(usage: SystemUsage) -> dict[str, Any]:
    """The system usage read from the events: {"bin_ms", "gpu_busy", "cpu_threads", "gpu_memory" (rows as in
    SystemUsage), "counters_missing" (metric names no sample of which is in the trace)}."""
    return {
        "bin_ms": round(usage.bin_ns / 1e6, 6),
        "gpu_busy": frame_records(usage.gpu_busy),
        "cpu_threads": frame_records(usage.cpu_threads),
        "gpu_memory": frame_records(usage.gpu_memory),
        "counters_missing": list(usage.counters_missing),
    }


def rule_docs() -> dict[str, Any]:
    """Every rule's parameters (name, default, doc), source, severity and fleet_mode: the JSON reports' "rule_docs"."""
    return {
        r.name: {
            "params": [{"name": p.name, "default": p.default, "doc": p.doc} for p in r.params],
            "source": r.source,
            "severity": r.severity,
            "fleet_mode": r.fleet_mode,
        }
        for r in all_rules()
    }


def rank_heatmap_dict(h: RankHeatmap | None) -> dict[str, Any] | None:
    """The heatmaps in whole percent, rows in `ranks` order ([node, rank], sorted by host and rank); null with
    fewer than 2 ranks."""
    if h is None:
        return None
    return {
        "t0_ns": h.bins.t0_ns,
        "bin_ns": h.bins.bin_ns,
        "n_bins": h.bins.n_bins,
        "ranks": [[str(n), int(r)] for n, r in h.ranks.iter_rows()],
        "busy_pct": percent_matrix(h, "time", "busy_share"),
        "comm_pct": percent_matrix(h, "time", "comm_share"),
        "steps": h.n_steps,
        "step_busy_pct": percent_matrix(h, "step", "busy_share"),
        "step_comm_pct": percent_matrix(h, "step", "comm_share"),
    }
