"""The CLI hears when numba compiles an analysis kernel, and when that compile ends (its status line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = """
import json, numpy as np
from ktrace.analysis.kernel_compiles import subscribe
from ktrace.analysis._kernels.scatter import _duration_groups
heard = []
subscribe(lambda kernel, done: heard.append([kernel, done]))
n = 8
_duration_groups(np.zeros(n, np.int64), np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 1, 1)
_duration_groups(np.zeros(n, np.int64), np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 1, 1)
print(json.dumps(heard))
"""


def test_a_compile_is_heard_at_its_start_and_its_end_and_only_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "KTRACE_PYTHON_KERNEL_ROWS": "0"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [["duration_groups", False], ["duration_groups", True]]


def test_light_kernels_run_as_python_on_larger_inputs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Operators by default gave the README demo 24 k rows in four cheap one-pass kernels: loading numba for
    those alone cost ~0.5 s and ~90 MB, so they stay Python up to LIGHT_FACTOR x the limit; others do not."""
    from ktrace.analysis import _kernels
    from ktrace.analysis._kernels.groups import _order_stats, _unsorted_groups
    from ktrace.analysis._kernels.intervals import _union_length
    from ktrace.analysis._kernels.nesting import _innermost, _parents

    monkeypatch.setattr(_kernels, "PYTHON_MAX_ROWS", 100)
    monkeypatch.setattr(_kernels, "_numba_loaded", False)  # as in a fresh process (another test may have loaded it)
    monkeypatch.setattr(_kernels.Kernel, "compiled", lambda self: lambda *args: "numba")
    plain, light = _kernels.Kernel(lambda: "python"), _kernels.Kernel(lambda: "python", light=True)
    assert [plain.sized(100), plain.sized(101)] == ["python", "numba"]
    assert [
        light.sized(101),
        light.sized(100 * _kernels.LIGHT_FACTOR),
        light.sized(100 * _kernels.LIGHT_FACTOR + 1),
    ] == ["python", "python", "numba"]
    monkeypatch.setattr(_kernels, "_numba_loaded", True)  # numba's fixed cost paid: light kernels compile too
    assert [light.sized(100), light.sized(101)] == ["python", "numba"]
    assert all(k.light for k in (_unsorted_groups, _union_length, _innermost, _parents)) and not _order_stats.light
