"""`ktrace view` on bad input: one line and an exit code, never a traceback or a broken screen."""

from __future__ import annotations

from ktrace.cli import main


def test_missing_trace_exits_4_with_one_line(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["view", str(tmp_path / "nope.json.gz")]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ktrace view: error:") and "no such file" in err[0]


def test_not_a_trace_exits_3(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    assert main(["view", str(path)]) == 3
    assert "not a trace" in capsys.readouterr().err


def test_refuses_without_a_terminal(synthetic_trace, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from ktrace.model.store import write

    write(synthetic_trace, tmp_path / "t.ktrace")
    assert main(["view", str(tmp_path / "t.ktrace")]) == 2  # pytest's stdout is not a tty
    assert "needs a terminal" in capsys.readouterr().err
