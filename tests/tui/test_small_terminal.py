"""The tree and track titles people can read: GPU annotations under their GPU, streams in numeric order, titles
that say what a row is, several ranks shown at first."""

from __future__ import annotations

import numpy as np

from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import TraceMeta
from ktrace.tui.first_rows import default_rows
from ktrace.tui.index_build import build_index
from ktrace.tui.tree_model import tree_roots

T0 = 1_700_000_000_000_000_000


def _trace(ranks: int = 1):  # type: ignore[no-untyped-def]
    """Kernels on streams 7, 22, 24 and 84; a host thread 4242 with a range; a Kineto-style GPU annotation row
    (pid 0 = device, tid 7 = stream, on_gpu)."""
    b = TraceBuilder(node="host", rank=0, meta=TraceMeta(source="kineto"))
    for rank in range(ranks):
        streams = np.array([7, 22, 24, 84] * 5)
        starts = T0 + np.arange(streams.size, dtype=np.int64) * 10_000
        n = streams.size
        b.add(
            "kernels",
            {
                "start_ns": starts,
                "end_ns": starts + 5_000,
                "device": np.zeros(n, np.int32),
                "stream": streams,
                "correlation_id": np.arange(n),
                "name": ["k"] * n,
            },
            rank=rank,
        )
        b.add(
            "ranges",
            {
                "start_ns": [T0, T0],
                "end_ns": [T0 + 90_000, T0 + 90_000],
                "pid": [4242, 0],
                "tid": [4242, 7],
                "name": ["step", "gpu step"],
                "domain": ["user", "gpu_user_annotation"],
                "depth": [0, 0],
                "on_gpu": [False, True],
                "device": [None, 0],
                "stream": [None, 7],
            },
            rank=rank,
        )
    return b.build()


def _expand_all(items):  # type: ignore[no-untyped-def]
    out = []
    for item in items:
        out.append(item)
        if item.expand is not None:
            out += _expand_all(item.expand())
    return out


def test_gpu_annotations_sit_under_the_gpu_and_streams_sort_as_numbers() -> None:
    index = build_index(_trace())
    items = _expand_all(tree_roots(index))
    labels = [i.label for i in items]
    gpu = next(i for i in items if i.label.startswith("GPU 0"))
    under_gpu = [c.label for c in _expand_all(gpu.expand())]  # type: ignore[misc]
    assert any(lab.startswith("GPU annotations") for lab in under_gpu), under_gpu
    assert not any("pid 0" in lab or "thread 7" in lab for lab in labels), labels
    streams = [lab.split(" · ")[0] for lab in under_gpu if lab.startswith("stream")]
    assert streams == ["stream 7", "stream 22", "stream 24", "stream 84"]
    rows = [index.title(i) for i in default_rows(index)]
    stream_rows = [r for r in rows if r.startswith("stream")]
    assert stream_rows == sorted(stream_rows, key=lambda r: int(r.split()[1]))


def test_track_titles_say_what_the_row_is() -> None:
    index = build_index(_trace())
    titles = {index.tracks[i].kind: index.title(i) for i in range(len(index.tracks))}
    assert titles["stream"].startswith("stream ") and "GPU0" in titles["stream"]
    host = [index.title(i) for i, t in enumerate(index.tracks) if t.kind == "ranges" and "4242" in t.key]
    assert host == ["ranges lvl 0 · T4242"]
    assert not any(":" in index.title(i) for i in range(len(index.tracks)))


def test_several_ranks_open_on_every_rank() -> None:
    index = build_index(_trace(ranks=3))
    shown = {index.tracks[i].rank for i in default_rows(index)}
    assert shown == {0, 1, 2}
    assert all(index.title(i).startswith(f"r{index.tracks[i].rank} ") for i in default_rows(index))


def test_narrow_timelines_keep_labels_readable_and_distinct() -> None:
    """At 80x24 the label column was 13 columns: "stream 7 · G", "CUDA API · T" (the thread cut off). Narrow
    timelines now drop the where of rows whose what is unique and size the column to the labels."""
    from ktrace.tui.viewmodel import label_cap, row_labels

    assert label_cap(200) == 32 and label_cap(115) == 28 and label_cap(53) == 17 and label_cap(20) == 10
    one_thread = [("ranges lvl 0", "T2869224"), ("CUDA API", "T2869224"), ("stream 7", "GPU0"), ("stream 20", "GPU0")]
    labels, width = row_labels(one_thread, 53)
    assert labels == ["ranges lvl 0", "CUDA API", "stream 7", "stream 20"] and width == 13
    labels, width = row_labels(one_thread, 115)  # room enough: the full titles
    assert labels[0] == "ranges lvl 0 · T2869224" and width == 24
    two_threads = [("CUDA API", "T12"), ("CUDA API", "T13"), ("stream 7", "GPU0")]
    labels, width = row_labels(two_threads, 40)  # two CUDA API rows keep their thread, the stream drops its GPU
    # 13 columns leave 12 characters: "CUDA API · T12" used to be cut to "CUDA API · T1" on both rows; now the
    # labels are cut where they differ (analysis.names.distinct_short_names)
    assert labels == ["CUD…PI · T12", "CUD…PI · T13", "stream 7"] and width == 13
    assert all(len(label) <= width - 1 for label in labels)


def test_kernel_details_never_print_none() -> None:
    from ktrace.tui.details import _gpu_fields

    rec = {
        "grid_x": 4,
        "grid_y": 1,
        "grid_z": 1,
        "block_x": 128,
        "block_y": 1,
        "block_z": 1,
        "registers_per_thread": None,
        "static_shared_bytes": 0,
        "dynamic_shared_bytes": None,
    }
    text = " ".join(v for _, v in _gpu_fields(rec))
    assert "None" not in text and "dynamic -" in text
    rec.update(registers_per_thread=32, static_shared_bytes=49_152, dynamic_shared_bytes=2048)
    assert "static 49.2 KB, dynamic 2.0 KB" in " ".join(v for _, v in _gpu_fields(rec))


def test_breadcrumb_at_a_step_boundary_names_one_step() -> None:
    """Used to read `ProfilerStep#7 > ProfilerStep#8` for a slice starting where step 8 starts."""
    from ktrace.tui.details import enclosing_ranges

    b = TraceBuilder(node="host", rank=0, meta=TraceMeta(source="ktrace"))
    b.add(
        "ranges",
        {
            "start_ns": [T0, T0 + 100, T0 + 100],
            "end_ns": [T0 + 100, T0 + 200, T0 + 150],
            "pid": [1, 1, 1],
            "tid": [1, 1, 1],
            "name": ["ProfilerStep#7", "ProfilerStep#8", "forward"],
            "domain": ["profiler_step", "profiler_step", "ktrace"],
            "depth": [0, 0, 1],
            "on_gpu": [False] * 3,
        },
    )
    index = build_index(b.build())
    assert enclosing_ranges(index, "host", 0, T0 + 100) == ["ProfilerStep#8", "forward"]
    assert enclosing_ranges(index, "host", 0, T0 + 50) == ["ProfilerStep#7"]


def test_dashboard_top_kernels_read_differently() -> None:
    import io

    import polars as pl
    from rich.console import Console

    from ktrace.presentation.page import Table, columns
    from ktrace.tui.dashboard_panels import PanelRenderer

    gemm = "void cutlass::Kernel2<cutlass_75_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_{t}_align1>(Params)"
    names = [gemm.format(t=t) for t in ("tn", "nn", "nt", "tt")]  # owlv2's: equal for 59 characters
    top = pl.DataFrame(
        {"name": names, "total_ns": [4, 3, 2, 1], "time_share": [0.4, 0.3, 0.2, 0.1], "count": [1, 1, 1, 1]}
    )
    renderer = PanelRenderer()
    renderer.table(Table("top_kernels_by_time", "", columns(*top.columns), tuple(top.iter_rows(named=True))))
    body = renderer.end()[2].body  # drawn to the panel's width: here an 80-column terminal's
    console = Console(width=76, record=True, color_system=None, file=io.StringIO())
    console.print(body)
    labels = [line.split("█")[0].strip() for line in console.export_text().splitlines() if line.strip()]
    assert len(labels) == 4 and len(set(labels)) == 4, labels


def test_kernel_details_show_grid_and_block_at_80x24(settled) -> None:  # type: ignore[no-untyped-def]
    """At 80x24 the details pane showed four lines of a templated kernel name and cut grid/block: the name now
    takes one line (whole at the end), the launch configuration comes before the times, and the pane takes the
    lines the timeline's rows leave free."""
    import asyncio

    from real_traces import fixture_path

    from ktrace.tui.app import make_app
    from ktrace.tui.widgets.details import Details

    app = make_app(fixture_path("power_iteration"), analyses=False)

    async def main() -> list[str]:
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot)
            await pilot.press("n", "n", *"jjjjj", "right_square_bracket", "right_square_bracket")
            await settled(pilot)
            details = app.query_one("#timeline-details", Details)
            assert dict(details.fields)["what"].startswith("kernel: ")
            return [details.render_line(y).text for y in range(details.size.height)]  # the lines on screen

    lines = asyncio.run(main())
    shown = [line.split()[0] for line in lines if line.strip()]
    assert shown[:4] == ["what", "duration", "grid", "block"], lines
    assert {"start", "where"} <= set(shown), lines
    assert lines[0].rstrip().endswith("…"), lines  # a name that does not fit is cut on its line
