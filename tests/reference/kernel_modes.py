"""Run a kernel test module three times: every kernel as its Python source, compiled by numba, then as the
wrappers' numpy twins (where a kernel has none, its Python source).

Kernels pick Python or numba by input size (ktrace.analysis._kernels.PYTHON_MAX_ROWS); the property tests'
inputs are small, so without this only the Python path would be compared with the naive twins.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktrace.analysis import _kernels


@pytest.fixture(scope="module", autouse=True, params=["python", "numba", "numpy"])
def kernel_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Module-scoped (hypothesis rejects function-scoped fixtures around @given), autouse: every path ("numpy":
    the wrappers' numpy twins where a kernel has one, NUMPY_MAX_ROWS; the kernel's Python source elsewhere)."""
    before = _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS
    _kernels.PYTHON_MAX_ROWS = -1 if request.param == "numba" else 1 << 62
    _kernels.NUMPY_MAX_ROWS = 1 << 62 if request.param == "numpy" else -1
    try:
        yield request.param
    finally:
        _kernels.PYTHON_MAX_ROWS, _kernels.NUMPY_MAX_ROWS = before
