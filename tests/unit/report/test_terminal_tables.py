"""Terminal tables at 80 columns: numbers are never cut, kernel names shrink but stay distinct."""

from __future__ import annotations

import dataclasses
import io

import polars as pl
from rich.console import Console

from ktrace.model.units import format_ns as fmt_ns
from ktrace.report.terminal_tables import format_bytes, print_table

_CLOVER = (
    "void clover::par_ranged2d_kernel<{fn}(int, int, int, int, clover::Buffer2D<double> &, "
    "clover::Buffer2D<double> &)::[lambda(int, int) (instance {i})]>(clover::Range2d, T1)"
)


def _render(rows, columns=None, share_bar=None, width=80):  # type: ignore[no-untyped-def]
    out = io.StringIO()
    print_table(Console(file=out, width=width, color_system=None, force_terminal=False), "t", rows, columns, share_bar)
    return out.getvalue()


def test_step_table_numbers_are_whole_at_80_columns() -> None:
    rows = [
        {
            "node": "nid008553-a-long-hostname",
            "rank": 0,
            "steps": 4,
            "total_ns": 259_700_000,
            "mean_ns": 64_920_000,
            "std_ns": 224_880_000,
            "p95_ns": 65_100_000,
            "p99_ns": 65_100_000,
        }
    ]
    text = _render(rows)
    assert all(len(line) <= 80 for line in text.splitlines())
    for key in ("total_ns", "mean_ns", "p95_ns"):
        assert fmt_ns(rows[0][key]) in text
    assert "…" not in text.replace("nid008553", "")  # only the node name may yield


def test_kernel_names_stay_distinct_and_numbers_whole_at_80_columns() -> None:
    names = [
        _CLOVER.format(fn=fn, i=i)
        for fn in ("PdV_kernel", "advec_mom_kernel", "advec_cell_kernel")
        for i in (1, 2, 7, 11)
    ]
    rows = [
        {
            "name": n,
            "count": 10 + i,
            "total_ns": 19_404_589 - i * 1000,
            "mean_ns": 1_940_458,
            "p50_ns": 1,
            "p95_ns": 1_950_000,
            "max_ns": 2,
            "time_share": 0.066,
        }
        for i, n in enumerate(names)
    ]
    rows.append(
        {
            "name": "other",
            "count": 1108,
            "total_ns": 87_070_000,
            "mean_ns": 78_580,
            "p50_ns": None,
            "p95_ns": None,
            "max_ns": None,
            "time_share": 0.296,
        }
    )
    text = _render(rows, share_bar="time_share")
    body = [line for line in text.splitlines()[3:] if line.strip()]
    shown = [line.split("  ")[0].strip() for line in body]
    assert len(set(shown)) == len(rows), shown
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "19.40 ms" in text and "1.94 ms" in text and "6.6 %" in text
    assert "<…>" not in text


def test_bytes_are_humanized() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(2_900_000) == "2.9 MB"
    assert format_bytes(3.2e9) == "3.2 GB"
    text = _render([{"op": "memcpy", "count": 3, "bytes": 3_200_000_000}])
    assert "3.2 GB" in text


def test_counters_name_their_core_and_humanize_bytes_at_80_columns() -> None:
    """Byte counters get a table of their own (one unit a column), humanized; the others keep two decimals."""
    from ktrace.presentation.summary_gpu import counter_rows
    from ktrace.presentation.summary_tables import rows_table
    from ktrace.report.terminal_tables import render_table

    stats = {"samples": 2, "min": 0.0, "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0, "mean": 50.0}
    rows = [
        {"node": "vm", "metric": "cpu.core.util", "instance": 0, **stats},
        {"node": "vm", "metric": "cpu.core.util", "instance": 1, **stats},
        {
            "node": "vm",
            "metric": "mem.used_bytes",
            "instance": -1,
            **stats,
            "max": 2_467_532_800.0,
            "mean": 2_464_126_976.0,
        },
    ]
    plain, in_bytes = counter_rows(rows)
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None, force_terminal=False)
    render_table(console, rows_table("counters", "counters", plain))
    stat_units = {k: "bytes" for k in ("min", "p50", "p95", "max", "mean")}
    render_table(console, rows_table("counters_bytes", "counters (bytes)", in_bytes, units=stat_units))  # type: ignore[arg-type]
    text = out.getvalue()
    assert "cpu.core.util[0]" in text and "cpu.core.util[1]" in text and "95.00" in text
    assert "2.5 GB" in text and "2,467,532,800" not in text and "95 B" in text
    assert all(len(line) <= 80 for line in text.splitlines()) and "…" not in text


def test_host_wide_rank_reads_as_a_dash_not_minus_one() -> None:
    text = _render(
        [{"resource": "cpu", "method": "counter", "node": "vm", "rank": -1, "instance": -1, "active_share": 0.5}]
    )
    assert "-1" not in text


def test_notes_come_before_the_tables(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary

    trace = synthetic_trace.with_meta(synthetic_trace.meta.with_health({}, ("input was truncated at 2 GB",)))
    out = io.StringIO()
    render_summary(summarize(trace), Console(file=out, width=100, color_system=None, force_terminal=False))
    text = out.getvalue()
    assert text.index("input was truncated") < text.index("job phases")


def test_what_the_trace_lacks_comes_last_not_before_the_tables(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """A trace without operators (or memory data, or a critical path): the notes saying so close the summary, dimmed, rather than open it
    before the numbers (an nsys summary opened with two of them)."""
    from ktrace.analysis.summary import NO_OPERATORS, summarize
    from ktrace.report.terminal import render_summary

    steps_only = synthetic_trace.ranges.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep"))
    bare = dataclasses.replace(synthetic_trace, ranges=steps_only)  # no operators, nor NVTX ranges to stand in
    summary = summarize(bare.with_meta(bare.meta.with_health({}, ("input was truncated",))))
    assert NO_OPERATORS in summary.notes  # the JSON keeps every note
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400, color_system=None, force_terminal=False))
    text = out.getvalue()
    assert text.index("input was truncated") < text.index("job phases") < text.index("not in this trace:")
    assert text.index("job phases") < text.index(NO_OPERATORS)


def test_active_share_and_mean_utilization_say_how_they_differ(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary

    out = io.StringIO()
    render_summary(summarize(synthetic_trace), Console(file=out, width=240, color_system=None, force_terminal=False))
    text = " ".join(out.getvalue().split())  # the title wraps at the table width
    assert "mean util = mean sample, lower than the active share when the device is partly busy" in text


def test_a_column_the_rows_lack_is_an_error_not_a_dash() -> None:
    import pytest

    rows = [{"node": "vm", "rank": 0, "busy_ns": 5}]
    with pytest.raises(KeyError, match="idle_ns"):
        _render(rows, ["node", "rank", "busy_ns", "idle_ns"])
    with pytest.raises(KeyError, match="busy_share"):
        _render(rows, share_bar="busy_share")


def test_a_short_host_column_leaves_its_room_to_the_names() -> None:
    """Flexible columns split the room left evenly: a 5-character host kept half of it and byte counters read
    "gpu…bytes[0]" at 80 columns; the narrowest now takes what it needs and the rest goes to the next."""
    stats = {"samples": 24, **{k: 32_000_000_000.0 for k in ("min", "p50", "p95", "max", "mean")}}
    rows = [{"node": "node0", "metric": f"gpu.mem_used_bytes[{i}]", **stats} for i in range(2)]
    from ktrace.presentation.summary_tables import rows_table
    from ktrace.report.terminal_tables import render_table

    out = io.StringIO()
    units = {k: "bytes" for k in ("min", "p50", "p95", "max", "mean")}
    render_table(
        Console(file=out, width=80, color_system=None, force_terminal=False), rows_table("c", "c", rows, units=units)
    )  # type: ignore[arg-type]
    text = out.getvalue()
    shown = [line.split()[1] for line in text.splitlines()[3:]]
    assert [len(m) for m in shown] == [20, 20] and shown[0].endswith("used_bytes[0]"), shown  # 12 before
    assert "32.0 GB" in text
    assert all(len(line) <= 80 for line in text.splitlines())
