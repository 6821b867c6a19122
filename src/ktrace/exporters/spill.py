"""What a timeline export notes per slice or per launch->run pair for a whole rank, kept outside the process's memory.

The Perfetto and Chrome JSON exports read a rank twice: a layout pass notes a code per slice (its track or place)
and a few bytes per launch->run pair, the writing pass reads them back in file order. Held in memory they grew
with the rank (~40 bytes a kernel: 0.4 GB at 10 M kernels); here they go to an unnamed temporary file as they are
noted and come back a chunk at a time, so the memory they take stays that of a chunk. The file lies in the
output's folder, on the disk the export writes to anyway (not in $TMPDIR: often a small tmpfs, whose pages are
memory, or swap, and which a large export fills); the kernel writes its pages out as it writes any file's and
keeps them in its page cache only while memory allows. The file has no name (no other process sees it) and is
gone once closed, or when the process ends however it ends.
"""

from __future__ import annotations

import tempfile
import weakref
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike, NDArray


class Spill:
    """Values of one dtype appended in order, then read back by position (every append before the reads), in an
    unnamed file in `folder` (the export's output folder)."""

    def __init__(self, dtype: DTypeLike, folder: Path) -> None:
        self.dtype = np.dtype(dtype)
        self.count = 0
        """Values appended."""
        self._file = tempfile.TemporaryFile(prefix="ktrace-export-", dir=folder, buffering=0)
        self._close = weakref.finalize(self, self._file.close)

    def append(self, values: NDArray[np.generic]) -> None:
        """Append `values` (cast to the dtype)."""
        data = np.ascontiguousarray(values, self.dtype)
        view = data.view(np.uint8).data
        self._file.seek(self.count * self.dtype.itemsize)
        while view.nbytes:
            view = view[self._file.write(view) or 0 :]
        self.count += int(data.shape[0])

    def read(self, first: int, count: int) -> NDArray[np.generic]:
        """Values first, ..., first + count - 1 (fewer past the end)."""
        count = max(0, min(count, self.count - first))
        out = np.empty(count, self.dtype)
        view = out.view(np.uint8).data
        self._file.seek(first * self.dtype.itemsize)
        while view.nbytes:
            got = self._file.readinto(view)
            if not got:
                raise OSError("the export's temporary file ended early")
            view = view[got:]
        return out

    def close(self) -> None:
        """Delete the file (reads fail after this)."""
        self._close()


RUN_GAP = 4096
"""Places at most this far apart are read or written in one run (SpillTable)."""


class SpillTable:
    """A fixed number of values of one dtype, all 0 at first, read and written by place (any places, any order), in
    an unnamed file in `folder`: a value per launch correlation id, where the places a window touches lie close
    together (ids count up with time), so each access is a few runs of the file, never the whole table in memory.
    The file is sparse: places never written take no disk."""

    def __init__(self, dtype: DTypeLike, size: int, folder: Path) -> None:
        self.dtype = np.dtype(dtype)
        self.size = size
        self._file = tempfile.TemporaryFile(prefix="ktrace-export-", dir=folder, buffering=0)
        self._file.truncate(size * self.dtype.itemsize)
        self._close = weakref.finalize(self, self._file.close)

    def _runs(self, places: NDArray[np.int64]) -> list[tuple[int, int, int, int]]:
        """(first place, last place + 1, first index, end index) of each run of the sorted distinct `places`."""
        cuts = np.flatnonzero(np.diff(places) > RUN_GAP) + 1
        heads, tails = np.r_[0, cuts], np.r_[cuts, places.shape[0]]
        return [
            (int(places[h]), int(places[t - 1]) + 1, int(h), int(t))
            for h, t in zip(heads.tolist(), tails.tolist(), strict=True)
        ]

    def _read_run(self, lo: int, hi: int) -> NDArray[np.generic]:
        run = np.empty(hi - lo, self.dtype)
        view = run.view(np.uint8).data
        self._file.seek(lo * self.dtype.itemsize)
        while view.nbytes:
            got = self._file.readinto(view)
            if not got:
                raise OSError("the export's temporary file ended early")
            view = view[got:]
        return run

    def _one_run(self, places: NDArray[np.int64]) -> tuple[int, int] | None:
        """(first, last + 1) of `places` where they lie close enough to read as one run (as a window's ids do)."""
        if not places.size:
            return (0, 0)
        lo, hi = int(places.min()), int(places.max()) + 1
        return (lo, hi) if hi - lo <= 16 * places.shape[0] + RUN_GAP else None

    def get(self, keys: NDArray[np.integer]) -> NDArray[np.generic]:
        """The values at places `keys` (each in 0 .. size - 1; repeats allowed)."""
        places: NDArray[np.int64] = np.asarray(keys, np.int64)
        one = self._one_run(places)
        if one is not None:
            return self._read_run(*one)[places - one[0]]
        distinct, inverse = np.unique(places, return_inverse=True)
        values = np.empty(distinct.shape[0], self.dtype)
        for lo, hi, h, t in self._runs(distinct):
            values[h:t] = self._read_run(lo, hi)[distinct[h:t] - lo]
        return values[inverse.reshape(-1)]

    def put(self, keys: NDArray[np.integer], values: NDArray[np.generic]) -> None:
        """Set the values at places `keys` (each in 0 .. size - 1; of a place given twice, one value is kept)."""
        places: NDArray[np.int64] = np.asarray(keys, np.int64)
        one = self._one_run(places)
        if one is not None:
            run = self._read_run(*one)
            run[places - one[0]] = values
            self._write_run(one[0], run)
            return
        by_place = np.argsort(places, kind="stable")
        sorted_places = places[by_place]
        sorted_values = np.asarray(values)[by_place].astype(self.dtype, copy=False)
        for lo, hi, h, t in self._runs(sorted_places):
            run = self._read_run(lo, hi)
            run[sorted_places[h:t] - lo] = sorted_values[h:t]
            self._write_run(lo, run)

    def _write_run(self, lo: int, run: NDArray[np.generic]) -> None:
        view = run.view(np.uint8).data
        self._file.seek(lo * self.dtype.itemsize)
        while view.nbytes:
            view = view[self._file.write(view) or 0 :]

    def close(self) -> None:
        """Delete the file."""
        self._close()
