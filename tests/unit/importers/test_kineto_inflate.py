"""isal is an optional speed-up (the `analysis` extra): without it .json.gz traces inflate with zlib, to the same trace."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator

import pytest
from real_traces import fixture_path

from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_stream import inflate_module
from ktrace.testing import assert_trace_equal


def test_isal_is_used_when_installed() -> None:
    pytest.importorskip("isal", reason="isal is not installed: the zlib path is the only one to test here")
    assert inflate_module().__name__ == "isal.isal_zlib"


def test_without_isal_zlib_reads_the_same_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    path = fixture_path("alexnet")
    with_default = import_kineto(path)
    monkeypatch.setitem(sys.modules, "isal.isal_zlib", None)  # as if isal were not installed
    assert inflate_module() is zlib
    assert_trace_equal(import_kineto(path), with_default)


def test_the_gunzip_thread_stays_at_most_a_few_blocks_ahead() -> None:
    """Blocks inflated but not yet decoded are memory at the import's peak (8 MB each): the thread may hold
    AHEAD_BLOCKS of them in the queue and one in hand, no more, however slow the decoder is."""
    import threading
    import time

    from ktrace.importers import kineto_stream
    from ktrace.model.errors import no_progress

    produced = 0
    lock = threading.Lock()

    def source() -> Iterator[bytes]:
        nonlocal produced
        for _ in range(20):
            with lock:
                produced += 1
            yield b"x"

    ahead = 0
    for consumed, _ in enumerate(
        kineto_stream._threaded(source(), kineto_stream.StreamStatus(), no_progress, 0, 0), start=1
    ):
        time.sleep(0.02)  # a slow decoder: the thread fills the queue meanwhile
        with lock:
            ahead = max(ahead, produced - consumed)
    assert consumed == 20
    assert 1 <= ahead <= kineto_stream.AHEAD_BLOCKS + 1 <= 3
