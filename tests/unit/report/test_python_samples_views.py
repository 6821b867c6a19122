"""The Python samples in every view of a trace: the summary's section and JSON key, the report's icicle figure
(HTML) and table (Markdown); a trace without samples has none of them."""

from __future__ import annotations

import dataclasses
import json

import polars as pl

from ktrace.analysis.summary import summarize
from ktrace.model.schema import STACK_SEPARATOR
from ktrace.model.trace import Trace
from ktrace.presentation.report_model import build_report
from ktrace.presentation.report_page import report_page
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.presentation.summary_page import summary_page
from ktrace.report.html import render_html
from ktrace.report.markdown import render_markdown
from ktrace.report.sections import figure_spec
from ktrace.testing.synthetic import SyntheticConfig, generate

HOT = "/home/u/project/train.py:20 hot_loop"
STACK = ["/home/u/project/train.py:1 <module>", "/home/u/project/train.py:10 train"]


def with_samples(trace: Trace) -> Trace:
    """The synthetic trace with 30 samples of its rank's main thread across its steps, 24 of them in hot_loop."""
    lo, hi = trace.span_ns() or (0, 0)
    n = 30
    ts = [lo + (hi - lo) * i // n for i in range(n)]
    stacks = [STACK_SEPARATOR.join([*STACK, HOT] if i % 5 else STACK) for i in range(n)]
    node, rank = trace.ranks[0] if trace.ranks[0][1] >= 0 else trace.ranks[-1]
    samples = pl.DataFrame(
        {"node": [node] * n, "rank": [rank] * n, "ts_ns": ts, "pid": [1] * n, "tid": [1] * n, "stack": stacks},
        schema={
            "node": pl.Categorical,
            "rank": pl.Int32,
            "ts_ns": pl.Int64,
            "pid": pl.Int64,
            "tid": pl.Int64,
            "stack": pl.Categorical,
        },
    )
    return dataclasses.replace(trace, samples=samples)


def test_the_summary_shows_the_top_function_and_its_json() -> None:
    summary = summarize(with_samples(generate(SyntheticConfig(seed=3))))
    section = summary_page(summary).section("python-samples")
    assert section is not None
    table = next(b for b in section.blocks if getattr(b, "key", "") == "python_top_functions")
    assert table.rows[0]["name"] == "hot_loop (project/train.py:20)" and table.rows[0]["self_samples"] == 24
    doc = json.loads(json.dumps(summary_to_dict(summary)))["python_profile"]
    assert doc["samples"] == 30 and doc["functions"][0]["function"] == HOT
    assert doc["steps"]["with_samples"] > 0 and doc["steps"]["slowest"]["top_function"] in (HOT, STACK[-1])


def test_the_report_draws_an_icicle_and_markdown_keeps_the_table() -> None:
    report = build_report(with_samples(generate(SyntheticConfig(seed=3))))
    section = report_page(report).section("python-samples")
    assert section is not None
    icicle = next(b for b in section.blocks if getattr(b, "kind", "") == "icicle")
    spec = figure_spec(icicle)["data"][0]
    assert spec["type"] == "icicle" and spec["values"][:2] == [30, 30] and spec["parents"].count("") == 1
    assert "&lt;module&gt;" in spec["labels"][1]  # trace text is escaped for plotly
    assert '"type":"icicle"' in render_html(report)  # the figure's spec, drawn by the inlined plotly.js
    markdown = render_markdown(report)
    assert "## Python samples" in markdown and "hot\\_loop (project/train.py:20) | 24 |" in markdown


def test_a_trace_without_samples_has_no_python_section() -> None:
    trace = generate(SyntheticConfig(seed=3))
    assert summary_page(summarize(trace)).section("python-samples") is None
    assert summary_to_dict(summarize(trace))["python_profile"] is None
