"""The `ktrace run` launcher: spawn the command with the startup hook, forward signals, sample counters,
then finalize the run folder (Parquet, meta.json) and return the command's exit code.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ktrace.tracer.config import ENV_CAPTURE_DIR, ENV_CONFIG, ENV_LAUNCHER_PID, CaptureConfig
from ktrace.tracer.run_result import RunResult

if TYPE_CHECKING:
    from ktrace.tracer.counters import CounterSampler
    from ktrace.tracer.job_watch import JobWatch

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SI_KERNEL = 0x80
"""si_code of a signal the kernel sent itself, e.g. the terminal's Ctrl-C to the foreground group."""

SITECUSTOMIZE = '''\
"""Injected by `ktrace run`: start the ktrace tracer in this process, then run any other sitecustomize."""
import os as _os
import sys as _sys

_dir = _os.path.dirname(_os.path.abspath(__file__))
try:
    from ktrace.tracer.hook import install as _ktrace_install
    _ktrace_install()
except ImportError as _exc:
    _sys.stderr.write(f"ktrace: not installed for {_sys.executable} ({_exc}): process {_os.getpid()} not traced\\n")
except Exception as _exc:
    _sys.stderr.write(f"ktrace: tracer hook failed in process {_os.getpid()}: {type(_exc).__name__}: {_exc}\\n")
# Chain to the user's sitecustomize (as ddtrace does): hide this folder and import the next one.
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _dir]
_self = _sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize as _user  # noqa: F401
except ImportError:
    _user = _self
_sys.modules["sitecustomize"] = _user  # the import system looks the name up when this file ends
'''

Say = Callable[[str], None]


def child_environment(base: dict[str, str], root: Path, config: CaptureConfig, boot_dir: Path) -> dict[str, str]:
    """The command's environment: the hook's variables and PYTHONPATH with the bootstrap folder first."""
    env = dict(base)
    env[ENV_CAPTURE_DIR] = str(root.resolve())
    env[ENV_CONFIG] = config.to_json()
    env[ENV_LAUNCHER_PID] = str(os.getpid())
    env["PYTHONPATH"] = os.pathsep.join([str(boot_dir), *filter(None, [base.get("PYTHONPATH")])])
    return env


def exit_status(returncode: int) -> int:
    """Popen returncode -> shell-style exit code."""
    return 128 - returncode if returncode < 0 else returncode


def wait_forwarding(child: subprocess.Popen[bytes], say: Say) -> int:
    """Wait for `child`, forwarding FORWARDED signals (they must be blocked in this thread)."""
    waited = {*FORWARDED, signal.SIGCHLD}
    same_group = os.getpgid(child.pid) == os.getpgrp()
    while True:
        code = child.poll()
        if code is not None:
            return exit_status(code)
        info = signal.sigtimedwait(waited, 0.25)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        sig = signal.Signals(info.si_signo)
        if same_group and info.si_code == SI_KERNEL and sig in (signal.SIGINT, signal.SIGQUIT):
            continue  # Ctrl-C in the terminal: the command got it already
        say(f"forwarding {sig.name} to the command (pid {child.pid})")
        try:
            child.send_signal(sig)
        except ProcessLookupError:
            pass


def _spawn(cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    from ktrace.model.errors import ExitCode, KtraceError

    def unblock() -> None:  # the command must not inherit the launcher's blocked signals
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {*FORWARDED, signal.SIGCHLD})

    try:
        return subprocess.Popen(list(cmd), env=env, preexec_fn=unblock)  # noqa: PLW1509 - no threads yet
    except FileNotFoundError:
        raise KtraceError(f"command not found: {cmd[0]}", ExitCode.NOT_FOUND) from None
    except PermissionError:
        raise KtraceError(f"command not executable: {cmd[0]}", ExitCode.FAILURE) from None


def run_command(
    cmd: Sequence[str], config: CaptureConfig, root: Path, say: Say, wait_s: float = 30.0, watch: JobWatch | None = None
) -> RunResult:
    """Record `cmd` into the run folder `root` (created here) and finalize it.

    Args:
        cmd: the command and its arguments.
        config: capture options (t0_ns is set here).
        root: the .ktrace folder to create.
        say: prints one line for the user.
        wait_s: how long to wait, once the command ended, for traced processes it left running.
        watch: started with the command, finished when it ended; its notes join the trace's (--on-finding).
    """
    from ktrace.tracer.preflight import driver_cuda_version, gpu_capture_problem

    root.mkdir(parents=True, exist_ok=True)
    config = dataclasses.replace(config, t0_ns=time.time_ns())
    notes: list[str] = []
    problem = gpu_capture_problem() if config.gpu else None
    if problem:
        say(problem)
        notes.append(problem)
    boot_dir = Path(tempfile.mkdtemp(prefix="ktrace-boot-"))
    (boot_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = child_environment(dict(os.environ), root, config, boot_dir)
    node = socket.gethostname()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {*FORWARDED, signal.SIGCHLD})
    sampler = None
    started = time.monotonic()
    try:
        child = _spawn(cmd, env)
        if watch is not None:
            watch.start(child)
        if config.counters:
            gpu = config.gpu and driver_cuda_version() is not None  # no driver: the line above said so
            sampler = _start_sampler(root, node, config.interval_ms, child.pid, gpu, notes)
        code = wait_forwarding(child, say)
    finally:
        if watch is not None:
            notes += watch.finish()
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if sampler is not None:
            _stop_sampler(sampler, root, notes)
        shutil.rmtree(boot_dir, ignore_errors=True)
    from ktrace.tracer.finalize import finalize_run, wait_for_traced

    still_running = wait_for_traced(root, wait_s, say)
    try:
        result = finalize_run(
            root,
            cmd,
            config,
            code,
            notes,
            node,
            sampler.samples if sampler else 0,
            still_running,
            gpu_recorded=problem is None,
        )
    except OSError as exc:  # a full disk must not cost the user the command's exit code, nor the capture
        from ktrace.model.outputs import write_error

        why = str(write_error(exc, root, "the raw capture is kept"))
        result = RunResult(exit_code=code, root=root, notes=notes, finalize_error=why)
    result.duration_s = time.monotonic() - started
    result.printed = [problem] if problem else []
    return result


def _start_sampler(
    root: Path, node: str, interval_ms: int, pid: int, gpu: bool, notes: list[str]
) -> CounterSampler | None:
    """The host counters' sampler, started; None (and a note) where its partition cannot be written (a full
    disk): the command runs on, and `ktrace run` still ends with its exit code."""
    from ktrace.tracer.counters import CounterSampler

    try:
        sampler = CounterSampler(root, node, interval_ms, pid, gpu=gpu)
    except OSError as exc:
        notes.append(f"host counters not recorded: {_write_failure(exc, root)}")
        return None
    notes += sampler.notes
    sampler.start()
    return sampler


def _stop_sampler(sampler: CounterSampler, root: Path, notes: list[str]) -> None:
    """Write the sampler's last rows; a full disk costs the counters' end, never the command's exit code."""
    try:
        sampler.stop()
    except OSError as exc:
        notes.append(f"host counters cut short: {_write_failure(exc, root)}")


def _write_failure(exc: OSError, root: Path) -> str:
    from ktrace.model.outputs import write_error

    return str(write_error(exc, root, "what was written before is kept"))


def default_output(cwd: Path) -> Path:
    """run.ktrace, or run-2.ktrace, run-3.ktrace, ... when taken."""
    candidate = cwd / "run.ktrace"
    n = 2
    while candidate.exists():
        candidate = cwd / f"run-{n}.ktrace"
        n += 1
    return candidate


def python_command(cmd: Sequence[str]) -> list[str]:
    """A command starting with a `.py` file runs with this interpreter (as `python file.py`)."""
    if cmd and cmd[0].endswith(".py") and not os.access(cmd[0], os.X_OK):
        return [sys.executable, *cmd]
    return list(cmd)
