"""Names from a hostile trace (escape sequences, bidi overrides, rich markup) reach the TUI as plain, visible text."""

from __future__ import annotations

import re
from pathlib import Path

from property.hostile_corpus import HOSTILE_NAME, kineto_doc, write_json
from rich.text import Text

from ktrace.importers.kineto import import_kineto
from ktrace.tui.app import make_app
from ktrace.tui.widgets.host_device_tree import HostDeviceTree
from ktrace.tui.widgets.timeline import Timeline

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_tree_and_timeline_show_hostile_names_as_text(tmp_path: Path, drive, settled) -> None:  # type: ignore[no-untyped-def]
    doc = kineto_doc([HOSTILE_NAME] * 3, host="[b]host[/b]\x1b[2J", annotation=f"r{HOSTILE_NAME}")
    app = make_app(trace=import_kineto(write_json(tmp_path / "names.json", doc)), analyses=False)

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        tree = app.query_one(HostDeviceTree)
        nodes = list(tree.root.children)
        for node in nodes:
            node.expand()
        await settled(pilot)
        labels = []
        stack = list(tree.root.children)
        while stack:
            node = stack.pop()
            assert isinstance(node.label, Text)
            labels.append(node.label.plain)
            stack.extend(node.children)
        assert any(label.startswith("[b]host[/b]\\x1b[2J") for label in labels), labels  # markup kept as text
        assert not any(UNSAFE.search(label) for label in labels)
        timeline = app.query_one(Timeline)
        lines = ["".join(s.text for s in timeline.render_line(y)) for y in range(timeline.size.height)]
        assert not any(UNSAFE.search(line) for line in lines)

    drive(app, scenario)
