"""Findings of any shape become markers: flat objects, mappings, and rule-engine findings with timed evidence."""

from __future__ import annotations

import enum
from types import SimpleNamespace

from ktrace.exporters.findings import FindingRow, finding_rows


class Severity(enum.Enum):
    WARNING = 2


def test_flat_object_and_mapping() -> None:
    flat = SimpleNamespace(
        rule_name="A", severity=Severity.WARNING, message="m", start_ns=5, end_ns=9, node="n", rank=1
    )
    mapping = {"name": "B", "severity": "error", "message": "x"}
    assert finding_rows([flat, mapping]) == [
        FindingRow("A", "warning", "m", 5, 9, "n", 1),
        FindingRow("B", "error", "x", None, None, None, None),
    ]


def test_evidence_with_times_expands_to_one_marker_each() -> None:
    evidence = (
        SimpleNamespace(start_ns=1, end_ns=2, node="n", rank=0),
        SimpleNamespace(start_ns=None),
        SimpleNamespace(start_ns=7, end_ns=None, node="n", rank=3),
    )
    finding = SimpleNamespace(rule="GPUGaps", severity="warning", message="idle", evidence=evidence)
    assert finding_rows([finding]) == [
        FindingRow("GPUGaps", "warning", "idle", 1, 2, "n", 0),
        FindingRow("GPUGaps", "warning", "idle", 7, None, "n", 3),
    ]
