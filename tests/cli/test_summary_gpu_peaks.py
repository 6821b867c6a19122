"""`ktrace summary --rules FILE`: the summary's roofline uses the file's [gpu_peaks."NAME"] rows, in one process and
rank by rank, as `ktrace check|report --rules` do. Fails on the old code: summary had no --rules (a usage error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.real_traces import fixture_path

from ktrace.cli import main

OVERRIDE = '[gpu_peaks."H100"]\nbf16 = 100\n'
"""The owlv2 trace's 'NVIDIA H100 80GB HBM3' at 100 dense BF16 TFLOP/s instead of the datasheet's 989.5."""


def _roofline(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["summary", *argv, "--json"]) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)["roofline"]
    return found


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "rules.toml"
    path.write_text(OVERRIDE, encoding="utf-8")
    return path


def test_the_rules_files_peaks_reach_the_summarys_roofline(rules: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(fixture_path("tracelens"))
    datasheet = _roofline([trace], capsys)
    assert datasheet["peaks"]["bf16"] == 989.5
    mine = _roofline([trace, "--rules", str(rules)], capsys)
    assert mine["peaks"]["bf16"] == 100 and mine["peaks"]["source"] == "rules file"
    assert mine["peaks"]["hbm_tbps"] == datasheet["peaks"]["hbm_tbps"]  # the fields left out keep the row's
    assert mine["mfu"]["mean"] == pytest.approx(datasheet["mfu"]["mean"] * 989.5 / 100, rel=1e-4)
    assert main(["summary", trace, "--rules", str(rules)]) == 0
    assert "peak 100 TFLOP/s dense" in capsys.readouterr().out


def test_rank_by_rank_too(rules: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "owlv2.ktrace"
    assert main(["import", str(fixture_path("tracelens")), "-o", str(store)]) == 0
    capsys.readouterr()
    roofline = _roofline([str(store), "--workers", "1", "--rules", str(rules)], capsys)
    assert roofline["peaks"]["bf16"] == 100 and roofline["peaks"]["source"] == "rules file"


def test_a_bad_rules_file_is_one_line_and_an_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[gpu_peaks."NewGPU"]\nbf16 = 100\n', encoding="utf-8")
    code = main(["summary", str(fixture_path("tracelens")), "--rules", str(bad)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "hbm_tbps is needed" in err and len(err.splitlines()) == 1
