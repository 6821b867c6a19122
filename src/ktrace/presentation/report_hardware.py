"""The report's "how close to the hardware" sections: the roofline figure (log-log, operators as points sized by
GPU time under the GPU's roofs) with the terminal's roofline and MFU tables, the busbw-vs-message-size figure with the
collectives table, and the top kernels' launch figures.

The tables are summary_hardware's (one definition for the terminal and the report); the figures draw the rows of
those tables' frames, and the Markdown report shows the tables in their place (`shown_in`). A trace without shapes,
collectives or launch figures gets each section with one line saying why.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

from ktrace.analysis.collectives import Collectives
from ktrace.analysis.roofline import Roofline
from ktrace.analysis.summary import Summary
from ktrace.presentation.page import Block, Column, Figure, Section, Table, Text
from ktrace.presentation.summary_hardware import (
    ROOFLINE_COLUMNS,
    collectives_section,
    efficiency_section,
    roofline_section,
)
from ktrace.presentation.summary_tables import frame_rows

NOT_COMPUTED = "not computed for this trace"
NO_LAUNCH_FIGURES = (
    "kernel efficiency: no kernel carries launch figures (blocks per SM, est. achieved occupancy, registers, shared "
    "memory: Kineto writes them in its kernel events' args, nsys exports the launch configuration)"
)
SHAPES_COLUMN = Column("input_dims", "shapes", "text")
"""The report's roofline table tells an operator's shapes apart (the terminal's 80 columns leave them out)."""
RIDGE_MARGIN = 4.0
"""The roofline figure's x axis reaches this factor beyond the lowest and highest of its points and ridges."""


def _hover(row: dict[str, Any]) -> str:
    pct = "" if row["pct_of_peak"] is None else f", {row['pct_of_peak']:.1f} % of its roofline"
    return (
        f"{row['name']} {row['input_dims'] or ''} {row['dtype'] or ''}: {row['calls']:,} calls, "
        f"{row['gpu_time_ns'] / 1e6:,.3f} ms, {row['tflops']:,.2f} TFLOP/s, {row['intensity']:,.1f} FLOP/B{pct}"
    )


def roofs(r: Roofline, precisions: list[str], x_low: float, x_high: float) -> list[dict[str, Any]]:
    """The GPU's roofline per precision of `precisions` it has a peak for: TFLOP/s = min(peak, intensity x HBM
    TB/s), drawn from x_low to x_high FLOP/byte through the ridge (peak / bandwidth)."""
    if r.peaks is None:
        return []
    out = []
    bandwidth = r.peaks.hbm_tbps
    for precision in precisions:
        peak = r.peaks.tflops(precision)
        if peak is None:
            continue
        ridge = peak / bandwidth
        xs = [min(x_low, ridge), ridge, max(x_high, ridge)]
        out.append(
            {
                "label": f"{precision} roof ({peak:,.0f} TFLOP/s, {bandwidth:g} TB/s)",
                "x": xs,
                "y": [min(peak, x * bandwidth) for x in xs],
                "mode": "lines",
            }
        )
    return out


def roofline_figure(r: Roofline) -> Figure | None:
    """Achieved TFLOP/s against arithmetic intensity (log-log) of every roofline row with FLOPs, sized by GPU time,
    under the GPU's roofs at the rows' precisions; its title says how many rows (bytes-only models, which a log axis
    cannot place) it leaves out. None when no row has FLOPs."""
    drawn = r.operators.filter((pl.col("flops") > 0) & (pl.col("tflops") > 0) & (pl.col("intensity") > 0))
    if drawn.is_empty():
        return None
    rows = frame_rows(drawn)
    intensity = drawn["intensity"]
    peaks = r.peaks
    ridges = [] if peaks is None else [p / peaks.hbm_tbps for p in (peaks.tflops(d) for d in drawn["dtype"]) if p]
    x_low = min([float(intensity.min()), *ridges]) / RIDGE_MARGIN  # type: ignore[arg-type]
    x_high = max([float(intensity.max()), *ridges]) * RIDGE_MARGIN  # type: ignore[arg-type]
    precisions = sorted({d for d in drawn["dtype"].to_list() if d})
    points = {
        "label": "operators (area: GPU time)",
        "x": [row["intensity"] for row in rows],
        "y": [row["tflops"] for row in rows],
        "sizes": [row["gpu_time_ns"] for row in rows],
        "hover": [_hover(row) for row in rows],
        "mode": "markers",
    }
    data = {
        "series": [points, *roofs(r, precisions, x_low, x_high)],
        "x_title": "arithmetic intensity (FLOP/byte)",
        "y_title": "achieved TFLOP/s",
        "log": True,
        "shown_in": "roofline",
    }
    left_out = r.operators.height - drawn.height
    title = f"Roofline: {r.gpu or 'an unnamed GPU'}" + ("" if peaks else " (not in the peak table: no roofs)")
    if left_out:
        title += f" ({left_out:,} bytes-only operator shapes: in the table only)"
    return Figure("roofline_figure", title, "scatter", data)


def roofline_report_section(r: Roofline | None) -> Section:
    """The roofline figure, then summary_hardware's roofline section with the shapes column; why it is empty."""
    section = roofline_section(r)
    if section is None or r is None:
        return Section("roofline", "Roofline", (Text(f"roofline: {NOT_COMPUTED}", "dim"),))
    if r.reason is not None:
        return section
    figure = roofline_figure(r)
    blocks: list[Block] = [] if figure is None else [figure]
    for block in section.blocks:
        if isinstance(block, Table) and block.key == "roofline":
            block = dataclasses.replace(block, columns=(ROOFLINE_COLUMNS[0], SHAPES_COLUMN, *ROOFLINE_COLUMNS[1:]))
        blocks.append(block)
    return dataclasses.replace(section, blocks=tuple(blocks))


def busbw_figure(c: Collectives) -> Figure | None:
    """Bus bandwidth (nccl-tests' busbw, GB/s) against message size (bytes), log-log, a line per (collective, dtype,
    ranks)."""
    sized = c.by_size.filter((pl.col("bytes") > 0) & (pl.col("busbw_gbps") > 0)).sort("bytes")
    if sized.is_empty():
        return None
    series = []
    for (name, dtype, ranks), group in sized.group_by("collective", "dtype", "group_size", maintain_order=True):
        series.append(
            {
                "label": f"{name} {dtype or ''} on {ranks} ranks",
                "x": group["bytes"].to_list(),
                "y": group["busbw_gbps"].to_list(),
                "hover": [
                    f"{name} {dtype or ''}: {b:,} bytes, {n:,} calls, busbw {bw:,.2f} GB/s"
                    for b, n, bw in zip(group["bytes"], group["count"], group["busbw_gbps"], strict=True)
                ],
                "mode": "lines+markers",
            }
        )
    series.sort(key=lambda s: str(s["label"]))
    data = {
        "series": series,
        "x_title": "message size (bytes)",
        "y_title": "busbw (GB/s, nccl-tests' definition)",
        "log": True,
        "shown_in": "collectives",
    }
    return Figure("busbw_figure", "NCCL bus bandwidth by message size", "scatter", data)


def collectives_report_section(c: Collectives | None) -> Section:
    """The busbw-vs-size figure, then summary_hardware's collectives section; why it is empty."""
    section = collectives_section(c)
    if section is None or c is None:
        return Section("collectives", "Collectives", (Text(f"collectives: {NOT_COMPUTED}", "dim"),))
    figure = None if c.reason is not None else busbw_figure(c)
    return section if figure is None else dataclasses.replace(section, blocks=(figure, *section.blocks))


def efficiency_report_section(summary: Summary) -> Section:
    """summary_hardware's kernel efficiency section; why it is empty."""
    found = efficiency_section(summary)
    return found or Section("kernel_efficiency", "Kernel efficiency", (Text(NO_LAUNCH_FIGURES, "dim"),))


def hardware_sections(summary: Summary) -> tuple[Section, ...]:
    """The roofline, collectives and kernel efficiency sections of the report, in that order."""
    return (
        roofline_report_section(summary.roofline),
        collectives_report_section(summary.collectives),
        efficiency_report_section(summary),
    )
