"""The TUI's dashboard tab and the report render one dashboard model: same numbers, names and formats."""

from __future__ import annotations

from rich.console import Console

from ktrace.analysis.distributions import memory_op_label
from ktrace.model.units import format_ns
from ktrace.report.content import build_report, report_document
from ktrace.tui.dashboard_data import compute_dashboard


def _text(panel) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=200, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(panel.body)
    return console.export_text()


def test_tui_panels_show_the_reports_series_steps_and_durations(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    report = report_document(build_report(synthetic_trace))
    message = compute_dashboard(synthetic_trace)
    assert message.dashboard is not None and not message.error
    panels = {p.title: p for p in message.panels}

    util = _text(panels["utilization over time"])
    assert report["utilization"]["series"]
    for series in report["utilization"]["series"]:
        mean = sum(series["y_pct"]) / len(series["y_pct"])
        assert f"{series['label']}" in util and f"mean {mean:.1f}%" in util

    steps = message.dashboard.step_histogram
    assert list(steps.counts) == report["steps_histogram"]["counts"]
    assert len(steps.counts) == 16  # 8 steps on each of 2 ranks: one bin per step below 30 (the TUI used 20)
    assert list(steps.edges_ms) == report["steps_histogram"]["edges_ms"]

    top = _text(panels["top 15 kernels by time"])
    for row in report["summary"]["top_by_time"]:
        assert format_ns(row["total_ns"]) in top  # the report's duration format, not a second formatter

    memory = _text(panels["memory-op share"])
    for row in report["summary"]["memory"]:
        assert memory_op_label(row["op"], row["copy_kind"], row["host_memory"]) in memory


def test_active_share_and_mean_utilization_say_what_they_are() -> None:
    """ "50.7% active" beside a utilization "mean 33.2%" read as two answers to one question: each panel says what
    its figure is (the counter method's active share and mean util differ by definition)."""
    import polars as pl

    from ktrace.tui.dashboard_panels import _active

    active = pl.DataFrame(
        {
            "node": ["n", "n"],
            "rank": [0, -1],
            "resource": ["gpu", "gpu"],
            "instance": [0, 0],
            "method": ["timeline", "counter"],
            "active_share": [0.507, 1.0],
            "mean_util": [None, 33.2],
            "samples": [10, 10],
        }
    )
    text = " ".join(_text(_active(active)).split())
    assert "mean util 33.2%" in text
    assert "% active = share of the time from the first to the last record with any kernel or copy running" in text
    assert "share of the samples above 0 %" in text and "mean of the sampled %" in text
    only_timeline = _text(_active(active.filter(pl.col("method") == "timeline")))
    assert "samples" not in only_timeline


def test_utilization_mean_says_what_it_averages(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    panels = {p.title: p for p in compute_dashboard(synthetic_trace).panels}
    util = " ".join(_text(panels["utilization over time"]).split())
    assert "mean = mean of the points drawn" in util and "≈ its timeline % active" in util


def test_utilization_rows_fit_an_80_column_terminal(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """The time axis was 80 columns whatever the width: at 80x24 (a 76-column panel) every series took two lines."""
    panels = {p.title: p for p in compute_dashboard(synthetic_trace).panels}
    console = Console(width=76, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(panels["utilization over time"].body)
    rows = [line for line in console.export_text().splitlines() if "/rank" in line]
    assert rows and all(" mean " in line and len(line.rstrip()) <= 76 for line in rows), rows


def test_findings_give_a_rules_recommendation_once() -> None:
    """A rule firing on 7 GPUs used to repeat its 4-line recommendation 7 times: now once, under its findings."""
    from types import SimpleNamespace

    from ktrace.analysis.rules.base import Evidence, Finding
    from ktrace.tui.dashboard_panels import findings_panel

    advice = "overlap the copies with compute:\nuse pinned memory\nuse non_blocking=True\nprefetch the next batch"
    gpus = [
        Finding("low_gpu_util", "warning", f"GPU {d} idle 40 %", advice, (Evidence("gap", 10 * d, 10 * d + 5),))
        for d in range(7)
    ]
    other = Finding("launch_bound", "info", "many tiny kernels", "fuse them with torch.compile")
    panel = findings_panel(SimpleNamespace(rules=SimpleNamespace(findings=(*gpus, other))), "")  # type: ignore[arg-type]
    text = _text(panel)
    assert text.count("use pinned memory") == 1 and text.count("fuse them with torch.compile") == 1
    assert all(f"low_gpu_util: GPU {d} idle 40 %" in text for d in range(7))
    assert text.index("GPU 6 idle") < text.index("overlap the copies") < text.index("launch_bound")
    assert [(start, end) for _, start, end in panel.evidence] == [(10 * d, 10 * d + 5) for d in range(7)]


def test_top_kernel_bars_take_the_panels_width(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """The bars were 60 + 36 columns whatever the width: two lines per kernel at 80 columns, a third of a
    160-column panel left blank. Now one line per kernel at 80 and longer bars at 160."""
    panel = next(p for p in compute_dashboard(synthetic_trace).panels if p.title == "top 15 kernels by time")

    def lines(width: int) -> list[str]:
        console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(panel.body)
        return [line for line in console.export_text().splitlines() if line.strip()]

    narrow, wide = lines(76), lines(154)  # inside the panel's border and padding at 80 and 160 columns
    assert len(narrow) == len(wide) == len(synthetic_trace.kernels["name"].unique().head(15))
    assert all(len(line) <= 76 for line in narrow)
    assert wide[0].count("█") > narrow[0].count("█") + 40


def test_utilization_labels_of_long_host_names_stay_apart() -> None:
    """The series labels were cut to 27 characters: every GPU of a long host name read the same."""
    from ktrace.analysis.dashboard import UtilizationSeries
    from ktrace.tui.dashboard_panels import UtilizationChart

    host = "ip-10-0-12-34.us-west-2.compute.internal"
    series = tuple(UtilizationSeries(f"{host}/rank{g}/GPU{g}", "timeline", (0.0, 1.0), (50.0, 60.0)) for g in range(2))
    console = Console(width=120, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(UtilizationChart(series, 1.0))
    labels = [line[:27].strip() for line in console.export_text().splitlines() if line.startswith("ip-")]
    assert len(labels) == 2 and len(set(labels)) == 2, labels
