"""model.outputs.sync_filesystem: a failed flush is an error (never a store published as if durable), and the
file-by-file flush used off Linux reaches every file."""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from pathlib import Path

import pytest

from ktrace.model import outputs


class _FailingLibc:
    def __init__(self, code: int) -> None:
        self.code = code

    def syncfs(self, fd: int) -> int:
        ctypes.set_errno(self.code)
        return -1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs(2) is Linux's")
def test_a_failed_syncfs_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes, "CDLL", lambda *args, **kwargs: _FailingLibc(errno.EIO))
    with pytest.raises(OSError) as raised:
        outputs.sync_filesystem(tmp_path)
    assert raised.value.errno == errno.EIO


def test_without_syncfs_every_file_is_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "node=a" / "rank=0").mkdir(parents=True)
    for name in ("node=a/rank=0/kernels.parquet", "meta.json"):
        (tmp_path / name).write_bytes(b"x")
    flushed: list[int] = []
    real = os.fsync
    monkeypatch.setattr(sys, "platform", "darwin")

    def counted(fd: int) -> None:
        flushed.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    outputs.sync_filesystem(tmp_path)
    assert len(flushed) >= 2  # the two files (and the folders where they can be opened)
