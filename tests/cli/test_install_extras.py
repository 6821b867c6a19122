"""A capture-only install (`pip install ktrace`, no `analysis` extra) records, imports and describes traces; a verb
that needs the extra exits 6 with a one-line error. The extra's modules are made unimportable in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.cli import ANALYSIS_EXTRA
from ktrace.model.errors import ExitCode

WITHOUT_EXTRA = (
    "import sys\n"
    f"for name in {sorted(ANALYSIS_EXTRA)!r} + ['isal']:\n"
    "    sys.modules[name] = None  # import raises ModuleNotFoundError, as if not installed\n"
    "from ktrace.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def ktrace_without_extra(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_capture_only_install_records_imports_and_describes(tmp_path: Path) -> None:
    run = ktrace_without_extra("run", "-o", "run.ktrace", "--", sys.executable, "-c", "print('trained')", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    imported = ktrace_without_extra("import", str(fixture_path("alexnet")), "-o", "a.ktrace", "-q", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    info = ktrace_without_extra("info", "a.ktrace", cwd=tmp_path)
    assert info.returncode == 0 and "kernels" in info.stdout, info.stderr


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["summary", "TRACE"], "numba"),
        (["report", "TRACE", "-o", "r.html"], "numba"),
        (["export", "TRACE", "-f", "perfetto", "-o", "t.pftrace"], "perfetto"),
    ],
)
def test_a_verb_that_needs_the_extra_exits_6_in_one_line(tmp_path: Path, args: list[str], module: str) -> None:
    trace = str(fixture_path("power_iteration"))
    # KTRACE_PYTHON_KERNEL_ROWS=0 and KTRACE_NUMPY_KERNEL_ROWS=-1: every analysis kernel compiled, as for a large
    # trace (a small one runs them as Python or as their numpy twins and needs no numba: see the test below)
    compiled = {"KTRACE_PYTHON_KERNEL_ROWS": "0", "KTRACE_NUMPY_KERNEL_ROWS": "-1"}
    result = ktrace_without_extra(*[trace if a == "TRACE" else a for a in args], cwd=tmp_path, env=compiled)
    assert result.returncode == ExitCode.MISSING_DEPENDENCY, result.stderr
    assert result.stderr.count("\n") == 1 and f"needs {module}" in result.stderr
    assert "pip install 'ktrace[analysis]'" in result.stderr


def test_a_small_trace_summarizes_without_numba(tmp_path: Path) -> None:
    """Analysis kernels run as Python below KTRACE_PYTHON_KERNEL_ROWS rows: a capture-only install summarizes a
    small trace; only a large one asks for the extra."""
    result = ktrace_without_extra("summary", "--json", str(fixture_path("power_iteration")), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert '"kernels"' in result.stdout
