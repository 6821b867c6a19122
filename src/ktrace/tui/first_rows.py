"""The timeline's first rows: what a trace opens on, chosen so that the GPU rows holding the most GPU time are on
the first screen whatever the terminal's height.

Every track of the first rank is shown when they all fit. When they do not, the GPU streams that hold the most GPU
time keep at least half of the rows (all of them when the CPU rows are few) and the CPU rows most worth seeing take
the rest: the threads' CUDA API and top-level range rows first, then operators, then deeper range levels and
Kineto's GPU annotations. With several ranks every rank's busiest stream (by GPU time) is shown after the first
rank's top range row and CUDA API, and further streams, busiest first, take any rows left. The rows chosen are
shown in the tree's order (ranges, operators, API, streams), so the GPU rows come last but never past the screen.
No textual here.
"""

from __future__ import annotations

from ktrace.tui.tracks import TrackIndex
from ktrace.tui.tree_model import MEMORY_ROW, ROW_ORDER, natural_key

DEFAULT_LIMIT = 14
"""Rows shown at first when the caller does not say how many fit."""


def default_rows(index: TrackIndex, limit: int = DEFAULT_LIMIT) -> list[int]:
    """Tracks shown at first (at most `limit`, the rows the first screen has): the first rank's rows with its
    busiest streams among them, or with several ranks every rank's busiest stream; plus GPU utilization and the
    first GPU's allocated memory (when the trace has them)."""
    ranks = sorted({(t.node, t.rank) for t in index.tracks if t.rank >= 0})
    if not ranks:
        return list(range(min(limit, len(index.tracks))))
    util = [i for i, t in enumerate(index.tracks) if t.kind == "counter" and t.label.startswith("gpu.util")][:1]
    util += [i for i, t in enumerate(index.tracks) if t.kind == "counter" and t.label.startswith(MEMORY_ROW)][:1]
    util = util[: max(0, limit - 1)]  # a row for the GPU first
    room = max(1, limit - len(util))
    if len(ranks) > 1:
        rows = _many_ranks(index, ranks, room)
    else:
        node, rank = ranks[0]
        mine = [i for i, t in enumerate(index.tracks) if (t.node, t.rank) == (node, rank) and t.kind in ROW_ORDER]
        rows = _one_rank(index, mine, room)
    return (rows + util)[:limit]


def _tree_order(index: TrackIndex, ids: list[int]) -> list[int]:
    return sorted(ids, key=lambda i: (ROW_ORDER[index.tracks[i].kind], natural_key(index.tracks[i].key)))


def _busiest_first(index: TrackIndex, streams: list[int]) -> list[int]:
    """Streams by GPU time (busy ns; the overview's estimate until the tracks are sorted), then kernel count."""

    def key(i: int) -> tuple[int, int, tuple[object, ...]]:
        t = index.tracks[i]
        return (-t.busy_ns, -t.kernel_count, natural_key(t.key))

    return sorted(streams, key=key)


def _one_rank(index: TrackIndex, mine: list[int], room: int) -> list[int]:
    """The first rank's rows in `room` rows: all of them if they fit, else its busiest streams and best CPU rows."""
    if len(mine) <= room:
        return _tree_order(index, mine)
    streams = _busiest_first(index, [i for i in mine if index.tracks[i].kind == "stream"])
    cpu = sorted((i for i in mine if index.tracks[i].kind != "stream"), key=lambda i: _cpu_rank(index, i))
    n_gpu = min(len(streams), max(1, room // 2, room - len(cpu)))
    return _tree_order(index, streams[:n_gpu] + cpu[: room - n_gpu])


def _cpu_rank(index: TrackIndex, track_id: int) -> tuple[int, int, tuple[object, ...]]:
    """Which CPU rows go first when not all fit: CUDA API and top-level ranges, operators, then deeper ranges and
    Kineto's GPU annotations."""
    track = index.tracks[track_id]
    depth = track.key.rsplit("/nvtx", 1)[1] if track.kind == "ranges" and "/nvtx" in track.key else ""
    on_gpu = track.kind == "ranges" and index.title_parts(track_id)[1].startswith("GPU")
    if track.kind == "api" or (track.kind == "ranges" and depth in ("", "0") and not on_gpu):
        tier = 0
    elif track.kind == "ops":
        tier = 1
    else:
        tier = 2
    return (tier, -track.size, natural_key(track.key))


def _many_ranks(index: TrackIndex, ranks: list[tuple[str, int]], room: int) -> list[int]:
    """The first rank's top range row and CUDA API, every rank's busiest stream, then more streams, busiest first."""
    node, rank = ranks[0]
    head = []
    for kind in ("ranges", "api"):
        own = _tree_order(index, index.tracks_of(node, rank, kind))
        if own:
            head.append(own[0])
    busiest: list[int] = []
    rest: list[int] = []
    for n, r in ranks:
        streams = _busiest_first(index, index.tracks_of(n, r, "stream"))
        busiest += streams[:1]
        rest += streams[1:]
    head = head[: max(0, room - 1)]  # a row for a stream at least
    picked = busiest[: room - len(head)]
    picked += _busiest_first(index, rest)[: room - len(head) - len(picked)]
    order = {key: n for n, key in enumerate(ranks)}
    picked.sort(key=lambda i: (order[(index.tracks[i].node, index.tracks[i].rank)], natural_key(index.tracks[i].key)))
    return head + picked
