"""The summary page's sections: what each holds, from real traces and hand-made summaries."""

from __future__ import annotations

import dataclasses

import pytest

from ktrace.presentation.page import Table, Text


@pytest.fixture(scope="module")
def summaries(real_trace_path):  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.analysis.summary import summarize

    cache = {}

    def get(name: str, by_shape: bool = False):  # type: ignore[no-untyped-def]
        if (name, by_shape) not in cache:
            cache[name, by_shape] = summarize(ktrace.open(real_trace_path(name)), top=8, by_shape=by_shape)
        return cache[name, by_shape]

    return get


def _table(page, key: str) -> Table:  # type: ignore[no-untyped-def]
    return next(t for t in page.tables() if t.key == key)


def test_facts_and_document(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_json import summary_to_dict
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("power_iteration")
    page = summary_page(summary)
    assert dict(page.facts) == {
        "source": "nsys",
        "ranks": "1",
        "kernels": "3,689",
        "job": "1.79 s",
        "steps": "43 (inferred from a periodic kernel)",
    }
    assert dict(page.document) == summary_to_dict(summary)  # the JSON `ktrace summary --json` prints
    assert [s.key for s in page.sections][:3] == ["phases", "active", "busy"]


def test_notes_are_grouped_and_what_the_trace_lacks_is_flagged(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import NO_OPERATORS
    from ktrace.presentation.summary_page import summary_page

    said = tuple(f"rank{r}.json: 64 kernel(s) have no launch call in the trace (kept)" for r in range(8))
    summary = dataclasses.replace(summaries("power_iteration"), notes=(NO_OPERATORS, *said, said[0]))
    notes = summary_page(summary).notes
    assert [(n.count, n.absent) for n in notes] == [(9, False), (1, True)]  # absent last
    assert notes[0].line.endswith("(and 8 more like it)") and notes[1].text == NO_OPERATORS


def test_counters_keep_one_unit_a_column() -> None:
    from ktrace.presentation.summary_gpu import counter_rows

    stats = {"samples": 2, "min": 0.0, "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0, "mean": 50.0}
    plain, in_bytes = counter_rows(
        [
            {"node": "vm", "metric": "cpu.core.util", "instance": 3, **stats},
            {"node": "vm", "metric": "mem.used_bytes", "instance": -1, **stats, "max": 2_467_532_800.0},
        ]
    )
    assert [r["metric"] for r in plain] == ["cpu.core.util[3]"]
    assert [r["metric"] for r in in_bytes] == ["mem.used_bytes"] and in_bytes[0]["max"] == 2_467_532_800.0


def test_roofline_and_mfu_on_an_h100_trace(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.cells import format_value
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("tracelens")
    page = summary_page(summary)
    section = page.section("roofline")
    assert section is not None
    roof = _table(page, "roofline")
    first = summary.roofline.operators.row(0, named=True)
    assert roof.rows[0]["name"] == first["name"] and roof.rows[0]["gpu_time_ns"] == first["gpu_time_ns"]
    assert {c.key: c.kind for c in roof.columns}["pct_of_peak"] == "pct"
    assert "NVIDIA H100" in roof.title and "bf16" in roof.title
    mfu = _table(page, "mfu")
    mean = summary.roofline.per_step["mfu"].mean()
    assert mfu.rows[0]["mfu_mean"] == pytest.approx(mean, abs=1e-6)
    assert format_value("share", mfu.rows[0]["mfu_mean"]).strip() == f"{100 * mean:.1f} %"


def test_the_roofline_names_where_the_most_time_is_lost(summaries) -> None:  # type: ignore[no-untyped-def]
    """The issue's "top operators by time lost against their roofline": the JSON's top_lost, as a table, the shapes
    of an operator that has several named so its rows read apart (two "aten::bmm" rows did)."""
    from ktrace.analysis.roofline import top_lost
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("tracelens")
    lost = _table(summary_page(summary), "roofline_lost")
    expected = top_lost(summary.roofline.operators, 5)
    assert [r["lost_ns"] for r in lost.rows] == expected["lost_ns"].to_list()
    names = [r["name"] for r in lost.rows]
    assert len(set(names)) == len(names) and any(n.startswith("aten::bmm [[") for n in names)


def test_collectives_by_size_with_busbw(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("nccl")
    table = _table(summary_page(summary), "collectives")
    by_size = summary.collectives.by_size
    assert [r["busbw_gbps"] for r in table.rows] == pytest.approx(by_size["busbw_gbps"].head(10).to_list(), rel=1e-5)
    assert table.rest == max(0, by_size.height - 10)


def test_roofline_without_shapes_says_why_in_one_line(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("power_iteration")
    section = summary_page(summary).section("roofline")
    assert section is not None and len(section.blocks) == 1
    block = section.blocks[0]
    assert isinstance(block, Text) and block.text == summary.roofline.reason


def test_stragglers_top_five_with_their_causes_and_the_rest(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("dlrm")
    table = _table(summary_page(summary), "stragglers")
    ranks = summary.stragglers.table
    assert [r["rank"] for r in table.rows] == ranks["rank"].head(5).to_list()
    assert table.rest == ranks.height - 5 and table.rest_what == "ranks"
    causes = [c for c in ranks["causes"].head(5).to_list() if c]
    assert len(table.lines) == len(causes) and all(c in line for c, line in zip(causes, table.lines, strict=True))
    balance = summary_page(summary).section("load_balance")
    assert balance is not None and isinstance(balance.blocks[-1], Text)
    assert balance.blocks[-1].text.startswith("busy spread")


def test_shapes_are_named_and_listed_below(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_page import summary_page

    summary = summaries("tracelens", by_shape=True)
    table = _table(summary_page(summary, by_shape=True), "operator_shapes")
    dims = summary.operators.by_shape["input_dims"].head(15).to_list()
    named = {r["shapes"] for r in table.rows}
    assert len(named) == len(set(dims)) and len(table.lines) == len({d for d in dims if d is not None})
    assert summary_page(summary).section("operators").blocks[-1].key != "operator_shapes"  # type: ignore[union-attr]


def test_annotations_get_one_table_each(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_page import summary_page

    summary = summarize(synthetic_trace, annotations=("ProfilerStep.*", "no such range"))
    section = summary_page(summary).section("annotations")
    assert section is not None
    titles = [b.title for b in section.blocks if isinstance(b, Table)]
    assert titles[0].startswith("annotation 'ProfilerStep.*': ") and len(titles) == 2
    empty = summarize(synthetic_trace)
    assert summary_page(empty).section("annotations") is None


def test_report_operator_tables_name_their_columns(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.presentation.summary_operators import operator_report_tables

    tables = operator_report_tables(summaries("tracelens"))
    assert [t.key for t in tables] == [
        "operators_by_gpu",
        "operators_by_cpu_self",
        "operators_by_shape",
        "operator_kernels",
        "modules",
        "kernel_sequences",
    ]
    assert [c.header for c in tables[0].columns][:3] == ["operator", "calls", "CPU total"]
    assert tables[0].lines and not tables[1].lines  # the first says what GPU time means
    assert all(" → " in r["kernels"] for r in tables[-1].rows)


def test_no_operators_gives_one_empty_table_saying_why(summaries) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import NO_OPERATORS
    from ktrace.presentation.summary_operators import operator_report_tables

    bare = dataclasses.replace(summaries("power_iteration"), operators=None)
    tables = operator_report_tables(bare)
    assert tables[0].rows == () and tables[0].lines == (NO_OPERATORS,)


def test_a_long_rank_table_shows_its_extremes_and_counts_the_rest() -> None:
    from ktrace.presentation.summary_tables import capped, rows_table

    rows = [{"node": "n", "rank": r, "busy_pct": float(r % 7), "mean_ns": None if r == 3 else r} for r in range(40)]
    table = rows_table("t", "busy", rows)
    busy = capped(table, "busy_pct", descending=False, first="least busy", limit=10)
    assert [r["busy_pct"] for r in busy.rows] == [0.0] * 6 + [1.0] * 4 and busy.rest == 30
    assert busy.title == "busy; 10 of 40 rows, least busy first"
    slow = capped(table, "mean_ns", descending=True, first="slowest", limit=10)
    assert [r["rank"] for r in slow.rows][:2] == [39, 38] and slow.rest == 30  # the row without a value last
    assert capped(table, "busy_pct", descending=False, first="x", limit=40) is table


def test_64_ranks_give_bounded_tables_with_the_planted_straggler_first() -> None:
    """At 64 ranks the idle table alone had 256 rows; every per-rank table now shows 32 and counts the rest."""
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_page import summary_page
    from ktrace.presentation.summary_tables import RANK_TABLE_ROWS
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    fleet = generate_fleet(FleetConfig(ranks=64, hosts=8, steps=4, max_offset_ns=0))
    page = summary_page(summarize(fleet.trace, top=8))
    tables = {t.key: t for t in page.tables()}
    for key in ("active_time", "gpu_busy", "gpu_idle_by_cause", "step_time", "overlap", "load_balance"):
        assert len(tables[key].rows) == RANK_TABLE_ROWS and tables[key].rest > 0, key
    steps = tables["step_time"].rows
    assert [r["mean_ns"] for r in steps] == sorted((r["mean_ns"] for r in steps), reverse=True)
    first = tables["stragglers"].rows[0]
    assert (first["node"], first["rank"]) == fleet.straggler
