"""The end of a shared map (`ProcessEngine(in_client=True)`): once only as many items are left as the worker
processes would hold, each holds one task, so the last items stay within this process's reach instead of queuing
behind a running task (where this process would wait for both with its core idle)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ktrace.fleet.engines import ProcessEngine


def _shell(script: str) -> list[str]:
    return ["sh", "-c", script]


def _wait_for(mark: Path) -> str:
    return f"for i in $(seq 6000); do if [ -e {mark} ]; then exit 0; fi; sleep 0.01; done; exit 1"


def test_the_last_item_is_not_queued_behind_a_running_task(tmp_path: Path) -> None:
    """Items 0 and 1 go to the worker process (4 left: two each), item 2 to this process. When item 0 ends, one item
    is left: it is not queued behind item 1, which waits for it, but taken by this process once item 2 ends."""
    first, last = tmp_path / "first", tmp_path / "last"
    items = [
        _shell(f"touch {first}"),
        _shell(_wait_for(last)),
        _shell(f"({_wait_for(first)}) && sleep 0.5"),  # item 0's end reaches this process before it takes item 3
        _shell(f"touch {last}"),
    ]
    with ProcessEngine(2, in_client=True) as engine:
        results = dict(engine.map(subprocess.run, items))
    assert sorted(results) == [0, 1, 2, 3]
    assert results[1].returncode == 0, "the last item was queued behind the task waiting for it"
