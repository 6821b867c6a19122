"""Judge a capture's rules while `ktrace run` records it: the loop of `ktrace check --follow` and the watch of
`ktrace run --on-finding RULE=stop`, one piece of code for both.

Every few seconds the store is read as published so far, the window (analysis.rules.follow.window_bounds) is cut
out of it by the exporters' cutter (exporters.selection.select), the rules run on that, and
analysis.rules.follow.RuleFollower says which findings fired or cleared since the last look. While the capture
records, analysis.rules.follow.StallWatch also tells StalledTraining: no progress for --stall seconds of the clock.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from ktrace.analysis.rules.base import Rule
    from ktrace.analysis.rules.config import RulesConfig
    from ktrace.analysis.rules.follow import FollowEvent, FollowWindow, RuleFollower

WINDOW_HELP = (
    "what the rules judge, ending at the newest record: the last N seconds (60s, the default) or the last N "
    "steps counted by ktrace.step() or step-named ranges (10steps)"
)
STALL_S = 1800.0
"""--stall's default: SageMaker Debugger's StalledTrainingRule threshold (30 min)."""
STALL_HELP = (
    "tell StalledTraining (an error) when no training step began (without steps: no kernel, operator, range or "
    "API call) for S seconds of the clock while the capture still records, as SageMaker Debugger's "
    "StalledTrainingRule does (default: 1800; 0: never)"
)
DEFAULT_WINDOW = "60s"
"""--window when none is given: the last 60 seconds recorded."""
EVERY_S = 5.0
"""Default seconds between two looks at the capture (ktrace run publishes every 5 s by default)."""


def follow_window(text: str) -> FollowWindow:
    """--window text as a FollowWindow; a one-line usage error when malformed."""
    from ktrace.analysis.rules.follow import parse_window

    try:
        return parse_window(text)
    except ValueError as exc:
        raise KtraceError(str(exc), ExitCode.USAGE) from None


def check_stall(seconds: float) -> float:
    """--stall's seconds (0 turns it off); a one-line usage error when negative."""
    if seconds < 0:
        raise KtraceError(f"--stall must be >= 0 seconds (0: never; got {seconds:g})", ExitCode.USAGE)
    return seconds


def check_every(seconds: float, option: str) -> float:
    """A positive number of seconds between looks; a one-line usage error otherwise."""
    if not 0 < seconds <= 3600:
        raise KtraceError(f"{option} must be between 0 and 3600 seconds (got {seconds:g})", ExitCode.USAGE)
    return seconds


class WindowJudge:
    """Reads the store, cuts the window, runs the rules on it and tells what fired or cleared."""

    def __init__(
        self,
        path: Path,
        window: FollowWindow,
        config: RulesConfig,
        *,
        rules: Sequence[Rule] | None = None,
        skip_ops: bool = False,
        stall_s: float = 0.0,
    ) -> None:
        from ktrace.analysis.rules.follow import RuleFollower, StallWatch

        self.path = path
        self.config = config
        self.rules = rules
        self.skip = ("ops",) if skip_ops else ()
        self.follower: RuleFollower = RuleFollower(window)
        self.stall = StallWatch(stall_s)
        """StalledTraining, judged at each look while the capture records (stall_s 0: never)."""
        self.unreadable = ""
        """Why the last look could not read the capture (empty when it could)."""
        self.judged = 0
        """How many looks judged a window (a live capture shorter than the window is not judged)."""
        self.skipped: dict[str, str] = {}
        """Rule -> why it could not run on the last window judged (the data it needs is not in it)."""
        self.notes: tuple[str, ...] = ()
        """The notes of the capture as last read (a stop by `ktrace run --on-finding` is one)."""

    def look(self, live: bool) -> list[FollowEvent]:
        """The events of one look. While the capture is `live`, only a whole window is judged (not the job's
        first seconds as if they were one), and a store not readable yet (nothing recorded, a partition just
        created) is no error: `unreadable` says why and the next look tries again. The last look (not `live`)
        judges what the finished capture holds, even if shorter than the window. StalledTraining is judged on
        the whole capture, while it is `live` only (its events come after the rules')."""
        from ktrace.analysis.index import TraceIndex
        from ktrace.analysis.rules.engine import run_rules
        from ktrace.analysis.rules.follow import last_progress, window_bounds
        from ktrace.exporters.selection import select
        from ktrace.model import store
        from ktrace.model.errors import TraceFormatError

        try:
            trace = store.read(self.path, skip=self.skip)
        except TraceFormatError as exc:
            if not live or isinstance(exc, FileNotFoundError):
                raise
            self.unreadable = str(exc)
            return []
        self.unreadable = ""
        self.notes = trace.meta.notes
        index = TraceIndex(trace)
        stalled = self.stall.update(last_progress(trace, index), time.time_ns()) if live else []
        bounds = window_bounds(trace, self.follower.window, index=index, partial=not live)
        if bounds is None or self.rules == []:
            return stalled
        self.judged += 1
        report = run_rules(select(trace, window=bounds), self.config, rules=self.rules)
        self.skipped = {r.rule: r.skipped for r in report.results if r.skipped}
        return self.follower.update(report, bounds) + stalled


EVENT_RULE_COLUMN = len("HH:MM:SS ") + 8 + 8
"""Where event_line's rule name starts (after the time, the event and the severity): its folded lines go under it."""


def event_line(event: FollowEvent) -> str:
    """`HH:MM:SS FIRED   WARNING StepOutlier: message (last 60 s)` on one line, safe for a terminal."""
    from ktrace.model.display_text import printable

    at = dt.datetime.fromtimestamp(event.end_ns / 1e9).strftime("%H:%M:%S")
    message = printable(" ".join(event.message.split()))
    return f"{at} {event.event.upper():7} {event.severity.upper():7} {event.rule}: {message} ({event.window.label})"


def event_json(event: FollowEvent) -> str:
    """One JSON object on one line: event, rule, severity, message and window {seconds or steps (the other null),
    start_ns, end_ns}."""
    window = {
        "seconds": event.window.seconds,
        "steps": event.window.steps,
        "start_ns": event.start_ns,
        "end_ns": event.end_ns,
    }
    doc = {
        "event": event.event,
        "rule": event.rule,
        "severity": event.severity,
        "message": event.message,
        "window": window,
    }
    return json.dumps(doc, sort_keys=True)


def follow_store(judge: WindowJudge, every_s: float, emit: Callable[[FollowEvent], None]) -> str:
    """Look at the capture every `every_s` seconds until it is no longer recorded; emit each event. Returns how
    it ended, for the user (the last look is of the finished store)."""
    from ktrace.model.layout import META_FILE
    from ktrace.model.live import live_status
    from ktrace.model.outputs import writer_pid

    waiting_said = ""
    while True:
        # live: recording, or `ktrace run` holds the folder before its first traced process wrote anything
        live = live_status(judge.path) is not None or writer_pid(judge.path) is not None
        for event in judge.look(live=live):
            emit(event)
        if not live:
            break
        if judge.unreadable and judge.unreadable != waiting_said:
            print(f"ktrace check: waiting for the capture: {judge.unreadable}", file=sys.stderr, flush=True)
            waiting_said = judge.unreadable
        time.sleep(every_s)
    if (judge.path / META_FILE).exists():
        return "the capture is finalized"
    return "the capture is no longer being recorded (its writer ended without finalizing it)"


class RuleStop:
    """`ktrace run --on-finding RULE=stop`: a tracer.job_watch.JobWatch that judges the capture on a thread and,
    when a stop rule fires, ends the command: SIGTERM, then SIGKILL after `grace_s`."""

    def __init__(self, judge: WindowJudge, stop_rules: Sequence[str], every_s: float, grace_s: float) -> None:
        self.judge = judge
        self.stop_rules = frozenset(stop_rules)
        self.every_s = every_s
        self.grace_s = grace_s
        self.stopped: FollowEvent | None = None
        """The finding that stopped the command (None: it ran to its end)."""
        self.said: list[str] = []
        """Lines printed while the command ran."""
        self.error = ""
        """Why the watch gave up (a store it could not read); the command then runs on unwatched."""
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, child: subprocess.Popen[bytes]) -> None:
        """Begin judging on a thread of its own."""
        self._thread = threading.Thread(target=self._watch, args=(child,), name="ktrace-rule-stop", daemon=True)
        self._thread.start()

    def finish(self) -> list[str]:
        """Stop judging; the `stopped by RULE: message` note when a rule stopped the command."""
        from ktrace.analysis.rules.follow import stop_note

        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._thread is not None and self.judge.rules != [] and not self.judge.judged and not self.error:
            window = self.judge.follower.window.label
            self._say(f"--on-finding: the command ended before the capture held a whole window ({window}): not judged")
        for rule in sorted(self.stop_rules & self.judge.skipped.keys()):
            self._say(f"--on-finding: {rule} could not judge the last window: {self.judge.skipped[rule]}")
        return [stop_note(self.stopped)] if self.stopped is not None else []

    def _say(self, line: str) -> None:
        from ktrace.model.display_text import printable

        self.said.append(line)
        print(f"ktrace: {printable(line)}", file=sys.stderr, flush=True)

    def _watch(self, child: subprocess.Popen[bytes]) -> None:
        while not self._done.wait(self.every_s):
            try:
                events = self.judge.look(live=True)
            except Exception as exc:  # noqa: BLE001 - said in one line: a watch must not end, nor flood, the job's log
                why = str(exc) if isinstance(exc, (KtraceError, OSError)) else f"{type(exc).__name__}: {exc}"
                self.error = f"--on-finding: the capture could not be judged ({why}); the command runs on unwatched"
                self._say(self.error)
                return
            for event in events:
                if event.rule in self.stop_rules and event.event == "fired":
                    self.stopped = event
                    self._say(f"stopping the command: {event.rule} fired: {' '.join(event.message.split())}")
                    self._end(child)
                    return

    def _end(self, child: subprocess.Popen[bytes]) -> None:
        """SIGTERM, and SIGKILL if the command still runs `grace_s` later (Popen checks it was not reaped)."""
        child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if child.poll() is None:
            self._say(f"the command still ran {self.grace_s:g} s after SIGTERM: SIGKILL")
            child.kill()


def add_on_finding_arguments(parser: argparse.ArgumentParser) -> None:
    """`ktrace run`'s --rules, --set, --on-finding RULE=stop, --grace and --finding-window."""
    from ktrace.cli.rules_options import add_rules_arguments

    group = parser.add_argument_group(
        "acting on the rules while recording",
        "With --on-finding, the capture is judged each time it is published (--publish), the way `ktrace check "
        "--follow` does, once it holds a whole --finding-window; when "
        f"RULE fires, the finding is printed and kept in the trace (meta.json: 'stopped by RULE: message'), the "
        f"command gets SIGTERM, then SIGKILL after --grace, the trace is finalized and ktrace exits "
        f"{int(ExitCode.STOPPED)}. Nothing is stopped unless asked.",
    )
    add_rules_arguments(group)  # type: ignore[arg-type]
    group.add_argument(
        "--on-finding",
        metavar="RULE=stop",
        action="append",
        default=[],
        help="end the command when RULE fires (repeatable), e.g. --on-finding Dataloader=stop",
    )
    group.add_argument(
        "--grace",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL when a rule stops the command (default: 10)",
    )
    group.add_argument("--finding-window", default=DEFAULT_WINDOW, metavar="60s|Nsteps", help=WINDOW_HELP)
    group.add_argument(
        "--stall",
        type=float,
        metavar="S",
        help="with --on-finding StalledTraining=stop: end the command when no training step began (without steps: "
        "no kernel, operator, range or API call) for S seconds while it still runs, a job that hangs "
        "(default: 1800)",
    )


@dataclass(frozen=True)
class OnFinding:
    """`ktrace run --on-finding`, checked before anything is written: which rules stop the command, judged how."""

    stops: tuple[str, ...]
    config: RulesConfig
    window: FollowWindow
    every_s: float
    grace_s: float
    stall_s: float = STALL_S

    def watch(self, root: Path) -> RuleStop:
        """The watch the launcher runs on the capture being written at `root`."""
        from ktrace.analysis.rules.engine import rule_by_name
        from ktrace.analysis.rules.follow import STALLED

        rules = [rule_by_name(name) for name in self.stops if name != STALLED]
        stall_s = self.stall_s if STALLED in self.stops else 0.0
        judge = WindowJudge(root, self.window, self.config, rules=rules, stall_s=stall_s)
        return RuleStop(judge, self.stops, self.every_s, self.grace_s)


def on_finding(args: argparse.Namespace, every_s: float) -> OnFinding | None:
    """--on-finding's settings (None without it: nothing is stopped); one-line usage errors for an unknown rule,
    a rule the rules file disables, --rules/--set without --on-finding, a negative --grace, a bad window."""
    from ktrace.analysis.rules.engine import all_rules
    from ktrace.analysis.rules.follow import parse_actions
    from ktrace.cli.rules_options import rules_config

    if not args.on_finding:
        if args.rules or args.set_params:
            raise KtraceError("--rules and --set are read only with --on-finding RULE=stop", ExitCode.USAGE)
        if args.stall is not None:
            raise KtraceError("--stall is read only with --on-finding StalledTraining=stop", ExitCode.USAGE)
        return None
    try:
        stops = parse_actions(args.on_finding, (r.name for r in all_rules()))
    except ValueError as exc:
        raise KtraceError(str(exc), ExitCode.USAGE) from None
    if args.grace < 0:
        raise KtraceError(f"--grace must be >= 0 seconds (got {args.grace:g})", ExitCode.USAGE)
    config = rules_config(args)
    off = sorted(set(stops) & config.disabled)
    if off:
        raise KtraceError(f"--on-finding {off[0]}=stop: the rules file disables {off[0]}", ExitCode.USAGE)
    window = follow_window(args.finding_window)
    stall_s = check_stall(STALL_S if args.stall is None else args.stall)
    return OnFinding(tuple(stops), config, window, every_s, args.grace, stall_s)


def stopped_exit(watch: RuleStop | None, code: int) -> int:
    """ktrace run's exit code: ExitCode.STOPPED, said on stderr, when a rule stopped the command, else `code`."""
    if watch is None or watch.stopped is None:
        return code
    print(
        f"ktrace: exit code {int(ExitCode.STOPPED)}: --on-finding {watch.stopped.rule}=stop ended the command "
        f"(its own exit code: {code})",
        file=sys.stderr,
    )
    return int(ExitCode.STOPPED)
