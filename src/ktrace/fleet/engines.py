"""One executor interface for per-rank tasks, and the two local engines (in-process, worker processes).

An `Engine` maps a module-level function over a sequence of picklable items and yields `(index, result)` as the
tasks complete, in any order. A task's exception comes back as a one-line `KtraceError` naming the item (rank or
file); Ctrl-C, or the caller dropping the iterator, cancels the tasks not yet started. The Dask engine lives in
`ktrace.fleet.dask_engine` (the only module that imports dask): `open_engine` imports it only for a cluster. What
every engine shares is in `ktrace.fleet.engine_base`, which both import.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Generic, Protocol, TypeVar

from ktrace.fleet.engine_base import EngineBase, item_label, task_error
from ktrace.model.errors import ExitCode, KtraceError

T = TypeVar("T")
R = TypeVar("R")

DASK_HINT = "pip install 'ktrace[dask]'"


class Engine(Protocol):
    """Runs per-rank tasks; `name` is "in-process", "processes" or "dask", `workers` how many run at once."""

    name: str
    workers: int

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, describe: Callable[[T], str] | None = None
    ) -> Iterator[tuple[int, R]]:
        """Run `fn(item)` for each item; yield (index into items, result) as tasks complete.

        `fn` must be a module-level function and the items picklable (they travel to other processes). A failing
        task raises a one-line KtraceError naming `describe(item)` (default: `str(item)`)."""
        ...

    def close(self) -> None:
        """Release the workers (idempotent)."""
        ...

    def __enter__(self) -> Engine: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


def default_workers() -> int:
    """The number of cores this process may run on (the default of `--workers`)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


BYTES_PER_WORKER = 4 << 20
"""`ktrace import DIR` without --workers: at most one worker per 4 MB of rank files left to import. A worker process
costs ~0.4 s of CPU to start (polars, pyarrow, the importer; measured: 2 workers took 0.8 s more CPU than one process
on 32 DLRM ranks), what ~0.7 MB of gzip Kineto costs to import (0.55 s/MB): at 4 MB a worker, starting costs under a
fifth of the work. The 8-rank DLRM folder (0.4 MB) imports in this process."""


def auto_workers(sizes: Sequence[int]) -> int:
    """The default of `ktrace import DIR --workers` for rank files of `sizes` bytes: one per core, one per
    BYTES_PER_WORKER at most."""
    return max(1, min(default_workers(), len(sizes), sum(sizes) // BYTES_PER_WORKER))


class InProcessEngine(EngineBase):
    """Runs every task in this process, one after the other (one rank, or `--workers 1`)."""

    name = "in-process"
    workers = 1

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, describe: Callable[[T], str] | None = None
    ) -> Iterator[tuple[int, R]]:
        """Call `fn` on each item in order."""
        for index, item in enumerate(items):
            try:
                result = fn(item)
            except (KeyboardInterrupt, SystemExit, MemoryError):
                raise
            except Exception as exc:
                raise task_error(item_label(item, describe), exc) from exc
            yield index, result


class ProcessEngine(EngineBase):
    """Runs tasks in `workers` local processes (concurrent.futures), started by forkserver (spawn off Linux).

    Never fork: numba's and polars' thread pools do not survive a fork. At most `workers` tasks are in flight, so a
    long job holds few pending futures.

    `in_client`: this process is one of the `workers` (it runs tasks between collecting the others' results) and
    `workers - 1` processes are started. A worker process spends ~0.5 s importing polars, pyarrow and the importer
    before its first task; this process has them already, so it works while the other starts (`ktrace import`,
    whose client holds one rank at a time anyway; not the summary, whose client must stay small)."""

    name = "processes"

    def __init__(self, workers: int, *, in_client: bool = False) -> None:
        self.workers = workers
        self._in_client = in_client and workers > 1
        method = "forkserver" if sys.platform.startswith("linux") else "spawn"
        processes = workers - 1 if self._in_client else workers
        self._pool = ProcessPoolExecutor(
            max_workers=processes, mp_context=multiprocessing.get_context(method), initializer=_leave_interrupts
        )
        self._warming: list[Future[bool]] = []
        self._starting: threading.Thread | None = None
        self._mapped = False
        self._interrupted = False

    def warm_up(self, module: str) -> None:
        """Start the worker processes now, each importing `module` (the tasks' own): they load it while this process
        still prepares the tasks (a worker process takes ~0.5 s to import polars, pyarrow and the importer). Started
        from a thread: the first start waits ~0.1 s for the forkserver's own interpreter, which this process spends
        preparing instead."""
        count = self.workers - 1 if self._in_client else self.workers

        def start() -> None:
            with contextlib.suppress(Exception):  # (a pool that cannot start says so when map submits its tasks)
                self._warming = [self._pool.submit(_import_module, module) for _ in range(count)]

        self._starting = threading.Thread(target=start, name="ktrace-warm-up", daemon=True)
        self._starting.start()

    def _started(self) -> None:
        """Wait for warm_up's thread (its submissions done: the pool is this thread's again)."""
        if self._starting is not None:
            self._starting.join()
            self._starting = None

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, describe: Callable[[T], str] | None = None
    ) -> Iterator[tuple[int, R]]:
        """Submit tasks as workers free up (2 per worker queued) and yield each result as it completes."""
        self._started()
        self._mapped = True
        if self._in_client:
            yield from self._map_shared(fn, items, describe)
            return
        pending: dict[Future[R], int] = {}
        upcoming = iter(range(len(items)))
        try:
            for index in upcoming:
                pending[self._pool.submit(fn, items[index])] = index
                if len(pending) >= 2 * self.workers:
                    break
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    yield index, self._result(future, item_label(items[index], describe))
                for index in upcoming:
                    pending[self._pool.submit(fn, items[index])] = index
                    if len(pending) >= 2 * self.workers:
                        break
        finally:
            for future in pending:  # Ctrl-C, a failed task or a caller that stopped early: start nothing more
                future.cancel()

    def _map_shared(
        self, fn: Callable[[T], R], items: Sequence[T], describe: Callable[[T], str] | None
    ) -> Iterator[tuple[int, R]]:
        """`map` with this process as one worker: items are taken in order by whoever frees up first. A finished
        process task submits the next item from its done-callback, so the processes stay fed (two tasks each) while
        this one runs a long task; this process yields the finished ones between its own."""
        feed = _Feed(self._pool, fn, items, self.workers - 1)
        try:
            feed.top_up()
            while True:
                for index, future in feed.finished():
                    yield index, self._result(future, item_label(items[index], describe))
                mine = feed.take()
                if mine is None:
                    break
                try:
                    result = fn(items[mine])
                except (KeyboardInterrupt, SystemExit, MemoryError):
                    raise
                except Exception as exc:
                    raise task_error(item_label(items[mine], describe), exc) from exc
                yield mine, result
            while (found := feed.next_finished()) is not None:
                yield found[0], self._result(found[1], item_label(items[found[0]], describe))
        finally:
            feed.stop()

    @staticmethod
    def _result(future: Future[R], label: str) -> R:
        try:
            return future.result()
        except BrokenProcessPool as exc:
            raise KtraceError(
                f"{label}: a worker process died (killed, or out of memory: try fewer --workers)"
            ) from exc
        except Exception as exc:
            raise task_error(label, exc) from exc

    def close(self) -> None:
        """Cancel what has not started and stop the workers; workers that only warmed up (the caller failed before
        its first task: a usage error), and every worker after a Ctrl-C (`with engine:` left by KeyboardInterrupt),
        are stopped at once rather than waited for."""
        self._started()
        if (self._warming and not self._mapped) or self._interrupted:
            # (concurrent.futures has no terminate before 3.14; a pool shut down already holds None there)
            for process in list((self._pool._processes or {}).values()):
                process.terminate()
            self._warming = []
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        self.close()


def _leave_interrupts() -> None:
    """A worker process's first call: it ignores Ctrl-C. A terminal's Ctrl-C reaches its whole process group, the
    workers too; the client, which handles it, stops them (ProcessEngine.close). A worker idle in its queue's get
    printed a KeyboardInterrupt traceback under the client's one line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _import_module(name: str) -> bool:
    importlib.import_module(name)
    return True


class _Feed(Generic[T, R]):
    """The items of a shared map: taken in order under a lock by this process and by the done-callbacks of the
    worker processes' futures; finished futures queued for this process to yield.

    The `processes` hold two tasks each (one running, one queued: a process never waits for this one's GIL, held
    by its own task, to be handed its next) until only as many items are left as they would hold; then one each:
    an item queued behind a running one is out of this process's reach, and at the end this process would wait
    for both (up to two tasks with a core idle, where one each leaves at most the one running)."""

    def __init__(self, pool: ProcessPoolExecutor, fn: Callable[[T], R], items: Sequence[T], processes: int) -> None:
        self._pool, self._fn, self._items = pool, fn, items
        self._processes = processes
        self._in_processes = 0
        """Tasks submitted to the processes and not finished."""
        self._lock = threading.Lock()
        self._next = 0
        self._to_processes = 0
        """Items taken for the worker processes: each comes back through `_done` (as a failed future if its
        submission failed)."""
        self._collected = 0
        self._submitted: dict[Future[R], int] = {}
        self._done: queue.SimpleQueue[tuple[int, Future[R]]] = queue.SimpleQueue()

    def take(self) -> int | None:
        """The next item's index for this process, or None when every item was taken (or the map stopped)."""
        with self._lock:
            if self._next >= len(self._items):
                return None
            self._next += 1
            return self._next - 1

    def top_up(self) -> None:
        """Submit items to the worker processes until they hold two tasks each, or one each near the end."""
        while True:
            with self._lock:
                left = len(self._items) - self._next
                if left <= 0 or self._in_processes >= self._processes * (2 if left > 2 * self._processes else 1):
                    return
                index = self._next
                self._next += 1
                self._to_processes += 1
                self._in_processes += 1
            self._submit(index)

    def _submit(self, index: int) -> None:
        try:
            future = self._pool.submit(self._fn, self._items[index])
        except Exception as exc:  # a worker died (BrokenProcessPool), or the pool is shut down: say so as its result
            with self._lock:
                self._in_processes -= 1
            failed: Future[R] = Future()
            failed.set_exception(exc)
            self._done.put((index, failed))
            return
        with self._lock:
            self._submitted[future] = index
        future.add_done_callback(self._finished)

    def _finished(self, future: Future[R]) -> None:
        with self._lock:
            index = self._submitted.pop(future)
            self._in_processes -= 1
        self._done.put((index, future))
        if not future.cancelled():
            self.top_up()

    def finished(self) -> Iterator[tuple[int, Future[R]]]:
        """The process tasks finished since the last call, without waiting."""
        while True:
            try:
                found = self._done.get_nowait()
            except queue.Empty:
                return
            self._collected += 1
            yield found

    def next_finished(self) -> tuple[int, Future[R]] | None:
        """Wait for the next process task to finish; None when every one was collected (call once all are taken)."""
        with self._lock:
            if self._collected >= self._to_processes:
                return None
        self._collected += 1
        return self._done.get()

    def stop(self) -> None:
        """Take nothing more and cancel what has not started."""
        with self._lock:
            self._next = len(self._items)
            pending = list(self._submitted)
        for future in pending:
            future.cancel()


def check_engine_options(workers: int | None, cluster: str | object | None) -> None:
    """The usage errors of --workers/--cluster, checked where they arrive (also when no engine is opened: a fully
    resumed import, a source that is not a folder of ranks).

    Raises:
        KtraceError: `workers` < 1, or both `workers` and `cluster` (the cluster runs its own workers), exit 2."""
    if workers is not None and workers < 1:
        raise KtraceError(f"--workers must be at least 1, not {workers}", ExitCode.USAGE)
    if cluster is not None and workers is not None:
        raise KtraceError(
            "--workers and --cluster contradict each other: the cluster runs its own workers (scale it instead)",
            ExitCode.USAGE,
        )


def open_engine(
    *, workers: int | None = None, cluster: str | object | None = None, tasks: int = 1, in_client: bool = False
) -> Engine:
    """The engine for `tasks` per-rank tasks.

    `cluster` (a scheduler address such as "tcp://host:8786", a `dask.distributed.Client`, or a cluster object such
    as LocalCluster or dask-jobqueue's SLURMCluster) -> the Dask engine (needs `ktrace[dask]`: exit 6 without it).
    Else `workers` local processes (default: one per core, never more than `tasks`); one worker or one task runs
    in this process. `in_client`: this process counts as one of the local workers (ProcessEngine).

    Raises:
        KtraceError: both `workers` and `cluster` (usage: the cluster sets its own workers), `workers` < 1 (usage),
            `cluster` without dask (missing dependency)."""
    check_engine_options(workers, cluster)
    if cluster is not None:
        try:
            from ktrace.fleet.dask_engine import DaskEngine
        except ImportError as exc:  # dask or distributed missing, or broken
            raise KtraceError(
                f"--cluster needs dask.distributed, which this install lacks ({exc.name or exc}): {DASK_HINT}",
                ExitCode.MISSING_DEPENDENCY,
            ) from exc
        return DaskEngine(cluster)
    count = min(workers if workers is not None else default_workers(), max(1, tasks))
    if count <= 1:
        return InProcessEngine()
    return ProcessEngine(count, in_client=in_client)
