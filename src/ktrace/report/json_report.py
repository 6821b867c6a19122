"""The report as stable JSON: sorted keys, rounded floats, one document per trace."""

from __future__ import annotations

import json
from typing import Any

from ktrace.presentation.report_model import Report
from ktrace.report.content import page


def dump_json(document: dict[str, Any]) -> str:
    """A JSON document indented, with sorted keys (a stable contract for scripts and CI)."""
    return json.dumps(document, indent=1, sort_keys=True, allow_nan=False, default=str) + "\n"


def render_json(report: Report) -> str:
    """The report as JSON: its Page's document (report_document), dumped by dump_json."""
    return dump_json(dict(page(report).document))
