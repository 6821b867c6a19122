"""The summary JSON's `roofline` and `collectives` keys: how close the operators came to the hardware, and the
NCCL calls by message size with their arrival skew."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import polars as pl

from ktrace.analysis.collectives import Collectives
from ktrace.analysis.roofline import Roofline, top_lost, unknown_gpu_note

TOP_OPERATORS = 50
"""Roofline rows the summary JSON lists (by GPU time)."""
Records = Callable[[pl.DataFrame], list[dict[str, Any]] | None]

TOP_INSTANCES = 10
"""Collective instances the JSON lists, largest arrival skew first."""


def roofline_dict(r: Roofline, records: Records) -> dict[str, Any]:
    """The summary JSON's `roofline` key; `records` turns a frame into rows (json_rows.frame_records)."""
    peaks = None if r.peaks is None else {f.name: getattr(r.peaks, f.name) for f in fields(r.peaks)}
    out: dict[str, Any] = {"gpu": r.gpu, "peaks": peaks}
    if r.reason is not None:
        return {**out, "reason": r.reason}
    mfu = r.per_step["mfu"].drop_nulls()
    no_model_ns = int(r.no_model["gpu_time_ns"].sum())
    return {
        **out,
        **({"note": unknown_gpu_note(r.gpu)} if r.peaks is None else {}),
        "precision": r.precision,
        "operator_rows": r.operators.height,
        "operators": records(r.operators.head(TOP_OPERATORS)),
        "top_lost": records(top_lost(r.operators)),
        "mfu": {"per_step": records(r.per_step), "mean": float(mfu.mean()) if mfu.len() else None},  # type: ignore[arg-type]
        "no_model": {
            "operators": r.no_model.height,
            "calls": int(r.no_model["calls"].sum()),
            "gpu_time_ns": no_model_ns,
            "share_of_gpu_time": no_model_ns / r.gpu_time_ns if r.gpu_time_ns else 0.0,
            "top": records(r.no_model.head(10)),
        },
    }


def collectives_dict(c: Collectives, records: Records) -> dict[str, Any]:
    """The summary JSON's `collectives` key; `records` turns a frame into rows (json_rows.frame_records)."""
    skew = c.skew
    top = skew.instances.sort("skew_ns", "first_start_ns", descending=[True, False]).head(TOP_INSTANCES)
    return {
        "definition": c.definition,
        "calls": c.calls,
        "sized_calls": c.sized_calls,
        "by_size": records(c.by_size),
        **({} if c.reason is None else {"reason": c.reason}),
        "skew": {
            "matched_by": skew.matched_by,
            **({"caveat": skew.caveat} if skew.caveat else {}),
            "instances": skew.instances.height,
            "skew_ns": int(skew.instances["skew_ns"].sum()),
            "transfer_ns": int(skew.instances["transfer_ns"].sum()),
            "per_rank": records(skew.per_rank),
            "per_process_group": records(skew.per_group),
            "top_instances": records(top.drop("key")),
            **({} if skew.reason is None else {"reason": skew.reason}),
        },
    }
