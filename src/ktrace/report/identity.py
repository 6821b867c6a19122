"""What a report is about: the trace's files, hosts and GPU models, so a saved report says which run it shows."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ktrace.model.trace import Trace

MAX_FILES = 8
"""Files named in the report header; more are counted."""


def trace_identity(trace: Trace) -> dict[str, Any]:
    """{"files", "more_files", "folder", "hosts", "gpus"}: each empty when the trace lacks it.

    "gpus" lists each GPU model once with its count (["NVIDIA A100-SXM4-80GB ×8"]), from the devices table.
    """
    job = trace.meta.job
    files = [str(f) for f in (job.get("source_files") or job.get("files") or [])]
    gpus: Counter[str] = Counter()
    if trace.devices.height and "name" in trace.devices.columns:
        for name in trace.devices["name"].cast(str).to_list():
            if name:
                gpus[name] += 1
    return {"files": files[:MAX_FILES], "more_files": max(0, len(files) - MAX_FILES),
            "folder": str(job.get("folder") or ""), "hosts": list(trace.meta.hosts),
            "gpus": [f"{name} ×{n}" if n > 1 else name for name, n in sorted(gpus.items())]}


def identity_line(identity: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label, text) pairs for a report header: trace files, hosts, GPUs; empty parts left out."""
    if not identity:
        return []
    files = ", ".join(identity.get("files") or [])
    if identity.get("more_files"):
        files += f" and {identity['more_files']} more"
    if identity.get("folder"):
        files = f"{identity['folder']}/: {files}" if files else identity["folder"]
    parts = [("trace", files), ("host", ", ".join(identity.get("hosts") or [])),
             ("GPU", ", ".join(identity.get("gpus") or []))]
    return [(k, v) for k, v in parts if v]
