"""A large multi-host Kineto job built from a real one: the DLRM 8-rank folder tiled over ranks, hosts and steps.

`generate_fleet_job(source, folder, ranks=256)` writes one gzip Kineto file per rank: rank r replays source file
r % 8 (its own distributedInfo rank r, world size N), `steps` times back to back (correlation, external and flow
ids moved out of each other's way, ProfilerStep#n renumbered), on host r // ranks_per_host, whose clock is off by a
known amount; one straggler rank has its compute kernels stretched. `fleet_job.json` beside the files records what
was planted, for tests of clock alignment and straggler detection:

    {"hosts": {"node000": {"offset_ns": 0, "ranks": [0, ..., 7]}, ...}, "straggler": {"rank": r, "host": ...,
     "kernel_stretch": 1.5, "delay_ms": 0.0}, "steps": 2, "step_period_ns": ..., "ranks": 256, ...}

`offset_ns` is what the host's clock reads minus the reference clock (host node000's, offset 0): every time in
that host's files is the true time plus its offset, so an aligner subtracts it. Offsets are whole microseconds
(Kineto's unit), from 1 ms to 2 s in size, of either sign, reproducible from `seed`. The straggler's compute kernels
(not NCCL's) last `stretch` times longer and push the rest of their stream later (no overlap on a stream); its
collectives therefore end late too, as a straggler's do. The manifest does not open as a trace, so the folder
imports as it is.

`straggler_delay_ms=D` plants a consistent straggler instead, as a synchronous job has one: in each step (each
ProfilerStep range of the source), the straggler's compute kernel that ends last before the step's first
collective runs D ms longer, the other ranks' first collective lasts D ms longer (they wait inside it), and
everything after (GPU and CPU, on every rank) happens D ms later, so all collectives end together; CPU ranges
holding that moment (the step, its operator) last D ms longer. Use it with stretch=1.0 for a straggler that is
late by D and nothing else.
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
    delay_ns: int = 0
    """The planted lateness (straggler_delay_ms) in ns; 0: none."""


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
    straggler_delay_ms: float = 0.0,
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
        straggler_delay_ms: the straggler arrives this much later at each step's first collective, the others wait
            for it there (see the module doc); 0: no delay.
        seed: the clock offsets' seed. compresslevel: gzip level (1: fast, files ~10 % larger).
    """
    sources = kineto_files(Path(source))
    if not sources or ranks < 1 or steps < 1 or ranks_per_host < 1:
        raise ValueError(f"need Kineto rank files in {source}, ranks >= 1, steps >= 1, ranks_per_host >= 1")
    straggler = ranks // 2 if straggler_rank is None else straggler_rank
    delay_us = int(round(straggler_delay_ms * 1000))
    docs = [_load(p) for p in sources]
    late = _planted_delay(docs[straggler % len(docs)], delay_us, late=True)
    docs = [_planted_delay(doc, delay_us, late=False) for doc in docs]
    period_us = max(_span_us(doc) for doc in [*docs, late]) + _STEP_GAP_US
    tiled = [_tile_steps(doc, steps, period_us) for doc in docs]
    tiled_late = _tile_steps(late, steps, period_us)
    hosts = (ranks + ranks_per_host - 1) // ranks_per_host
    offsets = planted_offsets_us(hosts, seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for rank in range(ranks):
        host = rank // ranks_per_host
        header, events = tiled_late if rank == straggler else tiled[rank % len(docs)]
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
        delay_us * 1000,
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
            "delay_ms": job.delay_ns / 1e6,
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


def _planted_delay(doc: dict[str, Any], delay_us: int, *, late: bool) -> dict[str, Any]:
    """`doc` with a straggler's delay planted in each step (module doc): `late`, its compute before the step's first
    collective runs `delay_us` longer; else its first collective lasts `delay_us` longer. Either way everything from
    then on happens `delay_us` later."""
    if delay_us <= 0:
        return doc
    events: list[dict[str, Any]] = [dict(e) for e in doc["traceEvents"]]
    for kernel in sorted(_delayed_kernels(events, late), key=lambda k: -int(k["ts"])):  # the latest first
        at = kernel["ts"] + kernel.get("dur", 0) if late else kernel["ts"] + 1
        for event in events:
            ts = event.get("ts")
            if not isinstance(ts, int) or event is kernel:
                continue
            if ts >= at:
                event["ts"] = ts + delay_us
            elif ts + event.get("dur", 0) > at and event.get("ph") == "X" and event.get("cat") not in _GPU_CATS:
                event["dur"] = event["dur"] + delay_us  # a CPU range holding the moment: the step, its operator
        kernel["dur"] = kernel.get("dur", 0) + delay_us
    return {**doc, "traceEvents": events}


def _delayed_kernels(events: list[dict[str, Any]], late: bool) -> list[dict[str, Any]]:
    """Per step (ProfilerStep range, up to the next one's start), the kernel that runs longer: its first collective,
    or (`late`) the compute kernel ending last before it."""
    kernels = sorted((e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"), key=lambda e: e["ts"])
    steps = sorted(e["ts"] for e in events if _STEP_NAME.match(str(e.get("name", ""))) and e.get("ph") == "X")
    found = []
    for start, end in zip(steps, [*steps[1:], math.inf], strict=True):
        first = next((k for k in kernels if start <= k["ts"] < end and _is_collective(k)), None)
        if first is not None and not late:
            found.append(first)
        elif first is not None:
            before = [k for k in kernels if not _is_collective(k) and k["ts"] + k.get("dur", 0) <= first["ts"]]
            if before:
                found.append(max(before, key=lambda k: k["ts"] + k.get("dur", 0)))
    return found


def _is_collective(kernel: dict[str, Any]) -> bool:
    """A NCCL kernel (as the stretch tells them apart from compute)."""
    return "nccl" in str(kernel.get("name", "")).lower()
