"""Golden files of the memory timeline on the two real traces with allocator events (tracelens: PyTorch 2.6 on an
H100, with addresses and the allocator's totals; resnet50: PyTorch 1.9 on a V100, bytes only): the summary JSON's
`memory_timeline`, and the terminal line and report tables (the Markdown report's rendering).

Update deliberately: KTRACE_UPDATE_GOLDEN=1 pytest tests/golden/test_memory_golden.py, then review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_compare import compare_golden

GOLDEN = Path(__file__).parent


@pytest.mark.parametrize("name", ["tracelens", "resnet50"])
def test_memory_timeline_golden(name: str, real_trace_path) -> None:  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.labels import peak_line
    from ktrace.presentation.report_memory import memory_tables
    from ktrace.presentation.summary_json import summary_to_dict
    from ktrace.report.markdown import MarkdownRenderer

    summary = summarize(ktrace.open(real_trace_path(name)), top=8)
    d = summary_to_dict(summary)
    compare_golden(GOLDEN / f"memory_{name}.json", json.dumps(d["memory_timeline"], indent=1, sort_keys=True) + "\n")
    m = summary.memory_timeline
    assert m is not None
    start = summary.phases.start_ns
    renderer = MarkdownRenderer()
    renderer.out += [peak_line(m, start), ""]
    for table in memory_tables(m, start):
        renderer.table(table)
    compare_golden(GOLDEN / f"memory_{name}.md", renderer.end())
