"""Importers of foreign trace formats, and `load()`, which opens any supported trace by its shape."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ktrace.model.errors import ExitCode, ProgressFn, TraceFormatError, no_progress
from ktrace.model.trace import Trace


def detect(path: Path) -> str:
    """The format of `path`: "ktrace", "kineto" (file or folder of rank files) or "nsys"."""
    from ktrace.model.store import is_store

    if not path.exists():
        raise TraceFormatError(f"{path}: no such file or directory", ExitCode.NOT_FOUND)
    if path.is_dir():
        if is_store(path):
            return "ktrace"
        if _nsys_export_in(path) is not None:
            return "nsys"
        if any(p.name.endswith((".json", ".json.gz")) for p in path.iterdir()):
            return "kineto"
        raise TraceFormatError(f"{path}: a folder with neither a .ktrace store nor Kineto .json files")
    with path.open("rb") as f:
        head = f.read(16)
    if head.startswith(b"SQLite format 3"):
        return "nsys"
    if head.startswith(b"\x1f\x8b") or head.lstrip()[:1] in (b"{", b"["):
        return "kineto"
    raise TraceFormatError(f"{path}: not a trace ktrace can read (expected .ktrace, Kineto JSON or nsys SQLite)")


def _nsys_export_in(folder: Path) -> Path | None:
    """The one nsys .sqlite export in a folder that holds no Kineto trace file (None otherwise).

    Raises:
        TraceFormatError: several .sqlite exports and no way to choose.
    """
    names = [p.name for p in folder.iterdir() if p.is_file()]
    if any(".pt.trace." in n or (n.endswith((".json", ".json.gz")) and "trace" in n.lower()) for n in names):
        return None
    exports = sorted(folder / n for n in names if n.endswith(".sqlite"))
    if len(exports) > 1:
        raise TraceFormatError(f"{folder}: {len(exports)} nsys exports ({', '.join(p.name for p in exports[:3])}"
                               f"{' ...' if len(exports) > 3 else ''}): open one of them")
    return exports[0] if exports else None


def load(path: str | os.PathLike[str], *, progress: ProgressFn = no_progress, **options: Any) -> Trace:
    """Open any supported trace as a Trace (foreign formats are imported on the fly); a folder holding one
    nsys .sqlite export (and no Kineto trace) opens that export."""
    p = Path(path)
    kind = detect(p)
    if kind == "nsys" and p.is_dir():
        p = _nsys_export_in(p) or p
    if kind == "ktrace":
        from ktrace.model.store import read

        return read(p)
    if kind == "nsys":
        from ktrace.importers.nsys import import_nsys

        return import_nsys(p, progress=progress, **options)
    from ktrace.importers.kineto import import_kineto

    return import_kineto(p, progress=progress, **options)
