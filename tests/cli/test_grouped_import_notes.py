"""`ktrace import DIR` and `ktrace info STORE` say a note repeated for many ranks once, with a count: a 256-rank
job printed "nodeN_rankM...: 128 kernel(s) have no launch call in the trace (kept)" 64 times."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ktrace.cli import main
from ktrace.model import store


def test_repeated_rank_notes_are_one_line_with_a_count(
    tmp_path: Path, real_trace_path: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from ktrace.testing.fleet_job import generate_fleet_job

    generate_fleet_job(real_trace_path("dlrm"), tmp_path / "job", ranks=16, steps=1)
    out = tmp_path / "job.ktrace"
    assert main(["import", str(tmp_path / "job"), "-o", str(out), "--workers", "1", "--no-progress"]) == 0
    said = [n for n in store.read(out).meta.notes if "no launch call" in n]
    assert len(said) >= 2  # the DLRM ranks 1 and 3 of each host: the store keeps every rank's note
    printed = [line for line in capsys.readouterr().err.splitlines() if "no launch call" in line]
    assert printed == [f"note: {said[0]} (and {len(said) - 1} more like it)"]
    assert main(["info", str(out)]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # rich folds the line at the terminal's width
    assert shown.count("no launch call") == 1 and f"(and {len(said) - 1} more like it)" in shown
