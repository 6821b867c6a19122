"""What the Perfetto and Chrome JSON exporters share, free of protobuf: counter track titles, and overlap lanes
that keep every slice on a track properly nested."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]

COUNTER_TITLES = {
    "cpu.util": "CPU utilization", "cpu.core.util": "CPU core {i} utilization", "cpu.iowait_pct": "CPU I/O wait",
    "mem.used_bytes": "Host memory used", "mem.util": "Host memory utilization",
    "disk.read_bytes": "Disk read", "disk.write_bytes": "Disk write",
    "net.rx_bytes": "Network received", "net.tx_bytes": "Network sent",
    "gpu.util": "GPU {i} utilization", "gpu.mem_util": "GPU {i} memory utilization",
    "gpu.mem_used_bytes": "GPU {i} memory used", "gpu.power_w": "GPU {i} power",
    "gpu.sm_clock_mhz": "GPU {i} SM clock",
}
"""Counter metric -> display name ({i}: the instance: core, GPU or NIC index)."""


def counter_title(metric: str, instance: int | None) -> str:
    """Display name of a counter track, e.g. ("gpu.util", 0) -> "GPU 0 utilization"."""
    title = COUNTER_TITLES.get(metric)
    has_instance = instance is not None and instance >= 0
    if title is None:
        return f"{metric} [{instance}]" if has_instance else metric
    if "{i}" in title:
        return title.format(i=instance if has_instance else "").replace("  ", " ")
    return f"{title} [{instance}]" if has_instance else title


def bracket_owner(track: I64, start: I64, end: I64) -> I64:
    """For each slice, the slice whose END a trace processor pops when replaying this slice's BEGIN.

    Slices are given in file order (sorted by (start, -duration)); BEGIN i sits at file position 2i and its END at
    2i+1, replayed in (track, ts, position) order. Opens and closes at one nesting level alternate, so pairing them
    level by level matches every BEGIN with the END that closes it. A slice is rebuilt exactly iff
    end[owner[i]] == end[i].
    """
    n = start.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    # One event per BEGIN (events 0..n-1) and per END (events n..2n-1).
    event_ts = np.concatenate([start, end])
    event_file_pos = np.concatenate([2 * np.arange(n), 2 * np.arange(n) + 1])
    event_track = np.concatenate([track, track])
    event_is_begin = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
    replay_order = np.lexsort((event_file_pos, event_ts, event_track))
    depth_step = np.where(event_is_begin[replay_order], 1, -1)
    depth_after = np.cumsum(depth_step)
    level = np.where(depth_step > 0, depth_after, depth_after + 1)
    by_level = replay_order[np.lexsort((np.arange(2 * n), level, event_track[replay_order]))]
    begins, ends = by_level[0::2], by_level[1::2]
    owner = np.empty(n, np.int64)
    owner[begins] = ends - n
    return owner


def nesting_lanes(track: I64, start: I64, end: I64) -> I64:
    """Lane per slice (0 = its own track) so that replaying every (track, lane) rebuilds each slice exactly.

    END events carry no identity: an END closes whatever slice is innermost, so a slice that partially overlaps
    another on its track would steal its END. bracket_owner finds where that happens (vectorized); only the
    clusters of overlapping slices around those are re-laid greedily: each slice, in file order, goes to the first
    lane where it nests. Two slices ending at the same ns may swap ENDs harmlessly.
    """
    lanes = np.zeros(start.shape[0], np.int64)
    if start.shape[0] == 0:
        return lanes
    owner = bracket_owner(track, start, end)
    bad = end[owner] != end
    for t in np.unique(track[bad]).tolist():
        rows = np.flatnonzero(track == t)
        # Only clusters of mutually overlapping slices that hold a bad one need re-laying: between clusters every
        # slice has ended, so each cluster's lanes are independent of the others.
        reach = np.maximum.accumulate(end[rows])
        cluster = np.cumsum(np.concatenate(([1], start[rows][1:] >= reach[:-1])))
        rows = rows[np.isin(cluster, cluster[bad[rows]])]
        lanes[rows] = _greedy_lanes(start[rows].tolist(), end[rows].tolist())
    return lanes


def _greedy_lanes(starts: list[int], ends: list[int]) -> list[int]:
    """First-fit lanes for slices in (start, -duration) order: a lane takes a slice if it nests in the lane's open
    slice (or the lane has none open); ENDs at the slice's start are closed first, as trace_processor does."""
    stacks: list[list[int]] = []
    out = []
    for s, e in zip(starts, ends, strict=True):
        for k, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or stack[-1] >= e:
                stack.append(e)
                out.append(k)
                break
        else:
            stacks.append([e])
            out.append(len(stacks) - 1)
    return out
