"""Pure model of the host/device tree: node -> rank -> CPU threads / GPUs -> tracks, children built lazily.

Busy shares are the overview's estimate (marked "~") until the tracks are sorted, then the exact union of each
stream's slices; a GPU shows its busiest stream until the summary's utilization.busy_time gives its exact busy
time. Items whose label can change carry `relabel`, which the widget calls when better values arrive.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ktrace.exporters.track_layout import ALLOCATED_METRIC
from ktrace.tui.track_types import Track
from ktrace.tui.tracks import TrackIndex


@dataclass
class TreeItem:
    """One tree node: its label, the timeline tracks under it and a function building its children."""

    label: str
    track_ids: list[int]
    """Every track under this node (toggled together when the node is selected)."""
    expand: Callable[[], list[TreeItem]] | None = None
    """Builds the children on first expansion; None for a leaf."""
    key: str = ""
    """Stable id (tests and selection)."""
    children: list[TreeItem] = field(default_factory=list)
    relabel: Callable[[], str] | None = None
    """The label from the index's current values (None: the label never changes)."""


def _pct(busy: int, span: int, estimated: bool = False) -> str:
    return f"{'~' if estimated else ''}{100 * busy / max(1, span):.1f}%"


def device_busy(summary: Any) -> dict[tuple[str, int, int], int]:
    """(node, rank, device) -> exact busy ns from a ktrace.analysis.summary.Summary's busy frame (per device)."""
    busy = getattr(summary, "busy", None)
    if busy is None or busy.height == 0 or not {"node", "rank", "device", "busy_ns"} <= set(busy.columns):
        return {}
    rows = busy.select(pl.col("node").cast(pl.String), "rank", "device", "busy_ns").iter_rows()
    return {(str(n), int(r), int(d)): int(b) for n, r, d, b in rows if r is not None and d is not None}


def tree_roots(index: TrackIndex) -> list[TreeItem]:
    """One root per node (host), children lazily: ranks, then threads and GPUs, then tracks."""
    by_node: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(index.tracks):
        by_node[t.node].append(i)
    return [
        TreeItem(
            f"{node} ({_ranks_text(index, ids)}{len(ids)} tracks)", ids, _node_children(index, node, ids), key=node
        )
        for node, ids in sorted(by_node.items())
    ]


def _ranks_text(index: TrackIndex, ids: list[int]) -> str:
    """ "8 ranks · " for a host with several ranks, "" for one."""
    n = len({index.tracks[i].rank for i in ids} - {-1})
    return f"{n:,} ranks · " if n > 1 else ""


RANK_BLOCK = 64
"""A host with more ranks than this lists them in blocks of this many ("ranks 0-63"), each expanded on demand: a
tree line per rank of a 1,024-rank host would bury everything else."""


def _node_children(index: TrackIndex, node: str, ids: list[int]) -> Callable[[], list[TreeItem]]:
    def build() -> list[TreeItem]:
        by_rank: dict[int, list[int]] = defaultdict(list)
        for i in ids:
            by_rank[index.tracks[i].rank].append(i)
        ranks = sorted(r for r in by_rank if r >= 0)
        if len(ranks) <= RANK_BLOCK:
            return _rank_items(index, node, by_rank, sorted(by_rank))
        items = [_rank_items(index, node, by_rank, [-1])[0]] if -1 in by_rank else []
        for at in range(0, len(ranks), RANK_BLOCK):
            block = ranks[at : at + RANK_BLOCK]
            bids = [i for r in block for i in by_rank[r]]
            items.append(
                TreeItem(
                    f"ranks {block[0]}-{block[-1]} ({len(block)} ranks)",
                    bids,
                    _block_children(index, node, by_rank, block),
                    key=f"{node}/ranks{block[0]}-{block[-1]}",
                )
            )
        return items

    return build


def _block_children(
    index: TrackIndex, node: str, by_rank: dict[int, list[int]], block: list[int]
) -> Callable[[], list[TreeItem]]:
    return lambda: _rank_items(index, node, by_rank, block)


def _rank_items(index: TrackIndex, node: str, by_rank: dict[int, list[int]], ranks: list[int]) -> list[TreeItem]:
    """One item per rank (the host's counters for rank -1)."""
    items = []
    for rank in ranks:
        rids = by_rank[rank]
        if rank < 0:
            items.append(TreeItem(f"node counters ({len(rids)})", rids, _leaves(index, rids), key=f"{node}/counters"))
            continue
        on_gpu = index.gpu_annotations()
        host = [i for i in rids if _gpu_of(on_gpu, index.tracks[i], index.tracks[i].key.split("/")) is None]
        pids = sorted({_pid(index.tracks[i]) for i in host} - {""}, key=natural_key)
        label = f"rank {rank}" + (f" · pid {', '.join(pids)}" if pids else "")
        items.append(TreeItem(label, rids, _rank_children(index, rids), key=f"{node}/{rank}"))
    return items


def _key_parts(track: Track) -> list[str]:
    """node, rank, then the rest of a track key; the node (a host name from the trace) may itself hold "/"."""
    return [track.node, *track.key[len(track.node) + 1 :].split("/")]


def _pid(track: Track) -> str:
    parts = _key_parts(track)
    return parts[2][1:] if len(parts) > 2 and parts[2].startswith("p") else ""


def _rank_children(index: TrackIndex, ids: list[int]) -> Callable[[], list[TreeItem]]:
    def build() -> list[TreeItem]:
        threads: dict[str, list[int]] = defaultdict(list)
        gpus: dict[str, list[int]] = defaultdict(list)
        counters: list[int] = []
        on_gpu = index.gpu_annotations()
        for i in ids:
            t = index.tracks[i]
            parts = _key_parts(t)
            if t.kind == "stream":
                gpus[parts[2]].append(i)
            elif t.kind == "counter":
                counters.append(i)
            elif (device := _gpu_of(on_gpu, t, parts)) is not None:
                gpus[f"gpu{device}"].append(i)  # Kineto's GPU annotations (pid = device, tid = stream)
            else:
                threads["/".join(parts[2:4])].append(i)
        items = [_thread_item(index, key, tids) for key, tids in sorted(threads.items())]
        items += [_gpu_item(index, key, gids) for key, gids in sorted(gpus.items(), key=lambda kv: int(kv[0][3:]))]
        if counters:
            items.append(TreeItem(f"counters ({len(counters)})", counters, _leaves(index, counters)))
        return items

    return build


def _gpu_of(on_gpu: dict[tuple[str, int, int, int], int], track: Track, parts: list[str]) -> int | None:
    if track.kind != "ranges" or len(parts) < 4 or not (parts[2][1:].isdigit() and parts[3][1:].isdigit()):
        return None
    return on_gpu.get((track.node, track.rank, int(parts[2][1:]), int(parts[3][1:])))


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key reading digit runs as numbers: stream 7 before stream 22 (not "22" < "7")."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _thread_item(index: TrackIndex, key: str, ids: list[int]) -> TreeItem:
    first = index.tracks[ids[0]]
    pid, tid = (int(p[1:]) for p in key.split("/"))
    names = (
        index.trace.threads.filter((pl.col("pid") == pid) & (pl.col("tid") == tid) & (pl.col("rank") == first.rank))[
            "name"
        ]
        .cast(pl.String)
        .to_list()
    )
    # Kineto names a thread "thread 59811 (python3)": said once, not "thread 59811 thread 59811 (python3)"
    own = (names[0] or "").removeprefix(f"thread {tid}").strip() if names else ""
    name = f" {own}" if own else ""
    api = sum(index.tracks[i].size for i in ids if index.tracks[i].kind == "api")
    ranges = sum(index.tracks[i].size for i in ids if index.tracks[i].kind == "ranges")
    label = f"thread {tid}{name} · {api:,} API · {ranges:,} ranges"
    return TreeItem(label, ids, _leaves(index, ids), key=f"{first.node}/{first.rank}/{key}")


def _gpu_item(index: TrackIndex, key: str, ids: list[int]) -> TreeItem:
    first = index.tracks[ids[0]]
    device = int(key[3:])
    names = index.trace.devices.filter((pl.col("device") == device) & (pl.col("rank") == first.rank))
    name = f" · {names['name'].cast(pl.String)[0]}" if names.height else ""
    kernels = sum(index.tracks[i].kernel_count for i in ids)
    head = f"GPU {device}{name} · {kernels:,} kernels · {len(ids)} streams · "

    def label() -> str:
        span = index.t1 - index.t0
        exact = index.device_busy.get((first.node, first.rank, device))
        if exact is not None:
            return head + f"busy {_pct(exact, span)}"
        tracks = [index.tracks[i] for i in ids]
        busiest = max(t.busy_ns for t in tracks)
        return head + f"busiest stream {_pct(busiest, span, not all(t.ready for t in tracks))}"

    return TreeItem(label(), ids, _leaves(index, ids), key=f"{first.node}/{first.rank}/{key}", relabel=label)


def _leaves(index: TrackIndex, ids: list[int]) -> Callable[[], list[TreeItem]]:
    def build() -> list[TreeItem]:
        out = []
        for i in sorted(
            ids, key=lambda i: (ROW_ORDER.get(index.tracks[i].kind, len(ROW_ORDER)), natural_key(index.tracks[i].key))
        ):
            t = index.tracks[i]
            relabel = _stream_label(index, i) if t.kind == "stream" else None
            if relabel is not None:
                label = relabel()
            elif t.kind == "counter":
                label = f"{t.label} ({t.size:,} samples)"
            else:
                label = f"{index.title(i).split(' · ')[0]} ({t.size:,})"
            out.append(TreeItem(label, [i], None, key=t.key, relabel=relabel))
        return out

    return build


def _stream_label(index: TrackIndex, track_id: int) -> Callable[[], str]:
    """A stream leaf's label, read from the index each time (its track is replaced once sorted)."""

    def label() -> str:
        t = index.tracks[track_id]
        kernels = t.kernel_count
        return (
            f"stream {t.key.rsplit('/s', 1)[1]} · {kernels:,} kernels · {t.size - kernels:,} copies"
            f" · busy {_pct(t.busy_ns, index.t1 - index.t0, not t.ready)}"
        )

    return label


ROW_ORDER = {"ranges": 0, "ops": 1, "api": 2, "stream": 3}
"""Order of a thread's or GPU's tracks, in the tree's leaves and the timeline's first rows alike."""


MEMORY_ROW = ALLOCATED_METRIC
"""The first GPU's allocated-memory counter (the allocator's memory timeline) is shown at first, after utilization."""
