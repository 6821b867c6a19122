"""What each output ktrace writes is, and how to recognise one ktrace wrote: what `--force` may replace.

An `OutputFormat` names an output in messages and says which existing paths are ktrace's own work: a store holding
nothing but store entries (`STORE`), a tables folder holding only its table files (`table_folder`), a file that
opens with the bytes of its format (after gunzip). `outputs.Output` checks a target against one (stdlib only: the
tracer's traced processes import the model).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

CAPTURE_MARKER = ".capture"
"""Left at a store's root by the capture writer while `ktrace run` records: the folder is a capture, readable
(recovered) even before meta.json is written. Removed once meta.json is written."""
_TEMP_PREFIX = ".ktrace-tmp-"


@dataclass(frozen=True)
class OutputFormat:
    """What an output is, and how to recognise one ktrace wrote."""

    what: str
    """Its name in messages: "a .ktrace store", "a Perfetto trace"."""
    folder: bool = False
    opening: tuple[bytes, ...] = ()
    """Files: the bytes one of which a file of this format starts with (after gunzip)."""
    contains: bytes = b""
    """Files: bytes that must also appear in the first 64 kB."""
    entries: frozenset[str] = field(default_factory=frozenset)
    """Folders other than stores: the only file names the folder may hold."""

    def foreign_part(self, path: Path) -> str | None:
        """None if `path` (which exists) is something ktrace wrote in this format, else what is foreign in it."""
        if self.folder:
            if not path.is_dir():
                return "it is a file"
            if self is STORE:
                return _foreign_store_entry(path)
            for entry in path.iterdir():
                if entry.name not in self.entries or entry.is_symlink() or not entry.is_file():
                    return f"{entry.name} is not a table file ktrace writes"
            return None
        if path.is_dir():
            return "it is a folder"
        head = _opening_bytes(path)
        if not head:
            return None  # an empty file holds nothing to lose
        if not head.startswith(self.opening) or self.contains not in head:
            return f"it is not {self.what}"
        return None


STORE = OutputFormat("a .ktrace store", folder=True)
PERFETTO = OutputFormat("a Perfetto trace", opening=(b"\x0a",))
CHROME = OutputFormat("a ktrace Chrome JSON export", opening=(b'{"traceEvents":[',))
HTML_REPORT = OutputFormat(
    "a ktrace HTML report", opening=(b'<!DOCTYPE html><html lang="en"><head>',), contains=b"<title>"
)
MD_REPORT = OutputFormat("a ktrace Markdown report", opening=(b"# ",), contains=b"\n## Training job summary\n")
JSON_REPORT = OutputFormat("a ktrace JSON report", opening=(b'{\n "',), contains=b'"rule_docs"')


def table_folder(tables: Sequence[str], extension: str) -> OutputFormat:
    """The format of an `export -f parquet|csv` folder: one `<table>.<extension>` file per table."""
    return OutputFormat(
        f"a folder of ktrace {extension} tables", folder=True, entries=frozenset(f"{t}.{extension}" for t in tables)
    )


_TABLE_FILE = re.compile(r"^[a-z_]+\.(parquet|arrows)(\.tmp)?$")
_RANK_ENTRIES = {"partition.json", "partition.json.tmp", ".owner"}
"""`.tmp` names: what ktrace before atomic_path in the store left when killed mid-finalize (still its own)."""


def _foreign_store_entry(root: Path) -> str | None:
    """None if every entry under `root` is one a store holds (meta.json, node=*/rank=*/<table>.parquet, capture
    files), else the first entry that is not."""
    for entry in root.iterdir():
        name = entry.name
        if entry.is_symlink():
            return f"{name} is a symbolic link"
        if entry.is_file() and (name in ("meta.json", CAPTURE_MARKER) or name.startswith(_TEMP_PREFIX)):
            # a .ktrace-tmp-* file is ktrace's own, left by a writer killed before its rename
            if name == "meta.json" and not _is_ktrace_meta(entry):
                return "its meta.json is not one ktrace wrote"
            continue
        if not (name.startswith("node=") and entry.is_dir()):
            return f"{name} is not part of a .ktrace store"
        for rank_dir in entry.iterdir():
            if not (rank_dir.name.startswith("rank=") and rank_dir.is_dir()) or rank_dir.is_symlink():
                return f"{name}/{rank_dir.name} is not part of a .ktrace store"
            for f in rank_dir.iterdir():
                ours = _TABLE_FILE.match(f.name) or f.name in _RANK_ENTRIES or f.name.startswith(_TEMP_PREFIX)
                if f.is_symlink() or not f.is_file() or not ours:
                    return f"{name}/{rank_dir.name}/{f.name} is not part of a .ktrace store"
    return None


def _is_ktrace_meta(path: Path) -> bool:
    try:
        meta = json.loads(path.read_bytes()[: 1 << 20])
    except (ValueError, RecursionError, OSError):
        return False
    return isinstance(meta, dict) and "schema_version" in meta and "source" in meta


def _opening_bytes(path: Path, size: int = 1 << 16) -> bytes:
    try:
        with path.open("rb") as f:
            head = f.read(size)
            if head[:2] == b"\x1f\x8b":
                f.seek(0)
                with gzip.GzipFile(fileobj=f) as gz:
                    head = gz.read(size)
    except (OSError, EOFError, gzip.BadGzipFile):
        return b"\0unreadable"
    return head
