"""Names of the .ktrace folder layout and rank lists; imports nothing heavy, so the tracer's startup hook can use it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ktrace.model.errors import TraceFormatError

PARTITION_META_FILE = "partition.json"
"""Per-process meta written by the tracer (health counts, notes); merged into the trace's meta on read."""
META_FILE = "meta.json"
"""The store's own meta, written last: a folder without it is an incomplete store."""


def is_store(path: Path) -> bool:
    """True if `path` looks like a .ktrace folder (here, not in store.py, so that telling formats apart does
    not load pyarrow.parquet, its file systems and compute: ~50 MB of a small Kineto trace's resident memory)."""
    return path.is_dir() and ((path / META_FILE).exists() or any(path.glob("node=*")))


_PART_RE = re.compile(r"^node=(?P<node>[^/]+)$")
_RANK_RE = re.compile(r"^rank=(?P<rank>-?[0-9]+)$")


def partitions(root: Path) -> Iterator[tuple[str, int, Path]]:
    """(node, rank, folder) of every partition under `root`, sorted (here, not in store.py: the rank-by-rank summary
    lists them before it imports polars and pyarrow)."""
    for node_dir in sorted(root.glob("node=*")):
        m = _PART_RE.match(node_dir.name)
        if not m or not node_dir.is_dir():
            continue
        for rank_dir in sorted(node_dir.glob("rank=*")):
            r = _RANK_RE.match(rank_dir.name)
            if r and rank_dir.is_dir():
                check_rank(int(r["rank"]), rank_dir)
                if r["rank"] != str(int(r["rank"])):  # "rank=007" beside "rank=7" would be one rank twice
                    raise TraceFormatError(f"{rank_dir}: not a partition name ktrace writes (rank={int(r['rank'])})")
                yield m["node"], int(r["rank"]), rank_dir


def check_rank(rank: int, folder: Path) -> None:
    """Ranks must fit the int32 rank column."""
    if not RANK_RANGE[0] <= rank <= RANK_RANGE[1]:
        raise TraceFormatError(f"{folder}: rank {rank} is out of range (ranks are 32-bit integers)")


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
MAX_NODE_CHARS = 200
"""Longer host names are cut (and told apart by a hash) so that node=<host> stays a legal file name."""


def partition_dir(root: Path, node: str, rank: int) -> Path:
    """The folder of one (node, rank) partition: node=<host>/rank=<r>, the host made path-safe and short."""
    safe = _UNSAFE.sub("_", node) or "localhost"
    if len(safe) > MAX_NODE_CHARS:
        import hashlib

        safe = f"{safe[: MAX_NODE_CHARS - 9]}~{hashlib.sha256(node.encode('utf-8', 'replace')).hexdigest()[:8]}"
    return root / f"node={safe}" / f"rank={rank}"


MAX_RANK = 2**31 - 1
"""Ranks are int32 in every table."""
RANK_RANGE = (-(2**31), MAX_RANK)
"""Ranks are int32 on disk and in memory (rank -1: a host's process-level partition)."""
MAX_RANKS_LISTED = 1 << 20
"""A rank list names at most this many ranks (0-2000000000 would need gigabytes)."""


def parse_rank_list(text: str) -> tuple[int, ...]:
    """A rank list such as "0,1,4-7" -> (0, 1, 4, 5, 6, 7), sorted and without repeats.

    Raises:
        ValueError: with a message fit to follow the option's name, for anything else.
    """
    ranks: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ValueError("expected a list such as 0,1,3 or 0-3") from None
        if not 0 <= first <= last <= MAX_RANK:
            raise ValueError(f"{part!r} is not a rank or an increasing range of ranks (0 to {MAX_RANK:,})")
        if len(ranks) + last - first + 1 > MAX_RANKS_LISTED:
            raise ValueError(f"names more than {MAX_RANKS_LISTED:,} ranks")
        ranks.extend(range(first, last + 1))
    if not ranks:
        raise ValueError("no rank given")
    return tuple(sorted(set(ranks)))
