"""The verbs that read, analyse and exit run with fewer full garbage collections, and set Python's thresholds back
on the way out, on success and on error; the long-running ones (`view`, `run`, a `--follow`) keep the default."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from ktrace import cli
from ktrace.cli.options import SHORT_COMMAND_GC_THRESHOLDS

ALEXNET = Path(__file__).parents[2] / "fixtures/traces/hta-a100-alexnet-tiny"


@pytest.mark.parametrize("verb", sorted(cli.SHORT_VERBS))
def test_short_verbs_collect_less_while_they_run(verb: str) -> None:
    before = gc.get_threshold()
    with cli.short_command_collections(verb, []):
        assert gc.get_threshold() == SHORT_COMMAND_GC_THRESHOLDS
    assert gc.get_threshold() == before


@pytest.mark.parametrize(
    ("verb", "rest"), [("view", []), ("run", []), ("ctl", []), ("check", ["--follow", "x"]), ("check", ["x", "--fol"])]
)
def test_long_running_verbs_keep_the_default(verb: str, rest: list[str]) -> None:
    before = gc.get_threshold()
    with cli.short_command_collections(verb, rest):
        assert gc.get_threshold() == before


def test_thresholds_come_back_after_a_verb_and_after_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    trace = next(ALEXNET.glob("*trace.json.gz"))
    seen: list[tuple[int, int, int]] = []
    original = gc.set_threshold

    def spy(*values: int) -> None:
        seen.append(tuple(values))  # type: ignore[arg-type]
        original(*values)

    gc.set_threshold = spy  # type: ignore[assignment]
    try:
        assert cli.main(["info", str(trace)]) == 0
        assert cli.main(["summary", str(ALEXNET / "missing.json")]) != 0
    finally:
        gc.set_threshold = original
    capsys.readouterr()
    assert seen == [SHORT_COMMAND_GC_THRESHOLDS, before, SHORT_COMMAND_GC_THRESHOLDS, before]
    assert gc.get_threshold() == before
