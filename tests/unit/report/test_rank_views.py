"""The rank-level views in every output: present only with 2+ ranks, the planted straggler first, the same
numbers in HTML, Markdown, JSON and the terminal, and tables cut to the top rows (with a count) at many ranks."""

from __future__ import annotations

import io
import json

import pytest
from fleet_traces import LAYOUT, STEPS, STRAGGLER, fleet_trace
from rich.console import Console

from ktrace.presentation.report_model import Report, build_report
from ktrace.report.html import all_sections
from ktrace.report.json_report import render_json
from ktrace.report.markdown import render_markdown
from ktrace.report.sections import Section
from ktrace.report.terminal import render_summary

MANY = tuple((f"host{h:02d}", h * 15 + r) for h in range(10) for r in range(15))
"""150 ranks on 10 hosts (more than a screen): the straggler is host03's 5th rank."""
MANY_STRAGGLER = MANY[49]


@pytest.fixture(scope="module")
def fleet() -> Report:
    return build_report(fleet_trace())


@pytest.fixture(scope="module")
def many() -> Report:
    return build_report(fleet_trace(layout=MANY, straggler=MANY_STRAGGLER))


def ranks_section(report: Report) -> Section | None:
    """The HTML report's Ranks section, laid out from the report's page."""
    return next((s for s in all_sections(report) if s.anchor == "ranks"), None)


def _terminal(report: Report) -> str:
    out = io.StringIO()
    render_summary(report.dashboard.summary, Console(file=out, width=120, color_system=None, force_terminal=False))
    return out.getvalue()


def test_html_section_has_one_heatmap_with_a_row_per_rank_and_the_straggler_first(fleet: Report) -> None:
    """One rank x step figure (there were four: busy and communication, per time bin and per step), the
    communication share in its hover."""
    sec = ranks_section(fleet)
    assert sec is not None
    assert [f["data"][0]["type"] for f in sec.figures] == ["heatmap"]
    trace = sec.figures[0]["data"][0]
    assert trace["y"] == [f"{h}/{r}" for h, r in LAYOUT] and trace["x"] == list(range(STEPS))
    assert trace["text"] == [[30 if key == STRAGGLER else 70] * STEPS for key in LAYOUT]  # communication %
    busy = trace["customdata"]
    assert trace["z"] == [[b - c for b, c in zip(*rows, strict=True)] for rows in zip(busy, trace["text"], strict=True)]
    hover = trace["hovertemplate"]
    parts = ("node/rank %{y}", "step %{x}", "GPU busy %{customdata} %", "communication %{text} %", "%{z} %")
    assert all(part in hover for part in parts)
    body = "".join(sec.body)
    step_time = body[body.index("<h3>Stragglers: step-time view") :]
    assert step_time.index("<td>b/2</td><td>133.3&nbsp;%</td>") < step_time.index(
        "<td>ranks 0, 1, 3 on 2 hosts</td><td>0.0&nbsp;%</td>"
    )
    assert "gemm +400&nbsp;ns/step" in body  # the unit stays on the line of its number


def test_html_shows_who_was_waited_for_before_the_step_time_view(fleet: Report) -> None:
    """The HTML Ranks section had no waited-for table (the Markdown and the terminal had): now the ranks the
    others waited for come first, the planted rank in the first row with its why, then the step-time view, then
    the slowest and fastest rank per step. Fails on the old code (no such table in the HTML)."""
    sec = ranks_section(fleet)
    assert sec is not None
    body = "".join(sec.body)
    titles = [t.split("<")[0] for t in body.split("<h3>")[1:]]
    assert [t.split(" (")[0].split(":")[0] for t in titles] == [
        "Ranks the others waited for at the collectives",
        "Stragglers",
        "Slowest and fastest rank per step",
    ]
    waited = body[body.index("<h3>Ranks the others waited for") : body.index("<h3>Stragglers")]
    first_row = waited[waited.index("<tbody><tr>") :].split("</tr>")[0]
    node, rank = STRAGGLER
    assert first_row.startswith(f"<tbody><tr><td>{node}/{rank}</td>") and "compute kernels" in first_row
    assert "matched by kernel name and order" in waited


def test_64_ranks_have_64_uncut_row_labels_and_the_figure_scrolls() -> None:
    """64 ranks on 8 hosts (testing.fleet): every rank a labelled row named "node/rank" in full, the figure grown
    to hold them and scrolling inside its section. Fails on the old code (4 figures of 900 px at most)."""
    from ktrace.report import plots
    from ktrace.testing.fleet import FleetConfig, generate_fleet

    trace = generate_fleet(FleetConfig(ranks=64, hosts=8, steps=4, kernels_per_step=4)).trace
    sec = ranks_section(build_report(trace))
    assert sec is not None and len(sec.figures) == 1
    labels = [f"{n}/{r}" for n, r in trace.kernels.select("node", "rank").unique().sort("node", "rank").iter_rows()]
    figure = sec.figures[0]
    assert len(labels) == 64 and figure["data"][0]["y"] == labels
    assert figure["layout"]["yaxis"]["tickvals"] == labels == figure["layout"]["yaxis"]["ticktext"]
    assert figure["layout"]["height"] >= 64 * plots.ROW_PX and figure["layout"]["height"] > plots.SCROLL_PX
    body = "".join(sec.body)
    wrapped = body[body.index('<div class="heatmap-scroll"') :]
    assert wrapped.index('<div class="plot" data-fig="0"></div>') < wrapped.index("</div>", wrapped.index("plot"))


def test_long_host_names_are_never_cut() -> None:
    hosts = [f"gpu-node-in-a-very-long-cluster-domain-name-{h}.example.org" for h in ("east", "west")]
    report = build_report(fleet_trace(layout=((hosts[0], 0), (hosts[0], 1), (hosts[1], 2), (hosts[1], 3))))
    sec = ranks_section(report)
    assert sec is not None
    assert sec.figures[0]["data"][0]["y"] == [f"{h}/{r}" for h, r in zip(sorted(hosts * 2), range(4), strict=True)]


def test_json_holds_the_same_matrices(fleet: Report) -> None:
    doc = json.loads(render_json(fleet))
    heat = doc["rank_heatmap"]
    assert heat["ranks"] == [list(k) for k in LAYOUT] and heat["steps"] == STEPS
    assert heat["step_comm_pct"] == [[30 if key == STRAGGLER else 70] * STEPS for key in LAYOUT]
    assert len(heat["busy_pct"][0]) == heat["n_bins"] <= 200
    table = doc["summary"]["stragglers"]["table"]
    assert (table[0]["node"], table[0]["rank"]) == STRAGGLER and len(table) == len(LAYOUT)


def test_markdown_and_terminal_name_the_straggler(fleet: Report) -> None:
    md = render_markdown(fleet)
    assert "## Ranks" in md and "| b/2 | 133.3 % |" in md
    assert "| ranks 0, 1, 3 on 2 hosts | 0.0 % |" in md  # the step-time view's ties: one row
    text = _terminal(fleet)
    lines = text[text.index("step-time view: stragglers") :].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("─")) + 1
    assert lines[first].split()[:2] == ["b/2", "133.3"]
    assert "  why b/2: gemm +400 ns/step; slow_copy_kernel +100 ns/step" in text


def test_one_rank_has_no_rank_views() -> None:
    report = build_report(fleet_trace(layout=(("a", 0),)))
    assert report.dashboard.rank_heatmap is None and report.dashboard.summary.stragglers is None
    assert ranks_section(report) is None
    assert "## Ranks" not in render_markdown(report)
    assert json.loads(render_json(report))["rank_heatmap"] is None
    assert "stragglers" not in _terminal(report)


def test_many_ranks_show_top_rows_a_line_per_rank_and_counts(many: Report) -> None:
    """The Markdown heatmap has a line per rank at any rank count (it had one per host past 64 ranks: identical
    lines that hid the straggler)."""
    md = render_markdown(many)
    ranks = md[md.index("## Ranks") :]
    heat_lines = ranks[ranks.index("```") + 4 : ranks.index("```", ranks.index("```") + 3)].splitlines()
    assert [line.split(" |")[0].strip() for line in heat_lines] == [f"{h}/{r}" for h, r in MANY]
    # the step-time view: the straggler, then the 149 ranks of equal figures in one row (no rest to count)
    assert f"| {MANY_STRAGGLER[0]}/{MANY_STRAGGLER[1]} | 133.3 % |" in ranks
    assert f"| ranks 0, 1, 2, 3, 4 +{len(MANY) - 6} on 10 hosts | 0.0 % |" in ranks and "more ranks" not in ranks
    sec = ranks_section(many)
    assert sec is not None
    y = sec.figures[0]["layout"]["yaxis"]
    assert y["ticktext"] == [f"{h}/{r}" for h, r in MANY]  # every rank, not a line per host
    assert len(sec.figures[0]["data"][0]["z"]) == len(MANY)
    text = _terminal(many)
    assert f"ranks 0, 1, 2, 3, 4 +{len(MANY) - 6} on 10 hosts" in text


def test_the_tui_straggler_panel_shows_the_step_time_view_with_ties_in_one_line(many: Report) -> None:
    """The TUI's step-time lines come from Stragglers.step_time as the terminal's do: the planted rank, then the
    149 ranks of equal figures on one line (enter: its first rank), nothing left to count. Fails on the old code
    (it read Stragglers.table: five lines of identical figures, one rank each, then "and 145 more ranks")."""
    from ktrace.tui.rank_panels import straggler_panel

    lag = many.dashboard.summary.stragglers
    assert lag is not None
    panel = straggler_panel(lag)
    lines = panel.body.plain.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("slower %"))
    shown = lines[header + 1 :]
    node, rank = MANY_STRAGGLER
    assert len(shown) == 2 and shown[0].split()[0] == "+133.3" and f" {node}/{rank} " in shown[0]
    assert shown[1].split()[0] == "+0.0" and f"ranks 0, 1, 2, 3 +{len(MANY) - 5} " in shown[1]
    assert panel.ranks[header + 1 :] == [MANY_STRAGGLER, MANY[0]]
    assert "more ranks" not in panel.body.plain


def test_markdown_draws_a_wide_heatmap_figure_in_at_most_60_blocks_a_line() -> None:
    """A rank x time-bin heatmap (200 bins) as text: a line per rank, runs of 4 bins averaged into a block, a rank
    without data drawn empty, and the note saying how many bins a block holds."""
    from ktrace.presentation.page import Figure
    from ktrace.report.markdown import TEXT_HEATMAP_COLS, heatmap_lines

    z: list[list[int | None]] = [[100 if i < 100 else 0 for i in range(200)], [None] * 200]
    data = {
        "rows": ["a/0", "a/1"],
        "row_what": "rank",
        "columns": list(range(200)),
        "column_what": "time bin of 5 ms",
        "z": z,
        "z_title": "busy %",
        "x_title": "s",
    }
    lines = heatmap_lines(Figure("rank_heatmap", "busy", "heatmap", data))
    drawn = lines[lines.index("```") + 1 : -2]
    assert [line.split(" |")[0] for line in drawn] == ["a/0", "a/1"]
    blocks = [line.split("|")[1] for line in drawn]
    assert len(blocks[0]) == 50 <= TEXT_HEATMAP_COLS and blocks[0] == "█" * 25 + " " * 25 and blocks[1] == " " * 50
    assert "a block per 4 columns, each a time bin of 5 ms" in lines[2]
