"""Run a kernel test module twice: every kernel as its Python source, then every kernel compiled by numba.

Kernels pick Python or numba by input size (ktrace.analysis._kernels.PYTHON_MAX_ROWS); the property tests'
inputs are small, so without this only the Python path would be compared with the naive twins.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktrace.analysis import _kernels


@pytest.fixture(scope="module", autouse=True, params=["python", "numba"])
def kernel_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Module-scoped (hypothesis rejects function-scoped fixtures around @given), autouse: both paths."""
    before = _kernels.PYTHON_MAX_ROWS
    _kernels.PYTHON_MAX_ROWS = 1 << 62 if request.param == "python" else -1
    try:
        yield request.param
    finally:
        _kernels.PYTHON_MAX_ROWS = before
