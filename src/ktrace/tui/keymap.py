"""Every key of the TUI in one table: the widgets' BINDINGS, the help screen and the command palette read it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class Key:
    """One key binding with where it works and what it does."""

    keys: str
    """Comma-separated Textual key names."""
    action: str
    """Action name (without action_), run on the scope's widget or the app."""
    description: str
    scope: str
    """"app", "timeline", "tree", "kernels", "ranks" (the dashboard's rank panels) or "operators" (the `o` screen)."""
    show: bool = False
    """Shown in the footer."""
    display: str = ""
    """How the help screen writes the keys (defaults to `keys`)."""


KEYS: tuple[Key, ...] = (
    Key("question_mark", "help", "show this help", "app", True, "?"),
    Key("1", "show_tab('timeline')", "Timeline tab", "app", True),
    Key("2", "show_tab('kernels')", "Kernels tab", "app", True),
    Key("3", "show_tab('dashboard')", "Dashboard tab", "app", True),
    Key("o", "operators", "operators: top by GPU / CPU self time, their kernels, nn.Modules", "app", False),
    Key("P", "python_samples", "Python samples: top functions by self / total samples (run --python-sample)", "app"),
    Key("ctrl+p", "command_palette", "command palette (every action)", "app", False, "ctrl+p"),
    Key("q", "quit", "quit", "app", True),
    Key(
        "end",
        "follow_live",
        "live capture: follow the newest records again (a pan or zoom away from them holds the view)",
        "app",
        False,
        "end",
    ),
    Key("pagedown", "scroll_dashboard(1)", "dashboard: scroll down a page", "app", False, "pgdn"),
    Key("pageup", "scroll_dashboard(-1)", "dashboard: scroll up a page", "app", False, "pgup"),
    Key("h,left", "pan(-0.2)", "pan left", "timeline", False, "h / ←"),
    Key("l,right", "pan(0.2)", "pan right", "timeline", False, "l / →"),
    Key("H", "pan(-1.0)", "pan left one screen", "timeline"),
    Key("L", "pan(1.0)", "pan right one screen", "timeline"),
    Key("plus,equals_sign", "zoom(2.0)", "zoom in", "timeline", True, "+ / ="),
    Key("minus", "zoom(0.5)", "zoom out", "timeline", True, "-"),
    Key("f,0", "fit", "fit the whole trace", "timeline", True, "f / 0"),
    Key("n", "step(1)", "next step", "timeline", True),
    Key("p", "step(-1)", "previous step", "timeline"),
    Key("g", "goto_step", "go to step N", "timeline", True),
    Key("j,down", "move_row(1)", "next track row", "timeline", False, "j / ↓"),
    Key("k,up", "move_row(-1)", "previous track row", "timeline", False, "k / ↑"),
    Key("right_square_bracket", "next_slice(1)", "select next slice on the row", "timeline", False, "]"),
    Key("left_square_bracket", "next_slice(-1)", "select previous slice on the row", "timeline", False, "["),
    Key(
        "enter",
        "follow",
        "jump from a kernel to its launch, or from a launch to its kernel(s)",
        "timeline",
        True,
        "enter",
    ),
    Key("z", "zoom_selection", "zoom to the selected slice", "timeline"),
    Key("c", "critical_path", "mark the GPU records on the median step's critical path (again: clear)", "app"),
    Key("x", "remove_row", "remove the current row from the timeline", "timeline"),
    Key("t", "focus_tree", "focus the host/device tree", "timeline"),
    Key("T", "toggle_tree", "hide or show the host/device tree (the timeline takes its width)", "app", False),
    Key(
        "enter",
        "select_cursor",
        "tree: add/remove the node's track(s) in the timeline (a leaf's ● says its track "
        "is a timeline row, ○ not; the tree's cursor follows the timeline's and back)",
        "tree",
        False,
        "enter",
    ),
    Key("space", "toggle_node", "tree: expand or collapse", "tree", False, "space"),
    Key("slash", "focus_filter", "filter kernels by name", "kernels", True, "/"),
    Key("s", "cycle_sort", "sort by the next column", "kernels", True),
    Key("r", "reverse_sort", "reverse the sort order", "kernels"),
    Key("enter", "show_in_timeline", "show the kernel in the timeline", "kernels", True, "enter"),
    Key(
        "j,down",
        "move(1)",
        "rank heatmap / stragglers: next rank (`3` lands on the heatmap, one row per rank; its rows scroll with "
        "the cursor)",
        "ranks",
        False,
        "j / ↓",
    ),
    Key("k,up", "move(-1)", "rank heatmap / stragglers: previous rank", "ranks", False, "k / ↑"),
    Key("pagedown", "page(1)", "rank heatmap: a page of ranks down", "ranks", False, "pgdn"),
    Key("pageup", "page(-1)", "rank heatmap: a page of ranks up", "ranks", False, "pgup"),
    Key("home", "jump(0)", "rank heatmap: the first rank", "ranks", False, "home"),
    Key("end", "jump(1)", "rank heatmap: the last rank", "ranks", False, "end"),
    Key(
        "plus,equals_sign,z",
        "zoom(2.0)",
        "rank heatmap: zoom in (fewer steps / time a column)",
        "ranks",
        False,
        "+ / z",
    ),
    Key("minus,Z", "zoom(0.5)", "rank heatmap: zoom out (more steps / time a column)", "ranks", False, "- / Z"),
    Key("l,right", "pan(0.5)", "rank heatmap: later steps / time (when zoomed in)", "ranks", False, "l / →"),
    Key("h,left", "pan(-0.5)", "rank heatmap: earlier steps / time", "ranks", False, "h / ←"),
    Key("enter", "choose", "rank heatmap / stragglers: show the rank's tracks in the timeline", "ranks", True, "enter"),
    Key("tab", "app.focus_next", "rank heatmap / stragglers: the next panel (shift+tab: the one before)", "ranks"),
    Key("s", "toggle_shapes", "by input shape", "operators", True),
    Key("r", "toggle_roofline", "roofline", "operators", True),
    Key("escape,q,o", "dismiss", "close", "operators", True),
)
"""The single source of truth for keys."""

MOUSE_HELP: tuple[tuple[str, str], ...] = (
    ("wheel", "timeline: zoom in/out at the pointer"),
    ("shift+wheel", "timeline: pan"),
    ("click", "timeline: select the slice under the pointer; tree/table: select"),
)


def bindings(scope: str, only: Collection[str] = ()) -> list[Binding]:
    """Textual Bindings of one scope (the tree's own bindings are Textual's and are only documented); `only`: just
    the keys of these actions (named without their arguments), for a widget that has a part of the scope's."""
    return [
        Binding(k.keys, k.action, k.description, show=k.show, key_display=k.display or None)
        for k in KEYS
        if k.scope == scope and (not only or k.action.split("(")[0] in only)
    ]
