"""The worst input for memory (issue 27 section 3): a small .json.gz of N copies of one small kept event.

A 130-byte kernel event inflates ~110:1 at gzip level 1 (under the importer's 200:1 bomb cap, so the file is read
to its end) and every copy becomes a kernels row: 20 M events are a 24 MB file, 2.6 GB of JSON. The script writes
the file (not committed: it is rebuilt in seconds) and runs `ktrace info` on it, once per size, as a user runs it:
wall time and peak memory of the whole process tree (the decode workers' too: see speed_everywhere.run_command).

    python benchmarks/worst_input.py [--events 2000000 5000000 20000000] [--kind kernel|op] [--keep DIR]

The last line of each size: `worst input: <N> events <MB> MB gz <GB> GB json, info <s> s <MB> MB, workers <k>`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from speed_everywhere import ktrace_cmd, run_command  # noqa: E402

HEADER = (
    b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 85899345920}], '
    b'"baseTimeNanoseconds": 1700000000000000000, "traceEvents": [\n'
)
EVENTS = {
    "kernel": b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1000,"dur":1,'
    b'"args":{"device":0,"stream":7,"correlation":1,"grid":[1,1,1]}},\n',
    "op": b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1000,"dur":1,'
    b'"args":{"External id":1,"Sequence number":1}},\n',
}
"""One small event of each kind ktrace keeps a row of (~130 bytes, as in the issue)."""
COPIES_PER_BLOCK = 50_000


def write_worst(path: Path, events: int, kind: str = "kernel", level: int = 1) -> int:
    """Write `events` copies of EVENTS[kind] as a .json.gz at gzip `level`; returns the inflated size in bytes."""
    event = EVENTS[kind]
    block = event * COPIES_PER_BLOCK
    packer = zlib.compressobj(level, wbits=31)
    inflated = 0
    with path.open("wb") as f:
        f.write(packer.compress(HEADER))
        left = events
        while left > 0:
            n = min(left, COPIES_PER_BLOCK)
            text = block if n == COPIES_PER_BLOCK else event * n
            if n == left:
                text = text[:-2] + b"\n"  # no comma after the last event
            f.write(packer.compress(text))
            inflated += len(text)
            left -= n
        f.write(packer.compress(b"]}\n"))
        f.write(packer.flush())
    return inflated + len(HEADER) + 3


def most_processes(pid: int, stop: threading.Event, seen: list[int]) -> None:
    """Count the processes of `pid`'s tree (the decode workers) every 0.2 s; the largest count goes in seen[0]."""
    while not stop.wait(0.2):
        todo, count = [pid], 0
        while todo:
            p = todo.pop()
            count += 1
            try:
                for task in os.listdir(f"/proc/{p}/task"):
                    todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
            except OSError:
                continue
        seen[0] = max(seen[0], count)


def measure_info(path: Path, env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """`ktrace info --json` on `path`: wall s, peak MB (process tree), most decode workers, and the trace's notes."""
    seen = [0]
    stop = threading.Event()
    me = os.getpid()
    watcher = threading.Thread(target=most_processes, args=(me, stop, seen), daemon=True)
    watcher.start()
    cmd = run_command(ktrace_cmd("info", str(path)), env=env, timeout=1800)
    stop.set()
    watcher.join()
    info = subprocess.run(
        ktrace_cmd("info", str(path), "--json"), capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    notes = ""
    if info.returncode == 0:
        try:
            notes = "; ".join(json.loads(info.stdout).get("notes", []))
        except (ValueError, AttributeError):
            notes = info.stdout[-300:]
    workers = max(0, seen[0] - 3)  # this process, GNU time, ktrace itself
    return cmd.wall_s, cmd.peak_rss_mb, workers, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="+", default=[2_000_000, 5_000_000, 20_000_000])
    parser.add_argument("--kind", choices=sorted(EVENTS), default="kernel")
    parser.add_argument("--level", type=int, default=1, help="gzip level (1 keeps the file under the 200:1 cap)")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them (default: a temp folder)")
    parser.add_argument("--no-run", action="store_true", help="only write the files")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ktrace-worst-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    for n in args.events:
        path = folder / f"worst_{args.kind}_{n}.json.gz"
        t0 = time.perf_counter()
        inflated = write_worst(path, n, args.kind, args.level)
        size = path.stat().st_size
        print(f"wrote {path} ({size / 1e6:.1f} MB, {inflated / 1e9:.2f} GB json) in {time.perf_counter() - t0:.1f} s")
        if not args.no_run:
            wall, peak, workers, notes = measure_info(path)
            short = re.sub(r"\s+", " ", notes)[:300]
            print(
                f"worst input: {n:,} events {size / 1e6:.1f} MB gz {inflated / 1e9:.2f} GB json, "
                f"info {wall:.1f} s {peak:.0f} MB, workers {workers}" + (f"; notes: {short}" if short else "")
            )
        if not args.keep:
            path.unlink()


if __name__ == "__main__":
    main()
