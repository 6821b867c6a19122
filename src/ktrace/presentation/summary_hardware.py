"""How close the work came to the hardware: the roofline of the top operators with the MFU of each rank's steps,
the NCCL collectives by message size with nccl-tests' bus bandwidth (and their arrival skew across ranks), and the
launch figures of the top kernels (blocks per SM, est. achieved occupancy, registers, shared memory).

The summary JSON has every row (roofline.operators, mfu.per_step, collectives.by_size, the figures in top_by_time
and the operators' tables); these sections show the top ones.
"""

from __future__ import annotations

import polars as pl

from ktrace.analysis.collectives import Collectives
from ktrace.analysis.kernels import EFFICIENCY_COLUMNS, OTHER
from ktrace.analysis.roofline import Roofline, top_lost, unknown_gpu_note
from ktrace.analysis.summary import Summary
from ktrace.model.units import format_ns
from ktrace.presentation.page import Column, Section, Table, Text
from ktrace.presentation.summary_tables import capped, frame_rows

ROOFLINE_ROWS = 10
"""Roofline rows (by GPU time) shown; the JSON lists hardware_json.TOP_OPERATORS."""
COLLECTIVE_ROWS = 10
"""Collective sizes (by total time) shown; the JSON lists every one."""
ROOFLINE_COLUMNS = (
    Column("name"),
    Column("dtype", unit="text"),
    Column("calls"),
    Column("gpu_time_ns", "gpu"),
    Column("tflops", "TFLOP/s"),
    Column("tbps", "TB/s"),
    Column("pct_of_peak", "peak %", "pct"),
    Column("bound", unit="text"),
    Column("lost_ns", "lost"),
)
LOST_ROWS = 5
"""Operator shapes shown by GPU time lost against their roofline (the JSON's roofline.top_lost has 10)."""
LOST_COLUMNS = (
    Column("name"),
    Column("dtype", unit="text"),
    Column("gpu_time_ns", "gpu"),
    Column("lost_ns", "lost"),
    Column("pct_of_peak", "peak %", "pct"),
    Column("bound", unit="text"),
)
MFU_COLUMNS = (
    Column("node"),
    Column("rank"),
    Column("steps"),
    Column("step_mean_ns", "step mean"),
    Column("mfu_mean", "MFU mean", "share"),
    Column("mfu_min", "MFU min", "share"),
    Column("mfu_max", "MFU max", "share"),
)
COLLECTIVE_COLUMNS = (
    Column("collective", unit="text"),
    Column("dtype", unit="text"),
    Column("bytes", "message"),
    Column("group_size", "ranks"),
    Column("count"),
    Column("time_ns", "total"),
    Column("median_ns", "median"),
    Column("algbw_gbps", "algbw"),
    Column("busbw_gbps", "busbw"),
)


def mfu_rows(per_step: pl.DataFrame) -> list[dict[str, object]]:
    """Per rank: its steps, their mean time and the mean, lowest and highest MFU of them (None without the peak)."""
    if per_step.is_empty():
        return []
    per_rank = (
        per_step.group_by("node", "rank", maintain_order=True)
        .agg(
            pl.len().alias("steps"),
            pl.col("duration_ns").mean().alias("step_mean_ns"),
            pl.col("mfu").mean().alias("mfu_mean"),
            pl.col("mfu").min().alias("mfu_min"),
            pl.col("mfu").max().alias("mfu_max"),
        )
        .sort("node", "rank")
    )
    return frame_rows(per_rank)


def shape_named(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Rows whose operator name repeats (one name, several input shapes) named with their shapes, so the views tell
    them apart ("aten::bmm [[16, 5185, 64], ...]"); the JSON keeps name and input_dims apart."""
    names = [r["name"] for r in rows]
    return [{**r, "name": f"{r['name']} {r['input_dims']}"} if names.count(r["name"]) > 1 else r for r in rows]


def _peak_text(r: Roofline) -> str:
    peak = None if r.peaks is None else r.peaks.tflops(r.precision)
    on = r.gpu or "an unnamed GPU"
    return f"{on}, {r.precision or 'no'} precision" + ("" if peak is None else f", peak {peak:,.0f} TFLOP/s dense")


def roofline_section(r: Roofline | None) -> Section | None:
    """The top operators by GPU time against the GPU's roofline (achieved TFLOP/s and TB/s, % of peak, what bounds
    them, time lost) and MFU per rank's steps; one line saying why when the trace gives no roofline."""
    if r is None:
        return None
    if r.reason is not None:
        return Section("roofline", "Roofline", (Text(r.reason, "dim"),))
    shown = frame_rows(r.operators.head(ROOFLINE_ROWS))
    rest = max(0, r.operators.height - ROOFLINE_ROWS)
    title = f"roofline: top operators by GPU time ({_peak_text(r)}; lost = GPU time above the roofline's)"
    blocks: list[Table | Text] = [
        Table("roofline", title, ROOFLINE_COLUMNS, tuple(shown), rest=rest, rest_what="operator shapes")
    ]
    lost = top_lost(r.operators, LOST_ROWS)
    if lost.height:
        lost_title = "roofline: where the most time is lost (GPU time above each operator shape's roofline)"
        blocks.append(Table("roofline_lost", lost_title, LOST_COLUMNS, tuple(shape_named(frame_rows(lost)))))
    mfu_title = "MFU per rank (model FLOPs of each step / its time x peak)"
    mfu = Table("mfu", mfu_title, MFU_COLUMNS, tuple(mfu_rows(r.per_step)))
    blocks.append(capped(mfu, "mfu_mean", descending=False, first="lowest MFU"))
    no_model_ns = int(r.no_model["gpu_time_ns"].sum())
    if no_model_ns:
        share = no_model_ns / r.gpu_time_ns if r.gpu_time_ns else 0.0
        blocks.append(
            Text(
                f"{format_ns(no_model_ns)} of GPU time ({100 * share:.1f} %) in {r.no_model.height:,} operators "
                "without a FLOP model (never guessed)",
                "dim",
            )
        )
    if r.peaks is None:
        blocks.append(Text(unknown_gpu_note(r.gpu), "dim"))
    return Section("roofline", "Roofline", tuple(blocks))


def collectives_section(c: Collectives | None) -> Section | None:
    """NCCL collectives by (collective, dtype, message size, ranks): count, time, nccl-tests' algbw and busbw; the
    arrival skew across ranks in one line; one line saying why when there are none."""
    if c is None:
        return None
    if c.reason is not None:
        return Section("collectives", "Collectives", (Text(c.reason, "dim"),))
    rest = max(0, c.by_size.height - COLLECTIVE_ROWS)
    title = f"NCCL collectives by message size ({c.sized_calls:,} of {c.calls:,} calls sized; busbw as nccl-tests)"
    table = Table(
        "collectives",
        title,
        COLLECTIVE_COLUMNS,
        tuple(frame_rows(c.by_size.head(COLLECTIVE_ROWS))),
        rest=rest,
        rest_what="sizes",
    )
    skew = c.skew
    if skew.reason is not None:
        line = f"arrival skew: {skew.reason}"
    else:
        line = (
            f"arrival skew over {skew.instances.height:,} collectives on 2+ ranks: "
            f"{format_ns(int(skew.instances['skew_ns'].sum()))} against {format_ns(int(skew.instances['transfer_ns'].sum()))} "
            f"of transfer (matched by {skew.matched_by})" + (f"; {skew.caveat}" if skew.caveat else "")
        )
    return Section("collectives", "Collectives", (table, Text(line, "dim")))


EFFICIENCY_ROWS = 10
"""Top kernels (by GPU time) whose launch figures are shown; the JSON has them on every top kernel."""
EFFICIENCY_TABLE_COLUMNS = (
    Column("name"),
    Column("total_ns", "gpu"),
    Column("blocks_per_sm", "blocks/SM", "number"),
    Column("est_occupancy_pct", "occupancy", "pct"),
    Column("registers_per_thread", "regs", "number"),
    Column("shared_bytes", "shared", "bytes"),
)


def efficiency_section(summary: Summary) -> Section | None:
    """The top kernels by GPU time with their time-weighted launch figures (kernels.EFFICIENCY_COLUMNS), as the
    TensorBoard profiler's kernel view showed them; None when no kernel carries any (or the top table lacks them)."""
    top = summary.top_by_time
    if not set(EFFICIENCY_COLUMNS) <= set(top.columns):
        return None
    named = top.filter(pl.col("name") != OTHER).head(EFFICIENCY_ROWS)
    if named.select(pl.all_horizontal(pl.col(EFFICIENCY_COLUMNS).is_null()).all()).item():
        return None
    title = "launch figures of the top kernels (time-weighted; occupancy: Kineto's estimate, none in nsys)"
    table = Table("kernel_efficiency", title, EFFICIENCY_TABLE_COLUMNS, tuple(frame_rows(named)))
    return Section("kernel_efficiency", "Kernel efficiency", (table,))
