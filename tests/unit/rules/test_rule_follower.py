"""analysis.rules.follow: the window of a growing capture and each finding told once when it fires and clears."""

from __future__ import annotations

import pytest

from ktrace.analysis.rules.config import RulesConfig, apply_overrides
from ktrace.analysis.rules.engine import all_rules, rule_by_name, run_rules
from ktrace.analysis.rules.follow import (
    STALLED,
    FollowWindow,
    Progress,
    RuleFollower,
    StallWatch,
    last_progress,
    parse_actions,
    parse_window,
    stop_note,
    stopped_by,
    window_bounds,
)
from ktrace.exporters.selection import select
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
STALL = 12
"""The step that stalls (300 ms among 20 ms steps)."""
DURATIONS_MS = [20.0] * STALL + [300.0] + [20.0] * 30


def _steps(durations_ms: list[float]) -> Trace:
    """A capture of `durations_ms` back-to-back steps (ktrace.step() ranges), as recorded so far."""
    starts, ends, t = [], [], T0
    for d in durations_ms:
        starts.append(t)
        t += int(d * MS)
        ends.append(t)
    n = len(starts)
    b = TraceBuilder(node="n0", rank=0, meta=TraceMeta(source="ktrace"))
    b.add(
        "ranges",
        {
            "start_ns": starts,
            "end_ns": ends,
            "pid": [1] * n,
            "tid": [1] * n,
            "name": [f"step {i}" for i in range(n)],
            "domain": ["ktrace"] * n,
            "depth": [0] * n,
            "on_gpu": [False] * n,
        },
    )
    return b.build()


def _follow(window: FollowWindow) -> list[tuple[int, str, str]]:
    """(steps recorded, event, rule) of every event while the capture grows one step at a time."""
    rules = all_rules()
    config = apply_overrides(RulesConfig(), ["StepOutlier.stddev=2", "StepOutlier.n_outliers=0"], rules)
    follower = RuleFollower(window)
    seen = []
    for n in range(3, len(DURATIONS_MS) + 1):
        trace = _steps(DURATIONS_MS[:n])
        bounds = window_bounds(trace, window)
        assert bounds is not None
        report = run_rules(select(trace, window=bounds), config, rules=[rule_by_name("StepOutlier")])
        seen += [(n, e.event, e.rule) for e in follower.update(report, bounds)]
    return seen


def test_a_stall_fires_once_and_clears_once_it_leaves_the_steps_window() -> None:
    events = _follow(parse_window("6steps"))
    assert events == [(STALL + 1, "fired", "StepOutlier"), (STALL + 1 + 6, "cleared", "StepOutlier")]


def test_a_seconds_window_clears_once_the_stall_is_older_than_it() -> None:
    events = _follow(parse_window("0.5s"))  # the stall and 10 steps before it; it leaves 26 steps of 20 ms later
    assert events == [(STALL + 1, "fired", "StepOutlier"), (STALL + 1 + 26, "cleared", "StepOutlier")]


def test_the_events_carry_the_finding_and_the_window() -> None:
    follower = RuleFollower(FollowWindow(steps=10))
    config = apply_overrides(RulesConfig(), ["StepOutlier.stddev=2", "StepOutlier.n_outliers=0"], all_rules())
    trace = _steps(DURATIONS_MS[: STALL + 3])
    bounds = window_bounds(trace, follower.window)
    assert bounds is not None and bounds[1] == trace.span_ns()[1]  # type: ignore[index]
    report = run_rules(select(trace, window=bounds), config, rules=[rule_by_name("StepOutlier")])
    (event,) = follower.update(report, bounds)
    assert (event.event, event.rule, event.severity, event.window.label) == (
        "fired",
        "StepOutlier",
        "warning",
        "last 10 steps",
    )
    assert event.message == report.result("StepOutlier").findings[0].message
    assert follower.update(report, bounds) == []  # still firing: told once
    assert list(follower.standing) == ["StepOutlier"]


def test_window_bounds_of_nothing_and_of_a_capture_shorter_than_the_window() -> None:
    empty = TraceBuilder(meta=TraceMeta(source="ktrace")).build()
    assert window_bounds(empty, FollowWindow(seconds=60)) is None
    trace = _steps([20.0] * 4)
    assert window_bounds(trace, FollowWindow(steps=10)) == trace.span_ns()  # the whole capture
    assert window_bounds(trace, FollowWindow(seconds=60)) == trace.span_ns()
    # while the job records (partial=False), a capture shorter than the window is not judged yet
    assert window_bounds(trace, FollowWindow(steps=10), partial=False) is None
    assert window_bounds(trace, FollowWindow(seconds=60), partial=False) is None
    assert window_bounds(trace, FollowWindow(steps=3), partial=False) == (T0 + 20 * MS + 1, T0 + 80 * MS)
    assert window_bounds(trace, FollowWindow(seconds=0.05), partial=False) == (T0 + 30 * MS, T0 + 80 * MS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60s", FollowWindow(seconds=60)),
        ("2.5 s", FollowWindow(seconds=2.5)),
        ("10steps", FollowWindow(steps=10)),
        ("1 step", FollowWindow(steps=1)),
    ],
)
def test_parse_window(text: str, expected: FollowWindow) -> None:
    assert parse_window(text) == expected


@pytest.mark.parametrize("text", ["60", "0s", "1.5steps", "10 minutes", ""])
def test_parse_window_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="60s or 10steps|whole number"):
        parse_window(text)


def test_parse_actions_names_the_rule_as_registered_and_refuses_unknown_ones() -> None:
    names = [r.name for r in all_rules()]
    assert parse_actions(["stepoutlier=stop"], names) == {"StepOutlier": "stop"}
    assert parse_actions([], names) == {}
    with pytest.raises(ValueError, match="unknown rule 'NoSuchRule'"):
        parse_actions(["NoSuchRule=stop"], names)
    with pytest.raises(ValueError, match="expected RULE=stop"):
        parse_actions(["StepOutlier=pause"], names)


def test_stop_note_round_trip() -> None:
    follower = RuleFollower(FollowWindow(seconds=60))
    config = apply_overrides(RulesConfig(), ["StepOutlier.stddev=2", "StepOutlier.n_outliers=0"], all_rules())
    trace = _steps(DURATIONS_MS)
    bounds = window_bounds(trace, follower.window)
    assert bounds is not None
    (event,) = follower.update(run_rules(trace, config, rules=[rule_by_name("StepOutlier")]), bounds)
    note = stop_note(event)
    assert note.startswith("stopped by StepOutlier: ") and "\n" not in note
    assert stopped_by(("recovered 1 table", note)) == note
    assert stopped_by(("nothing",)) is None


def test_stalled_training_fires_once_past_the_threshold_and_clears_when_the_job_moves_on() -> None:
    watch = StallWatch(2.0)
    step = Progress(T0, "step step 3 on n0 rank 0")
    assert watch.update(step, T0 + 2 * 10**9) == []  # exactly the threshold: not yet
    (fired,) = watch.update(step, T0 + 2 * 10**9 + 1)
    assert (fired.event, fired.rule, fired.severity) == ("fired", STALLED, "error")
    assert "no progress for 2 s" in fired.message and "the last was step step 3 on n0 rank 0" in fired.message
    assert (fired.start_ns, fired.window.seconds) == (T0, 2.0)
    assert watch.update(step, T0 + 60 * 10**9) == []  # told once
    later = Progress(T0 + 61 * 10**9, "step step 4 on n0 rank 0")
    (cleared,) = watch.update(later, T0 + 61 * 10**9 + MS)
    assert (cleared.event, cleared.message) == ("cleared", fired.message)
    assert watch.update(later, T0 + 62 * 10**9) == []
    assert StallWatch(0).update(step, T0 + 10**12) == []  # --stall 0: never
    assert StallWatch(2.0).update(None, T0 + 10**12) == []  # nothing recorded yet: not judged


def test_last_progress_is_the_newest_step_end_else_the_newest_activity_never_a_counter() -> None:
    progress = last_progress(_steps(DURATIONS_MS))
    assert progress is not None
    assert progress.at_ns == T0 + int(sum(DURATIONS_MS) * MS) and progress.what.startswith("the end of step step ")
    b = TraceBuilder(node="n0", rank=0, meta=TraceMeta(source="ktrace"))
    b.add("api", {"start_ns": [T0, T0 + 5 * MS], "end_ns": [T0 + MS, T0 + 6 * MS], "pid": [1, 1], "tid": [1, 1],
                  "name": ["cudaLaunchKernel"] * 2, "domain": ["cuda"] * 2, "correlation_id": [1, 2]})  # fmt: skip
    b.add("counters", {"ts_ns": [T0 + 10**12], "metric": ["cpu.util"], "instance": [0], "value": [1.0]})
    assert last_progress(b.build()) == Progress(T0 + 6 * MS, "the end of an API call")
    assert last_progress(TraceBuilder(node="n0", rank=0, meta=TraceMeta(source="ktrace")).build()) is None


def test_stalled_training_is_an_action_target() -> None:
    assert parse_actions(["stalledtraining=stop"], [r.name for r in all_rules()]) == {STALLED: "stop"}
