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


WARM_UP = """
import json, sys
from ktrace.analysis import _kernels
from ktrace.analysis.kernel_compiles import subscribe, warm_up_in_background
heard = []
subscribe(lambda kernel, done: heard.append([kernel, done]))
before = "numba" in sys.modules
thread = warm_up_in_background()
thread.join()
print(json.dumps([before, "numba" in sys.modules, _kernels._numba_loaded, warm_up_in_background() is None, heard]))
"""


def test_the_warm_up_loads_numba_in_a_thread_without_a_status(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A big trace is read while numba loads (its import and first cache load, ~0.3 s) in a daemon thread; with an
    empty cache its tiny kernel compiles, and no compile status is shown for it (the user asked for none)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", WARM_UP], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [False, True, True, True, []]
    assert any(tmp_path.rglob("*.nbi"))  # compiled and cached: the next process loads it


def test_the_cli_starts_the_warm_up_once_reading_has_begun(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Only for verbs that analyse, only for big traces, and only at the first progress report (the Kineto
    importer has forked its decode workers by then)."""
    from ktrace.analysis import kernel_compiles
    from ktrace.cli import options

    calls: list[str] = []
    monkeypatch.setattr(kernel_compiles, "warm_up_in_background", lambda: calls.append("warm"))
    monkeypatch.setattr(
        "ktrace.importers.load", lambda path, progress, **kw: (calls.append("load"), progress(1, 2), progress(2, 2))
    )
    big = tmp_path / "big.json"
    big.write_bytes(b" " * options.WARM_UP_BYTES)
    options.open_trace(str(big), progress=False, analyse=True)
    assert calls == ["load", "warm"]
    calls.clear()
    options.open_trace(str(big), progress=False)  # info, export: no analysis
    small = tmp_path / "small.json"
    small.write_bytes(b" ")
    options.open_trace(str(small), progress=False, analyse=True)
    assert calls == ["load", "load"]
