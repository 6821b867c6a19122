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
