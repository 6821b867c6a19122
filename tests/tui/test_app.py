"""Pilot tests: real key presses on a loaded trace, asserting on the app's state."""

from __future__ import annotations

import numpy as np
import pytest

from ktrace.tui.app import make_app
from ktrace.tui.keymap import KEYS
from ktrace.tui.screens.help import HelpScreen, help_table
from ktrace.tui.widgets.details import Details
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.kernel_table import KernelTable
from ktrace.tui.widgets.timeline import Timeline


@pytest.fixture
def app(synthetic_trace):  # type: ignore[no-untyped-def]
    return make_app(trace=synthetic_trace, analyses=False)


def test_opens_with_loader_then_shows_tracks(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        timeline = app.query_one(Timeline)
        assert timeline.index is not None and len(timeline.rows) >= 4
        assert not app.query_one("#tabs").loading
        assert app.focused is timeline
        assert "first_screen" in app.timings

    drive(app, scenario)


def test_zoom_pan_and_fit_keys(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        full = tl.viewport.span_ns
        await pilot.press("plus")
        assert tl.viewport.span_ns == pytest.approx(full / 2, rel=1e-6)
        start = tl.viewport.start_ns
        await pilot.press("l")
        assert tl.viewport.start_ns == start + int(tl.viewport.span_ns * 0.2)
        await pilot.press("h", "minus", "minus")
        await pilot.press("f")
        assert tl.viewport.span_ns == pytest.approx(full, rel=1e-3)

    drive(app, scenario)


def test_next_step_and_goto_step(app, synthetic_trace, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        steps = tl.steps
        await pilot.press("n")
        first = tl.viewport
        assert first.start_ns <= steps.starts[0] and first.end_ns >= steps.ends[0]
        assert first.span_ns < (steps.ends[0] - steps.starts[0]) * 1.1
        await pilot.press("g")
        await pilot.press("5", "enter")
        await pilot.pause()
        i = steps.names.index("ProfilerStep#5")
        assert tl.viewport.start_ns <= steps.starts[i] < steps.ends[i] <= tl.viewport.end_ns
        await pilot.press("p")
        assert tl.viewport.end_ns <= steps.ends[i]

    drive(app, scenario)


def test_select_kernel_shows_launch_and_follow_jumps(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        stream_row = next(i for i, t in enumerate(tl.rows) if tl.index.tracks[t].key.endswith("/s7"))
        for _ in range(stream_row):
            await pilot.press("j")
        await pilot.press("n", "right_square_bracket")
        await settled(pilot)  # the details are computed in a worker
        table, row = tl.index.source(*tl.selection)
        assert table == "kernels"
        assert tl.linked and tl.index.tracks[tl.linked[0][0]].kind == "api"
        fields = dict(app.query_one("#timeline-details", Details).fields)
        assert "API start -> run" in fields["latency"] and fields["step"].startswith("ProfilerStep#")
        await pilot.press("enter")
        await pilot.pause()
        assert tl.index.source(*tl.selection)[0] == "api"
        assert ("kernels", row) in tl.index.linked_rows(*tl.index.source(*tl.selection))
        await pilot.press("enter")
        assert tl.index.source(*tl.selection) == ("kernels", row)

    drive(app, scenario)


def test_click_selects_the_slice_under_the_pointer(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        await pilot.press("n")
        ranges_row = 0  # ProfilerStep ranges fill the step
        await pilot.click(Timeline, offset=(60, 1 + ranges_row))
        assert tl.selection is not None and tl.index.tracks[tl.selection[0]].kind == "ranges"

    drive(app, scenario)


def test_filter_and_sort_the_kernel_table(app, synthetic_trace, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("2")
        table = app.query_one(KernelTable)
        assert app.query_one("#tabs").active == "kernels" and app.focused is table
        await pilot.press("slash", *"nccl", "enter")
        await settled(pilot)
        names = synthetic_trace.kernels["name"].cast(str).to_numpy()[table.order]
        assert table.order.size > 0 and all("nccl" in n.lower() for n in names)
        dur = (synthetic_trace.kernels["end_ns"] - synthetic_trace.kernels["start_ns"]).to_numpy()[table.order]
        assert (np.diff(dur) <= 0).all()
        await pilot.press("r")
        await settled(pilot)
        dur = (synthetic_trace.kernels["end_ns"] - synthetic_trace.kernels["start_ns"]).to_numpy()[table.order]
        assert (np.diff(dur) >= 0).all()
        await pilot.press("j", "enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "timeline"
        tl = app.query_one(Timeline)
        assert tl.index.source(*tl.selection) == ("kernels", int(table.order[1]))

    drive(app, scenario)


def test_tree_selects_tracks_and_tabs_switch(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        before = list(tl.rows)
        await pilot.press("t")
        assert isinstance(app.focused, HostDeviceTree)
        tree = app.query_one(HostDeviceTree)
        for _ in range(6):  # walk down to "rank 0" with the arrow key
            if tree.cursor_node is not None and str(tree.cursor_node.label).startswith("rank 0"):
                break
            await pilot.press("down")
        await pilot.press("enter")  # two ranks open on a row of each: rank 0's other tracks are added
        added = list(tl.rows)
        assert set(before) <= set(added) and len(added) > len(before)
        await pilot.press("enter")  # now all shown: they are removed
        assert len(tl.rows) < len(added)
        await pilot.press("3")
        assert app.query_one("#tabs").active == "dashboard"
        await pilot.press("1")
        assert app.query_one("#tabs").active == "timeline"

    drive(app, scenario)


def test_help_lists_every_key_and_closes(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(app, scenario)
    described = [str(c) for c in help_table().columns[2]._cells]
    assert all(k.description in described for k in KEYS)


def test_palette_has_an_entry_per_action(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        commands = list(app.get_system_commands(app.screen))
        titles = [c.title.lower() for c in commands]
        for key in KEYS:
            if key.scope not in ("tree", "ranks", "operators") and key.action != "command_palette":
                assert any(key.description.lower() in t for t in titles), key
        for c in commands:  # people's words, not action names like "app: show_tab('dashboard')"
            assert "(" not in c.help or "(in the" in c.help, c.help
            assert "_" not in c.help.replace("ctrl+", ""), c.help

    drive(app, scenario)


def test_missing_file_exits_with_code_4(tmp_path, drive) -> None:  # type: ignore[no-untyped-def]
    app = make_app(tmp_path / "nope.json")

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        pass

    drive(app, scenario)
    assert app.return_code == 4


def test_small_moves_land_where_people_expect(app, synthetic_trace, drive, settled) -> None:  # type: ignore[no-untyped-def]
    """n from the whole trace goes to the first step (not the one under the centre); panning stops at the trace's
    end; showing a kernel from the table zooms to it rather than keeping a window 100x its length."""

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        steps = tl.steps
        await pilot.press("f", "n")
        assert tl.viewport.start_ns <= steps.starts[0] and steps.ends[0] <= tl.viewport.end_ns
        assert tl.viewport.span_ns < (steps.ends[0] - steps.starts[0]) * 1.5
        await pilot.press(*["L"] * 60)
        assert tl.viewport.end_ns <= tl.index.t1 and tl.viewport.start_ns < tl.index.t1
        await pilot.press("f")
        kernels = synthetic_trace.kernels
        row = int((kernels["end_ns"] - kernels["start_ns"]).arg_min())
        app.action_show_kernel(row)
        await pilot.pause()
        duration = int(kernels["end_ns"][row] - kernels["start_ns"][row])
        assert tl.viewport.span_ns <= 60 * max(1, duration)
        assert tl.viewport.start_ns <= kernels["start_ns"][row] <= tl.viewport.end_ns

    drive(app, scenario)


def test_screenshot_without_a_downloads_folder(app, drive, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        app.action_screenshot()
        await pilot.pause()

    drive(app, scenario)
    assert list(tmp_path.glob("*.svg"))


def test_palette_screenshot_without_a_downloads_folder(app, drive, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The palette's Screenshot (Textual's deliver_screenshot) saved to ~/Downloads and failed where it is missing;
    now it goes where the `screenshot` action puts it, and the notice says where."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    notices: list[str] = []

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        monkeypatch.setattr(app, "notify", lambda text, **kw: notices.append(str(text)))
        commands = [c for c in app.get_system_commands(app.screen) if c.title == "Screenshot"]
        if not commands:  # Textual's palette gained Screenshot after 3.2 (the dependency floor)
            pytest.skip("this Textual's command palette has no Screenshot command")
        command = commands[0]
        command.callback()
        await pilot.pause(0.5)
        await pilot.pause()

    drive(app, scenario)
    saved = list(tmp_path.glob("*.svg"))
    assert len(saved) == 1 and any(str(saved[0]) in n for n in notices), notices
    assert not (tmp_path / "home").exists()


def test_page_keys_scroll_the_dashboard_after_a_click_on_its_tab(synthetic_trace, drive, settled) -> None:  # type: ignore[no-untyped-def]
    """Clicking the tab leaves the focus on the tab bar: PageDown/PageUp used to do nothing there."""
    from ktrace.tui.widgets.dashboard import Dashboard

    app = make_app(trace=synthetic_trace, analyses=True)

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.click("#tabs Tab#--content-tab-dashboard")
        await settled(pilot)
        dashboard = app.query_one(Dashboard)
        assert dashboard.max_scroll_y > 0 and app.focused is not dashboard
        await pilot.press("pagedown")
        await pilot.pause()
        assert dashboard.scroll_y > 0
        await pilot.press("pageup")
        await pilot.pause()
        assert dashboard.scroll_y == 0

    drive(app, scenario)


def test_tree_marks_the_timeline_rows_and_the_cursors_follow_each_other(app, drive, settled) -> None:  # type: ignore[no-untyped-def]
    """The tree and the timeline do not share rows: which leaf is which row must be plain (issue #17)."""
    from ktrace.tui.widgets.host_device_tree import HIDDEN, SHOWN

    def leaves(tree):  # type: ignore[no-untyped-def]
        stack, out = list(tree.root.children), []
        while stack:
            node = stack.pop()
            if node.data is not None and node.data.expand is None and len(node.data.track_ids) == 1:
                out.append(node)
            stack.extend(node.children)
        return out

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl, tree = app.query_one(Timeline), app.query_one(HostDeviceTree)
        await pilot.pause()
        assert tree.cursor_node is not None and tree.cursor_node.data.track_ids == [tl.rows[tl.cursor]]
        await pilot.press("j", "j")
        await pilot.pause()
        assert tree.cursor_node.data.track_ids == [tl.rows[2]]
        built = leaves(tree)
        assert built and all(
            str(n.label).startswith(SHOWN if n.data.track_ids[0] in tl.rows else HIDDEN) for n in built
        )
        gone = tl.rows[tl.cursor]
        await pilot.press("x")  # remove the cursor's row: its leaf turns hollow
        await pilot.pause()
        assert next(str(n.label) for n in leaves(tree) if n.data.track_ids == [gone]).startswith(HIDDEN)
        await pilot.press("t")  # in the tree, a leaf shown in the timeline takes the timeline's cursor to its row
        other = next(
            n for n in leaves(tree) if n.data.track_ids[0] in tl.rows and n.data.track_ids[0] != tl.rows[tl.cursor]
        )
        tree.move_cursor(other)
        await pilot.pause()
        assert tl.rows[tl.cursor] == other.data.track_ids[0]

    drive(app, scenario)


def test_c_marks_the_critical_path(app, synthetic_trace, drive, settled) -> None:  # type: ignore[no-untyped-def]
    """c: the GPU records on the median step's critical path are marked (same ones as the analysis gives), the
    timeline fits that step; c again clears them."""
    from ktrace.analysis.critical_path import critical_path

    expected = critical_path(synthetic_trace)
    assert expected is not None and expected.path_records.size

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tl = app.query_one(Timeline)
        await pilot.press("c")
        await settled(pilot)
        assert len(tl.critical) == expected.path_records.size
        assert tl.viewport.start_ns <= expected.start_ns and tl.viewport.end_ns >= expected.end_ns
        assert {tl.index.tracks[t].kind for t, _ in tl.critical} == {"stream"}  # GPU stream rows only
        await pilot.press("c")
        assert tl.critical == []

    drive(app, scenario)
