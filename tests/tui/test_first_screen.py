"""The first screen shows the GPU: the streams that hold the most GPU time are among the first rows at any
terminal height (a 16-stream CUDA-graph trace opened on 14 CPU rows; DLRM opened without its NCCL stream, which
holds 66 % of the GPU time), and the tree names a thread once."""

from __future__ import annotations

import asyncio

import numpy as np
from real_traces import fixture_path

import ktrace
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta
from ktrace.tui.app import make_app
from ktrace.tui.first_rows import default_rows
from ktrace.tui.index_build import build_index
from ktrace.tui.tree_model import tree_roots
from ktrace.tui.widgets.timeline import Timeline

T0 = 1_700_000_000_000_000_000
STREAMS = 16
THREADS = 3


def many_streams_trace() -> Trace:
    """One rank: 16 streams of CUDA-graph kernels, stream 7 + k running k+1 times longer kernels than stream 7;
    3 host threads, each with 4 range levels, operators and CUDA API calls (18 CPU rows, more than a screen)."""
    b = TraceBuilder(node="a100", rank=0, meta=TraceMeta(source="kineto"))
    stream = np.repeat(np.arange(7, 7 + STREAMS), 4)
    starts = T0 + np.tile(np.arange(4, dtype=np.int64) * 1_000_000, STREAMS)
    ends = starts + (stream - 6) * 10_000
    n = stream.size
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": ends,
            "device": np.zeros(n, np.int32),
            "stream": stream,
            "correlation_id": np.arange(n),
            "name": [f"graph_kernel_{s}" for s in stream],
            "graph_id": np.ones(n, np.int64),
        },
    )
    for t in range(THREADS):
        tid = 100 + t
        b.add(
            "ranges",
            {
                "start_ns": [T0 + d * 10 for d in range(4)],
                "end_ns": [T0 + 4_000_000 - d * 10 for d in range(4)],
                "pid": [100] * 4,
                "tid": [tid] * 4,
                "name": [f"range {d}" for d in range(4)],
                "domain": ["user"] * 4,
                "depth": list(range(4)),
                "on_gpu": [False] * 4,
            },
        )
        b.add("ops", {"start_ns": [T0 + 100], "end_ns": [T0 + 200], "pid": [100], "tid": [tid], "name": ["aten::mm"]})
        b.add(
            "api",
            {
                "start_ns": [T0 + 300],
                "end_ns": [T0 + 400],
                "pid": [100],
                "tid": [tid],
                "correlation_id": [10_000 + t],
                "domain": ["runtime"],
                "name": ["cudaGraphLaunch"],
            },
        )
        b.add("threads", {"pid": [100], "tid": [tid], "name": [f"thread {tid} (python3)"]})
    return b.build()


def _stream(title: str) -> int:
    return int(title.split(" · ")[0].split()[-1])


def test_a_screen_of_cpu_rows_still_shows_the_busiest_streams() -> None:
    """Used to show the first 13 CPU rows of 18 and no stream at all at 80x24."""
    index = build_index(many_streams_trace())
    for limit in (13, 8, 4):
        rows = [index.title(i) for i in default_rows(index, limit)]
        assert len(rows) == limit
        streams = [_stream(r) for r in rows if r.startswith("stream")]
        assert len(streams) == max(1, limit // 2), rows
        busiest = list(range(7 + STREAMS - 1, 7 + STREAMS - 1 - len(streams), -1))
        assert sorted(streams) == sorted(busiest), rows  # the longest kernels are on the highest streams
        assert any(r.startswith("CUDA API") for r in rows) or limit < 4, rows


def test_every_row_when_they_fit() -> None:
    index = build_index(many_streams_trace())
    rows = default_rows(index, 100)
    assert len(rows) == len(index.tracks)
    kinds = [index.tracks[i].kind for i in rows]
    assert kinds.index("stream") == len(kinds) - STREAMS  # the tree's order: CPU rows, then the GPU's


def test_several_ranks_show_the_stream_with_the_most_gpu_time() -> None:
    """DLRM: stream 7 has the most kernels on every rank, stream 84 (NCCL) the most GPU time; it used to open on
    the streams 7 only."""
    trace = ktrace.open(fixture_path("dlrm"))
    index = build_index(trace)
    rows = [index.title(i) for i in default_rows(index, 10)]
    assert [r.split(" · ")[0] for r in rows if " stream " in r] == [f"r{r} stream 84" for r in range(8)], rows


def test_a_thread_is_named_once_in_the_tree() -> None:
    """Kineto names a thread "thread 101 (python3)": the tree read "thread 101 thread 101 (python3) · …"."""
    index = build_index(many_streams_trace())
    rank = tree_roots(index)[0].expand()[0]  # type: ignore[misc]
    labels = [c.label for c in rank.expand()]  # type: ignore[misc]
    threads = [lab for lab in labels if lab.startswith("thread")]
    assert threads and all(lab.startswith(f"thread {100 + i} (python3) · ") for i, lab in enumerate(threads)), labels


def test_the_first_screen_at_80x24_has_the_busiest_streams(settled) -> None:  # type: ignore[no-untyped-def]
    """The rows chosen fit the timeline: every one is on screen with the details pane at its floor, streams too."""

    async def main() -> None:
        app = make_app(trace=many_streams_trace(), analyses=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot)
            timeline = app.query_one(Timeline)
            visible = timeline.size.height - 1  # below the ruler
            titles = [app.index.title(i) for i in timeline.rows]  # type: ignore[union-attr]
            assert len(titles) <= visible, (titles, visible)
            assert sum(t.startswith("stream") for t in titles) >= 3, titles
            assert any(t.startswith(f"stream {7 + STREAMS - 1}") for t in titles), titles

    asyncio.run(main())


def test_first_screen_at_80x24_snapshot(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    """A snapshot at 80x24 whose first screen has GPU stream rows (the 16-stream trace above)."""
    assert snap_compare(
        make_app(trace=many_streams_trace(), analyses=False), terminal_size=(80, 24), run_before=settled
    )


def test_an_empty_details_pane_is_one_line_at_80x24(settled) -> None:  # type: ignore[no-untyped-def]
    """The kernel tab's empty details pane took 7 of 24 rows (the timeline's 3): now its border and a one-line hint."""
    from ktrace.tui.widgets.details import Details

    async def main() -> None:
        app = make_app(trace=many_streams_trace(), analyses=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot)
            assert app.query_one("#timeline-details", Details).outer_size.height == 2
            await pilot.press("2")
            await settled(pilot)
            assert app.query_one("#kernel-details", Details).outer_size.height == 2
            await pilot.press("j")  # a kernel chosen: its details take the room they need
            await settled(pilot)
            assert app.query_one("#kernel-details", Details).outer_size.height > 2

    asyncio.run(main())


def test_a_tall_terminal_opens_on_more_rows(settled) -> None:  # type: ignore[no-untyped-def]
    """At 160x45 the timeline opened on 14 rows above 25 empty lines (the rows were chosen before the pane was
    laid out); now on the rows that fit, every one on screen."""

    async def main() -> None:
        for size, rows in (((80, 24), 13), ((160, 45), 25)):
            app = make_app(trace=many_streams_trace(), analyses=False)
            async with app.run_test(size=size) as pilot:
                await settled(pilot)
                timeline = app.query_one(Timeline)
                assert len(timeline.rows) == rows and rows <= timeline.size.height - 1, (size, timeline.size)

    asyncio.run(main())
