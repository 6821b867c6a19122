"""Names of the .ktrace folder layout and rank lists; imports nothing heavy, so the tracer's startup hook can use it."""

from __future__ import annotations

import re
from pathlib import Path

PARTITION_META_FILE = "partition.json"
"""Per-process meta written by the tracer (health counts, notes); merged into the trace's meta on read."""


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def partition_dir(root: Path, node: str, rank: int) -> Path:
    """The folder of one (node, rank) partition: node=<host>/rank=<r>, the host made path-safe."""
    return root / f"node={_UNSAFE.sub('_', node) or 'localhost'}" / f"rank={rank}"


def parse_rank_list(text: str) -> tuple[int, ...]:
    """A rank list such as "0,1,4-7" -> (0, 1, 4, 5, 6, 7), sorted and without repeats.

    Raises:
        ValueError: with a message fit to follow the option's name, for anything else.
    """
    ranks: list[int] = []
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            lo, dash, hi = part.partition("-")
            ranks.extend(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    except ValueError:
        raise ValueError("expected a list such as 0,1,3 or 0-3") from None
    if not ranks:
        raise ValueError("no rank given")
    return tuple(sorted(set(ranks)))
