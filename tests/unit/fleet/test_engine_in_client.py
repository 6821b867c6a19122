"""The import's engine: this process is one of the `--workers` (it imports ranks while the worker process starts),
the worker processes stay fed while it runs a long task, and the rank files go largest first.

Tasks are stdlib functions (`os.getpid`-like, `subprocess.run`): module-level and importable in any worker process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ktrace.fleet.engines import ProcessEngine, open_engine
from ktrace.model.errors import ExitCode, KtraceError


def _shell(script: str) -> list[str]:
    return ["sh", "-c", script]


def test_this_process_runs_tasks_beside_the_worker_processes(tmp_path: Path) -> None:
    """12 tasks on 2 workers: every result once, from this process and from one worker process."""
    items = [_shell(f"echo $PPID > {tmp_path / str(n)}") for n in range(12)]
    with open_engine(workers=2, tasks=len(items), in_client=True) as engine:
        assert (engine.name, engine.workers) == ("processes", 2)
        results = dict(engine.map(subprocess.run, items))
    assert sorted(results) == list(range(12)) and all(r.returncode == 0 for r in results.values())
    parents = {(tmp_path / str(n)).read_text().strip() for n in range(12)}
    assert str(os.getpid()) in parents and len(parents) == 2  # this process, and the one worker process


def test_the_worker_process_stays_fed_while_this_process_runs_a_long_task(tmp_path: Path) -> None:
    """Items 0 and 1 go to the worker process (one running, one queued), item 2 to this process, which waits (up to
    60 s) until the worker process has done items 3..10: it can only if each finished task hands it the next one
    without this process."""
    marks = [tmp_path / f"done{n}" for n in range(3, 11)]
    wait_all = " && ".join(f"[ -e {m} ]" for m in marks)
    items = [
        _shell("true"),
        _shell("true"),
        _shell(f"for i in $(seq 6000); do if {wait_all}; then exit 0; fi; sleep 0.01; done; exit 1"),
        *(_shell(f"touch {m}") for m in marks),
    ]
    with ProcessEngine(2, in_client=True) as engine:
        results = dict(engine.map(subprocess.run, items))
    assert sorted(results) == list(range(11))
    assert results[2].returncode == 0, "the worker process starved while this process ran its task"


@pytest.mark.parametrize("failing", [0, 2])  # items 0 and 1 run in the worker process, item 2 in this one
def test_a_failing_task_is_one_line_naming_the_item_wherever_it_ran(failing: int) -> None:
    items = ["1", "2", "3", "4"]
    items[failing] = "rank7.json"
    with ProcessEngine(2, in_client=True) as engine, pytest.raises(KtraceError) as err:
        list(engine.map(int, items, describe=lambda item: f"rank file {item}"))
    message = str(err.value)
    assert message.startswith("rank file rank7.json: ValueError: invalid literal for int()"), message
    assert "\n" not in message and err.value.exit_code == ExitCode.FAILURE


def test_stopping_early_cancels_the_tasks_not_started(tmp_path: Path) -> None:
    paths = [tmp_path / f"done{n}" for n in range(40)]
    with ProcessEngine(2, in_client=True) as engine:
        results = engine.map(Path.touch, paths)
        next(results)
        results.close()  # what Ctrl-C (KeyboardInterrupt raised in the consumer) does to the generator
    assert sum(path.exists() for path in paths) < len(paths), "closing the iterator must cancel the rest"


def _rank_file(path: Path, rank: int, kernels: int) -> None:
    events: list[dict[str, object]] = []
    for n in range(kernels):
        events.append({"ph": "X", "cat": "kernel", "name": f"gemm_{n}", "pid": 0, "tid": 7, "ts": 10 * n, "dur": 4})
        events[-1]["args"] = {"correlation": n, "device": 0, "stream": 7}
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 3}, "traceEvents": events}
    path.write_text(json.dumps(doc))


def test_rank_files_are_imported_largest_first_and_stored_in_rank_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last tasks of an import are the shortest (no long rank left alone at the end); ranks keep their files'."""
    from ktrace.cli import main
    from ktrace.fleet import folder_import
    from ktrace.model import store

    folder = tmp_path / "job"
    folder.mkdir()
    for rank, kernels in enumerate([3, 40, 12]):
        _rank_file(folder / f"rank{rank}.json", rank, kernels)
    imported = folder_import.import_rank
    order: list[str] = []

    def recorded(task: folder_import.RankTask) -> folder_import.RankImport:
        order.append(Path(task.path).name)
        return imported(task)

    monkeypatch.setattr(folder_import, "import_rank", recorded)
    out = tmp_path / "job.ktrace"
    assert main(["import", str(folder), "-o", str(out), "--workers", "1", "--no-progress", "-q"]) == 0
    assert order == ["rank1.json", "rank2.json", "rank0.json"]
    kernels = store.read(out).kernels
    assert [kernels.filter(rank=r).height for r in range(3)] == [3, 40, 12]


def test_warmed_up_worker_processes_run_the_tasks_after(tmp_path: Path) -> None:
    """`ktrace import DIR --workers N` starts its worker processes before it lists the rank files (`warm_up`)."""
    items = [_shell(f"echo $PPID > {tmp_path / str(n)}") for n in range(6)]
    with ProcessEngine(2, in_client=True) as engine:
        engine.warm_up("ktrace.fleet.rank_import")
        results = dict(engine.map(subprocess.run, items))
    assert sorted(results) == list(range(6)) and all(r.returncode == 0 for r in results.values())


def test_closing_an_engine_that_only_warmed_up_twice_is_harmless() -> None:
    """Engine.close is idempotent: after a usage error the warmed-up workers are terminated, and a second close
    (a caller's finally after the engine's own) found the pool's process table gone (AttributeError)."""
    engine = ProcessEngine(2, in_client=True)
    engine.warm_up("ktrace.fleet.rank_import")
    engine.close()
    engine.close()
