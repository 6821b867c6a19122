"""--no-ops on the reading verbs: the trace's operators and Python frames are not read, from a Kineto file
(not decoded) or a .ktrace store (its ops files not read); everything else is the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktrace.cli import main


@pytest.fixture(scope="module")
def alexnet_store(real_trace_path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    import ktrace
    from ktrace.model import store

    path = tmp_path_factory.mktemp("no-ops") / "alexnet.ktrace"
    store.write(ktrace.open(real_trace_path("alexnet")), path)
    return path


def _summary(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["summary", *args, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize("source", ["kineto", "store"])
def test_summary_without_ops_drops_only_the_operator_view(
    source: str, alexnet_store: Path, real_trace_path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import NO_OPERATORS

    path = str(alexnet_store if source == "store" else real_trace_path("alexnet"))
    full, lean = _summary(capsys, path), _summary(capsys, path, "--no-ops")
    assert full["operators"] is not None and lean["operators"] is None and NO_OPERATORS in lean["notes"]  # type: ignore[operator]
    assert lean["top_by_time"] == full["top_by_time"] and lean["kernel_sequences"] == full["kernel_sequences"]


def test_check_and_report_take_no_ops(alexnet_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(alexnet_store), "--no-ops", "--json"]) in (0, 1)
    rules = {r["rule"]: r for r in json.loads(capsys.readouterr().out)["rules"]}
    assert "operators" in rules["LaunchBoundOperators"]["skipped"]
    out = tmp_path / "r.json"
    assert main(["report", str(alexnet_store), "--no-ops", "--format", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["summary"]["operators"] is None
