"""The dashboard tab as a renderer of the report's Page (presentation.layout.Renderer): each panel is one of the
page's figures or tables drawn in block characters, under the report's title, with the report's cells
(presentation.cells); the findings panel lists the page's rule verdicts with their evidence windows to jump to.
So the TUI, HTML and Markdown show the same numbers under the same titles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from ktrace.presentation.cells import format_value
from ktrace.presentation.labels import memory_op_label
from ktrace.tui.charts import KernelBars, UtilizationChart, colour, histogram, series_of, shares

if TYPE_CHECKING:  # the page is built and laid out in the dashboard worker, not when the TUI starts
    from ktrace.presentation.page import Figure, Page, RuleVerdict, Section, Table
    from ktrace.presentation.page import Text as PageText

ACTIVE_BAR = 20
"""Cells of an active-share bar: a timeline row (label 33 + bar + " 98.7 % active") fits an 80-column terminal."""
PANEL_TITLES = (
    "Active time",
    "Utilization over time",
    "Top kernels by total time",
    "Top kernels by launch count",
    "Step time distribution",
    "Kernel precision",
    "GPU activity",
    "GPU memory operations",
)
"""The panels in order, by the report's titles (a figure's own title, when the page has it, is the panel's)."""
FINDINGS_TITLE = "Rule findings"
RULES_SECTION = "rules"
"""The report's rules summary section (report_rules.rules_summary_section): its lead heads the findings panel."""
ACTIVE_MEANING = {
    "timeline": "timeline: % active = share of the time from the first to the last record with any kernel or copy "
    "running (CPU: any API call, operator or range)\n",
    "counter": "counter: % active = share of the samples above 0 %; mean util = mean of the sampled %, so a GPU that "
    "always runs one small kernel is 100 % active with a low mean util\n",
}
"""What each method's figures mean (ktrace.analysis.utilization.active_time_share), under the active-share rows."""
MAX_FINDINGS = 12
EMPTY = {
    "Active time": "no GPU or CPU activity in this trace",
    "Utilization over time": "no GPU records and no utilization counters",
    "Top kernels by total time": "no kernels in this trace",
    "Top kernels by launch count": "no kernels in this trace",
    "Step time distribution": "no steps found (no ProfilerStep or step annotations)",
    "Kernel precision": "no kernels",
    "GPU activity": "no GPU activity",
    "GPU memory operations": "no memcpy or memset in this trace",
}
"""Why a panel is empty when the page has nothing for it."""


@dataclass
class Panel:
    """One dashboard panel: a title, what to draw, and evidence windows (label, start_ns, end_ns) to jump to."""

    title: str
    body: RenderableType
    evidence: list[tuple[str, int, int]] = field(default_factory=list)
    available: bool = True


def unavailable(title: str, why: str) -> Panel:
    """A panel saying why it is empty."""
    return Panel(title, Text(why, style="italic dim"), available=False)


class PanelRenderer:
    """A Renderer[list[Panel]] of the dashboard's page: it gathers the blocks by key, then draws the panels in
    PANEL_TITLES order and the findings panel. `error` says why a panel the page lacks is empty when the analyses
    behind it failed."""

    def __init__(self, error: str = "") -> None:
        self.error = error
        self.tables: dict[str, Table] = {}
        self.figures: dict[str, Figure] = {}
        self.verdicts: list[RuleVerdict] = []
        self.rules_lead = ""
        self._section = ""

    def begin(self, page: Page) -> None:
        """Nothing to draw: the tab has no page title."""

    def section(self, section: Section) -> None:
        """Nothing to draw: panels are titled by their blocks."""
        self._section = section.key

    def table(self, table: Table) -> None:
        """Kept for the panel that shows it (first of a key wins: the dashboard's own tables)."""
        self.tables.setdefault(table.key, table)

    def figure(self, figure: Figure) -> None:
        """Kept for the panel that draws it."""
        self.figures.setdefault(figure.key, figure)

    def text(self, text: PageText) -> None:
        """The rules summary's lead ("2 errors, 3 warnings, ... from 23 rules") heads the findings panel."""
        if self._section == RULES_SECTION and not self.rules_lead:
            self.rules_lead = text.text

    def rules(self, verdicts: tuple[RuleVerdict, ...]) -> None:
        """Kept for the findings panel."""
        self.verdicts += verdicts

    def section_end(self, section: Section) -> None:
        """Notes are the summary's (the terminal and the job section show them)."""

    def end(self) -> list[Panel]:
        """The panels, in PANEL_TITLES order, then the findings."""
        return [
            self._active(),
            self._utilization(),
            self._top("top_kernels_by_time", PANEL_TITLES[2]),
            self._top("top_kernels_by_count", PANEL_TITLES[3]),
            self._steps(),
            self._pie("precision", PANEL_TITLES[5]),
            self._pie("activity", PANEL_TITLES[6]),
            self._memory(),
            findings_panel(self.verdicts, self.rules_lead, self.error),
        ]

    def _missing(self, title: str) -> Panel:
        return unavailable(title, self.error or EMPTY[title])

    def _active(self) -> Panel:
        table = self.tables.get("active_time")
        if table is None or not table.rows:
            return self._missing(PANEL_TITLES[0])
        lines = Text()
        for key in ("active_gpu", "active_cpu"):  # the report's pies: the mean over the devices
            pie = self.figures.get(key)
            if pie is not None:
                lines.append(f"{pie.title}: {format_value('share', pie.data['values'][0]).strip()} active\n")
        order = ("resource", "method", "node", "rank", "instance")
        for r in sorted(table.rows, key=lambda r: tuple(str(r[k]) for k in order)):
            who = f"{r['resource'].upper()} {r['instance'] if r['instance'] >= 0 else 'all'}"
            where = f"{r['node']}" + (f" rank {r['rank']}" if r["rank"] >= 0 else "")
            share = r["active_share"] or 0.0
            util = f"  mean util {r['mean_util']:.1f}%" if r.get("mean_util") is not None else ""
            lines.append(f"{who:<7} {where:<16} {r['method']:<8} ")
            lines.append(("█" * round(share * ACTIVE_BAR)).ljust(ACTIVE_BAR), style=colour(r["resource"]))
            lines.append(f" {format_value('share', share)} active{util}\n")
        for method in sorted({r["method"] for r in table.rows}, reverse=True):
            lines.append(ACTIVE_MEANING.get(method, ""), style="dim")
        return Panel(PANEL_TITLES[0], lines)

    def _utilization(self) -> Panel:
        figure = self.figures.get("utilization")
        series = figure.data["series"] if figure is not None else []
        if figure is None or not series:
            return self._missing(PANEL_TITLES[1])
        return Panel(figure.title, UtilizationChart(tuple(series_of(s) for s in series)))

    def _top(self, key: str, title: str) -> Panel:
        table = self.tables.get(key)
        if table is None or not table.rows:
            return self._missing(title)
        share = next(c.key for c in table.columns if c.key.endswith("share"))
        by_time = key.endswith("time")
        names, values, texts = [], [], []
        for r in table.rows:
            total, count, part = format_value("ns", r["total_ns"]), r["count"], format_value("share", r[share])
            names.append(str(r["name"]))
            values.append(float(r["total_ns"] if by_time else count))
            texts.append(f"{total:>9} {part}  ×{count:,}" if by_time else f"{count:>9,} {part}  {total}")
        return Panel(table.title or title, KernelBars(tuple(names), tuple(values), tuple(texts)))

    def _steps(self) -> Panel:
        figure = self.figures.get("step_histogram")
        if figure is None or not figure.data["counts"]:
            return self._missing(PANEL_TITLES[4])
        data = figure.data
        body: list[RenderableType] = [histogram(data["edges"], data["counts"], height=6, unit=" ms")]
        facts = {r["item"]: r["value"] for r in self.tables["job_facts"].rows} if "job_facts" in self.tables else {}
        steps = next(((k, v) for k, v in facts.items() if k.startswith("steps")), None)
        if steps is not None:
            body.insert(0, Text(f"{steps[0]}: {steps[1]}"))
        stats = self.tables.get("step_time")
        for r in stats.rows if stats is not None else ():
            ns = {k: format_value("ns", r[k]) for k in ("mean_ns", "p50_ns", "p95_ns", "max_ns")}
            body.append(
                Text(
                    f"{r['node']} rank {r['rank']}: {r['steps']} steps, mean {ns['mean_ns']}, p50 {ns['p50_ns']},"
                    f" p95 {ns['p95_ns']}, max {ns['max_ns']}"
                )
            )
        return Panel(figure.title, Group(*body))

    def _pie(self, key: str, title: str) -> Panel:
        figure = self.figures.get(key)
        if figure is None or not figure.data["labels"]:
            return self._missing(title)
        return Panel(figure.title, shares([str(x) for x in figure.data["labels"]], figure.data["values"]))

    def _memory(self) -> Panel:
        panel = self._pie("memory_operations", PANEL_TITLES[7])
        table = self.tables.get("memory_operations")
        if not panel.available or table is None:
            return panel
        lines = "\n".join(
            f"{memory_op_label(r['op'], r['copy_kind'], r['host_memory'])}: {r['count']:,} ops,"
            f" {format_value('bytes', r['bytes'])}, {format_value('gbps', r['bandwidth_gbps'] or 0)}"
            for r in table.rows
        )
        return Panel(panel.title, Group(panel.body, Text(lines)))


def findings_panel(verdicts: Sequence[RuleVerdict], lead: str = "", error: str = "") -> Panel:
    """The page's findings in its order (rules whose worst finding is an error first), grouped by rule: each
    finding's line, then the rule's recommendation once (a rule that fires per GPU or per rank gives the same advice
    each time), with each finding's first evidence window to jump to. `error`: why there are no verdicts."""
    from ktrace.presentation.findings import first_window

    if not verdicts and error:
        return unavailable(FINDINGS_TITLE, error)
    fired = [v for v in verdicts if v.findings]
    total = sum(len(v.findings) for v in fired)
    if not fired:
        return Panel(FINDINGS_TITLE, Text(f"{lead + ' ' if lead else ''}No rule fired.", style="green"))
    text = Text(f"{lead}\n" if lead else "", style="dim")
    evidence: list[tuple[str, int, int]] = []
    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    left = MAX_FINDINGS
    for v in fired:
        shown = v.findings[:left]
        left -= len(shown)
        for f in shown:
            text.append(f"{f.severity.upper():<8}", style=f"bold {colours.get(f.severity, 'white')}")
            text.append(f"{v.rule}: {f.message}\n")
            window = first_window(f)
            if window is not None:
                end = window.start_ns if window.end_ns is None else window.end_ns
                evidence.append((f"{v.rule} evidence", window.start_ns, end))
        for advice in dict.fromkeys(f.recommendation for f in shown if f.recommendation):
            text.append(f"        → {advice}\n", style="dim")
        if not left:
            break
    if total > MAX_FINDINGS:
        text.append(f"… and {total - MAX_FINDINGS} more (ktrace report lists all)\n", style="dim")
    return Panel(FINDINGS_TITLE, text, evidence)
