"""Golden files of the operator view and kernel sequences on three real Kineto traces of different eras
(alexnet: PyTorch 2023 snake_case categories; resnet50: PyTorch 1.9 "Operator" events; tracelens: H100, 2025, with
nn.Module frames for the module view), JSON and the terminal table.

Update deliberately: KTRACE_UPDATE_GOLDEN=1 pytest tests/golden/test_operators_golden.py, then review the diff.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from golden_compare import compare_golden

GOLDEN = Path(__file__).parent


@pytest.mark.parametrize("name", ["alexnet", "resnet50", "tracelens"])
def test_operators_golden(name: str, real_trace_path) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console

    import ktrace
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_json import summary_to_dict
    from ktrace.report.terminal import render_summary

    summary = summarize(ktrace.open(real_trace_path(name)), top=8)
    d = summary_to_dict(summary)
    compare_golden(
        GOLDEN / f"operators_{name}.json",
        json.dumps({k: d[k] for k in ("operators", "kernel_sequences")}, indent=1, sort_keys=True) + "\n",
    )
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=80, color_system=None, force_terminal=False))
    text = out.getvalue()
    table = text[text.index("operators: top") : text.index("launch-to-run latency")]
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 80
    compare_golden(GOLDEN / f"operators_{name}.txt", table)


@pytest.mark.parametrize("name", ["resnet50", "tracelens"])
def test_operators_by_shape_golden(name: str, real_trace_path) -> None:  # type: ignore[no-untyped-def]
    """`ktrace summary --by-shape` at 80 columns on the two real traces recorded with record_shapes=True."""
    from rich.console import Console

    import ktrace
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary

    summary = summarize(ktrace.open(real_trace_path(name)), top=8, by_shape=True)
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=80, color_system=None, force_terminal=False), by_shape=True)
    text = out.getvalue()
    table = text[text.index("operators by input shape") : text.index("launch-to-run latency")]
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 80
    compare_golden(GOLDEN / f"operators_by_shape_{name}.txt", table)
