"""The startup hook run in every Python process started under `ktrace run` (via the injected sitecustomize).

Cheap unless the process is selected: one environment check, then process selection from argv and
environment (cupti.md §6.2 step 3), then a CaptureSession for the CPU side and an import watcher that
starts CUPTI when a CUDA library (torch, cupy, jax, ...) is imported, i.e. before CUDA initializes.
"""

from __future__ import annotations

import atexit
import importlib.abc
import os
import re
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ktrace.tracer.config import ENV_CAPTURE_DIR, CaptureConfig

CUDA_LIBRARIES = frozenset(
    {"torch", "cupy", "jax", "jaxlib", "tensorflow", "pycuda", "numba.cuda", "cuda", "triton", "ktrace_cuda_probe"}
)
"""Importing one of these starts CUPTI (`ktrace_cuda_probe` is a name the tests import)."""


def skip_reason(config: CaptureConfig, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why this process should not be traced (None: trace it).

    Args:
        config: the capture options (trace_children, ranks).
        argv: the interpreter's full command line (sys.orig_argv).
        env: the process environment.
    """
    joined = " ".join(argv)
    if not config.trace_children:
        if "--multiprocessing-fork" in argv or "from multiprocessing" in joined:
            return "multiprocessing child (DataLoader worker, resource tracker)"
        if "compile_worker" in joined:
            return "torch inductor compile worker"
        agent = (
            any(Path(a).name == "torchrun" for a in argv[:3])
            or re.search(r"-m\s+torch\.distributed\.(run|launch)\b", joined) is not None
        )
        if agent and "LOCAL_RANK" not in env:
            return "launcher agent (torchrun)"
    rank = env_rank(env)
    if config.ranks is not None and rank is not None and rank not in config.ranks:
        return f"rank {rank} not in --ranks"
    return None


def env_rank(env: Mapping[str, str]) -> int | None:
    """The process's rank from RANK, else LOCAL_RANK; None when neither is a number."""
    for key in ("RANK", "LOCAL_RANK"):
        value = env.get(key, "")
        if value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def claim_partition(root: Path, node: str, rank: int, pid: int) -> int:
    """Reserve node=<node>/rank=<rank> for this process; fall back to the pid if another process has it (a rank
    that is then unknown: `ktrace info` says so)."""
    from ktrace.model.layout import partition_dir  # stdlib-only: the hook must not pay for pyarrow here

    for candidate in dict.fromkeys((rank, pid)):
        folder = partition_dir(root, node, candidate)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(folder / ".owner", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.write(fd, str(pid).encode())
        os.close(fd)
        return candidate
    return pid


class CudaImportWatcher(importlib.abc.MetaPathFinder):
    """Calls `on_import` once, when a CUDA library starts importing (before it can initialize CUDA)."""

    def __init__(self, on_import: Any) -> None:
        self.on_import = on_import

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        """Never finds anything itself: it only watches."""
        if fullname in CUDA_LIBRARIES or fullname.partition(".")[0] in CUDA_LIBRARIES - {"cuda"}:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
                self.on_import(fullname)
        return None


def start_gpu(session: Any, trigger: str) -> None:
    """Start CUPTI in this process, or note in one line why not (never raises)."""
    from ktrace.tracer.cupti_backend import BackendUnavailable, CuptiBackend, load_cupti
    from ktrace.tracer.preflight import gpu_capture_problem

    problem = gpu_capture_problem()
    if problem is not None:
        session.note(problem)
        return
    try:
        backend = CuptiBackend(session.config, load_cupti(), on_window=_window_switch(session))
        for line in backend.start():
            session.note(line)
    except BackendUnavailable as exc:
        session.note(str(exc))
        return
    except Exception as exc:  # a tracer bug must not kill the job
        session.note(f"CUPTI failed to start ({type(exc).__name__}: {exc}): GPU activity not recorded")
        return
    session.backend = backend
    session.record_clock_pair()
    if not session.windows.active:
        backend.set_recording(False)


def _window_switch(session: Any) -> Any:
    def switch(on: bool) -> None:
        (session.windows.open if on else session.windows.close)()

    return switch


def install(environ: Mapping[str, str] | None = None) -> Any:
    """Start capturing this process if it runs under `ktrace run` and is selected; returns the session."""
    env = os.environ if environ is None else environ
    root = env.get(ENV_CAPTURE_DIR)
    if not root:
        return None
    config = CaptureConfig.from_environ(dict(env))
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if skip_reason(config, argv, env) is not None:
        return None
    # polars imports ThreadPoolExecutor lazily; that import fails once shutdown began (a short process
    # whose writer runs in atexit), unless the module is loaded already.
    import concurrent.futures.thread  # noqa: F401

    from ktrace.tracer import api
    from ktrace.tracer.session import CaptureSession

    pid = os.getpid()
    rank = env_rank(env)
    # A process without RANK/LOCAL_RANK is a single-process job's rank 0; only a second one (0 taken) gets its pid
    rank = claim_partition(Path(root), socket.gethostname(), 0 if rank is None else rank, pid)
    session = CaptureSession(Path(root), config, socket.gethostname(), rank)
    api.attach(session)
    atexit.register(session.close)
    os.register_at_fork(after_in_child=session.abandon)
    _close_on_sigterm(session)
    if config.gpu:
        sys.meta_path.insert(0, CudaImportWatcher(lambda name: start_gpu(session, name)))
    session.start()
    return session


def _close_on_sigterm(session: Any) -> None:
    """On SIGTERM (when the program has no handler of its own): write the capture, then die as before."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: Any) -> None:
        if session.closing:  # a second SIGTERM (`ktrace run` forwards what a group kill delivered already)
            return  # while the first is writing the capture: that one ends the process when done
        try:
            session.close()
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass
