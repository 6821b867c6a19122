"""How fast `ktrace view` is on a huge synthetic trace: index build, first screen, redraw after zoom/pan.

Anchor (measured in the same run): a naive full-scan redraw that bins every visible slice of every shown row
with numpy (np.bincount over all slices in the window) instead of searchsorted + prefix sums.

usage: python benchmarks/tui_speed.py [--kernels 10000000] [--width 200] [--height 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np


def naive_redraw(index, rows, vp) -> None:  # type: ignore[no-untyped-def]
    """The anchor: per row, every slice in the window binned into columns (O(visible slices))."""
    for tid in rows:
        track = index.tracks[tid]
        lo = np.searchsorted(track.starts, vp.start_ns)
        hi = np.searchsorted(track.starts, vp.end_ns)
        cols = ((track.starts[lo:hi] - vp.start_ns) * vp.width // vp.span_ns).astype(np.int64)
        np.bincount(cols, weights=(track.ends[lo:hi] - track.starts[lo:hi]), minlength=vp.width)


async def measure(trace, width: int, height: int, repeats: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from ktrace.tui.app import make_app
    from ktrace.tui.widgets.timeline import LABEL_W, Timeline

    app = make_app(trace=trace, analyses=False)
    gaps: list[float] = []
    out: dict[str, float] = {}
    async with app.run_test(size=(width, height)) as pilot:
        last = time.perf_counter()

        def tick() -> None:
            nonlocal last
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

        timer = app.set_interval(0.01, tick)
        while "first_screen" not in app.timings:
            await asyncio.sleep(0.005)
        timer.stop()
        out["index_s"] = app.timings["index_s"]
        out["first_screen_s"] = app.timings["first_screen"] - app.timings["mount"] - app.timings["read_s"]
        out["max_ui_gap_during_load_s"] = max(gaps) if gaps else float("nan")
        tl = app.query_one(Timeline)
        tl.rows = list(range(len(tl.index.tracks)))[: height]
        for name, action in (("zoom", lambda: tl.action_zoom(2.0)), ("pan", lambda: tl.action_pan(0.2)),
                             ("zoom_out", lambda: tl.action_zoom(0.5))):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                action()
                for y in range(tl.size.height):
                    tl.render_line(y)
                times.append(time.perf_counter() - t0)
            out[f"{name}_redraw_median_s"] = statistics.median(times)
            out[f"{name}_redraw_max_s"] = max(times)
        tl.action_fit()
        anchor = []
        for _ in range(max(3, repeats // 4)):
            t0 = time.perf_counter()
            naive_redraw(tl.index, tl.rows, tl.viewport)
            anchor.append(time.perf_counter() - t0)
        fit = []
        for _ in range(repeats):
            tl._paint_cache.clear()
            t0 = time.perf_counter()
            for y in range(tl.size.height):
                tl.render_line(y)
            fit.append(time.perf_counter() - t0)
        out["fit_redraw_median_s"] = statistics.median(fit)
        out["anchor_naive_fit_redraw_s"] = statistics.median(anchor)
        out["rows_drawn"] = float(min(len(tl.rows), tl.size.height - 1))
        out["columns"] = float(tl.size.width - LABEL_W)
        await pilot.press("q")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=10_000_000)
    parser.add_argument("--width", type=int, default=200)
    parser.add_argument("--height", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    from ktrace.testing import SyntheticConfig, generate

    per_step = 5_000
    t0 = time.perf_counter()
    trace = generate(SyntheticConfig(steps=max(1, args.kernels // per_step), kernels_per_step=per_step,
                                     streams=4, seed=1, counter_interval_ns=100_000_000))
    print(f"generated {trace.kernels.height:,} kernels, {trace.api.height:,} API rows in "
          f"{time.perf_counter() - t0:.1f} s")
    res = asyncio.run(measure(trace, args.width, args.height, args.repeats))
    for k, v in res.items():
        print(f"{k:32s} {v:.4f}")
    print(f"first screen after the trace is read: {res['first_screen_s']:.3f} s (target <= 1.5 s)")
    print(f"redraw after zoom/pan, median/max: {1e3 * res['zoom_redraw_median_s']:.1f}/"
          f"{1e3 * res['zoom_redraw_max_s']:.1f} ms zoom, {1e3 * res['pan_redraw_median_s']:.1f}/"
          f"{1e3 * res['pan_redraw_max_s']:.1f} ms pan (target <= 50 ms)")
    print(f"fit-all redraw vs naive full-scan anchor: {1e3 * res['fit_redraw_median_s']:.1f} ms vs "
          f"{1e3 * res['anchor_naive_fit_redraw_s']:.1f} ms (ratio anchor/ours "
          f"{res['anchor_naive_fit_redraw_s'] / res['fit_redraw_median_s']:.1f}x; ours also builds the strips)")
    print(f"longest UI event-loop gap while loading: {1e3 * res['max_ui_gap_during_load_s']:.0f} ms")


if __name__ == "__main__":
    main()
