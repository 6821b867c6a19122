"""numba join kernel: for each row of one table, the row of another with the same integer key.

Public typed wrapper:

- ``lookup_first(keys, order_by, probe) -> int64[n_probe]``: index of the matching row (-1 if none);
  among rows sharing a key the one with the smallest ``order_by`` (then the lowest index) wins.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ktrace.analysis._kernels import jit

I64 = npt.NDArray[np.int64]
MAX_TABLE_FACTOR = 4
"""Direct-address table used while (key range) <= this x (rows of both tables) + 2**20."""


@jit
def _direct(keys: I64, order_by: I64, probe: I64, lo: int, size: int) -> I64:  # pragma: no cover - numba
    table = np.full(size, -1, np.int64)
    for i in range(keys.size):
        k = keys[i] - lo
        j = table[k]
        if j < 0 or order_by[i] < order_by[j]:
            table[k] = i
    out = np.full(probe.size, -1, np.int64)
    for i in range(probe.size):
        k = probe[i] - lo
        if 0 <= k < size:
            out[i] = table[k]
    return out


@jit
def _sorted(keys: I64, order_by: I64, probe: I64, perm: I64) -> I64:  # pragma: no cover - numba
    """Keys sorted via perm (by key, then order_by, then index): binary search each probe."""
    sk = keys[perm]
    out = np.full(probe.size, -1, np.int64)
    for i in range(probe.size):
        j = np.searchsorted(sk, probe[i])
        if j < sk.size and sk[j] == probe[i]:
            out[i] = perm[j]
    return out


def lookup_first(keys: I64, order_by: I64, probe: I64) -> I64:
    """Index into `keys` of each probe key (a left join on one int64 key, duplicates resolved).

    Args:
        keys: int64 key per build row (any order, duplicates allowed).
        order_by: int64 per build row; the duplicate with the smallest value (then lowest index) wins.
        probe: int64 keys to look up.

    Returns:
        int64 build-row index per probe, -1 where the key is absent.
    """
    k, o, p = _as64(keys), _as64(order_by), _as64(probe)
    if k.size == 0 or p.size == 0:
        return np.full(p.size, -1, np.int64)
    lo, hi = int(k.min()), int(k.max())
    numpy_twin = _sorted.skips_numba(max(k.size, p.size))
    if hi - lo < MAX_TABLE_FACTOR * (k.size + p.size) + (1 << 20) and not numpy_twin:
        return _direct(k, o, p, lo, hi - lo + 1)
    perm = np.lexsort((np.arange(k.size), o, k)).astype(np.int64)
    if not numpy_twin:
        return _sorted(k, o, p, perm)
    sk = k[perm]
    at = np.minimum(np.searchsorted(sk, p), sk.size - 1)  # the first of the key's rows in (order_by, index) order
    found: I64 = np.where(sk[at] == p, perm[at], -1)
    return found


def _as64(a: npt.ArrayLike) -> I64:
    return np.ascontiguousarray(a, dtype=np.int64)
