"""Long CLI work is never silent on a terminal: a bar while analysing, and a numba compile named in it."""

from __future__ import annotations

from ktrace.cli import progress


def _description() -> str:
    bar, task, _ = progress._ACTIVE[-1]
    return str(bar.tasks[0].description)


def test_a_compile_is_named_in_the_bar_on_screen_until_it_ends() -> None:
    with progress.progress_bar("analysing", enabled=True):
        assert _description() == "analysing"
        progress._compile_status("busy_union", False)
        progress._compile_status("merge_runs", False)  # a kernel compiled inside another's compile
        assert _description() == "analysing: compiling the merge_runs kernel (first run after install only)"
        progress._compile_status("merge_runs", True)
        assert "compiling the busy_union kernel" in _description()
        progress._compile_status("busy_union", True)
        assert _description() == "analysing"
    assert progress._ACTIVE == []


def test_without_a_bar_a_compile_is_a_status_line_cleared_at_its_end(capsys) -> None:  # type: ignore[no-untyped-def]
    progress._compile_status("busy_union", False)
    progress._compile_status("busy_union", True)
    err = capsys.readouterr().err
    assert err == "\r\x1b[Kktrace: compiling the busy_union kernel (first run after install only)\r\x1b[K"
