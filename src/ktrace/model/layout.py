"""Names of the .ktrace folder layout; imports nothing heavy, so the tracer's startup hook can use it."""

from __future__ import annotations

import re
from pathlib import Path

PARTITION_META_FILE = "partition.json"
"""Per-process meta written by the tracer (health counts, notes); merged into the trace's meta on read."""


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def partition_dir(root: Path, node: str, rank: int) -> Path:
    """The folder of one (node, rank) partition: node=<host>/rank=<r>, the host made path-safe."""
    return root / f"node={_UNSAFE.sub('_', node) or 'localhost'}" / f"rank={rank}"
