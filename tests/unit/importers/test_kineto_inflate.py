"""isal is an optional speed-up (the `analysis` extra): without it .json.gz traces inflate with zlib, to the same trace."""

from __future__ import annotations

import sys
import zlib

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
