"""The Dask engine: per-rank tasks on a dask.distributed cluster (the `ktrace[dask]` extra).

The only ktrace module that imports dask (a protected import-linter contract); `engines.open_engine` imports it
only when a cluster is named, so the local path never loads dask.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from distributed import Client, Future, as_completed

from ktrace.fleet.engine_base import EngineBase, item_label, task_error
from ktrace.fleet.scheduler_probe import SchedulerAddress, probe_scheduler
from ktrace.model.errors import ExitCode, KtraceError

T = TypeVar("T")
R = TypeVar("R")


class DaskEngine(EngineBase):
    """Runs tasks on a Dask cluster through `client.map` / `as_completed`.

    `cluster` is a scheduler address ("tcp://host:8786", or a SchedulerAddress with the time allowed to reach it:
    scheduler_probe), a `Client` (used, never closed: it is the caller's), or a cluster object (LocalCluster,
    dask-jobqueue's SLURMCluster: a client is opened on it and closed with the engine)."""

    name = "dask"

    def __init__(self, cluster: str | object) -> None:
        self._owned = not isinstance(cluster, Client)
        if isinstance(cluster, Client):
            self._client = cluster
        else:
            if isinstance(cluster, str):
                cluster = SchedulerAddress(cluster)
            target, timeout_s = cluster, 20.0
            if isinstance(cluster, SchedulerAddress):
                probe_scheduler(cluster)  # (dask's connect can hang, or wait 23 s on a closed port)
                target, timeout_s = cluster.address, cluster.timeout_s
            try:
                self._client = Client(target, timeout=f"{timeout_s}s")  # type: ignore[no-untyped-call]
            except Exception as exc:  # noqa: BLE001 - whatever dask raises on a server it cannot use: one line
                raise KtraceError(
                    f"cannot use the Dask scheduler {getattr(cluster, 'address', cluster)}: "
                    f"{type(exc).__name__}: {exc}",
                    ExitCode.FAILURE,
                ) from exc
        threads: dict[str, int] = self._client.nthreads()  # type: ignore[no-untyped-call]
        self.workers = max(1, sum(threads.values()))  # tasks run at once (0 workers yet: 1, they queue)

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], *, describe: Callable[[T], str] | None = None
    ) -> Iterator[tuple[int, R]]:
        """Submit every task (pure=False: each runs once even when two items are equal); yield as they finish."""
        futures: list[Future] = self._client.map(fn, list(items), pure=False)
        index_of = {future.key: index for index, future in enumerate(futures)}
        remaining = set(index_of)
        try:
            for future in as_completed(futures):  # type: ignore[no-untyped-call]
                index = index_of[future.key]
                remaining.discard(future.key)
                if future.status == "error":
                    exc = future.exception()
                    raise task_error(item_label(items[index], describe), exc)
                yield index, future.result()
        finally:
            left = [future for future in futures if future.key in remaining]
            if left:  # Ctrl-C, a failed task or a caller that stopped early: cancel the rest on the cluster
                self._client.cancel(left)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Close the client if this engine opened it."""
        if self._owned:
            self._client.close()  # type: ignore[no-untyped-call]
