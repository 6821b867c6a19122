"""The README demo (one profiler window of an H100 trace, 24 k operators, 65 k Python frames) is summarized without
loading numba: its fixed cost (~0.45 s of import and first cache load, ~90 MB) was most of the demo's regression
(benchmarks/RESULTS.md, "Regression fix (speed2 helper, 2026-11-26)"). Every table of such a trace stays under the
sizes where kernels run as Python (KTRACE_PYTHON_KERNEL_ROWS, @jit_light)."""

from __future__ import annotations

import os
import subprocess
import sys

from real_traces import fixture_path

DEMO = fixture_path("tracelens")
SCRIPT = """
import sys
from ktrace.analysis.summary import summarize
from ktrace.presentation.summary_json import summary_to_dict
from ktrace.importers import load
d = summary_to_dict(summarize(load(sys.argv[1])))
assert d["critical_path"] is not None and d["operators"]["python_frames"] is not None
print(sorted(m for m in sys.modules if m == "numba" or m.startswith("numba.")))
"""


def test_demo_summary_loads_no_numba() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KTRACE_PYTHON_KERNEL_ROWS"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(DEMO)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
