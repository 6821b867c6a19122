"""How fast `ktrace view` is on a huge synthetic trace: first screen, full index, redraw after zoom/pan, UI gaps.

The loader worker indexes in steps: track list + coarse overview (the first screen is drawn from it), then every
track's sorted arrays, then the launch<->kernel links. The longest event-loop gap is measured over all of it.
With --from-file the trace is written to a .ktrace store first and opened by path, as `ktrace view FILE` does
(numba then loads while the trace is read); otherwise the in-memory trace is given and numba loads cold.

Anchor (measured in the same run): a naive full-scan redraw that bins every visible slice of every shown row
with numpy (np.bincount over all slices in the window) instead of searchsorted + prefix sums.

usage: python benchmarks/tui_speed.py [--kernels 10000000] [--width 200] [--height 50] [--from-file DIR | --open STORE]
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


def _top_gaps(gaps: list[float], gap_at: list[float], timings: dict[str, float], read_end: float) -> list[str]:
    """The five longest event-loop gaps: how long, when (from the end of the read), and in which loading step."""
    marks = sorted((v, k) for k, v in timings.items() if k in ("first_screen", "tracks_ready", "links_ready"))
    out = []
    for i in sorted(range(len(gaps)), key=gaps.__getitem__, reverse=True)[:5]:
        stage = next((k for v, k in marks if gap_at[i] <= v), "after")
        out.append(f"{1e3 * gaps[i]:.0f} ms ending {gap_at[i] - read_end:.2f} s after the read (before {stage})")
    return out


async def measure(
    trace,
    width: int,
    height: int,
    repeats: int,
    path=None,  # type: ignore[no-untyped-def]
    top_gaps: list[str] | None = None,
) -> dict[str, float]:
    from ktrace.tui.app import make_app
    from ktrace.tui.widgets.timeline import LABEL_W, Timeline

    app = make_app(trace=None if path else trace, path=path, analyses=False)
    gaps: list[float] = []
    gap_at: list[float] = []
    top_gaps = [] if top_gaps is None else top_gaps
    out: dict[str, float] = {}
    async with app.run_test(size=(width, height)) as pilot:
        last = time.perf_counter()

        def tick() -> None:
            nonlocal last
            now = time.perf_counter()
            gaps.append(now - last)
            gap_at.append(now)
            last = now

        timer = app.set_interval(0.01, tick)
        while "first_screen" not in app.timings:
            await asyncio.sleep(0.005)
        first_gaps = list(gaps)
        while "links_ready" not in app.timings:
            await asyncio.sleep(0.005)
        timer.stop()
        read_end = app.timings["mount"] + app.timings["read_s"]
        out["read_s"] = app.timings["read_s"]
        out["overview_index_s"] = app.timings["index_s"]
        out["first_screen_s"] = app.timings["first_screen"] - read_end
        out["track_arrays_s"] = app.timings["tracks_s"]
        out["all_tracks_ready_s"] = app.timings["tracks_ready"] - read_end
        out["links_s"] = app.timings["links_s"]
        out["links_ready_s"] = app.timings["links_ready"] - read_end
        out["max_ui_gap_until_first_screen_s"] = max(first_gaps) if first_gaps else float("nan")
        out["max_ui_gap_during_load_s"] = max(gaps) if gaps else float("nan")
        top_gaps += _top_gaps(gaps, gap_at, app.timings, read_end)
        tl = app.query_one(Timeline)
        assert tl.index is not None and tl.index.ready
        tl.rows = list(range(len(tl.index.tracks)))[:height]
        for name, action in (
            ("zoom", lambda: tl.action_zoom(2.0)),
            ("pan", lambda: tl.action_pan(0.2)),
            ("zoom_out", lambda: tl.action_zoom(0.5)),
        ):
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
    parser.add_argument("--from-file", metavar="DIR", help="write the trace to DIR/bench.ktrace and open it by path")
    parser.add_argument("--open", metavar="STORE", help="open an existing .ktrace store by path (no generation)")
    parser.add_argument("--in-memory", action="store_true", help="with --open: read it here, hand the Trace over")
    args = parser.parse_args()
    from ktrace.testing import SyntheticConfig, generate

    path = None
    if args.open:
        from pathlib import Path

        from ktrace.model.store import read

        path = Path(args.open)
        trace = read(path)
        print(f"opening {path}: {trace.kernels.height:,} kernels, {trace.api.height:,} API rows")
    else:
        per_step = 5_000
        t0 = time.perf_counter()
        trace = generate(
            SyntheticConfig(
                steps=max(1, args.kernels // per_step),
                kernels_per_step=per_step,
                streams=4,
                seed=1,
                counter_interval_ns=100_000_000,
            )
        )
        print(
            f"generated {trace.kernels.height:,} kernels, {trace.api.height:,} API rows in "
            f"{time.perf_counter() - t0:.1f} s"
        )
    if args.from_file:
        from pathlib import Path

        from ktrace.model.store import write

        path = Path(args.from_file) / "bench.ktrace"
        write(trace, path)
    if path is not None and not args.in_memory:
        del trace  # opened by path: the app reads it itself
        trace = None
    top_gaps: list[str] = []
    if args.in_memory:
        path = None
    res = asyncio.run(measure(trace, args.width, args.height, args.repeats, path, top_gaps))
    for k, v in res.items():
        print(f"{k:32s} {v:.4f}")
    print(f"first screen after the trace is read: {res['first_screen_s']:.3f} s (target <= 1.5 s)")
    print(
        f"redraw after zoom/pan, median/max: {1e3 * res['zoom_redraw_median_s']:.1f}/"
        f"{1e3 * res['zoom_redraw_max_s']:.1f} ms zoom, {1e3 * res['pan_redraw_median_s']:.1f}/"
        f"{1e3 * res['pan_redraw_max_s']:.1f} ms pan (target <= 50 ms)"
    )
    print(
        f"fit-all redraw vs naive full-scan anchor: {1e3 * res['fit_redraw_median_s']:.1f} ms vs "
        f"{1e3 * res['anchor_naive_fit_redraw_s']:.1f} ms (ratio anchor/ours "
        f"{res['anchor_naive_fit_redraw_s'] / res['fit_redraw_median_s']:.1f}x; ours also builds the strips)"
    )
    print(
        f"every track indexed {res['all_tracks_ready_s']:.2f} s and links {res['links_ready_s']:.2f} s after the read"
    )
    print(
        f"longest UI event-loop gap while loading: {1e3 * res['max_ui_gap_during_load_s']:.0f} ms "
        f"({1e3 * res['max_ui_gap_until_first_screen_s']:.0f} ms until the first screen)"
    )
    print("longest gaps:\n  " + "\n  ".join(top_gaps))


if __name__ == "__main__":
    main()
