"""Which track each slice of a rank goes on: steps, thread, GPU stream, sync and GPU-annotation tracks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ktrace.exporters.perfetto_slices import STREAM_KINDS, THREAD_KINDS
from ktrace.model.schema import NODE_RANK
from ktrace.model.trace import Trace

if TYPE_CHECKING:  # the Chrome JSON exporter uses this module's names without loading protobuf
    from ktrace.exporters.perfetto_layout import TrackTree

_GPU_ORDER = {"stream": 0, "sync": 1, "gpu_range": 2}


def process_order(trace: Trace) -> list[tuple[str, int]]:
    """(node, rank) of every process track in display order: per node, its host counters first, then its ranks."""
    return sorted({(str(n), int(r)) for n, r in trace.ranks}, key=lambda nr: (nr[0], nr[1]))


def _mine(frame: pl.DataFrame, node: str, rank: int) -> pl.DataFrame:
    return frame.filter((pl.col("rank") == rank) & (pl.col("node") == node))


def rank_pid(trace: Trace, node: str, rank: int) -> int | None:
    """The OS pid of a rank: the most frequent pid of its CPU-side rows (None if it has none)."""
    pids = [_mine(f, node, rank).select("pid") for f in (trace.api, trace.ranges, trace.ops, trace.threads)]
    allp = pl.concat(pids)["pid"].drop_nulls()
    if allp.len() == 0:
        return None
    counts = allp.value_counts(sort=True)
    return int(counts[0, 0])


def process_name(trace: Trace, node: str, rank: int) -> str:
    """ "rank R · host (pid P)" for a rank, "host (node counters)" for node-level rows."""
    if rank == NODE_RANK:
        return f"{node} (host)"
    pid = rank_pid(trace, node, rank)
    return f"rank {rank} · {node}" + (f" (pid {pid})" if pid is not None else "")


_GROUPS = ("gpu_range", "step", "stream", "sync", "thread")
"""Track groups, coded by their place here (alphabetical: the order tracks are created in)."""


TRACK_KEYS = ["group", "device", "stream", "pid", "tid"]
"""What puts two slices on one track (before overlap lanes): `slice_keys` columns."""


def slice_keys(slices: pl.DataFrame) -> pl.DataFrame:
    """The TRACK_KEYS of every slice (group: its place in _GROUPS)."""
    kind = pl.col("kind")
    code = {g: pl.lit(k, pl.Int8) for k, g in enumerate(_GROUPS)}
    group = (
        pl.when(kind.is_in(THREAD_KINDS))
        .then(code["thread"])
        .when(kind.is_in(STREAM_KINDS))
        .then(code["stream"])
        .when(kind == "step")
        .then(code["step"])
        .when(kind == "sync")
        .then(code["sync"])
        .otherwise(code["gpu_range"])
    )
    cpu = kind.is_in(THREAD_KINDS)
    gpu = kind.is_in([*STREAM_KINDS, "sync", "gpu_range"])
    return slices.select(
        group.alias("group"),
        pl.when(cpu).then(pl.col("pid")).otherwise(-1).fill_null(-1).alias("pid"),
        pl.when(cpu).then(pl.col("tid")).otherwise(-1).fill_null(-1).alias("tid"),
        pl.when(gpu).then(pl.col("device")).otherwise(-1).alias("device"),
        pl.when(kind.is_in(STREAM_KINDS)).then(pl.col("stream")).otherwise(-1).alias("stream"),
    )


def assign_tracks(tree: TrackTree, proc: int, trace: Trace, node: str, rank: int, slices: pl.DataFrame) -> np.ndarray:
    """Track uuid of every row of `slices` (creating the tracks in `tree`, in display order)."""
    keys = slice_keys(slices)
    groups = keys.with_row_index("row").group_by(TRACK_KEYS).agg(pl.col("row")).sort(TRACK_KEYS)
    uuids = track_uuids(tree, proc, trace, node, rank, list(groups.select(TRACK_KEYS).iter_rows()))
    track = np.empty(slices.height, np.int64)
    track[groups["row"].explode().to_numpy()] = np.repeat(uuids, groups["row"].list.len().to_numpy())
    return track


def track_uuids(
    tree: TrackTree, proc: int, trace: Trace, node: str, rank: int, keys: list[tuple[int, int, int, int, int]]
) -> list[int]:
    """The uuid of the track of each key (TRACK_KEYS values, sorted: the order tracks are created in)."""
    threads = {
        (int(p), int(t)): str(n)
        for p, t, n in _mine(trace.threads, node, rank)
        .select("pid", "tid", pl.col("name").cast(pl.String))
        .drop_nulls()
        .iter_rows()
    }
    devices = {
        int(d): str(n)
        for d, n in _mine(trace.devices, node, rank)
        .select("device", pl.col("name").cast(pl.String))
        .drop_nulls()
        .iter_rows()
    }
    uniq = [(_GROUPS[g], d, s, p, t) for g, d, s, p, t in keys]
    thread_rows = sorted(((p, t) for g, _, _, p, t in uniq if g == "thread"), key=lambda pt: (pt[1] != pt[0], pt[1]))
    thread_order = {pt: k for k, pt in enumerate(thread_rows, start=1)}
    uuids = []
    for group, device, stream, pid, tid in uniq:
        if group == "step":
            uuids.append(
                tree.custom(
                    ("steps", node, rank), proc, "Steps", 0, description="ProfilerStep ranges (domain profiler_step)"
                )
            )
        elif group == "thread":
            name = f"{threads.get((pid, tid), 'thread')} [{tid}]"
            uuids.append(tree.thread(("thread", node, rank, pid, tid), proc, name, thread_order[(pid, tid)]))
        else:
            uuids.append(_gpu_track(tree, proc, node, rank, group, device, stream, devices))
    return uuids


def _gpu_track(
    tree: TrackTree, proc: int, node: str, rank: int, group: str, device: int, stream: int, devices: dict[int, str]
) -> int:
    model = devices.get(device)
    label = f"GPU {device}" if device >= 0 else "GPU (unknown)"
    gpu = tree.custom(
        ("gpu", node, rank, device), proc, f"{label} · {model}" if model else label, 100 + max(device, 0), group=True
    )
    if group == "stream":
        name = f"Stream {stream}" if stream >= 0 else "Stream (unknown)"
        return tree.custom(("stream", node, rank, device, stream), gpu, name, max(stream, 0))
    title = "Synchronization" if group == "sync" else "GPU annotations"
    return tree.custom((group, node, rank, device), gpu, title, 1_000_000 + _GPU_ORDER[group])
