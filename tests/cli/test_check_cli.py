"""`ktrace check`: one line per finding, exit 5 at or above --fail-on, --list-rules, --json."""

from __future__ import annotations

import json

import pytest

from ktrace.analysis.rules.engine import RULE_ORDER
from ktrace.cli import main


@pytest.fixture(scope="module")
def store(tmp_path_factory, synthetic_trace):  # type: ignore[no-untyped-def]
    from ktrace.model.store import write

    path = tmp_path_factory.mktemp("check") / "run.ktrace"
    write(synthetic_trace, path)
    return str(path)


def test_fail_on_levels(store, capsys):  # type: ignore[no-untyped-def]
    # The synthetic job has pageable memcpys and FP32 GEMMs: warnings, no errors.
    assert main(["check", store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("WARNING PageableMemcpy: ") for line in lines)
    assert all(line.split()[0] in ("ERROR", "WARNING", "INFO") for line in lines)
    assert main(["check", store, "--fail-on", "warning"]) == 5
    assert main(["check", store, "--set", "PageableMemcpy.severity=error"]) == 5
    assert main(["check", store, "--fail-on", "never", "--set", "PageableMemcpy.severity=error"]) == 0


def test_rules_file(store, tmp_path, capsys):  # type: ignore[no-untyped-def]
    rules = tmp_path / "rules.toml"
    rules.write_text('disable = ["PageableMemcpy", "FP32Matmul", "GPUGaps", "ExcessiveSync"]\n', encoding="utf-8")
    capsys.readouterr()
    code = main(["check", store, "--rules", str(rules), "--fail-on", "warning"])
    out = capsys.readouterr().out
    assert "PageableMemcpy" not in out and "FP32Matmul" not in out
    assert code == (5 if out.strip() else 0)


def test_json_and_list(store, capsys):  # type: ignore[no-untyped-def]
    assert main(["check", store, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["rules"]) == len(RULE_ORDER) and doc["worst"] == "warning"
    assert main(["check", "--list-rules"]) == 0
    listing = capsys.readouterr().out
    assert "StepOutlier [sagemaker, warning; rank by rank: exact]" in listing and "    gap_ms = 500.0" in listing
    assert main(["check"]) == 2


def test_findings_fold_to_the_terminal_and_stay_one_line_in_a_pipe(store, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    from ktrace.cli.check import FOLD_INDENT, folded

    assert main(["check", store]) == 0  # captured: not a terminal, so one line per finding
    piped = capsys.readouterr().out.splitlines()
    assert piped and all(line.split()[0] in ("ERROR", "WARNING", "INFO") for line in piped)
    assert max(map(len, piped)) > 80
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["check", store]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert max(map(len, shown)) <= 80 and len(shown) > len(piped)
    assert " ".join(" ".join(shown).split()) == " ".join(" ".join(piped).split())  # nothing lost, nothing added
    assert all(line.startswith(" " * FOLD_INDENT) or line.split()[0] in ("WARNING", "ERROR", "INFO") for line in shown)
    assert folded("WARNING X: " + "a" * 100, 40) == "WARNING X:\n        " + "a" * 100  # a long word is never cut


def test_follow_event_lines_fold_under_their_rule_name() -> None:
    from ktrace.analysis.rules.follow import FollowEvent, FollowWindow
    from ktrace.cli.check import folded
    from ktrace.cli.follow_rules import EVENT_RULE_COLUMN, event_line

    message = "step 12 took 3.2x the median step of the window " * 3
    line = event_line(FollowEvent("cleared", "StepOutlier", "warning", message, FollowWindow(60.0), 0, 10**9))
    shown = folded(line, 80, EVENT_RULE_COLUMN).splitlines()
    assert line.index("StepOutlier") == EVENT_RULE_COLUMN and len(shown) > 1
    assert all(s.startswith(" " * EVENT_RULE_COLUMN) and s[EVENT_RULE_COLUMN] != " " for s in shown[1:])
