"""How close to the hardware, in the TUI (issue 28): the operator screen's roofline view (`r`: operator, input shapes,
dtype, TFLOP/s, % of peak, bound) at 80 columns, and the launch figures of the kernel table and the details pane
(blocks per SM, est. achieved occupancy, registers, shared memory). Fails on the old code: no roofline view, no
such columns or details line.

Regenerate the snapshot only after looking at it: pytest tests/tui/test_hardware_views.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import numpy as np
import polars as pl
from real_traces import fixture_path
from test_operator_screen import _ScreenApp
from textual.pilot import Pilot
from textual.widgets import DataTable

import ktrace
from ktrace.analysis.kernels import kernel_figures
from ktrace.analysis.roofline import NO_SHAPES
from ktrace.analysis.summary import summarize
from ktrace.model.trace import Trace
from ktrace.tui.details import describe
from ktrace.tui.index_build import build_index
from ktrace.tui.operators_model import ROOFLINE_HEADERS, OperatorPanel, operator_panel
from ktrace.tui.steps import PENDING_STEPS
from ktrace.tui.table_model import COLUMNS, format_page, sm_counts

SMALL = (80, 24)


@functools.cache
def _owlv2_panel() -> OperatorPanel:
    return operator_panel(summarize(ktrace.open(fixture_path("tracelens")), top=8))


@functools.cache
def _nccl() -> Trace:
    return ktrace.open(fixture_path("nccl"))


def test_the_roofline_rows_are_the_summarys() -> None:
    panel = _owlv2_panel()
    assert panel.roofline[0] == ("aten::softmax", "[[16, 5185, 5185], [], []]", "bf16", "0.00", "23.5 %", "memory")
    assert panel.roofline[3][0] == "aten::linear" and panel.roofline[3][-1] == "compute"
    assert panel.roofline_note.endswith("NVIDIA H100 80GB HBM3, bf16 peak 990 TFLOP/s")
    bare = operator_panel(summarize(_nccl()))
    assert bare.roofline == [] and bare.roofline_note == NO_SHAPES


def test_r_shows_the_roofline_at_80_columns_and_back() -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with _ScreenApp(_owlv2_panel()).run_test(size=SMALL) as pilot:
            await pilot.pause()
            await pilot.press("r")
            await pilot.pause()
            screen = pilot.app.screen
            table = screen.query_one(DataTable)
            seen["headers"] = tuple(str(c.label) for c in table.columns.values())
            seen["first"] = [str(c) for c in table.get_row_at(0)]
            seen["content"], seen["room"] = table.virtual_size.width, table.scrollable_content_region.width
            await pilot.press("s")  # by shape leaves the roofline
            await pilot.pause()
            seen["shapes"] = str(next(iter(table.columns.values())).label), screen.roofline  # type: ignore[attr-defined]
            await pilot.press("r", "r")
            await pilot.pause()
            seen["back"] = tuple(str(c.label) for c in table.columns.values())

    asyncio.run(main())
    assert seen["headers"] == ROOFLINE_HEADERS == ("operator", "input shapes", "dtype", "TFLOP/s", "peak %", "bound")
    assert seen["first"][0] == "aten::softmax" and seen["first"][2:] == ["bf16", "0.00", "23.5 %", "memory"]
    assert seen["content"] <= seen["room"], seen
    assert seen["shapes"] == ("operator", False) and seen["back"][:2] == ("operator", "calls")


def test_roofline_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("r")
        await settled(pilot)

    assert snap_compare(_ScreenApp(_owlv2_panel()), terminal_size=SMALL, run_before=run_before)


def test_kernel_table_cells_give_the_launch_figures() -> None:
    trace = _nccl()
    figures = kernel_figures(trace)
    rows = np.arange(0, trace.kernels.height, 37, dtype=np.int64)
    cells = format_page(trace.kernels, rows, 0, sm_counts(trace.devices))
    at = {c.header: i for i, c in enumerate(COLUMNS)}
    per_sm = [f"{v:,.2f}" for v in figures["blocks_per_sm"].gather(rows.tolist()).to_list()]
    assert [row[at["blk/SM"]] for row in cells] == per_sm
    occupancy = figures["est_occupancy_pct"].gather(rows.tolist()).to_list()
    assert [row[at["occ."]] for row in cells] == ["-" if v is None else f"{v:.0f} %" for v in occupancy]
    assert any(row[at["occ."]] != "-" for row in cells) and any(row[at["occ."]] == "-" for row in cells)
    shared = figures["shared_bytes"].gather(rows.tolist()).to_list()
    assert [row[at["shared"]] == "-" for row in cells] == [v is None for v in shared]
    assert format_page(trace.kernels, rows[:1], 0)[0][at["blk/SM"]] == "-"  # no SM counts: no figure


def test_details_name_the_blocks_per_sm_and_the_occupancy() -> None:
    trace = _nccl()
    k = trace.kernels.with_row_index()
    row = k.filter(pl.col("est_occupancy_pct") > 0).row(0, named=True)
    fields = dict(describe(build_index(trace), PENDING_STEPS, "kernels", row["index"]))
    blocks = row["grid_x"] * row["grid_y"] * row["grid_z"]
    assert fields["efficiency"] == (
        f"{blocks / 108:,.2f} blocks per SM (108 SMs) · est. achieved occupancy {row['est_occupancy_pct']} %"
    )
    assert fields["registers"] == f"{row['registers_per_thread']} per thread"
