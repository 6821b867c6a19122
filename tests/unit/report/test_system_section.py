"""The report's "System usage statistics" on a trace without counters (issue 26 item 6): GPU busy per device, CPU
threads' operator and launch load and allocated memory with p50/p95/p99 over bins, in HTML, Markdown and JSON, and
plainly which counters need `ktrace run`. The figures are worked out in tests/reference/system_usage_trace.py.
Fails on the old code: the section was one sentence ("The trace has no counter samples ...")."""

from __future__ import annotations

import json
import re

import pytest
from reference.system_usage_trace import system_usage_trace

from ktrace.model.schema import COUNTER_METRICS


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report

    return build_report(system_usage_trace(counters=False))


def _markdown_section(text: str) -> str:
    return text.split("## System usage statistics", 1)[1].split("\n## ", 1)[0]


def test_markdown_lays_out_the_event_tables(report) -> None:  # type: ignore[no-untyped-def]
    from ktrace.report.markdown import render_markdown

    sec = _markdown_section(render_markdown(report))
    assert "| n0/rank0/GPU0 | 4 | 0.0 % | 75.0 % | 100.0 % | 100.0 % | 100.0 % | 62.5 % |" in sec
    assert "| n0/rank0 main | 2 | 1.50 ms | 3 | 270.00 µs | 58.5 % | 50.0 % | 95.0 % | 99.0 % | 100.0 % |" in sec
    assert "| n0/rank0 pid 1 tid 2 | 1 | 500.00 µs | 0 | 0 ns | 100.0 % | - | - | - | - |" in sec
    assert "| n0/rank0/GPU0 | 3 | 100 B | 370 B | 394 B | 400 B |" in sec
    assert "Sampled counters" not in sec and "bins of 1.00 ms" in sec
    need = re.search(r"Counters only ktrace run records, not in this trace[^\n]*", sec)
    assert need is not None and all(m.replace("_", "\\_") in need.group() for m in COUNTER_METRICS)


def test_html_has_the_same_tables(report) -> None:  # type: ignore[no-untyped-def]
    from ktrace.report.html import render_html

    text = render_html(report)
    sec = text.split('<section id="system">', 1)[1].split("</section>", 1)[0]
    assert (
        "<h3>GPU busy per device</h3>" in sec
        and "<td>n0/<wbr>rank0/<wbr>GPU0</td><td>4</td><td>0.0&nbsp;%</td><td>75.0&nbsp;%</td>" in sec
    )
    assert "<td>n0/rank0 main</td>" in sec and "<td>394&nbsp;B</td><td>400&nbsp;B</td>" in sec
    assert "Counters only ktrace run records, not in this trace" in sec


def test_json_keys(report) -> None:  # type: ignore[no-untyped-def]
    from ktrace.report.json_report import render_json

    usage = json.loads(render_json(report))["system_usage"]
    assert set(usage) == {"bin_ms", "gpu_busy", "cpu_threads", "gpu_memory", "counters_missing"}
    assert usage["bin_ms"] == 1.0 and usage["counters_missing"] == list(COUNTER_METRICS)
    assert usage["gpu_busy"][0]["p50_pct"] == 75.0 and usage["gpu_memory"][0]["p95_bytes"] == 370.0
    assert [t["tid"] for t in usage["cpu_threads"]] == [1, 2] and usage["cpu_threads"][1]["p50_pct"] is None


def test_a_capture_says_its_missing_counters_were_not_recorded() -> None:
    from ktrace.presentation.report_model import build_report
    from ktrace.report.markdown import render_markdown

    sec = _markdown_section(render_markdown(build_report(system_usage_trace(source="ktrace"))))
    assert "Sampled counters" in sec and "| cpu.util |" in sec
    assert "Counters this capture did not record" in sec and "only ktrace run records" not in sec
    assert "cpu.util," not in sec.split("did not record", 1)[1]


def test_the_lead_names_only_what_is_shown() -> None:
    from ktrace.model import TraceBuilder
    from ktrace.presentation.report_model import build_report
    from ktrace.report.markdown import render_markdown

    b = TraceBuilder("n0", 0)
    b.add("counters", {"ts_ns": [1], "metric": ["cpu.util"], "instance": [-1], "value": [40.0]}, rank=-1)
    sec = _markdown_section(render_markdown(build_report(b.build())))
    assert "Sampled counters; the trace has no GPU, operator or launch events" in sec and "### GPU busy" not in sec
