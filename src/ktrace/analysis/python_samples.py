"""The Python sampling profile of a capture (`ktrace run --python-sample MS`): which functions the sampled
threads were in (self) or under (total), the stacks as a tree for an icicle view, and the samples per step.

A sample is one thread at one tick (samples table); its stack lists frames outermost first, each
`file:first_line function` (schema.STACK_SEPARATOR between them). Every number here is a count of samples: with
MS ms between ticks, a count times MS is roughly the time spent there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.steps import detect_steps, enclosing
from ktrace.model.schema import STACK_SEPARATOR
from ktrace.model.trace import Trace

TOP_FUNCTIONS = 15
"""Rows of the top-functions table."""
MAX_TREE_NODES = 400
"""Nodes of the icicle tree at most (the rest, the smallest, are left out)."""
MIN_TREE_SHARE = 0.002
"""Tree nodes holding less than this share of the samples are left out."""

_FUNCTION_SCHEMA = {
    "function": pl.String,
    "self_samples": pl.Int64,
    "total_samples": pl.Int64,
    "self_pct": pl.Float64,
    "total_pct": pl.Float64,
}
_TREE_SCHEMA = {"id": pl.Int64, "parent": pl.Int64, "function": pl.String, "samples": pl.Int64, "depth": pl.Int32}
_STEP_SCHEMA = {
    "node": pl.String,
    "rank": pl.Int32,
    "step": pl.Int64,
    "duration_ns": pl.Int64,
    "samples": pl.Int64,
    "top_function": pl.String,
    "top_samples": pl.Int64,
}


@dataclass(frozen=True)
class PythonProfile:
    """A trace's Python samples, summed."""

    samples: int
    """Samples (thread x tick) in the trace."""
    threads: int
    """Distinct (pid, tid) sampled."""
    interval_ns: int | None
    """The median time between two ticks of one thread (None with fewer than two ticks)."""
    functions: pl.DataFrame
    """function (`file:line name`), self_samples (the innermost frame), total_samples (anywhere on the stack,
    once per sample), self_pct and total_pct of every sample; by self_samples, then total_samples, descending."""
    tree: pl.DataFrame
    """The stacks as a tree (id, parent (null at the roots), function, samples under it, depth); the biggest
    nodes only (MAX_TREE_NODES, MIN_TREE_SHARE), parents before children."""
    steps: pl.DataFrame
    """Per step that holds samples: node, rank, step, duration_ns, samples (any thread of its rank inside the
    step), top_function (the most samples' innermost frame) and top_samples; by node, rank, step."""


@dataclass(frozen=True)
class PythonProfilePart:
    """What one rank (or any slice of a job with whole ranks) adds to the job's PythonProfile (the many-rank
    summary sums these, rank by rank: analysis.rank_partials)."""

    samples: int
    threads: int
    """Distinct (node, pid, tid) sampled."""
    interval_ns: int | None
    stacks: pl.DataFrame
    """Samples per distinct stack: stack (String), samples."""
    steps: pl.DataFrame
    """samples_per_step of the slice."""


def python_profile(trace: Trace, *, index: TraceIndex | None = None) -> PythonProfile | None:
    """The Python sampling profile of `trace`; None when it holds no samples."""
    return reduce_python_profiles([python_profile_part(trace, index=index)])


def python_profile_part(trace: Trace, *, index: TraceIndex | None = None) -> PythonProfilePart | None:
    """The samples of `trace` summed by stack and by step; None when it holds none."""
    samples = trace.samples
    if samples.height == 0:
        return None
    return PythonProfilePart(
        samples=samples.height,
        threads=samples.select("node", "pid", "tid").n_unique(),
        interval_ns=_median_interval(samples),
        stacks=_by_stack(samples).with_columns(pl.col("samples").cast(pl.Int64)),
        steps=samples_per_step(samples, detect_steps(trace, index=TraceIndex.of(trace, index))),
    )


def reduce_python_profiles(parts: Iterable[PythonProfilePart | None]) -> PythonProfile | None:
    """The job's PythonProfile from its slices' parts (None where a slice has no samples; None if none has)."""
    job = merge_python_parts(p for p in parts if p is not None)
    if job is None:
        return None
    counts = _with_frames(job.stacks)
    return PythonProfile(
        samples=job.samples,
        threads=job.threads,
        interval_ns=job.interval_ns,
        functions=top_functions(counts, job.samples),
        tree=stack_tree(counts),
        steps=job.steps.sort("node", "rank", "step"),
    )


def merge_python_parts(parts: Iterable[PythonProfilePart]) -> PythonProfilePart | None:
    """Several slices' parts as one (stacks summed, steps kept; the interval: the median of theirs), so that a
    reduce holds one part however many ranks it folded; None for none."""
    found = list(parts)
    if not found:
        return None
    intervals = [p.interval_ns for p in found if p.interval_ns is not None]
    return PythonProfilePart(
        samples=sum(p.samples for p in found),
        threads=sum(p.threads for p in found),
        interval_ns=int(np.median(intervals)) if intervals else None,
        stacks=pl.concat([p.stacks for p in found]).group_by("stack").agg(pl.col("samples").sum()),
        steps=pl.concat([p.steps for p in found]),
    )


def stack_counts(samples: pl.DataFrame) -> pl.DataFrame:
    """Samples per distinct stack: stack (String), frames (list of String, outermost first), samples."""
    return _with_frames(_by_stack(samples))


def _by_stack(samples: pl.DataFrame) -> pl.DataFrame:
    """stack (String), samples: grouped by the dictionary codes first, so that only the distinct stacks become
    strings (a stack is kilobytes; casting every row of 1 M samples took 7 GB and 47 s)."""
    return samples.group_by("stack").agg(samples=pl.len()).with_columns(pl.col("stack").cast(pl.String))


def _with_frames(counts: pl.DataFrame) -> pl.DataFrame:
    framed = counts.with_columns(frames=pl.col("stack").str.split(STACK_SEPARATOR))
    return framed.sort("samples", "stack", descending=True)


def top_functions(counts: pl.DataFrame, total: int, top: int | None = None) -> pl.DataFrame:
    """Self and total samples per function (schema _FUNCTION_SCHEMA) from stack_counts; the `top` first rows
    (None: all)."""
    if counts.height == 0 or total <= 0:
        return pl.DataFrame(schema=_FUNCTION_SCHEMA)
    leaf = counts.select(function=pl.col("frames").list.last(), samples="samples")
    self_samples = leaf.group_by("function").agg(self_samples=pl.col("samples").sum())
    # a recursive function appears once per sample in its total: unique frames per stack first
    anywhere = counts.select(function=pl.col("frames").list.unique(), samples="samples").explode("function")
    total_samples = anywhere.group_by("function").agg(total_samples=pl.col("samples").sum())
    out = (
        total_samples.join(self_samples, on="function", how="left")
        .with_columns(pl.col("self_samples").fill_null(0))
        .with_columns(
            self_pct=pl.col("self_samples") * 100.0 / total, total_pct=pl.col("total_samples") * 100.0 / total
        )
        .select(list(_FUNCTION_SCHEMA))
        .cast(_FUNCTION_SCHEMA)  # type: ignore[arg-type]
        .sort(["self_samples", "total_samples", "function"], descending=[True, True, False])
    )
    return out if top is None else out.head(top)


def stack_tree(
    counts: pl.DataFrame, max_nodes: int = MAX_TREE_NODES, min_share: float = MIN_TREE_SHARE
) -> pl.DataFrame:
    """The stacks of stack_counts as a tree of frames (schema _TREE_SCHEMA): a node per distinct path from a root
    frame, holding every sample whose stack starts with that path. Nodes under `min_share` of the samples are
    dropped, then the smallest past `max_nodes` (a parent always holds at least its children, so it stays)."""
    paths: dict[tuple[int, str], int] = {}  # (parent id, function) -> node id
    rows: list[list[object]] = []  # id, parent, function, samples, depth
    for frames, n in counts.select("frames", "samples").iter_rows():
        parent = -1
        for depth, function in enumerate(frames):
            node = paths.get((parent, function))
            if node is None:
                node = paths[(parent, function)] = len(rows)
                rows.append([node, None if parent < 0 else parent, function, 0, depth])
            rows[node][3] += n
            parent = node
    if not rows:
        return pl.DataFrame(schema=_TREE_SCHEMA)
    tree = pl.DataFrame(rows, schema=_TREE_SCHEMA, orient="row")
    total = int(counts["samples"].sum())
    kept = tree.filter(pl.col("samples") >= min_share * total).sort(["samples", "id"], descending=[True, False])
    kept = kept.head(max_nodes)  # by samples, descending: a child never holds more than its parent, so the
    ids = set(kept["id"].to_list())  # cut keeps parents; a node whose parent tied and fell off goes too
    kept = kept.filter(pl.col("parent").is_null() | pl.col("parent").is_in(list(ids)))
    return kept.sort("depth", "id")


def samples_per_step(samples: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Samples inside each step (schema _STEP_SCHEMA): any sampled thread of the step's rank between its start and
    end; steps without samples are left out."""
    if samples.height == 0 or steps.height == 0:
        return pl.DataFrame(schema=_STEP_SCHEMA)
    points = samples.select(pl.col("node").cast(pl.String), "rank", "ts_ns", "stack")
    ranges = steps.select(pl.col("node").cast(pl.String), "rank", "step", "start_ns", "end_ns", "duration_ns")
    ordered, at = enclosing(ranges, points, ("node", "rank"), "ts_ns")
    hit = at >= 0
    if not hit.any():
        return pl.DataFrame(schema=_STEP_SCHEMA)
    step_of = ordered.select(pl.col("step", "duration_ns").gather(pl.Series(at[hit])))
    inside = points.filter(pl.Series(hit)).with_columns(step_of.get_columns())
    # the innermost frame of each distinct stack as a number (by name), joined on the dictionary column: never a
    # string per sample (a stack is kilobytes)
    leaves = inside.select(pl.col("stack").unique()).with_columns(
        leaf=pl.col("stack").cast(pl.String).str.split(STACK_SEPARATOR).list.last()
    )
    names = leaves.select(pl.col("leaf").unique().sort()).with_row_index("leaf_id")
    inside = inside.join(leaves.join(names, on="leaf").select("stack", "leaf_id"), on="stack")
    keys = ("node", "rank", "step", "duration_ns")
    by_leaf = inside.group_by(*keys, "leaf_id").agg(n=pl.len())
    out = (
        by_leaf.sort(["n", "leaf_id"], descending=[True, False])
        .group_by(*keys)
        .agg(samples=pl.col("n").sum(), leaf_id=pl.col("leaf_id").first(), top_samples=pl.col("n").first())
        .join(names, on="leaf_id")
        .rename({"leaf": "top_function"})
    )
    return out.select(list(_STEP_SCHEMA)).cast(_STEP_SCHEMA).sort("node", "rank", "step")  # type: ignore[arg-type]


def slowest_step(steps: pl.DataFrame) -> dict[str, Any] | None:
    """The row of the longest step that holds samples (samples_per_step), None without one."""
    if steps.height == 0:
        return None
    return steps.sort(["duration_ns", "step"], descending=[True, False]).row(0, named=True)


def _median_interval(samples: pl.DataFrame) -> int | None:
    """The median gap between the ticks of the first sampled thread (np.unique took 2.4 s on 1 M ticks here)."""
    ts = samples.filter(pl.col("tid") == samples["tid"][0]).get_column("ts_ns").unique().sort()
    gap = ts.diff().drop_nulls().median()
    return None if gap is None else int(gap)
