"""Change what a running `ktrace run` capture records, without restarting the job.

--start begins detailed recording now (GPU activity, and Python samples where --python-sample asked for them);
--stop ends it; --steps A:B records steps A..B-1, counted by ktrace.step() as `ktrace run --steps` counts them
(recording stops until step A begins). The launcher's counters keep running whatever ctl says. Every traced
process applies the request within about a second and answers; ctl waits up to --timeout for the answers and
says how many processes applied it. It works on the capture folder `ktrace run -o PATH` is writing, from any
shell on the same host (also while `ktrace run --force` records the replacement of an older PATH).

examples:
  ktrace run -o job.ktrace --steps 0:1 -- python train.py &   (step 0 only)
  ktrace ctl job.ktrace --steps 100:110      (then steps 100 to 109)
  ktrace ctl job.ktrace --start              (record from now on)
  ktrace ctl job.ktrace --stop
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ktrace.model.errors import ExitCode, KtraceError

if TYPE_CHECKING:
    from ktrace.model.control import ControlAnswer, ControlRequest

POLL_S = 0.1
"""How often ctl looks for the processes' answers."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ktrace ctl`."""
    parser.add_argument("store", metavar="STORE", help="the .ktrace folder a running `ktrace run -o STORE` writes")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--start", action="store_true", help="begin detailed recording now")
    what.add_argument("--stop", action="store_true", help="end detailed recording now (counters keep running)")
    what.add_argument(
        "--steps", metavar="A:B", help="record steps A..B-1 (counted by ktrace.step()); nothing until step A"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="wait up to S seconds for the traced processes to answer (default: 10)",
    )


def run(args: argparse.Namespace) -> int:
    """Send the request, wait for the answers, say who applied it; exit 1 when none did."""
    from ktrace.model.control import send_request
    from ktrace.model.live import live_capture_of

    action, steps = _action(args)
    if not 0 < args.timeout <= 3600:
        raise KtraceError("--timeout must be between 0 and 3600 seconds", ExitCode.USAGE)
    root = live_capture_of(args.store) or Path(args.store)  # under `run --force`, the folder it records into
    _check_live(root)
    request = send_request(root, action, steps)
    _take_back_if_finalized(root)
    _check_live(root)  # finalized as the request went in: nothing will answer it
    answers = _wait_for_answers(root, request, args.timeout)
    return _report(root, request, answers, args.timeout)


def _action(args: argparse.Namespace) -> tuple[str, tuple[int, int] | None]:
    if args.steps is None:
        return ("start" if args.start else "stop"), None
    from ktrace.tracer.config import ConfigError, parse_steps

    try:
        return "steps", parse_steps(args.steps)
    except ConfigError as exc:
        raise KtraceError(str(exc), ExitCode.USAGE) from None


def _check_live(root: Path) -> None:
    """KtraceError unless `root` is a capture `ktrace run` is recording now."""
    from ktrace.model.layout import META_FILE
    from ktrace.model.live import live_status
    from ktrace.model.outputs import CAPTURE_MARKER

    if not root.exists():
        raise KtraceError(f"{root}: no such file or directory", ExitCode.NOT_FOUND)
    if (root / META_FILE).is_file():
        raise KtraceError(
            f"{root}: this capture has finished (its meta.json is written); ctl changes a capture while "
            "`ktrace run` records it",
            ExitCode.BAD_INPUT,
        )
    if not (root / CAPTURE_MARKER).is_file():
        raise KtraceError(f"{root}: not a capture `ktrace run` is recording", ExitCode.BAD_INPUT)
    if live_status(root) is None:
        raise KtraceError(
            f"{root}: nothing records this capture any more (its `ktrace run` was interrupted)", ExitCode.FAILURE
        )


def _take_back_if_finalized(root: Path) -> None:
    """Remove the capture marker the request left if `ktrace run` finalized the store meanwhile (its clean-up, which
    removes the marker, may have run before the request went in): a finished store keeps no marker."""
    from ktrace.model.layout import META_FILE
    from ktrace.model.outputs import CAPTURE_MARKER

    if (root / META_FILE).is_file():
        (root / CAPTURE_MARKER).unlink(missing_ok=True)


def _wait_for_answers(root: Path, request: ControlRequest, timeout_s: float) -> dict[Path, ControlAnswer]:
    """The answers to `request` (or a later one) by partition folder, once every process still recording has
    answered, or when `timeout_s` has passed."""
    from ktrace.model.control import answer_of
    from ktrace.model.live import recording_partitions

    deadline = time.monotonic() + timeout_s
    answers: dict[Path, ControlAnswer] = {}
    while True:
        recording = recording_partitions(root)
        for folder in {*recording, *answers}:
            answer = answer_of(folder)
            if answer is not None and answer.seq >= request.seq:
                answers[folder] = answer
        if answers and all(folder in answers for folder in recording):
            return answers
        if time.monotonic() >= deadline:
            return answers
        time.sleep(POLL_S)


def _report(root: Path, request: ControlRequest, answers: dict[Path, ControlAnswer], timeout_s: float) -> int:
    """Print each process's answer and a total; KtraceError when none answered or none applied it."""
    from ktrace.model.display_text import printable
    from ktrace.model.live import recording_partitions

    if not answers:
        raise KtraceError(
            f"{root}: no traced process answered within {timeout_s:g} s (is a Python process of the job still "
            "running under `ktrace run`?)",
            ExitCode.FAILURE,
        )
    what = {"start": "start recording", "stop": "stop recording"}.get(request.action)
    if request.steps is not None:
        what = f"record steps {request.steps[0]}..{request.steps[1] - 1}"
    for folder, answer in sorted(answers.items()):
        where = f"{folder.parent.name}/{folder.name} (pid {answer.pid})"
        print(f"ktrace ctl: {where}: {'' if answer.ok else 'not applied: '}{printable(answer.message)}")
    applied = sum(a.ok for a in answers.values())
    silent = [f for f in recording_partitions(root) if f not in answers]
    if not applied:
        raise KtraceError(f"{what}: applied by no process (see above)", ExitCode.FAILURE)
    tail = f"; {len(silent)} did not answer within {timeout_s:g} s" if silent else ""
    print(f"ktrace ctl: {what}: applied by {applied} process{'es' if applied != 1 else ''}{tail}")
    return 0 if applied == len(answers) and not silent else int(ExitCode.FAILURE)
