"""`ktrace diff`: a slower candidate is a regression (exit 5); the same trace is not."""

from __future__ import annotations

import json

import pytest

from ktrace.cli import main


@pytest.fixture(scope="module")
def stores(tmp_path_factory):  # type: ignore[no-untyped-def]
    from ktrace.model.store import write
    from ktrace.testing import SyntheticConfig, generate

    root = tmp_path_factory.mktemp("diff")
    fast = generate(SyntheticConfig(steps=10, kernels_per_step=40, seed=1))
    slow = generate(SyntheticConfig(steps=10, kernels_per_step=80, seed=1))  # twice the work per step
    write(fast, root / "a.ktrace")
    write(slow, root / "b.ktrace")
    return str(root / "a.ktrace"), str(root / "b.ktrace")


def test_regression_exits_5(stores, capsys):  # type: ignore[no-untyped-def]
    a, b = stores
    assert main(["diff", a, b]) == 5
    out = capsys.readouterr().out
    assert "REGRESSION: mean step time up" in out
    assert main(["diff", b, a]) == 0  # faster is fine
    assert main(["diff", a, b, "--threshold", "1000"]) == 0


def test_same_trace_json(stores, capsys):  # type: ignore[no-untyped-def]
    a, _ = stores
    capsys.readouterr()
    assert main(["diff", a, a, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["regression"] is False and doc["step_mean_ns"]["change_pct"] == 0.0
    assert all(r["status"] == "unchanged" for r in doc["kernels"])


def test_terminal_output_is_tables_not_escaped_markdown(stores, capsys):  # type: ignore[no-untyped-def]
    a, b = stores
    capsys.readouterr()
    assert main(["diff", a, b]) == 5
    out = capsys.readouterr().out
    assert "kernels that changed most" in out and "mean step time" in out
    assert "\\_" not in out and "&lt;" not in out and "&gt;" not in out and "|---" not in out
    assert any("_" in line for line in out.splitlines()[5:])  # kernel names keep their underscores
    assert main(["diff", a, b, "--markdown"]) == 5
    assert "|---" in capsys.readouterr().out
