"""Tile a Kineto trace N times in time (with shifted ids) to make a big, realistic benchmark input.

Each copy of the trace's events is shifted by (span + 1 ms) so copies follow each other, every
id that links events (correlation, External id, flow ids, Python ids) is offset so copies never
share one, and ProfilerStep#N becomes ProfilerStep#(N + 1000 k) in copy k. Events a longer real
trace holds only once (metadata, window markers, the profiler span) are kept once, and so is the
header (deviceProperties, distributedInfo, metadata, baseTimeNanoseconds, ...). Writes one event per line, gzip-compressed when OUT ends in .gz.

examples:
  python benchmarks/tile_kineto.py ../shared/traces/tracelens-h100-hf-inference/*.json.gz \
      -n 10 -o /tmp/tiled10.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ID_ARGS = (
    "correlation",
    "External id",
    "external id",
    "Python id",
    "Python parent id",
    "Record function id",
    "Ev Idx",
    "wait_on_cuda_event_record_corr_id",
)
"""args keys whose integer values are ids to offset per copy."""


def _read(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _span_us(events: list[dict[str, Any]]) -> tuple[float, float]:
    lo, hi = float("inf"), float("-inf")
    for e in events:
        ts = e.get("ts")
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            lo = min(lo, ts)
            hi = max(hi, ts + (e.get("dur") or 0))
    return lo, hi


def _max_id(events: list[dict[str, Any]]) -> int:
    top = 0
    for e in events:
        if isinstance(e.get("id"), int):
            top = max(top, e["id"])
        for key in ID_ARGS:
            v = (e.get("args") or {}).get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                top = max(top, v)
    return top


def _once(e: dict[str, Any]) -> bool:
    """Events a longer real trace has only once: metadata, window markers, the profiler span. PyTorch 1.9's
    allocator events (`[memory]`) have no category either but belong to every copy (kept once, resnet50 x10 had
    641 k events, not 757 k, and one copy's allocations)."""
    uncategorized = "cat" not in e and e.get("name") != "[memory]"
    return e.get("ph") == "M" or uncategorized or e.get("cat") == "Trace"


def _step_renamed(e: dict[str, Any], k: int) -> dict[str, Any]:
    name = e.get("name")
    if k and isinstance(name, str) and name.startswith("ProfilerStep#") and name[13:].isdigit():
        e = dict(e, name=f"ProfilerStep#{int(name[13:]) + k * 1000}")
    return e


def _shifted(e: dict[str, Any], k: int, dt: float, did: int, float_ts: bool) -> dict[str, Any]:
    out = _step_renamed(dict(e), k)
    if isinstance(out.get("ts"), int | float) and not isinstance(out.get("ts"), bool):
        out["ts"] = round(out["ts"] + dt, 3) if float_ts else int(out["ts"] + dt)
    if isinstance(out.get("id"), int) and out.get("ph") in ("s", "f", "t"):
        out["id"] = out["id"] + did
    args = out.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ID_ARGS:
            v = args.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                args[key] = v + did
        out["args"] = args
    return out


def tile(src: Path, out: Path, copies: int) -> int:
    """Write `copies` time-shifted copies of `src`'s events to `out`; return the number of events written."""
    data = _read(src)
    events = data.pop("traceEvents")
    lo, hi = _span_us(events)
    period = (hi - lo) + 1000.0
    did = _max_id(events) + 1
    float_ts = any(isinstance(e.get("ts"), float) for e in events[:1000])
    opener = gzip.open if out.name.endswith(".gz") else open
    n = 0
    with opener(out, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        header = json.dumps(data)
        f.write(header[:-1] + (", " if data else "") + '"traceEvents": [\n')
        first = True
        for k in range(copies):
            for e in events:
                if k > 0 and _once(e):
                    continue
                f.write(("" if first else ",\n") + json.dumps(_shifted(e, k, k * period, k * did, float_ts)))
                first = False
                n += 1
        f.write("\n]}\n")
    return n


def tiled_copy(src: Path, copies: int, workdir: Path) -> Path:
    """`src` tiled `copies` times, alone in its own folder under `workdir` (HTA loads a folder); made once, kept."""
    stem = f"{src.name.split('.json')[0]}_x{copies}"
    folder = workdir / stem
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{stem}.json.gz"
    if not out.exists():  # written beside the folder (HTA loads every file in it), then renamed: never half a file
        print(f"tiling {src.name} x{copies} ...", file=sys.stderr)
        partial = workdir / f".{stem}.partial.json.gz"  # ends in .gz: tile() gzips by the name
        tile(src, partial, copies)
        partial.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: SRC -n COPIES -o OUT."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path)
    parser.add_argument("-n", "--copies", type=int, default=10)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    n = tile(args.src, args.output, args.copies)
    print(f"wrote {n:,} events to {args.output} ({args.output.stat().st_size / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
