"""The Python samples screen (`P`) of `ktrace view`: the top functions of a trace's samples, or how to record them."""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from ktrace.model.schema import STACK_SEPARATOR
from ktrace.model.trace import Trace
from ktrace.testing.synthetic import SyntheticConfig, generate
from ktrace.tui.app import make_app
from ktrace.tui.screens.python_samples import PythonSamplesScreen

HOT = "/home/u/project/train.py:20 hot_loop"
ROOT = "/home/u/project/train.py:1 <module>"


def with_samples(trace: Trace, n: int = 40) -> Trace:
    lo, hi = trace.span_ns() or (0, 0)
    node, rank = next((n_, r) for n_, r in trace.ranks if r >= 0)
    stacks = [STACK_SEPARATOR.join([ROOT, HOT] if i % 4 else [ROOT]) for i in range(n)]
    samples = pl.DataFrame(
        {
            "node": [node] * n,
            "rank": [rank] * n,
            "ts_ns": [lo + (hi - lo) * i // n for i in range(n)],
            "pid": [1] * n,
            "tid": [1] * n,
            "stack": stacks,
        },
        schema_overrides={"node": pl.Categorical, "rank": pl.Int32, "stack": pl.Categorical},
    )
    return dataclasses.replace(trace, samples=samples)


def test_p_lists_the_top_functions_and_escape_closes(drive) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("P")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, PythonSamplesScreen)
        table = screen.query_one(DataTable)
        seen["first"] = [str(c) for c in table.get_row_at(0)]
        seen["headline"] = str(screen.query_one("#py-headline", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        seen["closed"] = not isinstance(pilot.app.screen, PythonSamplesScreen)

    drive(make_app(trace=with_samples(generate(SyntheticConfig(seed=5)))), scenario)
    assert seen["first"][:2] == ["hot_loop (project/train.py:20)", "30"] and seen["closed"]
    assert "40 Python samples" in seen["headline"]


def test_without_samples_it_says_how_to_record_them(drive) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, str] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("P")
        await pilot.pause()
        seen["note"] = str(pilot.app.screen.query_one("#py-headline", Static).render())

    drive(make_app(trace=generate(SyntheticConfig(seed=5))), scenario)
    assert "--python-sample" in seen["note"]
