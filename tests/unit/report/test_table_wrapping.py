"""HTML report tables: short words never break in a narrow column ("localhos t", "warnin g" in Chromium), long
unbroken names (kernels) may break anywhere, a number keeps its unit on its line, a long host/rank/GPU may wrap
after its slashes. Fails on the old code: every cell had overflow-wrap:anywhere and no class."""

from __future__ import annotations

import re

from ktrace.report.html import STYLE
from ktrace.report.sections import LONG_WORD, table

KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def _cells(html: str) -> list[tuple[str, str]]:
    return re.findall(r"<td( class=\"long\")?>(.*?)</td>", html)


def test_only_long_words_may_break_anywhere() -> None:
    (host, verdict, kernel) = _cells(table(["host", "verdict", "kernel"], [["localhost", "warning", KERNEL]]))
    assert host == ("", "localhost") and verdict == ("", "warning")
    assert kernel[1].count('<span class="long">') == 2 and kernel[1].startswith("void <span")  # only the long words
    assert re.search(r"(^|[}\n])td,th\{[^}]*overflow-wrap:break-word", STYLE)
    assert "overflow-wrap:anywhere" not in re.search(r"(^|[}\n])td,th\{[^}]*\}", STYLE).group()  # type: ignore[union-attr]
    assert ".long{overflow-wrap:anywhere}" in STYLE
    assert "long" not in table(["x"], [["y" * LONG_WORD]])
    raw = _cells(table(["rule"], [[f'<a href="#r">{KERNEL}</a>']], raw=[0]))
    assert raw[0][0] == ' class="long"'  # raw HTML is left whole: the cell may break


def test_units_stay_with_their_numbers_and_long_slashed_names_wrap_at_slashes() -> None:
    ((_, time), (_, device), (_, rate)) = _cells(
        table(["a", "b", "c"], [["1.73 ms", "localhost/rank0/GPU0", "+12 µs/step"]])
    )
    assert time == "1.73&nbsp;ms"
    assert device == "localhost/<wbr>rank0/<wbr>GPU0"
    assert rate == "+12&nbsp;µs/step"  # a short word with a slash stays whole
