"""ranks_graphs (analysis.critical_path_rank_graphs): the RankGraphs of a fleet task's ranks from their joined trace
equal rank_graph on each rank's own trace, field by field (packed arrays and their dtypes, the tables' rows, the GPU
records and collective keys): the DLRM 8 ranks, synthetic jobs and a real trace's event waits tiled over ranks."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ktrace.analysis.critical_path_graph import SYNC, Window
from ktrace.analysis.critical_path_parts import RankGraph, own_window, rank_graph
from ktrace.analysis.critical_path_rank_graphs import ranks_graphs
from ktrace.analysis.critical_path_task_steps import ranks_steps
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.rank_index_seeds import seed_rank_indexes
from ktrace.fleet.critical_path_map import guess_of
from ktrace.importers import load
from ktrace.model import store
from ktrace.model.schema import TABLES
from ktrace.model.trace import Trace
from ktrace.testing.synthetic import SyntheticConfig, generate

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "traces"
DLRM = FIX / "param-dlrm-v100-8rank"
EVENT_WAITS = FIX / "hta-critical-path" / "event_sync_multi_stream_trace.json.gz"
Part = tuple[str, int]
Windows = Callable[[list[Part], list[Trace], TraceIndex, list[TraceIndex]], list[Window | None]]


def _assert_same(want: RankGraph | None, have: RankGraph | None) -> None:
    assert (want is None) == (have is None)
    if want is None or have is None:
        return
    assert (have.graph.base_ns, have.graph.sync_records) == (want.graph.base_ns, want.graph.sync_records)
    assert have.graph.arrays.keys() == want.graph.arrays.keys()
    for name, array in want.graph.arrays.items():
        assert have.graph.arrays[name].dtype == array.dtype and np.array_equal(have.graph.arrays[name], array), name
    assert have.tables.keys() == want.tables.keys()
    for name, frame in want.tables.items():
        assert have.tables[name].schema == frame.schema and have.tables[name].equals(frame), name
    for name in ("kernel_records", "memory_records"):
        a, b = getattr(want, name), getattr(have, name)
        assert b.dtype == a.dtype and np.array_equal(a, b), name
    assert have.kernel_keys == want.kernel_keys


def _task(root: Path) -> tuple[TraceIndex, list[Part], list[TraceIndex], list[Trace]]:
    """A task of every partition of the store at `root`, as fleet.summary_map.partition_partial reads and seeds it."""
    parts = [(n, r) for n, r, _ in store.partitions(root)]
    joined, each = store.read_each(root, set(parts))
    index, indexes = TraceIndex(joined), [TraceIndex(t) for t in each]
    seed_rank_indexes(index, indexes, parts)
    return index, parts, indexes, each


def _assert_graphs(trace: Trace, root: Path, windows_of: Windows) -> list[RankGraph | None]:
    """ranks_graphs of every rank of `trace` (written at `root`) equals rank_graph on its own trace."""
    store.write(trace, root)
    index, parts, indexes, each = _task(root)
    windows = windows_of(parts, each, index, indexes)
    got = ranks_graphs(index, parts, indexes, windows)
    assert len(got) == len(parts)
    for part, window, have in zip(parts, windows, got, strict=True):
        alone = store.read(root, only={part})
        _assert_same(None if window is None else rank_graph(alone, window, {}, 0, 0), have)
    return got


def _whole(part: Part, trace: Trace) -> Window:
    """The rank's window over all its events."""
    spans = [trace.table(t) for t in ("ops", "api", "kernels", "memory") if trace.table(t).height]
    if not spans:
        return Window(*part, 0, 0)
    return Window(*part, min(int(f["start_ns"].min()) for f in spans), max(int(f["end_ns"].max()) for f in spans))  # type: ignore[arg-type]


def _imported_dlrm(root: Path) -> Trace:
    from ktrace.fleet.folder_import import import_folder

    import_folder(DLRM, root, workers=1)
    return store.read(root)


@pytest.mark.skipif(not DLRM.exists(), reason="DLRM fixture missing")
def test_dlrm_ranks_guessed_step(tmp_path: Path) -> None:
    """The summary's case: each rank's window of the first rank's median step; rank 3 without a window, rank 5
    given rank 0's (another rank's window: its own trace's graph), rank 6 its whole trace."""
    trace = _imported_dlrm(tmp_path / "imported.ktrace")

    def windows(
        parts: list[Part], each: list[Trace], index: TraceIndex, indexes: list[TraceIndex]
    ) -> list[Window | None]:
        found = ranks_steps(index, parts, indexes)  # as partition_partial: seeds each rank's collective rows
        guess = guess_of(found[0])
        assert guess is not None
        guessed = [own_window(s, *guess) for s in found]
        assert all(w is not None for w in guessed)
        return [*guessed[:3], None, guessed[4], guessed[0], _whole(parts[6], each[6]), guessed[7]]

    got = _assert_graphs(trace, tmp_path / "dlrm.ktrace", windows)
    assert got[3] is None and got[5] is not None and got[5].graph.arrays["ev_kind"].size == 0  # rank 0's window
    assert all(g is not None and len(g.kernel_keys) > 0 for i, g in enumerate(got) if i not in (3, 5))
    assert any(k is not None for g in got if g is not None for k in g.kernel_keys)  # collectives keyed


def _tiled(trace: Trace, ranks: int) -> Trace:
    """`trace` (one rank) run as `ranks` ranks on two hosts: the same pids, tids and correlation ids on each."""
    tables = {}
    for name in TABLES:
        frame = trace.table(name)
        copies = [
            frame.with_columns(
                pl.lit(f"host{r % 2}").cast(frame.schema["node"]).alias("node"),
                pl.lit(r).cast(frame.schema["rank"]).alias("rank"),
            )
            for r in range(ranks)
        ]
        tables[name] = pl.concat(copies)
    return dataclasses.replace(trace, **tables)


def test_event_waits_and_syncs_of_ranks_sharing_pids(tmp_path: Path) -> None:
    """A real trace's event syncs, stream waits and context sync on three ranks with the same pids and tids
    (threads keyed by rank), rank 1 in a window of its first half."""
    trace = _tiled(load(EVENT_WAITS), 3)

    def windows(parts: list[Part], each: list[Trace], *_: object) -> list[Window | None]:
        whole = [_whole(p, t) for p, t in zip(parts, each, strict=True)]
        half = whole[1].start_ns + (whole[1].end_ns - whole[1].start_ns) // 2
        return [whole[0], dataclasses.replace(whole[1], end_ns=half), whole[2]]

    got = _assert_graphs(trace, tmp_path / "events.ktrace", windows)
    full = [g for g in got if g is not None]
    assert all(g.graph.sync_records > 0 and (g.graph.arrays["etype"] == SYNC).any() for g in full)
    assert full[0].graph.arrays["src"].size > full[1].graph.arrays["src"].size > 0


def test_memory_records_a_rank_without_gpu_records_and_one_without_a_window(tmp_path: Path) -> None:
    """Ranks 0 and 2 with kernels and copies, rank 1 without a window, rank 3 without GPU records, the hosts'
    partitions (rank -1: no CPU or GPU events) in whole windows; one pid and tid on every rank."""
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=5, ranks=4, nodes=2))
    assert trace.memory.height > 0
    last = pl.col("rank") != 3
    trace = dataclasses.replace(trace, kernels=trace.kernels.filter(last), memory=trace.memory.filter(last))
    trace = dataclasses.replace(trace, api=trace.api.with_columns(pid=pl.lit(7), tid=pl.lit(7)))

    def windows(parts: list[Part], each: list[Trace], *_: object) -> list[Window | None]:
        return [None if p[1] == 1 else _whole(p, t) for p, t in zip(parts, each, strict=True)]

    found = _assert_graphs(trace, tmp_path / "synthetic.ktrace", windows)
    got = {r: g for (_, r, _), g in zip(store.partitions(tmp_path / "synthetic.ktrace"), found, strict=True)}
    assert got[1] is None and got[3] is not None and got[3].tables["kernels"].height == 0
    assert got[3].tables["api"].height > 0 and got[3].graph.arrays["src"].size > 0
    assert all(g is not None and g.tables["memory"].height > 0 for g in (got[0], got[2]))
    assert got[-1] is not None and got[-1].graph.arrays["ev_kind"].size == 0


def test_ranks_that_do_not_make_up_the_joined_trace_are_refused(tmp_path: Path) -> None:
    store.write(generate(SyntheticConfig(steps=1, kernels_per_step=3, ranks=2)), tmp_path / "two.ktrace")
    index, parts, indexes, each = _task(tmp_path / "two.ktrace")
    with pytest.raises(ValueError, match="do not make up"):
        ranks_graphs(index, parts[:1], indexes[:1], [_whole(parts[0], each[0])])
    # every rank given, in another order than the joined trace's: the totals agree, the blocks do not (RV6)
    windows = [_whole(p, t) for p, t in zip(parts, each, strict=True)]
    with pytest.raises(ValueError, match="do not make up"):
        ranks_graphs(index, parts[::-1], indexes[::-1], windows[::-1])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ranks=st.integers(1, 4),
    seed=st.integers(0, 1000),
    cuts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.booleans()), min_size=6, max_size=6),
)
def test_any_windows_of_a_synthetic_job(ranks: int, seed: int, cuts: Sequence[tuple[float, float, bool]]) -> None:
    """Random windows (a random part of each partition's span, or none) of a random small job (up to 4 ranks and a
    partition of each host's own rows)."""
    trace = generate(SyntheticConfig(steps=2, kernels_per_step=4, ranks=ranks, nodes=min(ranks, 2), seed=seed))

    def windows(parts: list[Part], each: list[Trace], *_: object) -> list[Window | None]:
        out: list[Window | None] = []
        for part, own, (a, b, skip) in zip(parts, each, cuts[: len(parts)], strict=True):
            whole = _whole(part, own)
            span = whole.end_ns - whole.start_ns
            lo, hi = sorted((int(a * span), int(b * span)))
            out.append(None if skip else Window(*part, whole.start_ns + lo, whole.start_ns + hi))
        return out

    with tempfile.TemporaryDirectory() as tmp:
        _assert_graphs(trace, Path(tmp) / "job.ktrace", windows)
