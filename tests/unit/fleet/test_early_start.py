"""fleet.early_start: the rank-by-rank summary's workers start, and one reads the first rank's steps, before the
client imports the analyses; what it computes is what summarize_store would compute itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ktrace.fleet.critical_path_map import first_task, guess_task
from ktrace.fleet.early_start import first_guess, start_early
from ktrace.fleet.engines import InProcessEngine
from ktrace.fleet.rank_tasks import RankTask
from ktrace.fleet.summary_map import fleet_summary, same_results
from ktrace.model import store
from ktrace.model.clock import clock_mode
from ktrace.model.errors import KtraceError
from ktrace.testing.fleet import FleetConfig, generate_fleet


@pytest.fixture(scope="module")
def job_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("early") / "job.ktrace"
    store.write(generate_fleet(FleetConfig(ranks=12, hosts=3, steps=4, kernels_per_step=6)).trace, path)
    return path


def test_the_first_guess_is_guess_task_s(job_store: Path) -> None:
    tasks = [RankTask(str(job_store), n, r, clock_mode()) for n, r, _ in store.partitions(job_store)]
    first = tasks[first_task(tasks)]
    expected = guess_task(InProcessEngine(), first)
    assert expected is not None
    assert first_guess(first) == expected
    with start_early(job_store, 2, steps_pattern=None) as early:  # type: ignore[union-attr]
        assert early.first is not None and (early.first.node, early.first.rank) == (first.node, first.rank)
        assert early.guess() == expected


def test_the_summary_of_an_early_start_is_the_summary(job_store: Path) -> None:
    plain = fleet_summary(job_store, workers=2)
    with start_early(job_store, 2, steps_pattern=None) as early:  # type: ignore[union-attr]
        started = fleet_summary(job_store, workers=2, early=early)
    assert same_results(plain, started)


def test_no_early_start_where_it_gains_nothing(job_store: Path, tmp_path: Path) -> None:
    assert start_early(job_store, 1, steps_pattern=None) is None  # the tasks run in this process
    assert start_early(tmp_path, 2, steps_pattern=None) is None  # no store
    (tmp_path / "trace.json").write_text("{}")
    assert start_early(tmp_path / "trace.json", 2, steps_pattern=None) is None


def test_a_first_rank_that_cannot_be_read_is_a_one_line_error(job_store: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.ktrace"
    subprocess.run(["cp", "-r", str(job_store), str(broken)], check=True)
    first = sorted(broken.glob("node=*/rank=0"))[0]
    for table in first.glob("*.parquet"):
        table.write_bytes(b"not parquet")
    with start_early(broken, 2, steps_pattern=None) as early:  # type: ignore[union-attr]
        with pytest.raises(KtraceError, match=r"node=.*/rank=0"):
            early.guess()


def test_the_client_does_not_import_polars_before_the_workers_start(job_store: Path) -> None:
    """What start_early needs (the store's names, the engine) imports no polars: the client's imports of the
    analyses come after the workers started."""
    code = (
        "import sys\n"
        "from ktrace.fleet.early_start import start_early\n"
        f"early = start_early({str(job_store)!r}, 2, steps_pattern=None)\n"
        "print('polars' in sys.modules)\n"
        "early.guess(); early.__exit__(None, None, None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
