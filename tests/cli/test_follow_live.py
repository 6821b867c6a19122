"""Rules on a capture while it records, end to end with real `ktrace run --no-gpu` jobs (issue 31): `ktrace check
--follow` tells a planted data-loader stall once when it fires and once when it clears; `ktrace run --on-finding
Dataloader=stop` ends the job on it, says so, keeps it in the trace and exits 7, the trace complete.

The job is a CPU loop of steps (a 1 ms data load, 40 ms of compute) with one data load stalled for 4 s; the
Dataloader rule fires when data loading holds more than 30 % of the window (4 s): all of it just after the stall,
above 30 % until the window ends 2.8 s past the stall; without the stall, a few %. The capture is published every
0.5 s and looked at every 0.5 s: margins wide enough for a loaded machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktrace.analysis.rules.follow import stopped_by
from ktrace.model import store
from ktrace.model.errors import ExitCode

PY = sys.executable
LOOP = """
import signal, sys, time
import ktrace
before, stall, after = (float(a) for a in sys.argv[1:4])
if len(sys.argv) > 4:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a job deaf to SIGTERM: only SIGKILL ends it
def step(load_s):
    ktrace.step()
    with ktrace.annotate("dataloader"):
        time.sleep(load_s)
    with ktrace.annotate("forward"):
        end = time.perf_counter() + 0.04
        while time.perf_counter() < end:
            pass
def loop(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        step(0.001)
loop(before)
step(stall)
loop(after)
ktrace.step()
"""
RULES = "[Dataloader]\nmax_step_pct = 30\n"
FOLLOW = ("--window", "4s")


def _job(tmp_path: Path, seconds: tuple[float, float, float], *args: str) -> list[str]:
    (tmp_path / "loop.py").write_text(LOOP)
    (tmp_path / "rules.toml").write_text(RULES)
    command = [PY, "-m", "ktrace", "run", "--no-gpu", "--no-counters", "--publish", "0.5", "-o", "job.ktrace"]
    return [*command, *args, "--", PY, "loop.py", *(str(s) for s in seconds)]


def _ktrace(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "ktrace", *args], capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env=os.environ
    )


def _follow_a_job(tmp_path: Path, seconds: tuple[float, float, float], *args: str) -> subprocess.CompletedProcess[str]:
    """`ktrace check --follow job.ktrace ARGS --every 0.5 --json` on the loop while `ktrace run` records it (the
    job must end well)."""
    job = subprocess.Popen(
        _job(tmp_path, seconds), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "job.ktrace").is_dir() and time.monotonic() < deadline:
            time.sleep(0.05)
        follow = _ktrace(tmp_path, "check", "--follow", "job.ktrace", *args, "--every", "0.5", "--json")
    finally:
        job.wait(timeout=60)
    assert job.returncode == 0, job.stderr.read() if job.stderr else ""
    return follow


def test_check_follow_fires_on_a_stall_and_clears_after_it(tmp_path: Path) -> None:
    follow = _follow_a_job(tmp_path, (1.5, 4.0, 5.0), "--rules", "rules.toml", *FOLLOW)
    assert follow.returncode == 0, follow.stderr
    events = [json.loads(line) for line in follow.stdout.splitlines()]
    assert [(e["event"], e["rule"]) for e in events] == [("fired", "Dataloader"), ("cleared", "Dataloader")]
    fired = events[0]
    assert fired["severity"] == "warning" and "data loading took" in fired["message"]
    assert (fired["window"]["seconds"], fired["window"]["steps"]) == (4.0, None)
    assert fired["window"]["end_ns"] - fired["window"]["start_ns"] == 4e9
    assert "the capture is finalized" in follow.stderr


def test_on_finding_stops_the_job_keeps_the_finding_and_exits_7(tmp_path: Path) -> None:
    run = subprocess.run(
        _job(
            tmp_path,
            (1.5, 4.0, 20.0),
            "--rules",
            "rules.toml",
            "--on-finding",
            "Dataloader=stop",
            "--finding-window",
            "4s",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == ExitCode.STOPPED == 7, run.stderr
    assert "stopping the command: Dataloader fired: data loading took" in run.stderr
    assert "exit code 7: --on-finding Dataloader=stop ended the command" in run.stderr
    trace = store.read(tmp_path / "job.ktrace")  # finalized: meta.json, Parquet, no capture stream left
    assert (tmp_path / "job.ktrace" / "meta.json").is_file()
    assert not list((tmp_path / "job.ktrace").rglob("*.arrows"))
    note = stopped_by(trace.meta.notes)
    assert note is not None and note.startswith("stopped by Dataloader: data loading took")
    assert trace.ranges.filter(trace.ranges["name"] == "dataloader").height > 10
    info = _ktrace(tmp_path, "info", "job.ktrace")
    assert "stopped by Dataloader" in info.stdout
    check = _ktrace(tmp_path, "check", "job.ktrace")
    assert "the job was stopped by Dataloader" in check.stderr
    follow = _ktrace(tmp_path, "check", "--follow", "job.ktrace")  # a finished store: one look, then the stop
    assert follow.returncode == 0 and "the job was stopped by Dataloader" in follow.stderr


def test_a_job_deaf_to_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            *_job(
                tmp_path,
                (1.5, 4.0, 20.0),
                "--rules",
                "rules.toml",
                "--on-finding",
                "dataloader=stop",
                "--finding-window",
                "4s",
                "--grace",
                "1",
            ),
            "deaf",
        ],  # fmt: skip
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 7, run.stderr
    assert "still ran 1 s after SIGTERM: SIGKILL" in run.stderr
    trace = store.read(tmp_path / "job.ktrace")
    assert stopped_by(trace.meta.notes) is not None and trace.ranges.height > 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--on-finding", "NoSuchRule=stop"), "unknown rule 'NoSuchRule'"),
        (("--on-finding", "Dataloader=pause"), "expected RULE=stop"),
        (("--rules", "rules.toml"), "--rules and --set are read only with --on-finding"),
        (("--on-finding", "Dataloader=stop", "--grace", "-1"), "--grace must be >= 0"),
        (("--on-finding", "Dataloader=stop", "--finding-window", "ten"), "expected seconds or steps"),
        (("--stall", "60"), "--stall is read only with --on-finding StalledTraining=stop"),
    ],
)
def test_on_finding_usage_errors_are_one_line_and_run_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    run = subprocess.run(_job(tmp_path, (0, 0, 0), *args), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "job.ktrace").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("nope.ktrace",), ExitCode.NOT_FOUND, "no such .ktrace folder"),
        (("rules.toml",), ExitCode.USAGE, "--follow reads a `ktrace run` store"),
        (("job.ktrace", "--window", "5min"), ExitCode.USAGE, "expected seconds or steps"),
        (("job.ktrace", "--every", "0"), ExitCode.USAGE, "--every must be between 0 and 3600"),
        (("job.ktrace", "--workers", "2"), ExitCode.USAGE, "drop --workers/--cluster"),
    ],
)
def test_check_follow_usage_errors_are_one_line(
    tmp_path: Path, args: tuple[str, ...], code: ExitCode, message: str
) -> None:
    (tmp_path / "rules.toml").write_text(RULES)
    (tmp_path / "job.ktrace").mkdir()
    check = _ktrace(tmp_path, "check", "--follow", *args, timeout=60)
    assert check.returncode == code, check.stderr
    assert message in check.stderr and len(check.stderr.strip().splitlines()) == 1


def test_a_stop_rule_that_cannot_judge_the_capture_is_named_and_stops_nothing(tmp_path: Path) -> None:
    run = subprocess.run(
        _job(tmp_path, (5.0, 0.001, 0.5), "--on-finding", "LowGPUUtilization=stop", "--finding-window", "1s"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "--on-finding: LowGPUUtilization could not judge the last window: the trace has no GPU" in run.stderr
    assert stopped_by(store.read(tmp_path / "job.ktrace").meta.notes) is None


def test_check_follow_tells_a_stalled_job_and_its_recovery(tmp_path: Path) -> None:
    """No step begins during the 5 s data load: StalledTraining (--stall 2) fires, then clears once steps resume."""
    follow = _follow_a_job(tmp_path, (1.0, 5.0, 2.0), "--stall", "2")
    assert follow.returncode == ExitCode.FINDINGS, follow.stderr  # an error fired meanwhile (--fail-on error)
    events = [e for line in follow.stdout.splitlines() if (e := json.loads(line))["rule"] == "StalledTraining"]
    assert [e["event"] for e in events] == ["fired", "cleared"]
    assert events[0]["severity"] == "error" and "no progress for" in events[0]["message"]
    assert "the last was the end of step ProfilerStep#" in events[0]["message"]
    assert events[0]["window"]["seconds"] == 2.0


def test_on_finding_stalled_training_stops_a_hung_job(tmp_path: Path) -> None:
    started = time.monotonic()
    run = subprocess.run(
        _job(tmp_path, (1.0, 60.0, 0.0), "--on-finding", "StalledTraining=stop", "--stall", "2", "--grace", "2"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == ExitCode.STOPPED, run.stderr
    assert time.monotonic() - started < 50  # stopped, not waited out
    assert "stopping the command: StalledTraining fired: no progress for" in run.stderr
    assert "not judged" not in run.stderr  # no window rule was asked for
    note = stopped_by(store.read(tmp_path / "job.ktrace").meta.notes)
    assert note is not None and note.startswith("stopped by StalledTraining: no progress for")


def test_a_negative_stall_is_a_usage_error(tmp_path: Path) -> None:
    run = subprocess.run(
        _job(tmp_path, (0, 0, 0), "--on-finding", "StalledTraining=stop", "--stall", "-1"),
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == ExitCode.USAGE and "--stall must be >= 0" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "job.ktrace").exists()
