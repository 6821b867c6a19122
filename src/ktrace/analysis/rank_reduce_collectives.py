"""The collectives (collectives.collectives) of a many-rank job from every rank's NCCL kernels.

Arrival skew matches each collective instance across ranks by process group, kernel name and order
(collectives_skew), which needs every rank's NCCL kernels at once: each rank sends its NCCL kernels' few columns
(who, when, which collective and message size; no other kernel), and the client runs collectives_of on them, so
by_size (medians included) and the skew tables are exactly one process's. These rows are the only per-event rows
the reduce keeps: NCCL kernels only, a few per step and rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ktrace.analysis.collectives import Collectives, collectives_of
from ktrace.analysis.collectives_skew import comm_kernels
from ktrace.model.trace import Trace

_COLUMNS = (
    "node",
    "rank",
    "name",
    "start_ns",
    "end_ns",
    "process_group",
    "collective",
    "in_nelems",
    "out_nelems",
    "comm_dtype",
    "group_size",
)
"""The kernel columns collectives_of reads (those the trace has)."""


def collectives_part(trace: Trace) -> pl.DataFrame:
    """The slice's NCCL kernels, only the columns collectives_of reads, categoricals as strings."""
    comm = comm_kernels(trace)
    return comm.select([c for c in _COLUMNS if c in comm.columns]).with_columns(pl.col(pl.Categorical).cast(pl.String))


def merge_collectives_parts(parts: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Several parts as one (rows concatenated; collectives_of orders them per rank by start)."""
    found = [p for p in parts if p.height]
    return pl.concat(found, how="diagonal_relaxed") if found else parts[0]


def job_collectives(comm: pl.DataFrame) -> Collectives:
    """collectives.collectives of the whole job from the merge of every rank's part."""
    return collectives_of(comm)
