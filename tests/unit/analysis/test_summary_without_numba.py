"""A single-rank Kineto trace's summary takes only kernels with a path beside numba (issue 29: at 1.3 M events,
numba's import and first cache load were ~110 MB of a ~400 MB peak). With KTRACE_PYTHON_KERNEL_ROWS=0 every
kernel without such a path compiles, so a kernel added to the summary without one fails here, naming itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from real_traces import fixture_path

PROBE = """
import sys
from ktrace.analysis import _kernels
from ktrace.analysis.summary import summarize
from ktrace.importers import load

compiled = []
dispatcher = _kernels._dispatcher
def spy(func):
    compiled.append(func.__module__.rsplit(".", 1)[-1] + "." + func.__name__)
    return dispatcher(func)
_kernels._dispatcher = spy
summarize(load(sys.argv[1]))
print("compiled:", ",".join(compiled), "numba:", "numba" in sys.modules)
"""


@pytest.mark.parametrize("name", ["tracelens", "resnet50", "nccl"])
def test_a_kineto_summary_compiles_no_kernel(name: str) -> None:
    env = {**os.environ, "KTRACE_PYTHON_KERNEL_ROWS": "0"}
    env.pop("KTRACE_NUMPY_KERNEL_ROWS", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(fixture_path(name))], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "compiled:  numba: False"


@pytest.mark.parametrize("variable", ["KTRACE_NUMPY_KERNEL_ROWS", "KTRACE_PYTHON_KERNEL_ROWS"])
def test_a_bad_row_setting_is_a_one_line_usage_error(variable: str) -> None:
    env = {**os.environ, variable: "lots"}
    done = subprocess.run(
        [sys.executable, "-m", "ktrace", "summary", str(fixture_path("alexnet"))],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ktrace summary: error: {variable}='lots' is not a whole number of rows"
        f" (e.g. {1 << 20 if variable == 'KTRACE_NUMPY_KERNEL_ROWS' else 20000})"
    ]
