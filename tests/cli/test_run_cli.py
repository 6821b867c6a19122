"""`ktrace run` end to end with real child processes (no GPU needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktrace.model import store

PY = sys.executable
SECRET = "hf_" + "Q" * 30


def ktrace_run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "ktrace", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
    )


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


TRAIN = """
import sys, ktrace
for i in range(4):
    ktrace.step()
    with ktrace.annotate("forward"):
        sum(range(20000))
print("trained")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def test_cpu_side_trace_counters_and_exit_code_without_a_gpu(tmp_path: Path) -> None:
    train = script(tmp_path, "train.py", TRAIN)
    res = ktrace_run(
        tmp_path,
        "-o",
        "t.ktrace",
        "--interval",
        "100",
        "--",
        PY,
        str(train),
        "7",
        f"--hf-token={SECRET}",
        env={"HF_TOKEN": SECRET},
    )
    assert res.returncode == 7, res.stderr
    assert "trained" in res.stdout
    assert "ktrace summary" in res.stderr and "ktrace view" in res.stderr
    t = store.read(tmp_path / "t.ktrace")
    assert t.meta.source == "ktrace" and t.meta.job["exit_code"] == 7 and t.meta.job["world_size"] == 1
    assert t.ranges["name"].cast(str).to_list().count("forward") == 4
    assert not t.threads.is_empty()
    assert {"cpu.util", "mem.used_bytes"} <= set(t.counters["metric"].cast(str).to_list())
    if not Path("/dev/nvidia0").exists():
        assert any("GPU activity not recorded" in n for n in t.meta.notes)
        assert sum("GPU activity not recorded" in line for line in res.stderr.splitlines()) == 1
        assert t.meta.capture["gpu"] is False and t.meta.capture["tracer"] == "none"
    steps = [n for n in t.ranges["name"].cast(str).to_list() if n.startswith("ProfilerStep")]
    assert len(steps) == 4  # 4 iterations, 4 steps: the last one is not lost to "finalization"
    for path in (tmp_path / "t.ktrace").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_non_python_command_says_only_python_is_traced(tmp_path: Path) -> None:
    res = ktrace_run(tmp_path, "-o", "s.ktrace", "--no-counters", "--", "true")
    assert res.returncode == 0, res.stderr
    assert "0 processes" in res.stderr and "traces Python processes" in res.stderr


def test_sigterm_is_forwarded_and_the_exit_code_kept(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    child = script(
        tmp_path,
        "child.py",
        f"""
import signal, sys, time, pathlib
def bye(sig, frame):
    pathlib.Path({str(tmp_path / "got")!r}).write_text(signal.Signals(sig).name)
    sys.exit(42)
signal.signal(signal.SIGTERM, bye)
pathlib.Path({str(ready)!r}).write_text("1")
time.sleep(60)
""",
    )
    proc = subprocess.Popen(
        [PY, "-m", "ktrace", "run", "-o", "s.ktrace", "--", PY, str(child)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=180)  # a hang guard: under CI load the exit alone took 12-19 s here
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        handled = (tmp_path / "got").exists()
        pytest.fail(f"ktrace run still running 180 s after SIGTERM (the command's handler ran: {handled}): {err}")
    assert proc.returncode == 42, err
    assert (tmp_path / "got").read_text() == "SIGTERM"
    assert "forwarding SIGTERM" in err
    assert json.loads((tmp_path / "s.ktrace" / "meta.json").read_text())["job"]["exit_code"] == 42


def test_the_tracer_thread_leaves_the_programs_signals_to_its_main_thread(tmp_path: Path) -> None:
    # A process-directed SIGTERM taken by ktrace's writer thread would not wake the program's main thread from
    # time.sleep(): its handler would run only when the sleep ends (a CI run waited 60 s for it).
    child = script(
        tmp_path,
        "masks.py",
        """
import json, signal, threading, pathlib, time
time.sleep(0.2)
def sigblk(tid):
    for line in pathlib.Path(f"/proc/self/task/{tid}/status").read_text().splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
masks = {t.name: sigblk(t.native_id) for t in threading.enumerate()}
pathlib.Path("masks.json").write_text(json.dumps(masks))
""",
    )
    res = ktrace_run(tmp_path, "-o", "m.ktrace", "--no-counters", "--", PY, str(child))
    assert res.returncode == 0, res.stderr
    masks = json.loads((tmp_path / "masks.json").read_text())
    term = 1 << (signal.SIGTERM - 1)
    assert masks["ktrace-writer"] & term and masks["ktrace-writer"] & (1 << (signal.SIGINT - 1))
    assert not masks["MainThread"] & term


def test_a_child_killed_with_sigkill_keeps_its_flushed_data(tmp_path: Path) -> None:
    child = script(
        tmp_path,
        "killed.py",
        """
import os, signal, time, ktrace
for i in range(3):
    with ktrace.annotate("kept"):
        pass
time.sleep(2.5)  # the writer thread flushes at least every second
os.kill(os.getpid(), signal.SIGKILL)
""",
    )
    res = ktrace_run(tmp_path, "-o", "k.ktrace", "--no-counters", "--", PY, str(child))
    assert res.returncode == 128 + signal.SIGKILL
    t = store.read(tmp_path / "k.ktrace")
    assert t.ranges["name"].cast(str).to_list() == ["kept"] * 3
    assert t.meta.health.get("processes_not_closed") == 1


def test_torchrun_like_launch_gives_one_partition_per_rank(tmp_path: Path) -> None:
    worker = script(
        tmp_path,
        "worker.py",
        """
import os, ktrace
with ktrace.annotate(f"rank{os.environ['RANK']}"):
    pass
""",
    )
    agent = script(
        tmp_path,
        "torchrun",
        f"""#!{PY}
import os, subprocess, sys
procs = [subprocess.Popen([sys.executable, {str(worker)!r}],
                          env={{**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2"}})
         for r in range(2)]
sys.exit(max(p.wait() for p in procs))
""",
    )
    agent.chmod(0o755)
    res = ktrace_run(tmp_path, "-o", "d.ktrace", "--no-counters", "--", str(agent))
    assert res.returncode == 0, res.stderr
    t = store.read(tmp_path / "d.ktrace")
    assert sorted(r for _, r in t.ranks) == [0, 1]  # the agent is not traced
    assert t.meta.job["ranks"] == [0, 1]
    assert sorted(t.ranges["name"].cast(str).to_list()) == ["rank0", "rank1"]


def test_user_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    child = script(tmp_path, "c.py", "import builtins\nprint('user site', getattr(builtins, 'USER_SITE_RAN', False))\n")
    res = ktrace_run(tmp_path, "-o", "u.ktrace", "--no-counters", "--", PY, str(child), env={"PYTHONPATH": str(site)})
    assert "user site True" in res.stdout, res.stderr
    assert "Error in sitecustomize" not in res.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "no command given"),
        (["--steps", "5:2", "--", "true"], 2, "--steps"),
        (["--interval", "50", "--", "true"], 2, "between 100 and 60000"),
        (["--", "/no/such/command"], 4, "command not found"),
    ],
)
def test_bad_usage_is_one_line_and_an_exit_code(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    res = ktrace_run(tmp_path, *args)
    assert res.returncode == code
    assert message in res.stderr and "Traceback" not in res.stderr


def test_existing_output_needs_force(tmp_path: Path) -> None:
    assert ktrace_run(tmp_path, "-o", "x.ktrace", "--no-counters", "--", "true").returncode == 0
    res = ktrace_run(tmp_path, "-o", "x.ktrace", "--", "true")
    assert res.returncode == 2 and "--force" in res.stderr
    assert ktrace_run(tmp_path, "-o", "x.ktrace", "--force", "--no-counters", "--", "true").returncode == 0
    assert ktrace_run(tmp_path, "--no-counters", "--", "true").returncode == 0
    assert (tmp_path / "run.ktrace").is_dir()


def test_notes_from_traced_processes_reach_the_terminal_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    """`ktrace run` prints the notes gathered from every traced process's partition.json: a hostile one (a thread
    or range name echoed in it) is shown as text, not executed by the terminal."""
    from ktrace.cli.run import _sayer

    _sayer(quiet=False)("thread \x1b]0;pwned\x07\x1b[2J named")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "pwned" in err


def test_a_failure_after_recording_keeps_the_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only "nothing was recorded" (command not found) removes the output folder; a KtraceError raised once a
    traced process has written its partition (finalize meeting a malformed one, say) keeps what was recorded."""
    from ktrace.cli import main
    from ktrace.model.errors import TraceFormatError
    from ktrace.tracer import launcher

    def records_then_fails(cmd, config, root, say, wait, watch):  # type: ignore[no-untyped-def]
        part = Path(root) / "node=h" / "rank=0"
        part.mkdir(parents=True)
        (part / "kernels.arrows").write_bytes(b"recorded")
        raise TraceFormatError("rank=0: malformed partition.json")

    monkeypatch.setattr(launcher, "run_command", records_then_fails)
    out = tmp_path / "t.ktrace"
    assert main(["run", "-o", str(out), "--", PY, "-c", "pass"]) == 3
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("t.ktrace")]
    assert kept and any((k / "node=h" / "rank=0" / "kernels.arrows").exists() for k in kept), kept
