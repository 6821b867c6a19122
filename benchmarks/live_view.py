"""How far behind a live capture `ktrace view` is, and how long it redraws after each growth, on a big synthetic job.

A synthetic trace (ktrace.testing.synthetic, its kernels, launches, memory ops and ranges; no counters, whose
samples span the whole job) is written as a live capture by the real writer (model.capture.CaptureWriter, with the
launcher's lock and the process's claim, as `ktrace run` holds it): all but the last `--growths` chunks of
`--grow-steps` steps first, then one chunk every `--publish` seconds, published like the writer thread does. The app follows
it at its default pace. Per growth:

- lag: from the publish to the grown trace swapped into the view (the worker's wait for its next look + the
  re-read + the index + the swap);
- reload: the worker's re-read and whole index (off the UI thread), and the process's CPU seconds from the publish
  to the swap (on a loaded machine the wall-clock figures mostly measure waiting for a core);
- longest UI gap during the growth (a 10 ms timer's longest late tick: the swap, and GIL contention);
- redraw: every timeline line drawn after the swap, paint cache empty (what the first frame after it costs).

Anchor (same run, same store): a cold `ktrace view` of the capture, from mount to the complete index (what quitting
and opening the view again would cost).

usage: python benchmarks/live_view.py [--kernels 1000000] [--growths 3] [--grow-steps 50] [--publish 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

SKIPPED = ("counters",)
"""Tables not written: the synthetic counters span the whole job, so the newest record would not move."""


def write_capture(root: Path, kernels: int, grow_steps: int, growths: int):  # type: ignore[no-untyped-def]
    """Write the capture's first part; return (writers, the chunks held back for the growths, the lock)."""
    from ktrace.model.capture import CaptureWriter
    from ktrace.model.output_lock import OutputLock
    from ktrace.testing.synthetic import SyntheticConfig, generate_batches

    root.mkdir(parents=True)
    lock = OutputLock(root)
    lock.acquire()
    config = SyntheticConfig(steps=max(growths * grow_steps * 2, kernels // 200), kernels_per_step=200)
    items = [item for item in generate_batches(config, steps_per_batch=grow_steps) if item[2] not in SKIPPED]
    starts = [i for i, item in enumerate(items) if item[2] == "kernels"]  # one kernels batch per chunk (one rank)
    held_from = starts[len(starts) - growths]
    writers: dict[tuple[str, int], CaptureWriter] = {}
    for node, rank, table, rows in items[:held_from]:
        if (node, rank) not in writers:
            writers[node, rank] = CaptureWriter(root, node, rank)
            (writers[node, rank].folder / ".owner").write_text(str(os.getpid()))
        writers[node, rank].append(table, rows)
    publish(writers)
    bounds = [*(s for s in starts if s >= held_from), len(items)]
    chunks = [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return writers, chunks, lock


def publish(writers) -> None:  # type: ignore[no-untyped-def]
    for writer in writers.values():
        writer.publish()
        writer.write_partition_meta({"processes_not_closed": 1}, [])


class Ticks:
    """The gaps between a 10 ms UI timer's ticks (a long one: the event loop was blocked)."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.last = time.perf_counter()

    def tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self.last)
        self.last = now


async def follow(root: Path, writers, chunks, width: int, height: int, publish_s: float) -> list[dict[str, float]]:  # type: ignore[no-untyped-def]
    from ktrace.tui.app import make_app
    from ktrace.tui.widgets.timeline import Timeline

    app = make_app(root, analyses=False)
    out = []
    async with app.run_test(size=(width, height)) as pilot:
        while not (app.index is not None and app.index.links_ready and app.follow.live):
            await asyncio.sleep(0.01)
        timeline = app.query_one(Timeline)
        timeline.show_rows(list(range(len(app.index.tracks))))  # a screen full of rows to redraw
        for chunk in chunks:
            ticks = Ticks()
            before = app.index.t1
            for node, rank, table, rows in chunk:
                writers[node, rank].append(table, rows)
            timer = app.set_interval(0.01, ticks.tick)
            published, cpu = time.perf_counter(), time.process_time()
            publish(writers)
            while app.index.t1 == before:
                if time.perf_counter() - published > 600:
                    raise SystemExit(f"the view did not grow in 10 min (status: {app.follow})")
                await asyncio.sleep(0.005)
            lag, cpu = time.perf_counter() - published, time.process_time() - cpu
            timer.stop()
            timeline._paint_cache.clear()
            t0 = time.perf_counter()
            for y in range(timeline.size.height):
                timeline.render_line(y)
            redraw = time.perf_counter() - t0
            out.append(
                {
                    "lag_s": lag,
                    "reload_s": app.timings["reload_s"],
                    "cpu_s": cpu,
                    "max_ui_gap_s": max(ticks.gaps, default=0.0),
                    "redraw_s": redraw,
                    "kernels": float(app.trace.kernels.height),  # type: ignore[union-attr]
                    "rows_drawn": float(min(len(timeline.rows), timeline.size.height - 1)),
                }
            )
            await asyncio.sleep(max(0.0, published + publish_s - time.perf_counter()))  # the next publish
        await pilot.press("q")
    return out


async def cold_open(root: Path, width: int, height: int) -> float:
    from ktrace.tui.app import make_app

    app = make_app(root, analyses=False)
    async with app.run_test(size=(width, height)) as pilot:
        while "links_ready" not in app.timings:
            await asyncio.sleep(0.005)
        seconds = app.timings["links_ready"] - app.timings["mount"]
        await pilot.press("q")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--growths", type=int, default=3)
    parser.add_argument("--grow-steps", type=int, default=50, help="steps per growth (200 kernels a step)")
    parser.add_argument("--publish", type=float, default=5.0, help="seconds between two growths (ktrace run's default)")
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=45)
    parser.add_argument("--dir", help="where to write the capture (default: a temporary folder)")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="ktrace-live-"))
    root = base / "live.ktrace"
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    writers, chunks, lock = write_capture(root, args.kernels, args.grow_steps, args.growths)
    print(f"capture of {args.kernels:,} kernels written in {time.perf_counter() - t0:.1f} s ({args.growths} held)")
    rows = asyncio.run(follow(root, writers, chunks, args.width, args.height, args.publish))
    anchor = asyncio.run(cold_open(root, args.width, args.height))
    for i, row in enumerate(rows, 1):
        print(
            f"growth {i}: {row['kernels']:,.0f} kernels  lag {row['lag_s']:.2f} s  reload {row['reload_s']:.2f} s "
            f"(process CPU {row['cpu_s']:.2f} s)  "
            f"longest UI gap {1e3 * row['max_ui_gap_s']:.0f} ms  redraw {1e3 * row['redraw_s']:.1f} ms "
            f"({row['rows_drawn']:.0f} rows)"
        )
    lag = statistics.median(r["lag_s"] for r in rows)
    reload = statistics.median(r["reload_s"] for r in rows)
    print(f"anchor: cold `ktrace view` of the same capture (mount to complete index) {anchor:.2f} s")
    print(
        f"median lag {lag:.2f} s = {lag / anchor:.2f}x the cold open; median reload {reload:.2f} s = "
        f"{reload / anchor:.2f}x"
    )
    lock.release()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
