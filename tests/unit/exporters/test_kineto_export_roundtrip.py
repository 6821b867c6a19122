"""Kineto export round trip: `ktrace import` of the export equals the trace it came from, on every real trace and a
synthetic `ktrace run`-like one, but for what Kineto has no slot for (`kineto_view` below, and README "Kineto export").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from real_traces import REAL_TRACES

import ktrace
from ktrace.exporters.kineto_json import export_kineto
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, assert_trace_equal, generate

KEPT_RANGE_DOMAINS = ("profiler_step", "user_annotation", "gpu_user_annotation")
EXPORT_HEALTH = ("dropped_events", "repaired_events", "truncated_input", "secrets_scrubbed")
"""Health counts of reading the source file (what it held that was broken or secret): the export holds none of it."""


def kineto_view(trace: Trace) -> Trace:
    """What a Kineto round trip keeps of `trace`: the exceptions, each a slot Kineto does not have.

    - counters: none (Kineto has no counter events ktrace reads);
    - kernels: `shared memory` is static + dynamic shared memory (Kineto's meaning), read back as static;
      queued/submitted times are not read back;
    - ranges: domains other than ProfilerStep / user / GPU annotations come back as user_annotation, no
      correlation id; a GPU range's pid/tid are its device/stream;
    - devices: no UUID; only the devices the GPU work ran on when it ran on any (Kineto lists every GPU of the host);
    - threads: only named ones.
    """
    k = trace.kernels
    either = pl.col("static_shared_bytes").is_not_null() | pl.col("dynamic_shared_bytes").is_not_null()
    kernels = k.with_columns(
        static_shared_bytes=pl.when(either).then(
            pl.col("static_shared_bytes").fill_null(0) + pl.col("dynamic_shared_bytes").fill_null(0)
        ),
        dynamic_shared_bytes=pl.lit(None, pl.Int32),
        queued_ns=pl.lit(None, pl.Int64),
        submitted_ns=pl.lit(None, pl.Int64),
    )
    domain = pl.col("domain").cast(pl.String)
    ranges = trace.ranges.with_columns(
        domain=pl.when(domain.is_in(KEPT_RANGE_DOMAINS)).then(domain).otherwise(pl.lit("user_annotation")),
        correlation_id=pl.lit(None, pl.Int64),
        pid=pl.when(pl.col("on_gpu")).then(pl.col("device").cast(pl.Int64)).otherwise(pl.col("pid")),
        tid=pl.when(pl.col("on_gpu")).then(pl.col("stream")).otherwise(pl.col("tid")),
    )
    used = pl.concat([trace.kernels.select("node", "rank", "device"), trace.memory.select("node", "rank", "device")])
    devices = trace.devices.with_columns(uuid=pl.lit(None, pl.String))
    on_used = devices.join(used.unique(), on=["node", "rank", "device"], how="semi")
    devices = pl.concat([on_used, devices.join(used.select("node", "rank").unique(), on=["node", "rank"], how="anti")])
    return Trace(
        **{
            **{name: trace.table(name) for name in trace.counts()},
            "kernels": kernels,
            "ranges": ranges,
            "devices": devices,
            "counters": trace.counters.clear(),
            "threads": trace.threads.filter(pl.col("name").is_not_null()),
        },
        meta=trace.meta,
    )


def round_trip(trace: Trace, folder: Path) -> Trace:
    """Export `trace` to Kineto (one file for one rank, else a folder) and import it again."""
    target = folder / "rank.json" if len(trace.ranks) == 1 else folder / "ranks"
    if target.suffix != ".json":
        target.mkdir()
    export_kineto(trace, target)
    return ktrace.open(str(target))


def assert_round_trip(original: Trace, back: Trace) -> None:
    assert_trace_equal(kineto_view(original), back, check_meta=False)
    assert back.meta.source == "kineto"
    if original.meta.source == "kineto":  # the join counts and Kineto's own record counts come back too
        keep = {k: v for k, v in original.meta.health.items() if k not in EXPORT_HEALTH}
        assert {k: v for k, v in back.meta.health.items() if k not in EXPORT_HEALTH} == keep


@pytest.mark.parametrize("name", sorted(REAL_TRACES))
def test_every_real_trace_round_trips(name: str, real_trace_path: Callable[[str], Path], tmp_path: Path) -> None:
    original = ktrace.open(str(real_trace_path(name)))
    assert_round_trip(original, round_trip(original, tmp_path))


def test_a_synthetic_run_capture_round_trips(tmp_path: Path) -> None:
    original = generate(SyntheticConfig(steps=6, kernels_per_step=50, ranks=2, seed=3))
    assert original.counters.height and original.kernels.height  # what is left out is there to leave out
    assert_round_trip(original, round_trip(original, tmp_path))


def test_the_exceptions_are_the_only_differences(tmp_path: Path) -> None:
    """kineto_view hides no other loss: without it, a synthetic capture differs in just the tables it names."""
    original = generate(SyntheticConfig(steps=2, kernels_per_step=10, seed=1))
    back = round_trip(original, tmp_path)
    differ = set()
    for name in TABLES:
        one = Trace.from_arrow({name: original.to_arrow(name)})
        other = Trace.from_arrow({name: back.to_arrow(name)})
        try:
            assert_trace_equal(one, other, check_meta=False)
        except AssertionError:
            differ.add(name)
    assert differ == {"kernels", "ranges", "counters", "devices"}  # shared memory, domains, counters, UUIDs
    assert_trace_equal(kineto_view(original), back, check_meta=False)
