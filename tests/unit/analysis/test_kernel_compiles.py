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
