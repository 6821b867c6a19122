"""The terminal lays out a presentation Page: every block in order, notes grouped, trace text printable."""

from __future__ import annotations

import io

from rich.console import Console

from ktrace.presentation.page import Column, Figure, Note, Page, RuleVerdict, Section, Table, Text


def _console(out: io.StringIO, width: int = 80) -> Console:
    return Console(file=out, width=width, color_system=None, force_terminal=False)


def test_every_block_is_laid_out_in_order() -> None:
    from ktrace.report.terminal import render_page

    table = Table(
        "t",
        "kernels [x]",
        (Column("name"), Column("total_ns"), Column("time_share")),
        ({"name": "gemm\x1b[2J", "total_ns": 1_500_000, "time_share": 0.5},),
        bar="time_share",
        rest=3,
        rest_what="kernels",
        lines=("  below the table",),
    )
    page = Page(
        "t",
        (("source", "kineto"), ("ranks", "2")),
        (
            Section("a", "A", (table, Text("a paragraph", "dim"), Figure("f", "a plot", "pie", {})), (Note("sec"),)),
            Section("r", "Rules", ((RuleVerdict("LowGPU", "triggered", "GPU idle 40 %", ""),),)),
        ),
        (Note("lacks memory", absent=True), Note("truncated", 2)),
    )
    out = io.StringIO()
    render_page(page, _console(out))
    text = out.getvalue()
    order = [
        "source kineto   ranks 2",
        "note: truncated (x2)",
        "kernels [x]",
        "1.50 ms",
        "██████",
        "below the table",
        "and 3 more kernels",
        "a paragraph",
        "a plot",
        "sec",
        "triggered LowGPU: GPU idle 40 %",
        "not in this trace:",
        "  lacks memory",
    ]
    at = [text.index(s) for s in order]
    assert at == sorted(at), text
    assert "gemm\\x1b[2J" in text and "\x1b" not in text  # trace text printable, never markup


def test_repeated_notes_print_once_with_a_count(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """64 ranks each saying the same thing gave 64 note lines before the first table."""
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary

    said = tuple(f"rank{r}.json: {r + 1} kernel(s) have no launch call in the trace (kept)" for r in range(8))
    trace = synthetic_trace.with_meta(synthetic_trace.meta.with_health({}, said))
    out = io.StringIO()
    render_summary(summarize(trace), _console(out, 200))
    lines = [line for line in out.getvalue().splitlines() if "have no launch call" in line]
    assert lines == ["note: rank0.json: 1 kernel(s) have no launch call in the trace (kept) (and 7 more like it)"]


def _summary_part(path, start: str, end: str):  # type: ignore[no-untyped-def]
    """The summary of a real trace and its terminal text at 80 columns from `start` to `end`, every line <= 80."""
    import ktrace
    from ktrace.analysis.summary import summarize
    from ktrace.report.terminal import render_summary

    summary = summarize(ktrace.open(path), top=8)
    out = io.StringIO()
    render_summary(summary, _console(out))
    text = out.getvalue()
    part = text[text.index(start) : text.index(end)]
    assert max(len(line.rstrip()) for line in part.splitlines()) <= 80
    return summary, part


def test_roofline_and_mfu_fit_80_columns(real_trace_path) -> None:  # type: ignore[no-untyped-def]
    from ktrace.model.units import format_ns

    summary, part = _summary_part(real_trace_path("tracelens"), "roofline: top operators", "counters")
    top = summary.roofline.operators.row(0, named=True)
    assert format_ns(top["gpu_time_ns"]) in part and f"{top['tflops']:,.2f}" in part
    assert "MFU mean" in part and "2.4 %" in part  # the README's owlv2 figure: MFU 0.0243


def test_collectives_keep_their_bus_bandwidth_at_80_columns(real_trace_path) -> None:  # type: ignore[no-untyped-def]
    """busbw is the figure to compare with nccl-tests: algbw gives way first (it was cut as the right-most)."""
    summary, part = _summary_part(real_trace_path("nccl"), "NCCL collectives", "arrival skew")
    first = summary.collectives.by_size.row(0, named=True)
    assert "busbw" in part and f"{first['busbw_gbps']:.2f} GB/s" in part
