"""No planted secret reaches the TUI's screen: the corpus's texts as kernel names, the host name and a range name of
a Kineto trace, every tab and the operator screen read back as screen text (issue 27: "TUI screen text")."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

from property.hostile_corpus import kineto_doc, write_json

from ktrace.testing.secrets_corpus import KEPT, TEXT_FORMS, all_secrets
from ktrace.tui.app import make_app

PAGES = 10
"""Pages of the kernel table read (30 rows each at the tests' 140x40: past every planted name)."""
TEXT_OF_SVG = re.compile(r"<text[^>]*\by=\"([0-9.]+)\"[^>]*>(.*?)</text>", re.S)


def screen_lines(svg: str) -> list[str]:
    """The screen's text from a Textual SVG screenshot: each line's text runs joined in document order."""
    lines: dict[str, list[str]] = {}
    for y, text in TEXT_OF_SVG.findall(svg):
        lines.setdefault(y, []).append(unescape(re.sub(r"<[^>]+>", "", text)).replace("\xa0", " "))
    return ["".join(parts) for parts in lines.values()]


def test_screen_lines_read_a_name_split_over_styles() -> None:
    """The reader must see text that the SVG splits into runs, or the leak test below could pass blind."""
    svg = '<text x="0" y="20">sk-ab</text><text class="r2" x="5" y="20">cd&amp;e</text><text y="40">next</text>'
    assert screen_lines(svg) == ["sk-abcd&e", "next"]


def test_no_planted_secret_on_any_screen(tmp_path: Path, drive, settled) -> None:  # type: ignore[no-untyped-def]
    texts = [p.text for p in TEXT_FORMS]
    doc = kineto_doc([*texts, *KEPT], host=texts[1], annotation=texts[2])
    app = make_app(write_json(tmp_path / "planted.json", doc))
    secrets = all_secrets()
    shown: list[str] = []

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        pages = ["pagedown"] * PAGES  # the kernel table, a screenful at a time: every planted name passes by
        for keys in (["1"], ["2"], *([k] for k in pages), ["3"], ["o"]):
            await pilot.press(*keys)
            await settled(pilot)
            shown.extend(screen_lines(app.export_screenshot()))

    drive(app, scenario)
    screen = "\n".join(shown)
    assert any(k[:12] in screen for k in KEPT), "no innocent kernel name on screen: the screens were not read"
    assert [s[:24] for s in secrets if s in screen] == []
