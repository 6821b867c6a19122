"""The rank-by-rank client loads the longest-path kernels compiled while its workers run, when the job's graph
will run them compiled: past the numpy/Python paths' NUMPY_MAX_ROWS (they load numba only then). The load must
really load numba: a preload that ran the kernels as Python (as a 100 k-edge chain did once the Python paths
took graphs up to NUMPY_MAX_ROWS) left the job's 1 M-edge graph to load it after the last partial."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
from ktrace.analysis import _kernels
from ktrace.analysis.critical_path_parts import load_longest_path
assert load_longest_path(1000) is None
assert not _kernels.numba_loaded()
thread = load_longest_path(_kernels.NUMPY_MAX_ROWS + 1)
assert thread is not None
thread.join()
print(_kernels.numba_loaded())
"""


def test_a_graph_past_the_numpy_paths_gets_numba_loaded() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_pass_fold_projects_the_jobs_graph() -> None:
    from ktrace.fleet.critical_path_map import PassFold

    fold = PassFold(partitions=256)
    assert fold.partitions == 256 and fold.ready() == {}
