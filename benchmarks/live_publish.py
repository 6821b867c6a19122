"""The cost of publishing a live capture (issue 31, `ktrace run --publish S`) at 200 k records/s, without a GPU.

    python benchmarks/live_publish.py [--seconds 20] [--rate 200000]

What a traced process's writer thread does once a second (flush_s = 1) is replayed as fast as it runs: append the
Arrow tables the fast path decodes from 200 k records of CUPTI 13.4-layout buffers (tracer.synthetic_buffers, the
benchmarks' training-step record mix; decoded once, outside the timing) to the capture streams, publish when due,
write partition.json. Modes, interleaved, each into a fresh folder:
  anchor      appends + partition.json as before publishing existed (no time span kept, nothing published);
  publish 5   the default: the span kept on every append, published every 5th flush;
  publish 1   published on every flush (`--publish 1`).
Per mode: the writer's CPU per recorded second (thread_time; the median of the rounds), bytes appended to the
streams and bytes of partition.json per recorded second, and each against the anchor. Then what a reader pays: one
store.read of the live capture as published (limits on every stream) against one of the same capture after it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ktrace.model import store  # noqa: E402
from ktrace.model.capture import CaptureWriter  # noqa: E402
from ktrace.model.output_lock import OutputLock  # noqa: E402
from ktrace.tracer.columns import RecordDecoder, generic_api_name  # noqa: E402
from ktrace.tracer.fast_decode import FastDecoder, by_name  # noqa: E402
from ktrace.tracer.layouts import layout_for  # noqa: E402
from ktrace.tracer.records import ACTIVITY_KIND  # noqa: E402
from ktrace.tracer.synthetic_buffers import random_buffer  # noqa: E402

MODES: dict[str, int | None] = {"anchor": None, "publish 5": 5, "publish 1": 1}
"""Mode -> publish every N flushes (None: never, and no span kept)."""


def one_second_of_records(rate: int) -> list[tuple[str, Any]]:
    """(table name, Arrow table) appended per flush: `rate` records decoded by the fast path."""
    layout = layout_for(130401, ACTIVITY_KIND)
    assert layout is not None
    buf = random_buffer(rate, layout, ACTIVITY_KIND, seed=3)
    columns = FastDecoder(layout).decode(buf.data, buf.valid)
    tables, _ = RecordDecoder(generic_api_name, pid=1).decode(by_name([columns], layout))
    return [(name, table) for name, table in tables.items() if table.num_rows]


class Unspanned(CaptureWriter):
    """The writer as it was before publishing: no time span kept on append."""

    def _widen_span(self, table: Any) -> None:
        return None


def record(folder: Path, batches: list[tuple[str, Any]], seconds: int, every: int | None) -> tuple[float, int, int]:
    """(writer CPU seconds, stream bytes, partition.json bytes) of `seconds` flushes into a fresh capture."""
    writer = (Unspanned if every is None else CaptureWriter)(folder, "host", 0)
    meta = writer.folder / "partition.json"
    meta_bytes = 0
    cpu = time.thread_time()
    for second in range(seconds):
        for name, table in batches:
            writer.append(name, table)
        if every is not None and second % every == 0:
            writer.publish()
        writer.write_partition_meta({"processes_not_closed": 1}, [])
        meta_bytes += meta.stat().st_size
    cpu = time.thread_time() - cpu
    return cpu, writer.bytes_written, meta_bytes


def read_costs(folder: Path) -> tuple[float, float, int, int]:
    """(seconds to read the capture live, seconds to read its streams whole, kernels read each way)."""
    lock = OutputLock(folder)
    lock.acquire()  # held as `ktrace run` holds it: the capture reads as live
    try:
        started = time.perf_counter()
        live = store.read(folder)
        live_s = time.perf_counter() - started
    finally:
        lock.release()
    started = time.perf_counter()  # nobody holds it now: an interrupted capture, every stream read whole
    whole = store.read(folder)
    return live_s, time.perf_counter() - started, live.kernels.height, whole.kernels.height


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=20, help="recorded seconds per round (default: 20)")
    parser.add_argument("--rate", type=int, default=200_000, help="records per second (default: 200000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every mode, interleaved (default: 5)")
    args = parser.parse_args(argv)
    batches = one_second_of_records(args.rate)
    rows = sum(t.num_rows for _, t in batches)
    print(f"{args.rate:,} CUPTI records a second -> {rows:,} rows in {len(batches)} tables per flush")
    work = Path(tempfile.mkdtemp(prefix="ktrace-live-publish-"))
    results: dict[str, list[tuple[float, int, int]]] = {mode: [] for mode in MODES}
    try:
        for mode, every in MODES.items():  # a warm-up round, not counted: first appends, imports, page cache
            record(work / f"warm-{mode.replace(' ', '_')}.ktrace", batches, 2, every)
        for r in range(args.rounds):
            for mode, every in MODES.items():
                folder = work / f"{mode.replace(' ', '_')}-{r}.ktrace"
                results[mode].append(record(folder, batches, args.seconds, every))
                if r < args.rounds - 1 or mode != "publish 5":
                    shutil.rmtree(folder)
        anchor_cpu = statistics.median(c for c, _, _ in results["anchor"]) / args.seconds
        anchor_bytes = statistics.median(s + m for _, s, m in results["anchor"]) / args.seconds
        for mode, runs in results.items():
            cpu = statistics.median(c for c, _, _ in runs) / args.seconds
            streams = statistics.median(s for _, s, _ in runs) / args.seconds
            meta = statistics.median(m for _, _, m in runs) / args.seconds
            print(
                f"{mode:10}  writer CPU {cpu * 1e3:7.1f} ms per recorded s ({cpu / anchor_cpu:5.3f}x anchor, "
                f"{cpu * 100:.2f} % of a core)  streams {streams / 2**20:6.2f} MB/s  partition.json "
                f"{meta / 1024:5.2f} kB/s  bytes {(streams + meta) / anchor_bytes:6.4f}x anchor"
            )
        last = work / f"publish_5-{args.rounds - 1}.ktrace"
        live_s, whole_s, published, kernels = read_costs(last)
        print(
            f"reader: store.read of the live capture {live_s:.2f} s ({published:,} kernels as published), of its "
            f"streams whole {whole_s:.2f} s ({kernels:,} kernels)"
        )
        cpu5 = statistics.median(c for c, _, _ in results["publish 5"]) / args.seconds
        bytes5 = statistics.median(s + m for _, s, m in results["publish 5"]) / args.seconds
        print(
            f"publishing at {args.rate // 1000} k records/s, --publish 5: writer CPU {(cpu5 / anchor_cpu - 1) * 100:+.1f} %, "
            f"bytes written {(bytes5 / anchor_bytes - 1) * 100:+.3f} % against the anchor"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    raise SystemExit(main())
