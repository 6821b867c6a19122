"""Finish a `ktrace run` folder: wait for traced processes still running, Parquet from the capture streams,
and meta.json (written last: it marks the trace complete) with job, capture, health."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ktrace.model.live import owner_pid, pid_alive, recording_partitions
from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.run_result import RunResult

KEPT_ENVIRONMENT = (
    "CUDA_VISIBLE_DEVICES",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "NCCL_DEBUG",
    "OMP_NUM_THREADS",
    "PYTORCH_CUDA_ALLOC_CONF",
)
"""The only environment variables recorded (values scrubbed): never the whole environment."""


_STARTUP_GRACE_S = 2.0
"""How long a process of the run that has not started its tracer yet gets to start it (Python's startup)."""


def _owners(root: Path) -> set[int]:
    from ktrace.model.store import partitions

    return {pid for _, _, folder in partitions(root) if (pid := owner_pid(folder)) is not None}


def _processes_of_run(root: Path) -> set[int]:
    """Live processes started under this run (their environment names its capture folder)."""
    from ktrace.tracer.config import ENV_CAPTURE_DIR

    needle = f"\0{ENV_CAPTURE_DIR}={root.resolve()}\0".encode()
    pids = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    environ = b"\0" + f.read()
            except OSError:
                continue
            if needle in environ and pid_alive(int(entry.name)):
                pids.add(int(entry.name))
    return pids


def _let_tracers_start(root: Path) -> None:
    """Give processes of the run that have not claimed a partition yet a moment to do so (a detached child
    started just before the command ended), so that the wait below knows about them."""
    pending = _processes_of_run(root) - _owners(root)
    deadline = time.monotonic() + _STARTUP_GRACE_S
    while pending and time.monotonic() < deadline:
        time.sleep(0.1)
        owners = _owners(root)
        pending = {p for p in pending if p not in owners and pid_alive(p)}


def running_traced(root: Path) -> list[int]:
    """Pids of traced processes that are still running and have not closed their partition."""
    pids = [owner_pid(folder) for folder in recording_partitions(root)]
    return [pid for pid in pids if pid is not None and pid != os.getpid()]


def wait_for_traced(root: Path, timeout_s: float, say: Any) -> list[int]:
    """Wait up to `timeout_s` for traced processes still running (detached children); Ctrl-C stops waiting.
    Returns the pids still running after that."""
    if timeout_s > 0:
        _let_tracers_start(root)
    pids = running_traced(root)
    if not pids or timeout_s <= 0:
        return pids
    say(
        f"waiting up to {timeout_s:g} s for {len(pids)} traced process{'es' if len(pids) > 1 else ''} still "
        f"running (pid {', '.join(map(str, pids[:5]))}) to write their trace; Ctrl-C stops waiting"
    )
    deadline = time.monotonic() + timeout_s
    try:
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = running_traced(root)
    except KeyboardInterrupt:
        say("not waiting any longer")
        pids = running_traced(root)
    return pids


def _merge_partition_meta(
    root: Path, clock_pairs: dict[str, list[dict[str, int]]] | None = None
) -> tuple[dict[str, int], list[str], list[dict[str, Any]]]:
    """Sum every process's partition.json into one health dict and note list (`_clean_up` removes them); each
    process's clock pairs go into `clock_pairs` under "node/rank"."""
    from ktrace.model.capture import PARTITION_META_FILE
    from ktrace.model.secrets import scrub_text
    from ktrace.model.store import partitions

    health: dict[str, int] = {}
    notes: list[str] = []
    processes: list[dict[str, Any]] = []
    for node, rank, folder in partitions(root):
        owner = folder / ".owner"
        pid = owner.read_text().strip() if owner.exists() else ""
        part = folder / PARTITION_META_FILE
        if part.exists():
            try:
                data = json.loads(part.read_text())
            except ValueError:
                data = {"health": {"unreadable_partition_meta": 1}, "notes": []}
            for k, v in dict(data.get("health", {})).items():
                health[str(k)] = health.get(str(k), 0) + int(v)
            for line in [*data.get("notes", []), *_clock_pairs(data, f"{node}/{rank}", clock_pairs)]:
                text, _ = scrub_text(str(line))
                if text not in notes:
                    notes.append(text)
        elif rank >= 0:
            health["processes_not_closed"] = health.get("processes_not_closed", 0) + 1
        if rank >= 0:
            processes.append(
                {"node": node, "rank": rank, "pid": int(pid) if pid.isdigit() else None, "rows": _rows(folder)}
            )
    return health, notes, processes


def _clock_pairs(data: dict[str, Any], where: str, into: dict[str, list[dict[str, int]]] | None) -> list[str]:
    """Keep a partition's clock pairs in `into[where]`; a note if its GPU clock is off CLOCK_REALTIME."""
    from ktrace.model.clock import ClockPair
    from ktrace.tracer.clock_pairs import clock_note

    raw = data.get("clock_pairs")
    if not isinstance(raw, list):
        return []
    try:
        pairs = [ClockPair.from_dict(p) for p in raw if isinstance(p, dict)]
    except ValueError:
        return [f"{where}: unreadable clock pairs in partition.json"]
    if into is not None and pairs:
        into[where] = [p.to_dict() for p in pairs]
    note = clock_note(pairs, where)
    return [note] if note else []


def _rows(folder: Path) -> dict[str, int]:
    import pyarrow.parquet as pq

    return {p.stem: pq.read_metadata(p).num_rows for p in sorted(folder.glob("*.parquet"))}


def job_description(cmd: Sequence[str], exit_code: int, processes: list[dict[str, Any]]) -> dict[str, Any]:
    """The `job` of meta.json: command (scrubbed), exit code, world size, interpreter (no secrets)."""
    import os

    from ktrace.model.secrets import scrub_argv, scrub_environment

    command, _ = scrub_argv(cmd)
    env, _ = scrub_environment({k: os.environ[k] for k in KEPT_ENVIRONMENT if k in os.environ})
    return {
        "command": command,
        "exit_code": exit_code,
        "world_size": len(processes),
        "ranks": sorted(p["rank"] for p in processes),
        "processes": processes,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "environment": env,
    }


def _clean_up(root: Path) -> None:
    """Remove the capture's bookkeeping files once meta.json holds what they said."""
    from ktrace.model.capture import PARTITION_META_FILE
    from ktrace.model.outputs import CAPTURE_MARKER
    from ktrace.model.store import partitions

    for _, _, folder in partitions(root):
        (folder / ".owner").unlink(missing_ok=True)
        (folder / PARTITION_META_FILE).unlink(missing_ok=True)
        for stream in folder.glob("*.arrows"):  # begun by a process after finalize() converted its streams (or of
            stream.unlink(missing_ok=True)  # no table): read back, it would be "recovered" into the trace
    (root / CAPTURE_MARKER).unlink(missing_ok=True)


def finalize_run(
    root: Path,
    cmd: Sequence[str],
    config: CaptureConfig,
    exit_code: int,
    notes: list[str],
    node: str,
    samples: int,
    still_running: Sequence[int] = (),
    gpu_recorded: bool = True,
) -> RunResult:
    """Convert capture streams to Parquet, write meta.json and describe the run.

    Every file is replaced whole, and the bookkeeping files go only after meta.json is written: a failure (a
    full disk) leaves a capture that `ktrace.open` still recovers, and this can be run again. `gpu_recorded`
    False (no driver, no cupti-python) makes meta say so: gpu false, tracer "none".
    """
    from ktrace.model.layout import META_FILE
    from ktrace.model.outputs import write_atomically
    from ktrace.model.scrub import scrub_meta
    from ktrace.model.store import finalize
    from ktrace.model.trace import TraceMeta

    finalize(root)
    clock_pairs: dict[str, list[dict[str, int]]] = {}
    health, child_notes, processes = _merge_partition_meta(root, clock_pairs)
    if still_running:
        health["processes_still_running"] = len(still_running)
        notes = [
            *notes,
            f"{len(still_running)} traced process{'es' if len(still_running) > 1 else ''} still "
            f"running when the trace was finalized (pid {', '.join(map(str, still_running[:5]))}): "
            "what they record from now on is not in the trace",
        ]
    all_notes = list(dict.fromkeys([*notes, *child_notes]))
    gpu = config.gpu and gpu_recorded
    capture = {
        "kinds": list(config.kinds) if gpu else [],
        "gpu": gpu,
        "window": {
            "delay_s": config.delay_s,
            "duration_s": config.duration_s,
            "steps": list(config.steps) if config.steps else None,
            "capture_range": config.capture_range,
        },
        "interval_ms": config.interval_ms if config.counters else None,
        "counter_samples": samples,
        "t0_ns": config.t0_ns,
        "tracer": "cupti-python" if gpu else "none",
    }
    if clock_pairs:
        capture["clock_pairs"] = clock_pairs
    meta = TraceMeta(
        source="ktrace",
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        job=job_description(cmd, exit_code, processes),
        capture=capture,
        hosts=(node,),
        health=health,
        notes=tuple(all_notes),
    )
    write_atomically(root / META_FILE, scrub_meta(meta)[0].to_json().encode())
    _clean_up(root)
    return RunResult(exit_code=exit_code, root=root, processes=processes, notes=all_notes)
