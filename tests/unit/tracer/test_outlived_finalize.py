"""A traced process that outlives `ktrace run`'s wait must not write into the finalized trace.

The writer checked for meta.json before a flush and wrote its partition.json after: a finalize that ran between
the two left a partition.json (and new streams) in the finished store (issue 26: the load-dependent
test_run_reports_a_child_that_outlives_the_wait). close() wrote its last partition.json after a flush that had
seen the trace finalized.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ktrace.model import store
from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.finalize import finalize_run
from ktrace.tracer.session import CaptureSession


def _finalize(root: Path) -> None:
    finalize_run(root, ["python", "train.py"], CaptureConfig(gpu=False, counters=False), 0, [], "host", 0, [4242])


def _leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.name in ("partition.json", ".capture") or p.suffix == ".arrows")


@pytest.fixture
def session(tmp_path: Path) -> CaptureSession:
    s = CaptureSession(tmp_path / "run.ktrace", CaptureConfig(gpu=False, counters=False), "host", 0)
    s.record_range("before", "user", 1, 2, 7, 0)
    s.flush_once()
    return s


def test_a_finalize_between_the_check_and_the_write_leaves_nothing_behind(
    session: CaptureSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = session.root
    write = session._writer.write_partition_meta

    def finalized_meanwhile(*args: Any, **kwargs: Any) -> None:
        _finalize(root)  # the launcher's finalize runs while this flush is under way
        write(*args, **kwargs)

    monkeypatch.setattr(session._writer, "write_partition_meta", finalized_meanwhile)
    session.record_range("after", "user", 3, 4, 7, 0)
    session.flush_once()
    assert _leftovers(root) == []
    session.close()
    assert _leftovers(root) == []
    assert store.read(root).ranges["name"].cast(str).to_list() == ["before", "after"]  # flushed before the finalize


def test_close_after_the_finalize_writes_nothing(session: CaptureSession) -> None:
    _finalize(session.root)
    session.record_range("after", "user", 3, 4, 7, 0)
    session.close()
    assert _leftovers(session.root) == []
    assert store.read(session.root).meta.health["processes_still_running"] == 1


def test_a_writer_thread_that_starts_after_the_finalize_leaves_nothing(tmp_path: Path) -> None:
    """The writer thread makes its partition folder and the capture marker before its first flush: started after
    the finalize, it left them in the finished trace."""
    root = tmp_path / "run.ktrace"
    first = CaptureSession(root, CaptureConfig(gpu=False, counters=False), "host", 0)
    first.record_range("before", "user", 1, 2, 7, 0)
    first.close()
    _finalize(root)
    late = CaptureSession(root, CaptureConfig(gpu=False, counters=False), "host", 1)
    late._ensure_writer()  # what its thread does first
    late.flush_once()
    late.close()
    assert _leftovers(root) == [] and not (root / "node=host" / "rank=1").exists()


def test_a_stream_begun_after_the_conversion_is_not_left_in_the_trace(
    session: CaptureSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that began a stream between finalize()'s conversion and meta.json: the published store held it,
    and reading it "recovered" records the trace does not hold."""
    import pyarrow as pa

    import ktrace.model.store as store_module
    from ktrace.model.capture import CaptureWriter

    convert = store_module.finalize

    def then_a_stream_begins(root: Path) -> list[Path]:
        done = convert(root)
        late = CaptureWriter(root, "host", 0)
        late.append("threads", pa.table({"pid": [1], "tid": [2], "name": ["late"]}))
        late.close()
        return done

    monkeypatch.setattr(store_module, "finalize", then_a_stream_begins)
    _finalize(session.root)
    assert _leftovers(session.root) == []
    assert "recovered_tables" not in store.read(session.root).meta.health
