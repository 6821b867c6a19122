"""Every view cuts names with the distinct-name shortener (ktrace.analysis.names.distinct_short_names), never into
two names that read the same: a scan of the source for ad-hoc cuts, and the views that cut names rendered with
names sharing long prefixes (eight `bmm_MxE4m3_MxE2m1MxE4m3…` rows on a B200 trace, two
`torch::autograd::CppNode<…>` operators, 14-character names in `COLUMNS=80 ktrace diff`)."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from ktrace.analysis.names import distinct_short_names

SRC = Path(__file__).resolve().parents[2] / "src" / "ktrace"

AD_HOC_CUT = re.compile(r"\[\s*:[^\]]*\]\s*\+\s*[\"']…[\"']|\bfit_end\(")
"""`text[: n - 1] + "…"` and the generic cutter `fit_end(`: a name cut there may read like another."""

CUTTERS = {
    "analysis/names.py": "the shortener itself",
    "model/display_text.py": "defines fit_end",
    "importers/nsys_sqlite.py": "an nsys string kept on one line on import, not a view",
}
"""Modules that may cut text another way, and why."""


def test_no_view_cuts_a_name_another_way() -> None:
    found = {
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        if AD_HOC_CUT.search(path.read_text(encoding="utf-8"))
    }
    assert found - CUTTERS.keys() == set(), "cut names with distinct_short_names"


B200 = [
    f"bmm_MxE4m3_MxE2m1MxE4m3_{out}_t128x{n}x256u2_s{s}_et128x64_m128x{n}x64_cga1x1x1_16dp256b_TN_transOut_sched{k}_sm100f"
    for out in ("Fp32", "Bfloat16")
    for n, s in ((128, 3), (64, 4))
    for k in ("S", "P")
]
"""Eight B200 FP4 GEMM kernels that differ in the middle and near the end of their names."""


def test_the_shortener_tells_b200_gemms_apart_at_the_kernel_tables_width() -> None:
    for width in (24, 31, 60):
        shown = distinct_short_names(B200, width)
        assert len(set(shown.values())) == len(B200) and all(len(s) <= width for s in shown.values()), shown
        assert not any(" #" in s for s in shown.values()), shown  # told apart by what differs, not numbered
    assert distinct_short_names(B200, 24)[B200[0]] == "bmm…Fp32…s3…schedS…"


def test_operator_names_keep_what_and_which() -> None:
    """`autograd::engine::evaluate_function: torch::autograd::CppNode<X>` lost its first half when shortened."""
    names = [
        f"autograd::engine::evaluate_function: torch::autograd::CppNode<{op}>"
        for op in ("SplitLookupFunction_adagrad_Op", "SplitLookupFunction_sgd_Op")
    ]
    shown = distinct_short_names(names, 60)
    assert sorted(shown.values()) == [
        "evaluate_function: CppNode<SplitLookupFunction_adagrad_Op>",
        "evaluate_function: CppNode<SplitLookupFunction_sgd_Op>",
    ]


def _table_lines(rows: list[dict[str, object]], width: int = 80) -> list[str]:
    from ktrace.report.terminal_tables import print_table

    out = io.StringIO()
    print_table(Console(file=out, width=width, color_system=None, force_terminal=False), "t", rows)
    return out.getvalue().splitlines()[3:]


def test_the_diffs_kernel_table_at_80_columns_gives_names_room_and_keeps_them_apart() -> None:
    """`COLUMNS=80 ktrace diff` cut kernel names to 14 characters; the launch counts now give way first."""
    rows: list[dict[str, object]] = [
        {
            "name": name,
            "count_a": 474,
            "count_b": 12,
            "total_a_ns": 12_620_000,
            "total_b_ns": 277_000,
            "delta_ns": -12_343_000,
            "status": "decreased",
        }
        for name in B200
    ]
    lines = _table_lines(rows)
    names = [line.split("  ")[0].strip() for line in lines]
    assert len(set(names)) == len(B200), lines
    assert all(("Fp32" in n or "Bfloat16" in n) and ("schedS" in n or "schedP" in n) for n in names), lines
    assert all(len(line.rstrip()) <= 80 for line in lines)


def test_every_name_column_of_a_terminal_table_is_cut_apart() -> None:
    """A module (or host) column was cut by rich: two modules differing at the end read the same."""
    modules = [f"nn.Module: DLRM_Net.embedding_bags.EmbeddingBagCollection.tables_{i}" for i in (1, 2)]
    rows: list[dict[str, object]] = [
        {"module": m, "calls": 8, "cpu_total_ns": 1_000_000, "gpu_ns": 2_000_000, "gpu_inclusive_ns": 3_000_000}
        for m in modules
    ]
    lines = _table_lines(rows, width=60)
    shown = [line.split("  ")[0].strip() for line in lines]
    assert len(set(shown)) == 2 and all(s.endswith(("_1", "_2")) for s in shown), lines


def _b200_trace():  # type: ignore[no-untyped-def]
    import numpy as np

    from ktrace.model.builder import TraceBuilder
    from ktrace.model.trace import TraceMeta

    t0 = 1_700_000_000_000_000_000
    n = len(B200)
    b = TraceBuilder(node="b200", rank=0, meta=TraceMeta(source="kineto"))
    starts = t0 + np.arange(n, dtype=np.int64) * 1_000_000
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": starts + 900_000 - np.arange(n) * 1_000,
            "device": np.zeros(n, np.int32),
            "stream": np.full(n, 7),
            "correlation_id": np.arange(n),
            "name": B200,
        },
    )
    return b.build()


def test_the_kernel_table_at_80_columns_shows_eight_b200_gemms_apart(settled) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from ktrace.tui.app import make_app
    from ktrace.tui.table_model import NAME
    from ktrace.tui.widgets.kernel_table import KernelTable

    async def main() -> list[str]:
        app = make_app(trace=_b200_trace(), analyses=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot)
            await pilot.press("2")
            await settled(pilot)
            table = app.query_one(KernelTable)
            width = table._widths()[NAME]
            start = sum(w + 1 for w in table._widths()[:NAME])
            return [table.render_line(y).text[start : start + width].strip() for y in range(1, len(B200) + 1)]

    names = asyncio.run(main())
    assert len(names) == len(B200) and len(set(names)) == len(B200), names


def test_a_cut_name_keeps_its_end_when_the_difference_is_near_it() -> None:
    """DLRM's two CppNode operators read 'CppN…plitLookupFunction_a…' and '…_D…' at the operator screen's width:
    the window now ends on the name's end when everything from the difference on fits."""
    names = [f"torch::autograd::CppNode<SplitLookupFunction_{opt}_Op>" for opt in ("adagrad", "Dense")]
    shown = distinct_short_names(names, 26)
    assert shown[names[0]].endswith("_adagrad_Op>") and shown[names[1]].endswith("_Dense_Op>"), shown
