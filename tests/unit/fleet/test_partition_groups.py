"""partition_groups (fleet.task_groups): a store's partitions cut into tasks of consecutive partitions; with several
workers the tasks shrink towards the end (guided), so the workers finish nearly together."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktrace.fleet.task_groups import TAIL_SHARE, TASKS_PER_WORKER, partition_groups
from ktrace.model import store
from ktrace.testing.synthetic import SyntheticConfig, generate


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("groups") / "wide.ktrace"
    store.write(generate(SyntheticConfig(steps=1, kernels_per_step=2, ranks=96, nodes=4)), path)
    return path


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_every_partition_once_in_store_order(wide: Path, workers: int) -> None:
    groups = partition_groups(wide, workers)
    assert [p for g in groups for p in g] == [(n, r) for n, r, _ in store.partitions(wide)]


def test_several_workers_get_shrinking_tasks(wide: Path) -> None:
    n = len(list(store.partitions(wide)))  # 96 ranks and each host's process-level partition (rank -1)
    sizes = [len(g) for g in partition_groups(wide, 2)]
    assert n == 100 and sizes == [25, 19, 14, 11, 8, 6, 5, 4, 4, 4]  # a quarter of what is left, at least n / 32
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 2 * TAIL_SHARE


def test_one_worker_and_a_given_size_cut_equal_tasks(wide: Path) -> None:
    assert [len(g) for g in partition_groups(wide, 1)] == [25] * TASKS_PER_WORKER
    assert [len(g) for g in partition_groups(wide, 2, 40)] == [40, 40, 20]
