"""The critical path as timed markers for the exporters (ktrace export --critical-path).

Consecutive path edges of one type (cpu, launch, kernel_gap, gpu) merge into one marker spanning them;
weightless edges (dependency, sync) are left out. Each marker is a mapping the exporters' findings take
(rule, severity, message, start_ns, end_ns, node, rank), so it lands on the Findings track of the rank the run
is on (a path joining ranks crosses between them at collectives).
"""

from __future__ import annotations

from typing import Any

from ktrace.analysis.critical_path import CriticalPath
from ktrace.model.units import format_ns

RULE = "critical path"


def path_marks(cp: CriticalPath) -> list[dict[str, Any]]:
    """One marker per run of same-type weighted edges of the path, in path order."""
    runs: list[list[Any]] = []  # [type, start, end, weight, node, rank]
    for start, end, kind, weight, node, rank in cp.path_segments.iter_rows():
        if weight <= 0:
            continue
        if runs and runs[-1][0] == kind and runs[-1][2] == start and runs[-1][4:] == [node, rank]:
            runs[-1][2], runs[-1][3] = end, runs[-1][3] + weight
        else:
            runs.append([kind, start, end, weight, node, rank])
    return [
        {
            "rule": RULE,
            "severity": "info",
            "message": f"{kind} {format_ns(weight)} on the critical path of {cp.label} (run {i + 1} of {len(runs)})",
            "start_ns": start,
            "end_ns": end,
            "node": node,
            "rank": rank,
        }
        for i, (kind, start, end, weight, node, rank) in enumerate(runs)
    ]
