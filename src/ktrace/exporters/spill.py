"""What a timeline export notes per slice or per launch->run pair for a whole rank: in memory while it is small,
past a budget outside the process's memory.

The Perfetto and Chrome JSON exports read a rank twice: a layout pass notes a code per slice (its track or place)
and a few bytes per launch->run pair, the writing pass reads them back in file order. Held in memory they grow
with the rank (~40 bytes a kernel: 0.4 GB at 10 M kernels). So every Spill and SpillTable draws on one budget for the
whole process, MEMORY_BYTES (256 MiB; the environment variable KTRACE_EXPORT_MEMORY_BYTES sets another, 0: files
always): while its values fit what is left of it they lie in a numpy array, as fast as the export was before; past it
they go to an unnamed temporary file and come back a chunk at a time, so the memory they take stays that of a chunk.
Callers see the same values either way (the tests run both side by side); a table in memory is read and written
where it lies, one in a file a run of places at a time. The file lies in the output's folder, on the
disk the export writes to anyway (not in $TMPDIR: often a small tmpfs, whose pages are memory, or swap, and which a
large export fills); the kernel writes its pages out as it writes any file's and keeps them in its page cache only
while memory allows. The file has no name (no other process sees it) and is gone once closed, or when the process
ends however it ends; closing (or dropping) a spill in memory gives its bytes back to the budget.
"""

from __future__ import annotations

import bisect
import io
import os
import tempfile
import threading
import weakref
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike, NDArray

from ktrace.model.errors import ExitCode, KtraceError

MEMORY_BYTES = 1 << 28
"""What every Spill and SpillTable of the process together hold in memory at most (256 MiB: a SpillTable of 32 M
int64 values fits), unless KTRACE_EXPORT_MEMORY_BYTES says otherwise."""
MEMORY_ENV = "KTRACE_EXPORT_MEMORY_BYTES"


class _Budget:
    """The bytes the process's spills hold in memory, against the limit (read from the environment at each ask)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.used = 0

    def take(self, nbytes: int) -> bool:
        """Reserve `nbytes` if they fit what is left (True), else nothing (False)."""
        text = os.environ.get(MEMORY_ENV, "").strip() or str(MEMORY_BYTES)
        if not text.isdigit():
            raise KtraceError(
                f"{MEMORY_ENV}={text!r}: expected a whole number of bytes (0: files always)", ExitCode.USAGE
            )
        limit = int(text)
        with self._lock:
            if self.used + nbytes > limit:
                return False
            self.used += nbytes
            return True

    def give(self, nbytes: int) -> None:
        """Return `nbytes` reserved before."""
        with self._lock:
            self.used -= nbytes


BUDGET = _Budget()
"""The one budget of the process's spills in memory."""


class _Backing:
    """Where a spill's values lie: `array` (memory, `reserved` bytes of the budget) or `file` (an unnamed file)."""

    def __init__(self) -> None:
        self.array: NDArray[np.generic] | None = None
        self.reserved = 0
        self.file: io.FileIO | None = None

    def open_file(self, folder: Path) -> io.FileIO:
        """The unnamed temporary file in `folder` (made on first use)."""
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="ktrace-export-", dir=folder, buffering=0)
        return self.file

    def let_go(self) -> None:
        """Drop the values: the array's bytes back to the budget, the file closed (and so deleted)."""
        self.array = None
        BUDGET.give(self.reserved)
        self.reserved = 0
        if self.file is not None:
            self.file.close()

    def write(self, first: int, data: NDArray[np.generic]) -> None:
        """Write `data` (contiguous) at value `first` of the file."""
        assert self.file is not None
        view = data.view(np.uint8).data
        self.file.seek(first * data.dtype.itemsize)
        while view.nbytes:
            view = view[self.file.write(view) or 0 :]

    def read_into(self, first: int, out: NDArray[np.generic]) -> None:
        """Fill `out` from value `first` of the file."""
        assert self.file is not None
        view = out.view(np.uint8).data
        self.file.seek(first * out.dtype.itemsize)
        while view.nbytes:
            got = self.file.readinto(view)
            if not got:
                raise OSError("the export's temporary file ended early")
            view = view[got:]


class Spill:
    """Values of one dtype appended in order, then read back by position (every append before the reads): in memory
    while they fit the budget, else in an unnamed file in `folder` (the export's output folder)."""

    def __init__(self, dtype: DTypeLike, folder: Path) -> None:
        self.dtype = np.dtype(dtype)
        self.count = 0
        """Values appended."""
        self._folder = folder
        self._held: list[NDArray[np.generic]] = []
        """In memory: the appends (those not empty), in order."""
        self._ends: list[int] = []
        """In memory: the count after each of `_held`."""
        self._backing = _Backing()
        self._close = weakref.finalize(self, self._backing.let_go)

    @property
    def in_memory(self) -> bool:
        """Whether the values lie in memory (False: in the file)."""
        return self._backing.file is None

    def append(self, values: NDArray[np.generic]) -> None:
        """Append `values` (cast to the dtype)."""
        data = np.array(values, self.dtype, copy=True, order="C")  # a copy: the caller may reuse its array
        backing = self._backing
        if backing.file is None and BUDGET.take(data.nbytes):
            backing.reserved += data.nbytes
            if data.size:
                self._held.append(data)
                self._ends.append(self.count + int(data.shape[0]))
        else:
            if backing.file is None:  # past the budget: what was held goes to the file first
                backing.open_file(self._folder)
                for held, end in zip(self._held, self._ends, strict=True):
                    backing.write(end - held.shape[0], held)
                self._held, self._ends = [], []
                BUDGET.give(backing.reserved)
                backing.reserved = 0
            backing.write(self.count, data)
        self.count += int(data.shape[0])

    def read(self, first: int, count: int) -> NDArray[np.generic]:
        """Values first, ..., first + count - 1 (fewer past the end); read-only where they lie in memory."""
        count = max(0, min(count, self.count - first))
        if self._backing.file is None:  # the appends as they came: a view of one, or the pieces of a few joined
            at = bisect.bisect_right(self._ends, first)
            pieces: list[NDArray[np.generic]] = []
            while count > 0:
                held, end = self._held[at], self._ends[at]
                piece = held[first - (end - held.shape[0]) :][:count]
                pieces.append(piece)
                first, count, at = first + piece.shape[0], count - piece.shape[0], at + 1
            out = pieces[0] if len(pieces) == 1 else np.concatenate([np.zeros(0, self.dtype), *pieces])
            out.flags.writeable = False
            return out
        out = np.empty(count, self.dtype)
        self._backing.read_into(first, out)
        return out

    def close(self) -> None:
        """Let the values go (reads fail after this)."""
        self._held, self._ends = [], []
        self._close()


RUN_GAP = 4096
"""Places at most this far apart are read or written in one run (SpillTable)."""


class SpillTable:
    """A fixed number of values of one dtype, all 0 at first, read and written by place (any places, any order): a
    value per launch correlation id. In memory (a numpy array) where the table fits the budget; else in an unnamed
    file in `folder`, where the places a window touches lie close together (ids count up with time), so each access
    is a few runs of the file, never the whole table in memory. The file is sparse: places never written take no
    disk."""

    def __init__(self, dtype: DTypeLike, size: int, folder: Path) -> None:
        self.dtype = np.dtype(dtype)
        self.size = size
        self._backing = _Backing()
        self._close = weakref.finalize(self, self._backing.let_go)
        nbytes = size * self.dtype.itemsize
        if BUDGET.take(nbytes):
            self._backing.array, self._backing.reserved = np.zeros(size, self.dtype), nbytes
        else:
            self._backing.open_file(folder).truncate(nbytes)

    @property
    def in_memory(self) -> bool:
        """Whether the values lie in memory (False: in the file)."""
        return self._backing.file is None

    def _runs(self, places: NDArray[np.int64]) -> list[tuple[int, int, int, int]]:
        """(first place, last place + 1, first index, end index) of each run of the sorted distinct `places`."""
        cuts = np.flatnonzero(np.diff(places) > RUN_GAP) + 1
        heads, tails = np.r_[0, cuts], np.r_[cuts, places.shape[0]]
        return [
            (int(places[h]), int(places[t - 1]) + 1, int(h), int(t))
            for h, t in zip(heads.tolist(), tails.tolist(), strict=True)
        ]

    def _read_run(self, lo: int, hi: int) -> NDArray[np.generic]:
        """Places lo .. hi - 1, from the file."""
        run = np.empty(hi - lo, self.dtype)
        self._backing.read_into(lo, run)
        return run

    def _write_run(self, lo: int, run: NDArray[np.generic]) -> None:
        self._backing.write(lo, run)

    def _one_run(self, places: NDArray[np.int64]) -> tuple[int, int] | None:
        """(first, last + 1) of `places` where they lie close enough to read as one run (as a window's ids do)."""
        if not places.size:
            return (0, 0)
        lo, hi = int(places.min()), int(places.max()) + 1
        return (lo, hi) if hi - lo <= 16 * places.shape[0] + RUN_GAP else None

    def get(self, keys: NDArray[np.integer]) -> NDArray[np.generic]:
        """The values at places `keys` (each in 0 .. size - 1; repeats allowed)."""
        places: NDArray[np.int64] = np.asarray(keys, np.int64)
        if self._backing.array is not None:  # in memory the whole table is one run, read where it lies
            return self._backing.array[places]
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
        if self._backing.array is not None:
            self._backing.array[places] = values
            return
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

    def close(self) -> None:
        """Let the values go."""
        self._close()
