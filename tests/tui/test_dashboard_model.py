"""The TUI's dashboard tab and the report render one dashboard model: same numbers, names and formats."""

from __future__ import annotations

from rich.console import Console

from ktrace.model.units import format_ns
from ktrace.presentation.labels import memory_op_label
from ktrace.presentation.report_model import build_report
from ktrace.report.content import report_document
from ktrace.tui.dashboard_data import compute_dashboard


def _text(panel) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=200, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(panel.body)
    return console.export_text()


def _panel(trace, title: str):  # type: ignore[no-untyped-def]
    """The dashboard panel of that title (a figure's title may go on: "Utilization over time (timeline bins...)")."""
    return next(p for p in compute_dashboard(trace).panels if p.title.startswith(title))


def test_tui_panels_show_the_reports_series_steps_and_durations(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    report = report_document(build_report(synthetic_trace))
    message = compute_dashboard(synthetic_trace)
    assert message.dashboard is not None and not message.error
    panels = {p.title.split(" (")[0]: p for p in message.panels}

    util = _text(panels["Utilization over time"])
    assert report["utilization"]["series"]
    for series in report["utilization"]["series"]:
        mean = sum(series["y_pct"]) / len(series["y_pct"])
        assert f"{series['label']}" in util and f"mean {mean:.1f}%" in util

    steps = message.dashboard.step_histogram
    assert list(steps.counts) == report["steps_histogram"]["counts"]
    assert len(steps.counts) == 16  # 8 steps on each of 2 ranks: one bin per step below 30 (the TUI used 20)
    assert list(steps.edges_ms) == report["steps_histogram"]["edges_ms"]

    top = _text(panels["Top kernels by total time"])
    for row in report["summary"]["top_by_time"]:
        assert format_ns(row["total_ns"]) in top  # the report's duration format, not a second formatter

    memory = _text(panels["GPU memory operations"])
    for row in report["summary"]["memory"]:
        assert memory_op_label(row["op"], row["copy_kind"], row["host_memory"]) in memory


def test_active_share_and_mean_utilization_say_what_they_are() -> None:
    """ "50.7% active" beside a utilization "mean 33.2%" read as two answers to one question: each panel says what
    its figure is (the counter method's active share and mean util differ by definition)."""
    from ktrace.presentation.page import Table, columns
    from ktrace.tui.dashboard_panels import PanelRenderer

    keys = ("node", "rank", "resource", "instance", "method", "active_share", "mean_util", "samples")
    rows = (("n", 0, "gpu", 0, "timeline", 0.507, None, 10), ("n", -1, "gpu", 0, "counter", 1.0, 33.2, 10))

    def active(*found: tuple[object, ...]) -> str:
        renderer = PanelRenderer()
        renderer.table(
            Table("active_time", "Active time", columns(*keys), tuple(dict(zip(keys, r, strict=True)) for r in found))
        )
        return _text(renderer.end()[0])

    text = " ".join(active(*rows).split())
    assert "mean util 33.2%" in text and "50.7 % active" in text
    assert "% active = share of the time from the first to the last record with any kernel or copy running" in text
    assert "share of the samples above 0 %" in text and "mean of the sampled %" in text
    only_timeline = active(rows[0])
    assert "samples" not in only_timeline


def test_utilization_mean_says_what_it_averages(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    util = " ".join(_text(_panel(synthetic_trace, "Utilization over time")).split())
    assert "mean = mean of the points drawn" in util and "≈ its timeline % active" in util


def test_utilization_rows_fit_an_80_column_terminal(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """The time axis was 80 columns whatever the width: at 80x24 (a 76-column panel) every series took two lines."""
    console = Console(width=76, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(_panel(synthetic_trace, "Utilization over time").body)
    rows = [line for line in console.export_text().splitlines() if "/rank" in line]
    assert rows and all(" mean " in line and len(line.rstrip()) <= 76 for line in rows), rows


def test_findings_give_a_rules_recommendation_once() -> None:
    """A rule firing on 7 GPUs used to repeat its 4-line recommendation 7 times: now once, under its findings."""
    from ktrace.analysis.rules.base import Evidence, Finding, RuleResult
    from ktrace.presentation.report_rules import rule_verdict
    from ktrace.tui.dashboard_panels import findings_panel

    advice = "overlap the copies with compute:\nuse pinned memory\nuse non_blocking=True\nprefetch the next batch"
    gpus = tuple(
        Finding("low_gpu_util", "warning", f"GPU {d} idle 40 %", advice, (Evidence("gap", 10 * d, 10 * d + 5),))
        for d in range(7)
    )
    other = Finding("launch_bound", "info", "many tiny kernels", "fuse them with torch.compile")
    verdicts = [rule_verdict(RuleResult(f[0].rule, "timeline", "", {}, 1, 1, f)) for f in (gpus, (other,))]
    panel = findings_panel(verdicts, "0 errors, 7 warnings, 1 notes from 2 rules.")
    text = _text(panel)
    assert text.count("use pinned memory") == 1 and text.count("fuse them with torch.compile") == 1
    assert all(f"low_gpu_util: GPU {d} idle 40 %" in text for d in range(7))
    assert text.index("from 2 rules") < text.index("GPU 6 idle") < text.index("overlap the copies")
    assert text.index("overlap the copies") < text.index("launch_bound")
    assert [(start, end) for _, start, end in panel.evidence] == [(10 * d, 10 * d + 5) for d in range(7)]


def test_top_kernel_bars_take_the_panels_width(synthetic_trace) -> None:  # type: ignore[no-untyped-def]
    """The bars were 60 + 36 columns whatever the width: two lines per kernel at 80 columns, a third of a
    160-column panel left blank. Now one line per kernel at 80 and longer bars at 160."""
    panel = _panel(synthetic_trace, "Top kernels by total time")

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
    from ktrace.tui.charts import Series, UtilizationChart

    host = "ip-10-0-12-34.us-west-2.compute.internal"
    series = tuple(Series(f"{host}/rank{g}/GPU{g}", (0.0, 1.0), (50.0, 60.0)) for g in range(2))
    console = Console(width=120, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(UtilizationChart(series))
    labels = [line[:27].strip() for line in console.export_text().splitlines() if line.startswith("ip-")]
    assert len(labels) == 2 and len(set(labels)) == 2, labels
