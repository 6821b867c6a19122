"""rank_rule_parts (rules.rank_rules) with the inputs rank_rule_seeds and rank_index_seeds cut from a fleet task's
joined trace: every rank's RuleParts equal rank_rule_part on the rank's own trace with an index of its own, and
each seeded input equals what the rank's index builds (RooflineGap's modeled calls, the kernels' launch figures and
name codes, the records' operators, the steps): the DLRM 8 ranks, a job tiled from them, synthetic jobs with memory
records, a rank without GPU records, and ranks whose steps come from each of detect_steps' methods."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import kernel_figures, kernel_stats
from ktrace.analysis.operators import operator_of_records
from ktrace.analysis.rank_index_seeds import seed_rank_indexes
from ktrace.analysis.rank_partials import rank_partial
from ktrace.analysis.rules.config import RulesConfig
from ktrace.analysis.rules.fleet_rules import ExactInputs
from ktrace.analysis.rules.hardware import gap_inputs
from ktrace.analysis.rules.rank_rule_seeds import seed_rule_inputs
from ktrace.analysis.rules.rank_rules import RuleParts, rank_rule_part, rank_rule_parts
from ktrace.analysis.steps import detect_steps
from ktrace.analysis.utilization import busy_time
from ktrace.model import store
from ktrace.model.trace import Trace
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.testing.synthetic import SyntheticConfig, generate

DLRM = Path(__file__).resolve().parents[3] / "fixtures" / "traces" / "param-dlrm-v100-8rank"
Part = tuple[str, int]
EAGER = RulesConfig(
    params={
        "RooflineGap": {"min_time_pct": 0.0, "max_pct_of_peak": 100.0},
        "LowOccupancy": {"min_time_pct": 0.0, "occupancy_pct": 100.0},
    }
)
"""RooflineGap and LowOccupancy firing on every operator and kernel they judge: a call or kernel cut from another
rank (or left out) shows in the findings."""


def _task(root: Path) -> tuple[TraceIndex, list[Part], list[TraceIndex]]:
    """A task of every partition of the store at `root`, read, analysed and seeded as partition_partial does."""
    parts = [(n, r) for n, r, _ in store.partitions(root)]
    joined, each = store.read_each(root, set(parts))
    index, indexes = TraceIndex(joined), [TraceIndex(t) for t in each]
    rank_partial(joined, index=index)
    seed_rank_indexes(index, indexes, parts)
    return index, parts, indexes


def _same_exact(a: ExactInputs, b: ExactInputs) -> None:
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pl.DataFrame):
            assert x.schema == y.schema and x.equals(y), field.name
        else:
            assert x == y, field.name


def _same_parts(want: RuleParts, have: RuleParts) -> None:
    assert have.ranks == want.ranks
    assert repr(have.per_rank) == repr(want.per_rank)  # repr: a NaN in a rule's details equals itself
    _same_exact(want.exact, have.exact)


def _same_frames(want: pl.DataFrame, have: pl.DataFrame) -> None:
    assert have.schema == want.schema and have.equals(want)


def _assert_seeded(trace: Trace, root: Path, config: RulesConfig | None = None) -> list[RuleParts]:
    """Write `trace` at `root`; each rank's RuleParts and seeded inputs equal its own trace's."""
    store.write(trace, root)
    joined, parts, indexes = _task(root)
    got = rank_rule_parts(joined, indexes, parts, config)
    assert len(got) == len(parts)
    for part, ix, have in zip(parts, indexes, got, strict=True):
        alone = store.read(root, only={part})
        own = TraceIndex(alone)
        _same_parts(rank_rule_part(alone, config, index=own), have)
        want, seeded = gap_inputs(alone, own), gap_inputs(ix.trace, ix)
        assert (seeded.reason, seeded.gpu_time_ns) == (want.reason, want.gpu_time_ns)
        _same_frames(want.coded, seeded.coded)
        _same_frames(kernel_figures(alone, index=own), kernel_figures(ix.trace, index=ix))
        _same_frames(kernel_stats(alone, index=own), kernel_stats(ix.trace, index=ix))
        codes, names = own.kernel_name_codes()
        seeded_codes, seeded_names = ix.kernel_name_codes()
        assert seeded_names == names and seeded_codes.dtype == codes.dtype and np.array_equal(seeded_codes, codes)
        assert np.array_equal(operator_of_records(ix.trace, index=ix), operator_of_records(alone, index=own))
        _same_frames(detect_steps(alone, index=own), detect_steps(ix.trace, index=ix))
        _same_frames(busy_time(alone, "device", index=own), busy_time(ix.trace, "device", index=ix))
    return list(got)


def _imported(folder: Path, root: Path) -> Trace:
    from ktrace.fleet.folder_import import import_folder

    import_folder(folder, root, workers=1)
    return store.read(root)


def _fired(got: list[RuleParts], rule: str) -> int:
    return sum(len(r.findings) for p in got for r in p.per_rank if r.rule == rule)


@pytest.mark.skipif(not DLRM.exists(), reason="DLRM fixture missing")
def test_dlrm_ranks(tmp_path: Path) -> None:
    trace = _imported(DLRM, tmp_path / "imported.ktrace")
    got = _assert_seeded(trace, tmp_path / "dlrm.ktrace", EAGER)
    assert _fired(got, "RooflineGap") > 8 and _fired(got, "LowOccupancy") >= 8
    _assert_seeded(trace, tmp_path / "defaults.ktrace")


@pytest.mark.skipif(not DLRM.exists(), reason="DLRM fixture missing")
def test_a_job_tiled_from_the_dlrm_ranks(tmp_path: Path) -> None:
    from ktrace.testing.fleet_job import generate_fleet_job

    job = generate_fleet_job(DLRM, tmp_path / "job", ranks=12, steps=1, ranks_per_host=4, straggler_delay_ms=1.0)
    trace = _imported(job.folder, tmp_path / "imported.ktrace")
    got = _assert_seeded(trace, tmp_path / "job.ktrace", EAGER)
    assert _fired(got, "RooflineGap") > 12


def test_synthetic_fleet(tmp_path: Path) -> None:
    trace = generate_fleet(FleetConfig(ranks=6, hosts=3, steps=3, kernels_per_step=6)).trace
    _assert_seeded(trace, tmp_path / "f", EAGER)


@pytest.mark.parametrize(("ranks", "without_gpu"), [(1, None), (1, 0), (4, 1), (4, 3)])
def test_memory_records_and_a_rank_without_gpu_records(ranks: int, without_gpu: int | None, tmp_path: Path) -> None:
    """Synthetic ranks with memcpys and memsets; one rank (the only one, a middle one or the last) without GPU
    records: its blocks of the GPU tables are empty, the next rank's start where it would have."""
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=ranks, nodes=min(ranks, 2)))
    assert trace.memory.height > 0
    if without_gpu is not None:
        kept = pl.col("rank") != without_gpu
        trace = dataclasses.replace(trace, kernels=trace.kernels.filter(kept), memory=trace.memory.filter(kept))
    _assert_seeded(trace, tmp_path / "s", EAGER)


def test_ranks_with_steps_of_each_method(tmp_path: Path) -> None:
    """Rank 1's steps are step-named annotations, rank 2 has no step range (not seeded: detect_steps tries to infer
    its steps from its kernels, finding no regular marker here), rank 3 has none and no GPU records, the others
    ProfilerStep ranges."""
    trace = generate(SyntheticConfig(steps=3, kernels_per_step=5, ranks=5, nodes=2))
    rank, name = pl.col("rank"), pl.col("name").cast(pl.String)
    ranges = trace.ranges.with_columns(
        name=pl.when(rank == 1).then(name.str.replace("ProfilerStep#", "train_step ")).otherwise(name),
        domain=pl.when(rank == 1).then(pl.lit("nvtx")).otherwise(pl.col("domain").cast(pl.String)),
    ).cast(trace.ranges.schema)
    ranges = ranges.filter(~rank.is_in([2, 3]) | ~pl.col("name").cast(pl.String).str.starts_with("ProfilerStep"))
    trace = dataclasses.replace(
        trace, ranges=ranges, kernels=trace.kernels.filter(rank != 3), memory=trace.memory.filter(rank != 3)
    )
    got = _assert_seeded(trace, tmp_path / "s", EAGER)
    sources = {
        p.ranks[0][1]: detect_steps(store.read(tmp_path / "s", only={p.ranks[0]}))["source"].unique().to_list()
        for p in got
    }
    assert sources == {-1: [], 0: ["profiler_step"], 1: ["annotation"], 2: [], 3: [], 4: ["profiler_step"]}


@pytest.mark.skipif(not DLRM.exists(), reason="DLRM fixture missing")
def test_the_seeds_are_what_the_rules_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded rank builds none of the seeded inputs (a slot renamed would leave its seed unread while the rank's
    own value still compared equal): their builders fail here."""
    import ktrace.analysis.index as index_module
    import ktrace.analysis.kernels as kernels_module
    import ktrace.analysis.operators as operators_module
    import ktrace.analysis.rules.hardware as hardware_module
    import ktrace.analysis.steps as steps_module
    import ktrace.analysis.utilization as utilization_module

    trace = _imported(DLRM, tmp_path / "imported.ktrace")
    store.write(trace, tmp_path / "s")
    joined, parts, indexes = _task(tmp_path / "s")
    seed_rule_inputs(joined, indexes, parts)

    def built(*_: object, **__: object) -> None:
        raise AssertionError("built, not seeded")

    monkeypatch.setattr(hardware_module, "modeled_calls", built)
    monkeypatch.setattr(kernels_module, "_kernel_figures", built)
    monkeypatch.setattr(kernels_module, "_kernel_stats", built)
    monkeypatch.setattr(index_module, "name_codes", built)
    monkeypatch.setattr(operators_module, "innermost_of_records", built)
    monkeypatch.setattr(steps_module, "_detect_steps", built)
    monkeypatch.setattr(utilization_module, "_busy_time", built)
    got = rank_rule_parts(joined, indexes, parts, EAGER)
    assert _fired(got, "RooflineGap") > 8


def test_ranks_out_of_the_joined_trace_order_are_refused(tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=3, nodes=1))
    store.write(trace, tmp_path / "s")
    joined, parts, indexes = _task(tmp_path / "s")
    with pytest.raises(ValueError, match="do not make up"):
        seed_rule_inputs(joined, indexes[::-1], parts[::-1])
