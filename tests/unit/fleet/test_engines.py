"""The three engines behind `open_engine`: same results, one-line errors naming the item, early stop cancels.

Tasks are stdlib functions (`int`, `Path.touch`): module-level and importable in any worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ktrace.fleet.engines import Engine, InProcessEngine, ProcessEngine, open_engine
from ktrace.model.errors import ExitCode, KtraceError

ITEMS = [str(n) for n in range(12)]


@pytest.fixture(scope="module")
def dask_client() -> Iterator[object]:
    distributed = pytest.importorskip("distributed", reason="dask[distributed] (the ktrace[dask] extra) is missing")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def _run_all(engine: Engine) -> dict[int, int]:
    with engine:
        results = dict(engine.map(int, ITEMS))
    return results


def test_open_engine_picks_in_process_for_one_task_or_one_worker() -> None:
    assert open_engine().name == "in-process"
    assert open_engine(tasks=8, workers=1).name == "in-process"
    with open_engine(tasks=8, workers=2) as engine:
        assert (engine.name, engine.workers) == ("processes", 2)
    with open_engine(tasks=2, workers=16) as engine:  # never more workers than tasks
        assert engine.workers == 2
    with pytest.raises(KtraceError) as err:
        open_engine(tasks=4, workers=0)
    assert err.value.exit_code == ExitCode.USAGE
    with pytest.raises(KtraceError, match="--workers and --cluster contradict") as err:
        open_engine(tasks=4, workers=2, cluster="tcp://scheduler:8786")  # was silently the cluster's
    assert err.value.exit_code == ExitCode.USAGE


def test_in_process_and_processes_give_every_result_once() -> None:
    expected = {index: int(text) for index, text in enumerate(ITEMS)}
    assert _run_all(InProcessEngine()) == expected
    assert _run_all(ProcessEngine(2)) == expected


def test_dask_local_cluster_gives_every_result_once(dask_client: object) -> None:
    engine = open_engine(cluster=dask_client, tasks=len(ITEMS))
    assert (engine.name, engine.workers) == ("dask", 2)
    assert _run_all(engine) == {index: int(text) for index, text in enumerate(ITEMS)}
    assert dask_client.status == "running"  # type: ignore[attr-defined]  # the caller's client stays open


@pytest.mark.parametrize("kind", ["in-process", "processes", "dask"])
def test_a_failing_task_is_one_line_naming_the_item(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "dask":
        engine: Engine = open_engine(cluster=request.getfixturevalue("dask_client"))
    else:
        engine = InProcessEngine() if kind == "in-process" else ProcessEngine(2)
    items = ["1", "2", "rank7.json"]
    with engine, pytest.raises(KtraceError) as err:
        list(engine.map(int, items, describe=lambda item: f"rank file {item}"))
    message = str(err.value)
    assert message.startswith("rank file rank7.json: ValueError: invalid literal for int()"), message
    assert "\n" not in message and err.value.exit_code == ExitCode.FAILURE


@pytest.mark.parametrize("kind", ["processes", "dask"])
def test_stopping_early_cancels_the_tasks_not_started(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # processes: at most 2 tasks a worker are submitted ahead, so 40 leave room; dask: every task is submitted at
    # once and its workers share this process, so 400 keep the scheduler busy past the first result
    if kind == "dask":
        engine: Engine = open_engine(cluster=request.getfixturevalue("dask_client"))
        paths = [tmp_path / f"done{n}" for n in range(400)]
    else:
        engine = ProcessEngine(1)
        paths = [tmp_path / f"done{n}" for n in range(40)]
    with engine:
        results = engine.map(Path.touch, paths)
        next(results)
        results.close()  # what Ctrl-C (KeyboardInterrupt raised in the consumer) does to the generator
    touched = sum(path.exists() for path in paths)
    assert touched < len(paths), "closing the iterator must cancel the tasks not yet started"


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_the_local_path_never_imports_dask() -> None:
    code = (
        "import sys\n"
        "import ktrace.cli.import_trace, ktrace.fleet.folder_import  # the import verb's modules\n"
        "from ktrace.fleet.engines import open_engine\n"
        "with open_engine(workers=2, tasks=3) as e:\n"
        "    assert sorted(r for _, r in e.map(int, ['1', '2', '3'])) == [1, 2, 3]\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "assert not bad, bad\n"
    )
    res = _run_python(code)
    assert res.returncode == 0, res.stderr


def test_a_cluster_without_dask_is_exit_6_with_the_pip_command() -> None:
    code = (
        "import sys\n"
        "sys.modules['distributed'] = None  # as if ktrace[dask] were not installed\n"
        "from ktrace.fleet.engines import open_engine\n"
        "from ktrace.model.errors import KtraceError\n"
        "try:\n"
        "    open_engine(cluster='tcp://127.0.0.1:8786')\n"
        "except KtraceError as exc:\n"
        "    print(int(exc.exit_code), exc)\n"
    )
    res = _run_python(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("6 ") and "pip install 'ktrace[dask]'" in res.stdout, res.stdout


def test_default_workers_scale_with_the_bytes_to_import() -> None:
    from ktrace.fleet.engines import default_workers
    from ktrace.fleet.folder_import import BYTES_PER_WORKER, auto_workers

    assert auto_workers([50_000] * 8) == 1  # the DLRM folder: worker processes would cost more than they save
    assert auto_workers([BYTES_PER_WORKER] * 256) == default_workers()
    assert auto_workers([BYTES_PER_WORKER * 4]) == 1  # never more workers than files


def test_a_rank_task_run_twice_keeps_the_first_partition(
    real_trace_path: Callable[[str], Path], tmp_path: Path
) -> None:
    from ktrace.fleet.rank_import import RankTask, import_rank, read_entry

    source = next(real_trace_path("dlrm").glob("worker2_*"))
    task = RankTask(str(source), str(tmp_path / "file=rank2"), True)
    first, again = import_rank(task), import_rank(task)  # as a Dask cluster may, after losing a worker
    assert first == again and read_entry(tmp_path / "file=rank2") is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file=rank2"]  # no temporary left behind


def test_a_worker_with_other_file_caps_than_the_client_refuses_in_one_line(
    real_trace_path: Callable[[str], Path], tmp_path: Path
) -> None:
    from ktrace.fleet.rank_import import RankTask, import_rank
    from ktrace.importers.kineto_limits import file_caps

    source = next(real_trace_path("dlrm").glob("worker2_*"))
    client = {**file_caps(), "KTRACE_MAX_EVENT_BYTES": 1 << 30}  # raised where `ktrace import` ran, not here
    with pytest.raises(KtraceError) as caught:
        import_rank(RankTask(str(source), str(tmp_path / "file=rank2"), True, client))
    assert caught.value.exit_code == ExitCode.USAGE
    assert "KTRACE_MAX_EVENT_BYTES is 1073741824 where ktrace import runs" in str(caught.value)
    assert not (tmp_path / "file=rank2").exists()
    assert import_rank(RankTask(str(source), str(tmp_path / "file=rank2"), True, file_caps())).skipped == ""


def _interrupt_setting(_: object) -> bool:
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_worker_processes_leave_ctrl_c_to_the_client() -> None:
    # a terminal's Ctrl-C reaches the workers too: an idle one printed a KeyboardInterrupt traceback
    with ProcessEngine(2) as engine:
        assert all(ignored for _, ignored in engine.map(_interrupt_setting, [0, 1, 2, 3]))


def test_leaving_on_ctrl_c_stops_a_running_task_at_once() -> None:
    engine = ProcessEngine(1)
    results = engine.map(time.sleep, [60.0])
    started = time.monotonic()
    seen: list[BaseException] = []

    def wait_for_it() -> None:  # the consumer: its task's worker is stopped under it
        try:
            next(results, None)
        except KtraceError as exc:
            seen.append(exc)

    with pytest.raises(KeyboardInterrupt), engine:
        pending = threading.Thread(target=wait_for_it, daemon=True)
        pending.start()  # the task is submitted and running
        time.sleep(1.0)
        raise KeyboardInterrupt
    assert time.monotonic() - started < 30, "the workers must be stopped, not waited for"
    pending.join(10)
    assert [str(e) for e in seen] == ["60.0: a worker process died (killed, or out of memory: try fewer --workers)"]
