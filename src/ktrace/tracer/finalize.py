"""Finish a `ktrace run` folder: Parquet from the capture streams, and meta.json with job, capture, health."""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.launcher import RunResult

KEPT_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "NCCL_DEBUG",
                    "OMP_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF")
"""The only environment variables recorded (values scrubbed): never the whole environment."""


def _merge_partition_meta(root: Path) -> tuple[dict[str, int], list[str], list[dict[str, Any]]]:
    """Sum every process's partition.json into one health dict and note list; remove the files."""
    from ktrace.model.capture import PARTITION_META_FILE
    from ktrace.model.secrets import scrub_text
    from ktrace.model.store import partitions

    health: dict[str, int] = {}
    notes: list[str] = []
    processes: list[dict[str, Any]] = []
    for node, rank, folder in partitions(root):
        owner = folder / ".owner"
        pid = owner.read_text().strip() if owner.exists() else ""
        owner.unlink(missing_ok=True)
        part = folder / PARTITION_META_FILE
        if part.exists():
            try:
                data = json.loads(part.read_text())
            except ValueError:
                data = {"health": {"unreadable_partition_meta": 1}, "notes": []}
            for k, v in dict(data.get("health", {})).items():
                health[str(k)] = health.get(str(k), 0) + int(v)
            for line in data.get("notes", []):
                text, _ = scrub_text(str(line))
                if text not in notes:
                    notes.append(text)
            part.unlink()
        elif rank >= 0:
            health["processes_not_closed"] = health.get("processes_not_closed", 0) + 1
        if rank >= 0:
            processes.append({"node": node, "rank": rank, "pid": int(pid) if pid.isdigit() else None,
                              "rows": _rows(folder)})
    return health, notes, processes


def _rows(folder: Path) -> dict[str, int]:
    import pyarrow.parquet as pq

    return {p.stem: pq.read_metadata(p).num_rows for p in sorted(folder.glob("*.parquet"))}


def job_description(cmd: Sequence[str], exit_code: int, processes: list[dict[str, Any]]) -> dict[str, Any]:
    """The `job` of meta.json: command (scrubbed), exit code, world size, interpreter (no secrets)."""
    import os

    from ktrace.model.secrets import scrub_environment, scrub_value

    command, _ = scrub_value("command", list(cmd))
    env, _ = scrub_environment({k: os.environ[k] for k in KEPT_ENVIRONMENT if k in os.environ})
    return {
        "command": command, "exit_code": exit_code, "world_size": len(processes),
        "ranks": sorted(p["rank"] for p in processes), "processes": processes,
        "python": sys.version.split()[0], "platform": platform.platform(), "environment": env,
    }


def finalize_run(root: Path, cmd: Sequence[str], config: CaptureConfig, exit_code: int, notes: list[str],
                 node: str, samples: int) -> RunResult:
    """Convert capture streams to Parquet, write meta.json and describe the run."""
    from ktrace.model.store import META_FILE, finalize
    from ktrace.model.trace import TraceMeta

    finalize(root)
    health, child_notes, processes = _merge_partition_meta(root)
    all_notes = list(dict.fromkeys([*notes, *child_notes]))
    capture = {
        "kinds": list(config.kinds) if config.gpu else [], "gpu": config.gpu,
        "window": {"delay_s": config.delay_s, "duration_s": config.duration_s,
                   "steps": list(config.steps) if config.steps else None, "capture_range": config.capture_range},
        "interval_ms": config.interval_ms if config.counters else None, "counter_samples": samples,
        "t0_ns": config.t0_ns, "tracer": "cupti-python",
    }
    meta = TraceMeta(source="ktrace", created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                     job=job_description(cmd, exit_code, processes), capture=capture, hosts=(node,),
                     health=health, notes=tuple(all_notes))
    (root / META_FILE).write_text(meta.to_json())
    return RunResult(exit_code=exit_code, root=root, processes=processes, notes=all_notes)
