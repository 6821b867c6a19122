"""`ktrace report`: formats chosen by flag or extension, thresholds from --set, clear errors."""

from __future__ import annotations

import json

import pytest

from ktrace.cli import main


@pytest.fixture(scope="module")
def store(tmp_path_factory, synthetic_trace):  # type: ignore[no-untyped-def]
    from ktrace.model.store import write

    path = tmp_path_factory.mktemp("cli") / "run.ktrace"
    write(synthetic_trace, path)
    return str(path)


def test_html_report_file(store, tmp_path, capsys):  # type: ignore[no-untyped-def]
    out = tmp_path / "r.html"
    assert main(["report", store, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and 'id="rule-GPUGaps"' in text
    assert "wrote" in capsys.readouterr().err


def test_markdown_by_extension_and_json_on_stdout(store, tmp_path, capsys):  # type: ignore[no-untyped-def]
    out = tmp_path / "r.md"
    assert main(["report", store, "-o", str(out), "--set", "FP32Matmul.enabled=false"]) == 0
    md = out.read_text(encoding="utf-8")
    assert md.startswith("# ktrace profiling report") and "FP32Matmul" not in md
    capsys.readouterr()
    assert main(["report", store, "--format", "json", "--set", "GPUGaps.gap_ms=1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    gaps = next(r for r in doc["rules"]["rules"] if r["rule"] == "GPUGaps")
    assert gaps["params"]["gap_ms"] == 1.0 and gaps["status"] == "fired"


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["report", "/nonexistent.ktrace"], 4, "error"),
        (["report", "STORE", "--set", "Nope.x=1"], 2, "unknown rule"),
        (["report", "STORE", "--rules", "/nonexistent.toml"], 4, "rules file not found"),
        (["report", "STORE", "--top", "0"], 2, "--top"),
    ],
)
def test_bad_input_one_line_and_exit_code(store, capsys, argv, code, message):  # type: ignore[no-untyped-def]
    assert main([store if a == "STORE" else a for a in argv]) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
