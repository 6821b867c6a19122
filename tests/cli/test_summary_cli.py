"""`ktrace summary`: JSON for scripts, text tables, and one-line errors with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktrace.cli import main
from ktrace.model.trace import Trace


@pytest.fixture(scope="module")
def stored(synthetic_trace: Trace, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ktrace.model import store

    path = tmp_path_factory.mktemp("summary") / "run.ktrace"
    store.write(synthetic_trace, path)
    return path


def test_json_is_stable_and_complete(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(stored), "--json", "--top", "3"]) == 0
    first = capsys.readouterr().out
    assert main(["summary", str(stored), "--json", "--top", "3"]) == 0
    assert capsys.readouterr().out == first
    data = json.loads(first)
    assert len(data["top_by_time"]) == 4 and data["top_by_time"][-1]["name"] == "other"
    assert {"phases", "precision", "activity", "memory", "latency", "idle", "load_balance"} <= set(data)


def test_text_output_and_annotation(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(stored), "--annotation", "backward"]) == 0
    out = capsys.readouterr().out
    for title in ("job phases", "top kernels by GPU time", "kernel precision", "annotation 'backward'"):
        assert title in out


@pytest.mark.parametrize(
    ("args", "code"), [(["--top", "0"], 2), (["--steps-pattern", "("], 2), (["--annotation", "[x"], 2)]
)
def test_bad_options_exit_with_usage(
    stored: Path, args: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["summary", str(stored), *args]) == code
    err = capsys.readouterr().err
    assert err.startswith("ktrace summary: error:") and "Traceback" not in err


def test_missing_trace_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(tmp_path / "nope.ktrace")]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_by_shape_table_and_json(real_trace_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """--by-shape adds the terminal table; the JSON has operators.by_shape with shapes, and only when asked
    without them (alexnet was recorded without record_shapes)."""
    resnet, alexnet = str(real_trace_path("resnet50")), str(real_trace_path("alexnet"))
    assert main(["summary", resnet, "--by-shape", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "operators by input shape" in out and "[[32, 256, 56, 56], [32, 256, 56, 56]" in out
    assert main(["summary", resnet, "--top", "3"]) == 0
    assert "operators by input shape" not in capsys.readouterr().out
    assert main(["summary", resnet, "--json", "--top", "3"]) == 0
    rows = json.loads(capsys.readouterr().out)["operators"]["by_shape"]
    assert len(rows) == 3 and all(r["input_dims"] for r in rows)
    assert main(["summary", alexnet, "--json"]) == 0
    assert "by_shape" not in json.loads(capsys.readouterr().out)["operators"]
    assert main(["summary", alexnet, "--json", "--by-shape"]) == 0
    rows = json.loads(capsys.readouterr().out)["operators"]["by_shape"]
    assert rows and all(r["input_dims"] is None for r in rows)
    assert main(["summary", alexnet, "--by-shape"]) == 0  # the table says why every shape is "-"
    assert "record_shapes=True" in " ".join(capsys.readouterr().out.split())
    assert main(["summary", str(real_trace_path("power_iteration")), "--by-shape"]) == 0  # NVTX ranges as operators
    assert "operators by input shape (nvtx operators carry no input shapes): none" in capsys.readouterr().out
