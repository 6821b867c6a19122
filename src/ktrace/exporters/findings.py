"""Rule findings as the exporters take them: any object (or mapping) with rule, severity, message, times, place."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Protocol


class Finding(Protocol):
    """What an exporter needs from a rule finding: `severity` and `message`, plus (all optional) the rule's name
    (`rule`, `rule_name` or `name`), `start_ns`, `end_ns`, `node`, `rank`. A finding without times but with
    `evidence` items that have them (ktrace.analysis.rules findings) becomes one marker per timed evidence item.
    """

    severity: Any
    message: str


class FindingRow(NamedTuple):
    """One marker to draw: a finding at a time and place (node/rank None: job-wide; start None: trace start)."""

    rule: str
    severity: str
    message: str
    start_ns: int | None
    end_ns: int | None
    node: str | None
    rank: int | None


def _get(f: Any, *names: str) -> Any:
    for name in names:
        value = f.get(name) if isinstance(f, Mapping) else getattr(f, name, None)
        if value is not None:
            return value
    return None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def finding_rows(findings: Iterable[Any]) -> list[FindingRow]:
    """Markers for `findings`, expanding evidence items when the finding itself has no time."""
    rows = []
    for f in findings:
        rule = str(_get(f, "rule", "rule_name", "name") or "finding")
        severity = _get(f, "severity")
        sev = str(getattr(severity, "name", severity) or "info").lower()
        message = str(_get(f, "message") or "")
        start = _int(_get(f, "start_ns"))
        timed = [e for e in (_get(f, "evidence") or ()) if _get(e, "start_ns") is not None]
        if start is None and timed:
            for e in timed:
                rows.append(
                    FindingRow(
                        rule,
                        sev,
                        message,
                        _int(_get(e, "start_ns")),
                        _int(_get(e, "end_ns")),
                        _get(e, "node"),
                        _int(_get(e, "rank")),
                    )
                )
            continue
        node = _get(f, "node")
        rows.append(
            FindingRow(
                rule,
                sev,
                message,
                start,
                _int(_get(f, "end_ns")),
                None if node is None else str(node),
                _int(_get(f, "rank")),
            )
        )
    return rows
