"""numba sequence kernel: non-overlapping occurrences of repeated windows (kernel sequences).

Public typed wrapper:

- ``first_fit_occurrences(seq, pos, length, n_seqs) -> bool[n_windows]``: which windows count as an
  occurrence of their sequence when occurrences of one sequence may not overlap (greedy, left to right).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]


@jit
def _first_fit(seq: I64, pos: I64, length: int, n_seqs: int) -> npt.NDArray[np.bool_]:  # pragma: no cover
    free_from = np.full(max(n_seqs, 1), -1, np.int64)
    out = np.zeros(seq.size, np.bool_)
    for i in range(seq.size):
        s = seq[i]
        if pos[i] >= free_from[s]:
            out[i] = True
            free_from[s] = pos[i] + length
    return out


def first_fit_occurrences(seq: I64, pos: I64, length: int, n_seqs: int) -> npt.NDArray[np.bool_]:
    """Windows kept as occurrences: a window of sequence s starting at `pos` counts unless it overlaps the
    last counted window of s (which covers positions [p, p + length)).

    Args:
        seq: int64 sequence id (0 <= id < n_seqs) per window.
        pos: int64 position of each window's first element, increasing.
        length: elements per window.
        n_seqs: number of sequence ids.

    Returns:
        bool per window.
    """
    seq, pos = np.ascontiguousarray(seq, np.int64), np.ascontiguousarray(pos, np.int64)
    if _first_fit.skips_numba(seq.size):  # its source as Python: ~40 ms at 130 k windows, numba's load ~0.45 s
        kept: npt.NDArray[np.bool_] = _first_fit.py_func(seq, pos, int(length), int(n_seqs))
        return kept
    return _first_fit(seq, pos, int(length), int(n_seqs))
