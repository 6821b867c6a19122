"""A large multi-host Kineto job built from a real one: the DLRM 8-rank folder tiled over ranks, hosts and steps.

`generate_fleet_job(source, folder, ranks=256)` writes one gzip Kineto file per rank: rank r replays source file
r % 8 (its own distributedInfo rank r, world size N), `steps` times back to back (correlation, external and flow
ids moved out of each other's way, ProfilerStep#n renumbered), on host r // ranks_per_host, whose clock is off by a
known amount; one straggler rank has its compute kernels stretched. `fleet_job.json` beside the files records what
was planted, for tests of clock alignment and straggler detection:

    {"hosts": {"node000": {"offset_ns": 0, "ranks": [0, ..., 7]}, ...}, "straggler": {"rank": r, "host": ...,
     "kernel_stretch": 1.5}, "steps": 2, "step_period_ns": ..., "ranks": 256, "ranks_per_host": 8, ...}

`offset_ns` is what the host's clock reads minus the reference clock (host node000's, offset 0): every time in
that host's files is the true time plus its offset, so an aligner subtracts it. Offsets are whole microseconds
(Kineto's unit), from 1 ms to 2 s in size, of either sign, reproducible from `seed`. The straggler's compute kernels
(not NCCL's) last `stretch` times longer and push the rest of their stream later (no overlap on a stream); its
collectives therefore end late too, as a straggler's do. The manifest does not open as a trace, so the folder
imports as it is.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktrace.importers.kineto_stream import GZIP_MAGIC, kineto_files
from ktrace.model.outputs import write_atomically

MANIFEST = "fleet_job.json"
_ID_ARGS = ("correlation", "External id")
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_STEP_GAP_US = 100


@dataclass(frozen=True)
class FleetJob:
    """What `generate_fleet_job` wrote (the same facts as its manifest)."""

    folder: Path
    files: tuple[Path, ...]
    offsets_ns: dict[str, int]
    """Host -> what its clock reads minus the reference clock's (node000: 0)."""
    host_of_rank: tuple[str, ...]
    straggler_rank: int
    stretch: float
    steps: int
    step_period_ns: int


def host_name(host: int) -> str:
    """The name of host number `host` in a generated job."""
    return f"node{host:03d}"


def planted_offsets_us(hosts: int, seed: int) -> list[int]:
    """Per host, its clock's offset in whole microseconds: 0 for host 0, else 1 ms to 2 s (log-uniform), +/-."""
    rng = random.Random(seed)
    offsets = [0]
    for _ in range(1, hosts):
        size = math.exp(rng.uniform(math.log(1_000), math.log(2_000_000)))
        offsets.append(int(round(size)) * rng.choice((-1, 1)))
    return offsets


def generate_fleet_job(
    source: Path,
    folder: Path,
    *,
    ranks: int = 256,
    steps: int = 2,
    ranks_per_host: int = 8,
    straggler_rank: int | None = None,
    stretch: float = 1.5,
    seed: int = 13,
    compresslevel: int = 1,
) -> FleetJob:
    """Write an N-rank job tiled from the Kineto files of `source` into `folder` (created); see the module doc.

    Args:
        source: a folder of per-rank Kineto files (the real DLRM 8-rank folder).
        folder: where the rank files and fleet_job.json go.
        ranks: ranks in the job; ranks_per_host: ranks on each host (the last host may have fewer).
        steps: copies of the source's window, back to back, in every rank file.
        straggler_rank: the rank whose kernels are stretched (default: the first rank of the second half).
        stretch: how many times longer the straggler's compute kernels last.
        seed: the clock offsets' seed. compresslevel: gzip level (1: fast, files ~10 % larger).
    """
    sources = kineto_files(Path(source))
    if not sources or ranks < 1 or steps < 1 or ranks_per_host < 1:
        raise ValueError(f"need Kineto rank files in {source}, ranks >= 1, steps >= 1, ranks_per_host >= 1")
    docs = [_load(p) for p in sources]
    period_us = max(_span_us(doc) for doc in docs) + _STEP_GAP_US
    tiled = [_tile_steps(doc, steps, period_us) for doc in docs]
    hosts = (ranks + ranks_per_host - 1) // ranks_per_host
    offsets = planted_offsets_us(hosts, seed)
    straggler = ranks // 2 if straggler_rank is None else straggler_rank
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for rank in range(ranks):
        host = rank // ranks_per_host
        header, events = tiled[rank % len(docs)]
        events = _shifted(events, offsets[host], stretch if rank == straggler else 1.0)
        doc = {
            **header,
            "hostname": host_name(host),
            "distributedInfo": {**header.get("distributedInfo", {}), "rank": rank, "world_size": ranks},
            "traceEvents": events,
        }
        path = folder / f"{host_name(host)}_rank{rank:05d}.pt.trace.json.gz"
        write_atomically(path, gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel))
        files.append(path)
    job = FleetJob(
        folder,
        tuple(files),
        {host_name(h): offsets[h] * 1000 for h in range(hosts)},
        tuple(host_name(r // ranks_per_host) for r in range(ranks)),
        straggler,
        stretch,
        steps,
        period_us * 1000,
    )
    _write_manifest(job, source, ranks_per_host, seed)
    return job


def _write_manifest(job: FleetJob, source: Path, ranks_per_host: int, seed: int) -> None:
    ranks_of: dict[str, list[int]] = {}
    for rank, host in enumerate(job.host_of_rank):
        ranks_of.setdefault(host, []).append(rank)
    manifest = {
        "source": Path(source).name,
        "ranks": len(job.files),
        "ranks_per_host": ranks_per_host,
        "steps": job.steps,
        "step_period_ns": job.step_period_ns,
        "seed": seed,
        "offset_meaning": "host clock minus reference clock (node000); true time = time in file - offset",
        "hosts": {h: {"offset_ns": job.offsets_ns[h], "ranks": ranks_of[h]} for h in job.offsets_ns},
        "straggler": {
            "rank": job.straggler_rank,
            "host": job.host_of_rank[job.straggler_rank] if job.straggler_rank < len(job.files) else None,
            "kernel_stretch": job.stretch,
        },
        "files": [p.name for p in job.files],
    }
    write_atomically(job.folder / MANIFEST, json.dumps(manifest, indent=1).encode())


def _load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    doc: dict[str, Any] = json.loads(gzip.decompress(data) if data[:2] == GZIP_MAGIC else data)
    return doc


def _span_us(doc: dict[str, Any]) -> int:
    times = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in doc["traceEvents"] if isinstance(e.get("ts"), int)]
    return max(end for _, end in times) - min(start for start, _ in times)


def _tile_steps(doc: dict[str, Any], steps: int, period_us: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the events of `steps` back-to-back copies of the window (metadata and instants once)."""
    events: list[dict[str, Any]] = doc["traceEvents"]
    stride = 10 ** len(str(max([_max_id(e) for e in events] + [1])))
    tiled = list(events)
    window_end = next((e for e in tiled if e.get("name") == "Record Window End"), None)
    for step in range(1, steps):
        shift, id_shift = step * period_us, step * stride
        for event in events:
            if event.get("ph") in ("M", "i") or event.get("cat") == "Trace" or not isinstance(event.get("ts"), int):
                continue
            copy = {**event, "ts": event["ts"] + shift}
            if "id" in copy and isinstance(copy["id"], int):
                copy["id"] += id_shift
            args = copy.get("args")
            if isinstance(args, dict) and any(isinstance(args.get(k), int) for k in _ID_ARGS):
                copy["args"] = {**args, **{k: args[k] + id_shift for k in _ID_ARGS if isinstance(args.get(k), int)}}
            step_name = _STEP_NAME.match(str(copy.get("name", "")))
            if step_name:
                copy["name"] = f"ProfilerStep#{int(step_name[1]) + step}"
            tiled.append(copy)
    if window_end is not None and steps > 1:
        tiled[tiled.index(window_end)] = {**window_end, "ts": window_end["ts"] + (steps - 1) * period_us}
    header = {k: v for k, v in doc.items() if k != "traceEvents"}
    return header, tiled


def _max_id(event: dict[str, Any]) -> int:
    args = event.get("args")
    values = [event.get("id")] + ([args.get(k) for k in _ID_ARGS] if isinstance(args, dict) else [])
    return max([v for v in values if isinstance(v, int)] + [0])


def _shifted(events: list[dict[str, Any]], offset_us: int, stretch: float) -> list[dict[str, Any]]:
    """The events as seen by a host clock `offset_us` ahead; compute kernels `stretch` times longer."""
    out = [{**e, "ts": e["ts"] + offset_us} if isinstance(e.get("ts"), int) else e for e in events]
    if stretch == 1.0:
        return out
    streams: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for event in out:
        if event.get("cat") in _GPU_CATS and event.get("ph") == "X":
            streams.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    for stream in streams.values():
        stream.sort(key=lambda e: e["ts"])
        extra = 0
        for event in stream:
            event["ts"] += extra
            if event.get("cat") == "kernel" and "nccl" not in str(event.get("name", "")).lower():
                longer = int(round(event.get("dur", 0) * stretch))
                extra += longer - event.get("dur", 0)
                event["dur"] = longer
    return out
