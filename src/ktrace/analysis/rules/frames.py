"""Polars selections shared by rules: names matching a pattern, and the top rows of a frame as Evidence."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ktrace.analysis.rules.base import Evidence
from ktrace.analysis.utilization import named as named
from ktrace.analysis.utilization import names_matching

__all__ = [
    "evidence_rows",
    "fmt_names",
    "named",
    "names_matching",
    "pct",
    "per_rank_span",
    "rows_named",
    "top_evidence",
]

_EVIDENCE_FIELDS = ("start_ns", "end_ns", "node", "rank", "device", "stream", "name", "value")


def rows_named(frame: pl.DataFrame, column: str, pattern: str, *, exclude: str | None = None) -> pl.DataFrame:
    """Rows of `frame` whose `column` matches `pattern` (and not `exclude`)."""
    names = names_matching(frame, column, pattern, exclude=exclude)
    if not names:
        return frame.clear()
    return frame.filter(named(frame, column, names))


def top_evidence(
    frame: pl.DataFrame, kind: str, value: pl.Expr, *, limit: int, descending: bool = True
) -> tuple[Evidence, ...]:
    """The `limit` rows of `frame` with the largest (or smallest) `value`, as Evidence.

    `frame` may have any of start_ns, end_ns, node, rank, device, stream and name; missing ones stay None.
    Only `limit` Python objects are built, whatever the frame's size.
    """
    if not frame.height or limit <= 0:
        return ()
    cols = [c for c in _EVIDENCE_FIELDS[:-1] if c in frame.columns]
    top = frame.with_columns(value.cast(pl.Float64).alias("value")).top_k(limit, by="value", reverse=not descending)
    top = top.sort("value", descending=descending, maintain_order=True).select(
        *[pl.col(c).cast(pl.String) if c in ("node", "name") else pl.col(c) for c in cols], "value"
    )
    return tuple(evidence_rows(top, kind))


def evidence_rows(frame: pl.DataFrame, kind: str) -> list[Evidence]:
    """One Evidence per row of a small frame whose columns are Evidence field names."""
    cols = [c for c in _EVIDENCE_FIELDS if c in frame.columns]
    out = []
    for row in frame.select(cols).iter_rows(named=True):
        values = {k: (None if v is None else _plain(k, v)) for k, v in row.items()}
        out.append(Evidence(kind=kind, **values))  # type: ignore[arg-type]
    return out


def _plain(key: str, value: object) -> object:
    if key in ("node", "name"):
        return str(value)
    if key == "value":
        return round(float(value), 6)  # type: ignore[arg-type]
    return int(value)  # type: ignore[call-overload]


def pct(part: float, whole: float) -> float:
    """100 * part / whole, 0 when whole is 0."""
    return 100.0 * part / whole if whole else 0.0


def per_rank_span(frame: pl.DataFrame) -> pl.DataFrame:
    """Per (node, rank): first start and last end of the rows of a span table."""
    return frame.group_by("node", "rank").agg(
        pl.col("start_ns").min().alias("first_ns"), pl.col("end_ns").max().alias("last_ns")
    )


def fmt_names(names: Sequence[str], limit: int = 3) -> str:
    """A short comma-separated list of names, with '+N more' past `limit`."""
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")
