"""Rules on a growing capture: the sliding window they judge, and each rule's finding told once when it fires and
once when it clears (`ktrace check --follow`, `ktrace run --on-finding RULE=stop`); and StalledTraining, a job
that stopped making progress while its capture still records (StallWatch: judged against the clock).

Pure: the caller reads the store, cuts the window (`window_bounds` says where; exporters.selection.select cuts) and
runs the rules on it; `RuleFollower.update` turns each new report into events. A rule is one finding here: it fires
when it has any finding in the window (its first, most severe, is told) and clears when it has none (or cannot run
on the window: the data it needs has left it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rules.base import Finding
from ktrace.analysis.rules.engine import RulesReport
from ktrace.analysis.steps import detect_steps
from ktrace.model.trace import Trace

STALLED = "StalledTraining"
"""The follow-only finding of a job that stopped making progress while its capture still records (SageMaker
Debugger's StalledTrainingRule): judged against the clock, not on a window, so it is no rule of the registry."""
ACTIONS = ("stop",)
"""What `--on-finding RULE=ACTION` may ask for."""
STOP_NOTE_PREFIX = "stopped by "
"""The meta.json note of a job a rule stopped: `stopped by RULE: message`."""

_WINDOW_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|steps?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class FollowWindow:
    """What the rules judge: the last `seconds` recorded, or the last `steps` steps (one of the two is set)."""

    seconds: float | None = None
    steps: int | None = None

    @property
    def label(self) -> str:
        """`last 60 s` or `last 10 steps`."""
        if self.steps is not None:
            return f"last {self.steps} step{'s' if self.steps != 1 else ''}"
        return f"last {self.seconds:g} s"


def parse_window(text: str) -> FollowWindow:
    """`60s` or `10steps` (also `10 steps`, `1 step`, `2.5s`).

    Raises:
        ValueError: with a message naming both forms.
    """
    match = _WINDOW_RE.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"--window {text!r}: expected seconds or steps, e.g. 60s or 10steps")
    number, unit = match.group(1), match.group(2).lower()
    if unit.startswith("step"):
        if "." in number:
            raise ValueError(f"--window {text!r}: a whole number of steps, e.g. 10steps")
        return FollowWindow(steps=int(number))
    return FollowWindow(seconds=float(number))


def window_bounds(
    trace: Trace, window: FollowWindow, *, index: TraceIndex | None = None, partial: bool = True
) -> tuple[int, int] | None:
    """(start, end) ns of the window ending at the last thing recorded; None when nothing is recorded yet.

    A steps window starts where the earliest rank's `steps`-th last step starts (ktrace.step() or step-named
    ranges, as analysis.steps finds them). A capture shorter than the window (fewer seconds, or a rank with fewer
    steps) is judged whole when `partial`, else not at all (None): while a job records, its first seconds are
    not judged as if they were a whole window.
    """
    span = trace.span_ns()
    if span is None:
        return None
    first, last = span
    whole = (first, last) if partial else None
    if window.seconds is not None:
        start = last - round(window.seconds * 1e9)
        return (start, last) if start >= first else whole
    steps = detect_steps(trace, index=index)
    n = window.steps or 1
    by_rank = steps.sort("start_ns").group_by("node", "rank").agg(pl.col("start_ns").tail(n).first(), pl.len())
    if steps.height == 0 or int(by_rank["len"].min()) < n:  # type: ignore[arg-type]
        return whole  # a rank has not done that many steps yet
    # + 1 ns: the step before it ends where it starts, and the cutter keeps rows that end at the window's start
    return int(by_rank["start_ns"].min()) + 1, last  # type: ignore[arg-type]


@dataclass(frozen=True)
class FollowEvent:
    """A rule's finding began or ended in the window."""

    event: Literal["fired", "cleared"]
    rule: str
    severity: str
    message: str
    """The finding's message (for "cleared": the one told when it fired)."""
    window: FollowWindow
    """What was judged (the last N s or N steps) ..."""
    start_ns: int
    end_ns: int
    """... and where that window lay when the event happened (ns)."""


class RuleFollower:
    """Which rules stand in the window now; `update` says what changed since the last report."""

    def __init__(self, window: FollowWindow) -> None:
        self.window = window
        self.standing: dict[str, Finding] = {}
        """Rule name -> the finding told when it fired, for every rule firing now."""

    def update(self, report: RulesReport, bounds: tuple[int, int]) -> list[FollowEvent]:
        """The events of one new evaluation (`report` of the window `bounds`): rules that fired, in rule order,
        then rules that cleared."""
        now = {r.rule: r.findings[0] for r in report.results if r.findings}
        events = [self._event("fired", f, bounds) for rule, f in now.items() if rule not in self.standing]
        events += [self._event("cleared", f, bounds) for rule, f in self.standing.items() if rule not in now]
        self.standing = {rule: self.standing.get(rule, f) for rule, f in now.items()}
        return events

    def _event(self, kind: Literal["fired", "cleared"], finding: Finding, bounds: tuple[int, int]) -> FollowEvent:
        return FollowEvent(kind, finding.rule, finding.severity, finding.message, self.window, *bounds)


@dataclass(frozen=True)
class Progress:
    """The newest sign that a job moved on: the end of its last step, else of its newest activity record."""

    at_ns: int
    what: str
    """`the end of step ProfilerStep#12 on node rank 0`, or of a `kernel` / `operator` / `range` / `API call`."""


_ACTIVITY = (("kernels", "kernel"), ("ops", "operator"), ("ranges", "range"), ("api", "API call"))


def last_progress(trace: Trace, index: TraceIndex | None = None) -> Progress | None:
    """Where the job last moved on: the newest end of a step of any rank (ktrace.step(), step-named ranges, as
    analysis.steps finds them: a step is recorded once it ends, when the next one begins); without steps, the newest
    end of a kernel, operator, range or API call (never a counter: counters go on while a job hangs). None when the
    capture holds none of these."""
    steps = detect_steps(trace, index=index)
    if steps.height:
        last = steps.sort("end_ns").row(-1, named=True)
        where = f"the end of step {last['name']} on {last['node']} rank {last['rank']}"
        return Progress(int(last["end_ns"]), where)
    found = [
        (int(frame["end_ns"].max()), f"the end of a{'n' if kind[0] in 'aeiouAEIOU' else ''} {kind}")
        for table, kind in _ACTIVITY
        if (frame := getattr(trace, table)).height
    ]
    return Progress(*max(found)) if found else None


class StallWatch:
    """StalledTraining, told once when it fires and once when it clears: fires when no progress (last_progress)
    was made for `seconds` of the clock while the capture still records; clears when the job moves on."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired: FollowEvent | None = None
        """The event told when it fired (None: not stalled)."""

    def update(self, progress: Progress | None, now_ns: int) -> list[FollowEvent]:
        """The event of one look at `now_ns` (wall clock, as the records' times), if the state changed."""
        if self.seconds <= 0 or progress is None:
            return []
        idle_ns = now_ns - progress.at_ns
        window = FollowWindow(seconds=self.seconds)
        if idle_ns > self.seconds * 1e9 and self.fired is None:
            message = (
                f"no progress for {idle_ns / 1e9:,.0f} s while the capture still records: the last was {progress.what} "
                f"(the job may hang: a collective waiting for a rank, a deadlock, a stuck data loader)"
            )
            self.fired = FollowEvent("fired", STALLED, "error", message, window, progress.at_ns, now_ns)
            return [self.fired]
        if idle_ns <= self.seconds * 1e9 and self.fired is not None:
            cleared = replace(self.fired, event="cleared", start_ns=progress.at_ns, end_ns=now_ns)
            self.fired = None
            return [cleared]
        return []


def parse_actions(specs: Sequence[str], rule_names: Iterable[str]) -> dict[str, str]:
    """`RULE=stop` strings -> {rule name as registered: action}; nothing given, nothing acts.

    Raises:
        ValueError: a malformed spec, an unknown rule or action (the message is one line for the user).
    """
    names = {name.lower(): name for name in (*rule_names, STALLED)}
    actions: dict[str, str] = {}
    for spec in specs:
        rule, sep, action = spec.partition("=")
        if not sep or not rule.strip() or action.strip() not in ACTIONS:
            raise ValueError(f"--on-finding {spec!r}: expected RULE=stop, e.g. StepOutlier=stop")
        name = names.get(rule.strip().lower())
        if name is None:
            raise ValueError(f"--on-finding {spec!r}: unknown rule {rule.strip()!r}; `ktrace check --list-rules`")
        actions[name] = action.strip()
    return actions


def stop_note(event: FollowEvent) -> str:
    """The meta.json note of a job stopped on `event`: `stopped by RULE: message`."""
    return f"{STOP_NOTE_PREFIX}{event.rule}: {' '.join(event.message.split())}"


def stopped_by(notes: Sequence[str]) -> str | None:
    """The `stopped by RULE: message` note among a trace's notes, or None if no rule stopped its job."""
    return next((n for n in notes if n.startswith(STOP_NOTE_PREFIX)), None)
