"""The operator screen (`o`): operators -> the highlighted operator's kernels, and the module view.

Pilot tests on two real Kineto traces: alexnet (operators, no module frames) loaded by the app, and the H100
trace's summary (nn.Module frames) shown on the screen directly; SVG snapshots of both at 80x24.
Regenerate the snapshots only after looking at them: pytest tests/tui/test_operator_screen.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import functools
import io
from typing import Any

from real_traces import fixture_path
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from ktrace.tui.app import make_app
from ktrace.tui.operators_model import OperatorPanel, operator_panel
from ktrace.tui.screens.operators import OperatorScreen

SMALL = (80, 24)


def _text(screen: Any, widget_id: str) -> str:
    """What a Static shows, as plain text (its content may be a rich Table)."""
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    widget = screen.query_one(widget_id, Static)
    console.print(widget.content if hasattr(widget, "content") else widget.renderable)  # textual < 4: renderable
    return console.export_text()


def test_o_opens_the_operators_and_the_cursor_picks_whose_kernels_show(drive) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("o")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, OperatorScreen)
        table = screen.query_one(DataTable)
        seen["rows"] = [table.get_row_at(i)[0] for i in range(table.row_count)]
        seen["first"] = _text(screen, "#op-kernels")
        await pilot.press("down")
        await pilot.pause()
        seen["second"] = _text(screen, "#op-kernels")
        seen["modules"] = _text(screen, "#op-modules")
        await pilot.press("escape")
        await pilot.pause()
        seen["closed"] = not isinstance(pilot.app.screen, OperatorScreen)

    drive(make_app(fixture_path("alexnet")), scenario)
    assert seen["rows"][:3] == ["aten::copy_", "aten::cudnn_convolution", "aten::addmm"]
    assert "kernels of aten::copy_: none listed" in seen["first"]  # its GPU time is memcpys
    assert "kernels of aten::cudnn_convolution" in seen["second"] and "sm80_xmma_fprop" in seen["second"]
    assert "no nn.Module frames" in seen["modules"] and seen["closed"]


@functools.cache
def _h100_panel() -> OperatorPanel:
    import ktrace
    from ktrace.analysis.summary import summarize

    return operator_panel(summarize(ktrace.open(fixture_path("tracelens")), top=8))


class _ScreenApp(App[None]):
    """Just the operator screen over an empty app, with a given panel."""

    def __init__(self, panel: OperatorPanel | None) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> ComposeResult:
        yield Static("")

    def on_mount(self) -> None:
        self.push_screen(OperatorScreen(self.panel))


def test_module_view_on_the_h100_trace(drive) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, str] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        seen["modules"] = _text(pilot.app.screen, "#op-modules")

    drive(_ScreenApp(_h100_panel()), scenario)
    assert "466 modules" in seen["modules"] and "Owlv2ForObjectDetection_0" in seen["modules"]


def test_pending_until_the_summary_arrives(drive) -> None:  # type: ignore[no-untyped-def]
    seen: dict[str, str] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        screen = pilot.app.screen
        seen["before"] = _text(screen, "#op-note")
        screen.show(OperatorPanel("operators: none in this trace"))
        await pilot.pause()
        seen["after"] = _text(screen, "#op-note")

    drive(_ScreenApp(None), scenario)
    assert "computing" in seen["before"] and seen["after"].strip() == "operators: none in this trace"


def test_operators_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("o")
        await settled(pilot)

    assert snap_compare(make_app(fixture_path("alexnet")), terminal_size=SMALL, run_before=run_before)


def test_modules_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_ScreenApp(_h100_panel()), terminal_size=SMALL, run_before=settled)


def test_by_shape_at_80x24(snap_compare, settled) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await settled(pilot)
        await pilot.press("s")
        await settled(pilot)

    assert snap_compare(_ScreenApp(_h100_panel()), terminal_size=SMALL, run_before=run_before)


def test_view_no_ops_reads_no_operators(drive) -> None:  # type: ignore[no-untyped-def]
    from ktrace.analysis.summary import NO_OPERATORS

    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("o")
        await pilot.pause()
        seen["ops"] = pilot.app.trace.ops.height  # type: ignore[attr-defined]
        seen["note"] = _text(pilot.app.screen, "#op-note")

    drive(make_app(fixture_path("alexnet"), with_ops=False), scenario)
    assert seen["ops"] == 0 and NO_OPERATORS[:30] in seen["note"]


def test_a_long_operator_name_leaves_every_column_on_an_80_column_screen() -> None:
    """DLRM's `torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>` (58 characters) pushed the GPU, kernels and
    launch->run columns off an 80-column screen; the name is cut instead, and the row still finds its kernels."""
    long_name = "torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>"
    panel = OperatorPanel(
        "2 operators",
        [
            (long_name, "64", "10.06 ms", "70.12 ms", "128", "1.23 ms"),
            ("aten::mm", "832", "23.10 ms", "6.01 ms", "832", "12.00 µs"),
        ],
        {long_name: [("embedding_backward_kernel", "128", "70.12 ms")]},
    )
    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.pause()
        table = pilot.app.screen.query_one(DataTable)
        seen["content"], seen["room"] = table.virtual_size.width, table.scrollable_content_region.width
        seen["cell"] = table.get_row_at(0)[0]
        seen["kernels"] = _text(pilot.app.screen, "#op-kernels")

    async def main() -> None:
        async with _ScreenApp(panel).run_test(size=SMALL) as pilot:
            await scenario(pilot)

    asyncio.run(main())
    assert seen["content"] <= seen["room"], seen
    assert "CppNode<SplitLookup" in seen["cell"] and len(seen["cell"]) < len(long_name)  # the telling part kept
    assert "embedding_backward_kernel" in seen["kernels"]


def test_names_sharing_a_long_prefix_stay_distinct_at_80_columns() -> None:
    """Two `torch::autograd::CppNode<…>` operators read the same at 80 columns, and so did two kernels or modules
    that differ late in the name: every column of names is cut where the names differ."""
    ops = [f"torch::autograd::CppNode<SplitLookupFunction_{opt}_Op>" for opt in ("adagrad", "rowwise_adagrad")]
    kernels = [f"void fbgemm_gpu::split_embedding_backward_codegen_{opt}_kernel<float>()" for opt in ("sgd", "adam")]
    modules = [f"nn.Module: DLRM_Net.embedding_bags.EmbeddingBagCollection_{i}" for i in (1, 2)]
    panel = OperatorPanel(
        "2 operators",
        [(name, "64", "10.06 ms", "70.12 ms", "128", "1.23 ms") for name in ops],
        {ops[0]: [(k, "64", "35.06 ms") for k in kernels]},
        [(m, "8", "1.00 ms", "2.00 ms", "3.00 ms") for m in modules],
        "2 modules",
    )
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with _ScreenApp(panel).run_test(size=SMALL) as pilot:
            await pilot.pause()
            table = pilot.app.screen.query_one(DataTable)
            seen["ops"] = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            seen["kernels"] = _text(pilot.app.screen, "#op-kernels")
            seen["modules"] = _text(pilot.app.screen, "#op-modules")

    asyncio.run(main())
    assert len(set(seen["ops"])) == 2 and all(len(op) < len(ops[1]) for op in seen["ops"]), seen["ops"]
    for pane, wanted in (("kernels", ("sgd", "adam")), ("modules", ("_1", "_2"))):
        rows = [line.split("│")[0].strip() for line in seen[pane].splitlines()[2:] if "│" in line]
        assert len(rows) == 2 and len(set(rows)) == 2, (pane, seen[pane])
        assert all(w in row for w, row in zip(wanted, rows, strict=True)), (pane, rows)


def test_names_that_look_like_markup_are_shown_as_they_are(drive) -> None:  # type: ignore[no-untyped-def]
    """Operator, kernel and module names come from the trace: "[/x]" in one crashed rich's markup parser (a
    MarkupError) and "[bold]" restyled the table; every cell is Text."""
    name, kernel = "aten::op[/x]", "gemm[bold]k"
    panel = OperatorPanel(
        "1 operator",
        operators=[(name, "1", "1 µs", "2 µs", "1", "3 µs")],
        kernels={name: [(kernel, "1", "2 µs")]},
        modules=[("Block[/]_0", "1", "1 µs", "2 µs", "2 µs")],
        modules_note="1 module",
    )
    seen: dict[str, str] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        seen["kernels"] = _text(pilot.app.screen, "#op-kernels")
        seen["modules"] = _text(pilot.app.screen, "#op-modules")

    drive(_ScreenApp(panel), scenario)
    assert f"kernels of {name}" in seen["kernels"] and kernel in seen["kernels"]
    assert "Block[/]_0" in seen["modules"]


def test_s_switches_to_operators_by_input_shape_and_back(drive) -> None:  # type: ignore[no-untyped-def]
    """The H100 trace records shapes: `s` lists (operator, input shapes) rows, the highlighted row still picks its
    operator's kernels, and `s` again restores the table by name."""
    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        table = pilot.app.screen.query_one(DataTable)
        seen["by_name"] = [str(c) for c in table.get_row_at(0)]
        await pilot.press("s")
        await pilot.pause()
        seen["columns"] = [str(c.label) for c in table.columns.values()]
        seen["rows"] = [[str(c) for c in table.get_row_at(i)] for i in range(3)]
        await pilot.press("down")
        await pilot.pause()
        seen["kernels"] = _text(pilot.app.screen, "#op-kernels")
        await pilot.press("s")
        await pilot.pause()
        seen["back"] = [str(c) for c in table.get_row_at(0)]

    drive(_ScreenApp(_h100_panel()), scenario)
    assert seen["columns"][:2] == ["operator", "input shapes"]
    assert [r[0] for r in seen["rows"]] == ["aten::_softmax", "aten::bmm", "aten::bmm"]
    shapes = ["[[16, 5185, 5185], [], []]", "[[16, 5185, 64], [16, 64, 5185]]", "[[16, 5185, 5185], [16, 5185, 64]]"]
    for row, full in zip(seen["rows"], shapes, strict=True):  # cut to the 80-column screen, never past it
        assert row[1] == full or (row[1].endswith("…") and full.startswith(row[1][:-1]))
    assert "kernels of aten::bmm (all its shapes; this row's: [[16, 5185, 64], [16, 64, 5185]])" in " ".join(
        seen["kernels"].split()
    )
    assert seen["back"] == seen["by_name"] and seen["back"][0] == "aten::_softmax"


def test_s_on_a_trace_without_shapes_says_why(drive) -> None:  # type: ignore[no-untyped-def]
    panel = OperatorPanel("1 operator", operators=[("aten::mm", "1", "1 µs", "2 µs", "1", "3 µs")])
    seen: dict[str, Any] = {}

    async def scenario(pilot: Pilot) -> None:  # type: ignore[type-arg]
        await pilot.press("s")
        await pilot.pause()
        seen["note"] = _text(pilot.app.screen, "#op-note")
        seen["first"] = pilot.app.screen.query_one(DataTable).get_row_at(0)[0]

    drive(_ScreenApp(panel), scenario)
    assert "record_shapes=True" in seen["note"] and seen["first"] == "aten::mm"


def test_nvtx_operators_say_where_they_come_from() -> None:
    import ktrace
    from ktrace.analysis.summary import summarize

    panel = operator_panel(summarize(ktrace.open(fixture_path("power_iteration")), top=5))
    assert "NVTX ranges play their part" in panel.note and panel.modules_note == ""
    assert panel.operators[0][0].startswith("Compute ")


def test_module_names_are_only_cut_not_read_as_cpp() -> None:
    """A module's "(MLP)" is no parameter list: the modules pane keeps it (the C++ shortener dropped it)."""
    from ktrace.tui.operators_model import MODULE_HEADERS
    from ktrace.tui.screens.operators import _table

    table = _table(MODULE_HEADERS, [("layers.0.mlp (MLP)", "1", "1 ms", "1 ms", "1 ms")], "modules", 120, plain=True)
    assert [str(c) for c in table.columns[0].cells] == ["layers.0.mlp (MLP)"]
