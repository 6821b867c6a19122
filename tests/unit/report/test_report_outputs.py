"""The HTML/Markdown/JSON report: self-contained, every trace string escaped, same content in each format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import TraceMeta

EVIL = '</script><script>alert("x")</script><img src=x onerror=alert(1)> | `*_[link](http://evil)'
T0 = 1_700_000_000_000_000_000


@pytest.fixture(scope="module")
def evil_content():  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report

    b = TraceBuilder(node="host<b>", rank=0, meta=TraceMeta(source="synthetic"))
    n = 150
    starts = T0 + np.arange(n, dtype=np.int64) * 100_000
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": starts + 2_000,
            "device": np.zeros(n, np.int32),
            "stream": np.full(n, 7),
            "correlation_id": np.arange(n),
            "name": [EVIL] * n,
        },
    )
    b.add(
        "api",
        {
            "start_ns": starts - 9_000,
            "end_ns": starts - 1_000,
            "pid": np.ones(n),
            "tid": np.ones(n),
            "correlation_id": np.arange(n),
            "domain": ["runtime"] * n,
            "name": ["cudaLaunchKernel"] * n,
        },
    )
    b.add(
        "ranges",
        {
            "start_ns": [T0],
            "end_ns": [T0 + 6_000_000],
            "pid": [1],
            "tid": [1],
            "name": [EVIL],
            "domain": ["nvtx"],
            "depth": [0],
            "on_gpu": [False],
        },
    )
    return build_report(b.build(), annotations=("alert",))


def test_html_escapes_trace_text_and_needs_no_network(evil_content):  # type: ignore[no-untyped-def]
    from ktrace.report.html import plotly_js, render_html

    page = render_html(evil_content)
    body = page.replace(plotly_js(), "")  # the bundle itself mentions plotly.com in its logo link
    assert len(page) - len(body) > 1_000_000  # plotly.js is inlined, once
    leaks = [s for s in (EVIL, 'alert("x")</script>', "onerror=alert(1)>") if s in page]
    assert not leaks
    assert "&lt;/script&gt;" in body  # the kernel name shown as text in the evidence tables
    assert "host&lt;b&gt;" in body
    assert body.count("<script") == 3  # plotly.js, the figure JSON, the drawing code: nothing from the trace
    remote = [r for r in ('src="http', "src='http", 'href="http', "cdn.plot.ly", "@import") if r in body]
    assert not remote
    assert 'id="rule-LaunchBoundKernels"' in body


def test_markdown_escapes_trace_text(evil_content):  # type: ignore[no-untyped-def]
    from ktrace.report.markdown import render_markdown

    md = render_markdown(evil_content)
    assert "<script>" not in md and "<img" not in md and "[link](" not in md
    for line in md.splitlines():
        if line.startswith("|") and "alert" in line:
            assert line.count(" | ") + 2 == line.count("|") - line.count("\\|")  # no cell broken by a '|'


def test_json_is_stable_and_complete(evil_content):  # type: ignore[no-untyped-def]
    from ktrace.report.json_report import dump_json, render_json

    text = render_json(evil_content)
    assert text == dump_json(json.loads(text))  # sorted keys: re-rendering is identity
    doc = json.loads(text)
    assert set(doc) == {
        "version",
        "title",
        "trace",
        "summary",
        "steps_histogram",
        "utilization",
        "rank_heatmap",
        "system_usage",
        "rules",
        "rule_docs",
    }
    rules = {r["rule"]: r for r in doc["rules"]["rules"]}
    assert rules["LaunchBoundKernels"]["status"] == "fired"
    assert rules["LaunchBoundKernels"]["findings"][0]["evidence"][0]["name"] == EVIL


def test_sections_in_the_order_of_the_seed_reports(synthetic_trace):  # type: ignore[no-untyped-def]
    from ktrace.analysis.rules.engine import RULE_ORDER
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import all_sections

    sections = all_sections(build_report(synthetic_trace))
    anchors = [s.anchor for s in sections]

    assert anchors[:12] == [
        *("job", "system", "framework", "rules", "dashboard"),
        *("ranks", "critical-path", "operators"),  # ranks: 2+ ranks
        *("roofline", "collectives", "kernel_efficiency", "memory"),  # how close to the hardware (issue 28)
    ]
    assert len(anchors) == 12 + len(RULE_ORDER)
    dashboard = sections[4]
    titles = [f["layout"]["title"]["text"] for f in dashboard.figures]
    for wanted in (
        "GPU active time",
        "CPU active time",
        "Utilization over time",
        "Top kernels by total time",
        "Top kernels by launch count",
        "Step time distribution",
        "Kernel precision",
        "GPU activity",
        "GPU memory operations",
        "Annotation durations",
    ):
        assert any(t.startswith(wanted) for t in titles), wanted


def test_downsample_bounds_points():
    from ktrace.analysis.dashboard import downsample

    x, y = downsample(np.arange(10_000, dtype=np.int64) * 1_000_000, np.ones(10_000), max_points=100)
    assert len(x) == len(y) == 100 and all(v == 1.0 for v in y)


def test_html_names_the_trace_and_puts_triggered_rules_first(synthetic_trace):  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report
    from ktrace.report.html import all_sections, render_html

    report = build_report(synthetic_trace)
    page = render_html(report)
    header = page[page.index("<header>") : page.index("</header>")]
    for host in synthetic_trace.meta.hosts:
        assert host in header
    gpu_names = [n for n in synthetic_trace.devices["name"].cast(str).to_list() if n]
    assert all(n in header for n in gpu_names) and "GPU" in header
    order = [s.anchor for s in all_sections(report) if s.anchor.startswith("rule-")]
    fired = [report.dashboard.rules.result(a[5:]).fired for a in order]
    assert fired == sorted(fired, reverse=True)
    assert any(fired)


def test_markdown_names_the_trace(synthetic_trace):  # type: ignore[no-untyped-def]
    from ktrace.presentation.report_model import build_report
    from ktrace.report.markdown import render_markdown

    head = render_markdown(build_report(synthetic_trace)).split("## ", 1)[0]
    assert "**GPU**" in head and "**host**" in head
    assert all(h in head for h in synthetic_trace.meta.hosts)
