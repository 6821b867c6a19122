"""analysis.python_samples: self/total samples per function, the stack tree and samples per step, on hand-made
samples and on random stacks against a naive count."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ktrace.analysis.python_samples import python_profile, samples_per_step, stack_counts, stack_tree, top_functions
from ktrace.analysis.rank_activity import gpu_bins
from ktrace.analysis.rank_partials import rank_partial
from ktrace.analysis.rank_reduce import reduce_partials
from ktrace.analysis.steps import detect_steps
from ktrace.analysis.summary import summarize
from ktrace.model import store
from ktrace.model.schema import STACK_SEPARATOR
from ktrace.model.trace import Trace
from ktrace.testing.fleet_compare import fleet_differences
from ktrace.testing.synthetic import SyntheticConfig, generate

MAIN = "train.py:1 <module>"
LOOP = "train.py:10 train"
HOT = "train.py:20 hot"
COLD = "train.py:30 cold"
MS = 1_000_000


def samples_table(stacks: list[list[str]], t0: int = 10 * MS, tid: int = 7) -> pa.Table:
    n = len(stacks)
    return pa.table(
        {
            "node": ["h"] * n,
            "rank": pa.array([0] * n, pa.int32()),
            "ts_ns": pa.array([t0 + i * MS for i in range(n)], pa.int64()),
            "pid": pa.array([7] * n, pa.int64()),
            "tid": pa.array([tid] * n, pa.int64()),
            "stack": [STACK_SEPARATOR.join(s) for s in stacks],
        }
    )


def step_ranges(bounds: list[tuple[int, int]]) -> pa.Table:
    n = len(bounds)
    return pa.table(
        {
            "node": ["h"] * n,
            "rank": pa.array([0] * n, pa.int32()),
            "start_ns": pa.array([a for a, _ in bounds], pa.int64()),
            "end_ns": pa.array([b for _, b in bounds], pa.int64()),
            "pid": pa.array([7] * n, pa.int64()),
            "tid": pa.array([7] * n, pa.int64()),
            "name": [f"ProfilerStep#{i}" for i in range(n)],
            "domain": ["profiler_step"] * n,
            "depth": pa.array([0] * n, pa.int32()),
            "on_gpu": [False] * n,
        }
    )


def test_the_hot_function_leads_by_self_and_the_caller_by_total() -> None:
    stacks = [[MAIN, LOOP, HOT]] * 6 + [[MAIN, LOOP, COLD]] * 2 + [[MAIN, LOOP]] * 2
    profile = python_profile(Trace.from_arrow({"samples": samples_table(stacks)}))
    assert profile is not None and profile.samples == 10 and profile.threads == 1
    assert profile.interval_ns == MS
    rows = {r["function"]: r for r in profile.functions.iter_rows(named=True)}
    assert profile.functions["function"][0] == HOT
    assert (rows[HOT]["self_samples"], rows[HOT]["total_samples"], rows[HOT]["self_pct"]) == (6, 6, 60.0)
    assert (rows[LOOP]["self_samples"], rows[LOOP]["total_samples"]) == (2, 10)
    assert (rows[MAIN]["self_samples"], rows[MAIN]["total_pct"]) == (0, 100.0)


def test_no_samples_no_profile() -> None:
    assert python_profile(Trace.from_arrow({})) is None


def test_samples_join_the_step_they_fall_in_and_name_its_top_function() -> None:
    # step 0: 10..14 ms (4 samples of cold), step 1: 14..24 ms (the slow one: 10 samples, 8 of hot)
    stacks = [[MAIN, COLD]] * 4 + [[MAIN, HOT]] * 8 + [[MAIN, COLD]] * 2
    trace = Trace.from_arrow(
        {"samples": samples_table(stacks), "ranges": step_ranges([(10 * MS, 14 * MS), (14 * MS, 24 * MS)])}
    )
    profile = python_profile(trace)
    assert profile is not None
    steps = profile.steps.select("step", "samples", "top_function", "top_samples").rows()
    assert steps == [(0, 4, COLD, 4), (1, 10, HOT, 8)]


def test_the_tree_sums_its_children_into_each_parent() -> None:
    stacks = [[MAIN, LOOP, HOT]] * 3 + [[MAIN, COLD]] * 1
    tree = stack_tree(stack_counts(pl.from_arrow(samples_table(stacks)).cast({"stack": pl.Categorical})))
    by_name = {r["function"]: r for r in tree.iter_rows(named=True)}
    assert by_name[MAIN]["samples"] == 4 and by_name[MAIN]["parent"] is None
    assert by_name[HOT]["parent"] == by_name[LOOP]["id"] and by_name[LOOP]["samples"] == 3


FRAMES = st.sampled_from([MAIN, LOOP, HOT, COLD, "lib.py:5 helper"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(FRAMES, min_size=1, max_size=6), min_size=1, max_size=40))
def test_self_and_total_match_a_naive_count(stacks: list[list[str]]) -> None:
    frame = pl.from_arrow(samples_table(stacks)).cast({"stack": pl.Categorical})
    got = top_functions(stack_counts(frame), len(stacks))
    self_count = Counter(s[-1] for s in stacks)
    total_count = Counter(f for s in stacks for f in set(s))
    assert dict(zip(got["function"], got["self_samples"], strict=True)) == {f: self_count[f] for f in total_count}
    assert dict(zip(got["function"], got["total_samples"], strict=True)) == dict(total_count)
    assert int(got["self_samples"].sum()) == len(stacks)
    tree = stack_tree(stack_counts(frame), min_share=0.0, max_nodes=10_000)
    roots = tree.filter(pl.col("parent").is_null())
    assert int(roots["samples"].sum()) == len(stacks)
    children = tree.group_by("parent").agg(pl.col("samples").sum()).drop_nulls("parent")
    parents = dict(zip(tree["id"], tree["samples"], strict=True))
    assert all(parents[p] >= n for p, n in children.iter_rows())


def test_steps_without_samples_are_left_out() -> None:
    samples = pl.from_arrow(samples_table([[MAIN]] * 2, t0=50 * MS)).cast({"stack": pl.Categorical})
    steps = pl.DataFrame(
        {"node": ["h"], "rank": [0], "step": [0], "start_ns": [0], "end_ns": [MS], "duration_ns": [MS]},
        schema_overrides={"rank": pl.Int32},
    )
    assert samples_per_step(samples, steps).height == 0


def test_rank_by_rank_the_profile_is_the_one_process_profile(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=4, kernels_per_step=20, ranks=4, nodes=2))
    steps = detect_steps(trace)
    lo, hi = int(steps["start_ns"].min()), int(steps["end_ns"].max())  # type: ignore[arg-type]
    parts = []
    for k, (node, rank) in enumerate(p for p in trace.ranks if p[1] >= 0):
        stacks = [[MAIN, LOOP, HOT if (i + k) % 3 else COLD] for i in range(30)]
        t0 = lo + k * 1000
        parts.append(
            pl.from_arrow(samples_table(stacks, t0=t0, tid=k)).with_columns(node=pl.lit(node), rank=pl.lit(rank))
        )
    frame = pl.concat(parts).with_columns(
        (lo + (pl.col("ts_ns") - lo) * (hi - lo) // (40 * MS)).alias("ts_ns")  # spread over the job's steps
    )
    samples = frame.cast({"node": pl.Categorical, "rank": pl.Int32, "stack": pl.Categorical})
    path = tmp_path / "job.ktrace"
    store.write(dataclasses.replace(trace, samples=samples), path)
    whole = store.read(path)
    span, bins = whole.span_ns(), gpu_bins(whole)
    partials = [
        rank_partial(store.read(path, only={(n, r)}), job_span=span, heatmap_bins=bins)
        for n, r, _ in store.partitions(path)
    ]
    fleet = reduce_partials(partials)
    single = summarize(whole)
    assert fleet.summary.python_profile is not None and fleet.summary.python_profile.samples == 120
    assert fleet.summary.python_profile.steps.height > 4  # joined to the steps of every rank
    assert [d for d in fleet_differences(single, fleet) if "python_profile" in d] == []
