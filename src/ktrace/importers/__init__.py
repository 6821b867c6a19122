"""Importers of foreign trace formats, and `load()`, which opens any supported trace by its shape."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ktrace.model.errors import ProgressFn, TraceFormatError, TraceNotFoundError, no_progress
from ktrace.model.trace import Trace


def detect(path: Path) -> str:
    """The format of `path`: "ktrace", "kineto" (file or folder of rank files) or "nsys"."""
    return locate(path)[0]


def locate(path: Path) -> tuple[str, Path]:
    """(format as in `detect`, the path its reader takes): a folder holding one nsys export gives that file."""
    kind, found, _ = locate_listed(path)
    return kind, found


def locate_listed(path: Path) -> tuple[str, Path, list[Path]]:
    """`locate`, and the Kineto rank files of a "kineto" folder (`kineto_stream.kineto_files`, [] otherwise):
    found by opening every .json/.json.gz file, which the folder's import then takes instead of listing again."""
    from ktrace.model.layout import is_store

    if not path.exists():
        raise TraceNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        if any(path.glob("node=*")):
            return "ktrace", path, []
        export = _nsys_export_in(path)
        if export is not None:
            return "nsys", export, []
        from ktrace.importers.kineto_stream import kineto_files

        files = kineto_files(path)
        if files:  # before is_store: a stray meta.json beside rank files does not make a store
            return "kineto", path, files
        if is_store(path):
            return "ktrace", path, []
        raise TraceFormatError(
            f"{path}: a folder with no trace in it (a .ktrace store, Kineto .json or .json.gz "
            "files, or one nsys .sqlite export)"
        )
    with path.open("rb") as f:
        head = f.read(16)
    if head.startswith(b"SQLite format 3"):
        return "nsys", path, []
    if head.startswith(b"\x1f\x8b") or head.lstrip()[:1] in (b"{", b"["):
        return "kineto", path, []
    raise TraceFormatError(f"{path}: not a trace ktrace can read (expected .ktrace, Kineto JSON or nsys SQLite)")


def _nsys_export_in(folder: Path) -> Path | None:
    """The one nsys .sqlite export in a folder that holds no Kineto trace (None when it holds none).

    Kineto traces are those `kineto_stream.kineto_files` finds, the same ones the Kineto importer reads.

    Raises:
        TraceFormatError: several .sqlite exports, or exports beside Kineto traces: no way to choose.
    """
    from ktrace.importers.kineto_stream import kineto_files

    exports = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(".sqlite"))
    if not exports:
        return None
    shown = ", ".join(p.name for p in exports[:3]) + (" ..." if len(exports) > 3 else "")
    kineto = kineto_files(folder)
    if kineto:
        raise TraceFormatError(
            f"{folder}: holds both Kineto traces ({kineto[0].name}"
            f"{' ...' if len(kineto) > 1 else ''}) and nsys exports ({shown}): open one of them"
        )
    if len(exports) > 1:
        raise TraceFormatError(f"{folder}: {len(exports)} nsys exports ({shown}): open one of them")
    return exports[0]


def load(path: str | os.PathLike[str], *, progress: ProgressFn = no_progress, **options: Any) -> Trace:
    """Open any supported trace as a Trace (foreign formats are imported on the fly); a folder holding one
    nsys .sqlite export (and no Kineto trace) opens that export. `with_ops=False` leaves the ops table empty
    (Kineto: cpu_op and python_function not decoded; a store: its ops files not read). One big Kineto file is read
    through a temporary store, in bounded memory (importers.kineto_spill)."""
    kind, p, files = locate_listed(Path(path))
    if kind == "ktrace":
        from ktrace.model.store import read

        return read(p, skip=("ops",) if options.get("with_ops") is False else ())
    if kind == "nsys":
        from ktrace.importers.nsys import import_nsys

        return import_nsys(p, progress=progress, **options)
    if p.is_dir():
        from ktrace.importers.kineto import import_kineto

        return import_kineto(p, progress=progress, files=files, **options)
    from ktrace.importers.kineto_spill import load_kineto_file  # (a big file through a temporary store)

    return load_kineto_file(p, progress=progress, **options)
