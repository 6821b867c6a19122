"""The typed DiffReport: the change arithmetic, the --json document and the terminal's safety."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ktrace.report.diff_report import Change, DiffReport, build_diff, diff_document, render_diff_terminal


@pytest.fixture(scope="module")
def diff() -> DiffReport:
    from ktrace.testing import SyntheticConfig, generate

    fast = generate(SyntheticConfig(steps=6, kernels_per_step=20, seed=1))
    slow = generate(SyntheticConfig(steps=6, kernels_per_step=40, seed=1))
    return build_diff(fast, slow, threshold_pct=5.0)


def test_change_is_none_without_a_baseline() -> None:
    assert Change.of(0, 5.0).change_pct is None
    assert Change.of(None, 5.0).change_pct is None
    assert Change.of(200.0, 250.0).change_pct == 25.0


def test_slower_candidate_is_a_regression_with_its_reason(diff: DiffReport) -> None:
    assert diff.regression and diff.step_mean.change_pct is not None and diff.step_mean.change_pct > 5.0
    assert diff.reasons[0].startswith("mean step time up")
    doc = diff_document(diff)
    assert set(doc) == {
        "step_mean_ns",
        "kernel_time_ns",
        "kernels",
        "memory",
        "rules",
        "threshold_pct",
        "regression",
        "reasons",
    }
    assert doc["regression"] is True and doc["rules"]["new"] == list(diff.new_rules)
    assert [r["name"] for r in doc["kernels"]] == diff.kernels["name"].to_list()


def test_terminal_prints_no_control_character_from_a_kernel_name(diff: DiffReport) -> None:
    import dataclasses

    import polars as pl

    evil = diff.kernels.with_columns(pl.lit("kern\x1b[2Jel").alias("name"))
    out = io.StringIO()
    render_diff_terminal(
        dataclasses.replace(diff, kernels=evil, reasons=("up\x07",)),
        Console(file=out, width=200, color_system=None, force_terminal=False),
    )
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "kern\\x1b[2Jel" in text
