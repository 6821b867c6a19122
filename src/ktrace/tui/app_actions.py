"""The `ktrace view` app's actions (what its keys do) and its command palette, apart from loading and messages."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.widgets import Input, TabbedContent

from ktrace.model.trace import Trace
from ktrace.tui.keymap import KEYS
from ktrace.tui.operators_model import OperatorPanel
from ktrace.tui.screens.help import HelpScreen
from ktrace.tui.screens.operators import OperatorScreen
from ktrace.tui.screens.python_samples import PythonSamplesScreen
from ktrace.tui.screens.step_prompt import StepPrompt
from ktrace.tui.steps import STEPS_PENDING, StepSpans, find_step
from ktrace.tui.widgets.dashboard import Dashboard
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.kernel_table import KernelTable
from ktrace.tui.widgets.timeline import Timeline


class AppActions(App[None]):
    """The actions of ktrace.tui.keymap's app-scope keys and the palette entries of every key; KtraceApp loads the
    trace and routes the widgets' messages."""

    steps: StepSpans
    """The trace's steps (KtraceApp sets them; pending until detected)."""

    trace: Trace | None
    """The trace once loaded (KtraceApp sets it)."""

    operator_panel: OperatorPanel | None
    """The operator screen's model once the summary is computed (KtraceApp sets it)."""

    def action_help(self) -> None:
        """Show every key."""
        self.push_screen(HelpScreen())

    def action_operators(self) -> None:
        """Show the operator screen (filled when the summary arrives, if it has not yet)."""
        if not isinstance(self.screen, OperatorScreen):
            self.push_screen(OperatorScreen(self.operator_panel))

    def action_python_samples(self) -> None:
        """Show the Python samples screen (the top functions of `ktrace run --python-sample`)."""
        if not isinstance(self.screen, PythonSamplesScreen):
            self.push_screen(PythonSamplesScreen(self.trace))

    def action_show_tab(self, tab: str) -> None:
        """Switch to a tab and focus its main widget."""
        self.query_one(TabbedContent).active = tab
        target = {"timeline": Timeline, "kernels": KernelTable}.get(tab)
        if target is not None:
            self.query_one(target).focus()
        else:
            self.query_one(Dashboard).focus_first()

    def action_scroll_dashboard(self, pages: int) -> None:
        """Scroll the dashboard by pages while its tab shows, whatever has the focus (clicking the tab leaves it on
        the tab bar, which has no use for these keys)."""
        if self.query_one(TabbedContent).active == "dashboard":
            dashboard = self.query_one(Dashboard)
            (dashboard.scroll_page_down if pages > 0 else dashboard.scroll_page_up)()

    def action_focus_tree(self) -> None:
        """Focus the host/device tree (showing it if it was hidden)."""
        self.action_show_tab("timeline")
        tree = self.query_one(HostDeviceTree)
        tree.display = True
        tree.focus()

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen in ~/Downloads when that folder exists, else in the current folder."""
        downloads = Path.home() / "Downloads"
        folder = Path(path) if path else (downloads if downloads.is_dir() else Path.cwd())
        try:
            saved = self.save_screenshot(filename, str(folder))
        except OSError as exc:
            self.notify(f"screenshot not saved: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"screenshot saved to {saved}", timeout=4)

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's Screenshot: saved like the `screenshot` action (Textual's own wrote to ~/Downloads and
        failed where that folder does not exist)."""
        self.action_screenshot(filename, path)
        return None

    def action_toggle_tree(self) -> None:
        """Hide or show the host/device tree: the timeline takes the whole width while it is hidden."""
        self.action_show_tab("timeline")
        tree = self.query_one(HostDeviceTree)
        tree.display = not tree.display
        if not tree.display:
            self.query_one(Timeline).focus()

    def action_focus_filter(self) -> None:
        """Focus the kernel name filter."""
        self.query_one(TabbedContent).active = "kernels"
        self.query_one("#kernel-filter", Input).focus()

    def action_show_kernel(self, row: int) -> None:
        """Select a kernel in the timeline and switch there."""
        self.action_show_tab("timeline")
        self.query_one(Timeline).select_row("kernels", row)

    def action_goto_step(self) -> None:
        """Ask for a step and fit it in the timeline."""
        if not self.steps.ready:
            self.notify(STEPS_PENDING, severity="warning", timeout=3)
            return
        if len(self.steps) == 0:
            self.notify("this trace has no steps", severity="warning")
            return

        def go(text: str | None) -> None:
            i = None if text is None else find_step(self.steps, text)
            if text is not None and i is None:
                self.notify(f"no step {text!r}", severity="warning", markup=False)
            if i is not None:
                self.action_show_tab("timeline")
                self.query_one(Timeline).show_step(i)

        self.push_screen(StepPrompt(len(self.steps)), go)

    def action_critical_path(self) -> None:
        """Mark the GPU records on the median step's critical path in the timeline, or clear the marks."""
        timeline = self.query_one(Timeline)
        if timeline.critical:
            timeline.set_critical([])
            self.notify("critical path marks cleared", timeout=2)
            return
        if timeline.index is None:
            return
        self.notify("finding the critical path…", timeout=2)
        self.find_critical_path()

    def find_critical_path(self) -> None:
        """Start the worker computing the critical path (KtraceApp runs it off the UI thread)."""

    def action_show_evidence(self, start_ns: int, end_ns: int) -> None:
        """Fit a finding's evidence window in the timeline."""
        self.action_show_tab("timeline")
        timeline = self.query_one(Timeline)
        timeline.set_viewport(timeline.viewport.show(start_ns, end_ns))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette: Textual's commands plus one entry per action of the keymap."""
        yield from super().get_system_commands(screen)
        seen: set[str] = set()
        for key in KEYS:
            if key.scope in ("tree", "ranks") or key.action in seen or key.action == "command_palette":
                continue
            seen.add(key.action)
            where = "" if key.scope == "app" else f" (in the {key.scope})"
            yield SystemCommand(
                key.description[:1].upper() + key.description[1:],
                f"key {key.display or key.keys}{where}",
                lambda k=key: self._run_key(k.scope, k.action),
            )

    def _run_key(self, scope: str, action: str) -> None:
        if scope == "timeline":
            self.action_show_tab("timeline")
            self.call_later(self.query_one(Timeline).run_action, action)
        elif scope == "kernels":
            self.action_show_tab("kernels")
            self.call_later(self.query_one(KernelTable).run_action, action)
        else:
            self.call_later(self.run_action, action)
