"""What a report is about: the trace's files, hosts and GPU models, so a saved report says which run it shows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ktrace.model.trace import Trace

MAX_FILES = 8
"""Files named in the report header; more are counted."""


@dataclass(frozen=True)
class TraceIdentity:
    """The trace a report shows; each part empty when the trace lacks it."""

    files: tuple[str, ...]
    """The first MAX_FILES source files."""
    more_files: int
    """Source files beyond those."""
    folder: str
    hosts: tuple[str, ...]
    gpus: tuple[str, ...]
    """Each GPU model once with its count ("NVIDIA A100-SXM4-80GB ×8"), from the devices table."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's "trace" object: {"files", "more_files", "folder", "hosts", "gpus"}."""
        return {
            "files": list(self.files),
            "more_files": self.more_files,
            "folder": self.folder,
            "hosts": list(self.hosts),
            "gpus": list(self.gpus),
        }


def trace_identity(trace: Trace) -> TraceIdentity:
    """The files, hosts and GPU models of `trace`."""
    job = trace.meta.job
    files = [str(f) for f in (job.get("source_files") or job.get("files") or [])]
    gpus: Counter[str] = Counter()
    if trace.devices.height and "name" in trace.devices.columns:
        for name in trace.devices["name"].cast(str).to_list():
            if name:
                gpus[name] += 1
    return TraceIdentity(
        files=tuple(files[:MAX_FILES]),
        more_files=max(0, len(files) - MAX_FILES),
        folder=str(job.get("folder") or ""),
        hosts=tuple(trace.meta.hosts),
        gpus=tuple(f"{name} ×{n}" if n > 1 else name for name, n in sorted(gpus.items())),
    )


def identity_line(identity: TraceIdentity) -> list[tuple[str, str]]:
    """(label, text) pairs for a report header: trace files, hosts, GPUs; empty parts left out."""
    files = ", ".join(identity.files)
    if identity.more_files:
        files += f" and {identity.more_files} more"
    if identity.folder:
        files = f"{identity.folder}/: {files}" if files else identity.folder
    parts = [("trace", files), ("host", ", ".join(identity.hosts)), ("GPU", ", ".join(identity.gpus))]
    return [(k, v) for k, v in parts if v]
