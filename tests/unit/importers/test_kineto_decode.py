"""The chunked decoder: slices cut anywhere give the same trace as one big slice; damage is salvaged."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.importers import kineto_decode
from ktrace.importers.kineto import import_kineto
from ktrace.testing import assert_trace_equal

ALEXNET = fixture_path("alexnet")


@contextmanager
def small_chunks(size: int) -> Iterator[None]:
    """Make the splitter cut tiny slices, so cuts land inside strings and nested objects."""
    old = kineto_decode.CHUNK_BYTES
    kineto_decode.CHUNK_BYTES = size
    try:
        yield
    finally:
        kineto_decode.CHUNK_BYTES = old


@pytest.mark.parametrize("size", [512, 3000, 40_000])
def test_slice_size_does_not_change_the_trace(size: int) -> None:
    whole = import_kineto(ALEXNET)
    with small_chunks(size):
        sliced = import_kineto(ALEXNET)
    assert_trace_equal(sliced, whole)


def test_damage_in_the_middle_is_salvaged(tmp_path: Path) -> None:
    text = gzip.decompress(ALEXNET.read_bytes())
    at = text.index(b'"cat": "kernel"', len(text) // 2)
    damaged = text[:at] + b"###" + text[at:]
    path = tmp_path / "damaged.json"
    path.write_bytes(damaged)
    whole = import_kineto(ALEXNET)
    with small_chunks(4096):
        trace = import_kineto(path)
    assert trace.kernels.height == whole.kernels.height - 1
    assert trace.meta.health["dropped_events"] >= 1
    assert trace.meta.health["truncated_input"] == 0


def test_plain_json_truncated_mid_file(tmp_path: Path) -> None:
    text = gzip.decompress(ALEXNET.read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(text[: len(text) * 2 // 3])
    trace = import_kineto(path)
    assert 0 < trace.api.height < import_kineto(ALEXNET).api.height
    assert any("truncated" in n for n in trace.meta.notes)


def test_multi_member_gzip_is_read_whole(tmp_path: Path) -> None:
    text = gzip.decompress(ALEXNET.read_bytes())
    half = len(text) // 2
    path = tmp_path / "two_members.json.gz"
    path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    assert_trace_equal(import_kineto(path), import_kineto(ALEXNET))
