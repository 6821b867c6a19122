"""A new number is added in one place, its section builder: every table of the summary page says its unit and
header, and every table the summary JSON holds is shown by some section (the exceptions are listed, with why)."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from ktrace.presentation.cells import Unit

TRACES = ("power_iteration", "tracelens", "dlrm", "nccl")
"""nsys on one GPU; Kineto with shapes, modules and memory (roofline, MFU); 8 ranks (load balance, stragglers,
critical path across ranks); NCCL with message sizes (collectives by size)."""

SECTION_OF = {
    "phases": "phases",
    "active": "active",
    "busy": "busy",
    "idle": "idle",
    "top_by_time": "kernels",
    "top_by_count": "kernel_counts",
    "operators": "operators",
    "latency": "latency",
    "step_stats": "steps",
    "precision": "precision",
    "activity": "activity",
    "memory": "memory",
    "memory_timeline": "memory",
    "overlap": "overlap",
    "collectives": "collectives",
    "roofline": "roofline",
    "counters": "counters",
    "load_balance": "load_balance",
    "stragglers": "stragglers",
    "critical_path": "critical_path",
    "annotations": "annotations",
}
"""summary_to_dict key -> the summary page's section that shows it."""
NOT_A_SECTION = {
    "kernel_sequences": "three kernel names a row do not fit 80 columns: the report's operator section shows them "
    "(summary_operators.operator_report_tables)",
    "notes": "the page's notes (grouped), not a section",
}
"""Keys holding a table that the summary page leaves to another page or shows otherwise, and why."""


def _holds_table(value: Any) -> bool:
    """A list of rows, or an object holding one (one level down)."""
    if isinstance(value, list):
        return any(isinstance(v, dict) for v in value)
    return isinstance(value, dict) and any(_holds_table(v) for v in value.values())


@pytest.fixture(scope="module", params=TRACES)
def page_and_doc(request, real_trace_path):  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_page import summary_page

    page = summary_page(summarize(ktrace.open(real_trace_path(request.param)), top=8), by_shape=True)
    return page, dict(page.document)


def test_every_column_has_a_known_unit_and_a_header(page_and_doc) -> None:  # type: ignore[no-untyped-def]
    page, _ = page_and_doc
    units = set(typing.get_args(Unit))
    for table in page.tables():
        for column in table.columns:
            assert column.header.strip(), (table.key, column.key)
            assert column.kind in units, (table.key, column.key)
            values = [row[column.key] for row in table.rows]  # every row holds every column (KeyError otherwise)
            texts = [v for v in values if isinstance(v, str)]
            if column.kind not in ("text", "id"):  # a name in a number column reads right-aligned and unescaped
                assert not texts, (table.key, column.key, texts[:2])
        if table.bar is not None:
            assert table.bar in {c.key for c in table.columns}, table.key


def test_every_table_of_the_json_is_shown_by_a_section(page_and_doc) -> None:  # type: ignore[no-untyped-def]
    page, doc = page_and_doc
    for key, value in doc.items():
        if not _holds_table(value):
            continue
        assert key in SECTION_OF or key in NOT_A_SECTION, f"summary key {key!r} has no section: add a builder"
        if key in SECTION_OF:
            assert page.section(SECTION_OF[key]) is not None, key
    assert not set(SECTION_OF) & set(NOT_A_SECTION)


def test_table_keys_are_unique(page_and_doc) -> None:  # type: ignore[no-untyped-def]
    page, _ = page_and_doc
    keys = [t.key for t in page.tables()]
    assert len(keys) == len(set(keys)), keys
    sections = [s.key for s in page.sections]
    assert len(sections) == len(set(sections)), sections
