"""numba kernels for interval work: numpy in, numpy out. The only place that imports numba.

Every kernel uses `jit` (or `jit_parallel`) from here: nogil so a Textual worker thread running one
does not freeze the UI, cache so the second process skips the ~0.6 s compile. A test rejects any
other `@njit(` in the package.
"""

from __future__ import annotations

import numba

jit = numba.njit(nogil=True, cache=True)
jit_parallel = numba.njit(nogil=True, cache=True, parallel=True)
