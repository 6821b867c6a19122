"""summarize runs latency_stats, device_idle_breakdown and the critical path in threads only where its kernels run
compiled (summary.runs_compiled); below, in turn in the calling thread (issue 29: at owlv2 x10 the critical path's
Python longest paths held the GIL in their thread while its memory stacked on the operators' pass). Either way
the summary is the same."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future

import pytest
from real_traces import fixture_path

from ktrace.analysis.summary import InPlace

PROBE = """
import sys
from ktrace.analysis.summary import runs_compiled
from ktrace.importers import load
print(runs_compiled(load(sys.argv[1])))
"""


def _run(args: list[str], numpy_rows: str | None) -> str:
    env = {**os.environ}
    env.pop("KTRACE_NUMPY_KERNEL_ROWS", None)
    env.pop("KTRACE_PYTHON_KERNEL_ROWS", None)
    if numpy_rows is not None:
        env["KTRACE_NUMPY_KERNEL_ROWS"] = numpy_rows
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, check=True).stdout


def test_a_small_trace_runs_in_turn_and_a_large_one_in_threads() -> None:
    trace = str(fixture_path("alexnet"))
    assert _run(["-c", PROBE, trace], None).strip() == "False"
    # past KTRACE_NUMPY_KERNEL_ROWS rows the kernels would compile: threads (alexnet's 1.4 k events still run as
    # Python, under PYTHON_MAX_ROWS, so neither run loads numba)
    assert _run(["-c", PROBE, trace], "10").strip() == "True"


def test_the_summary_is_the_same_in_turn_or_in_threads() -> None:
    command = ["-m", "ktrace", "summary", str(fixture_path("alexnet")), "--json"]
    in_turn, in_threads = _run(command, None), _run(command, "10")
    assert in_turn
    assert in_turn == in_threads


def test_in_place_runs_the_call_at_once_and_keeps_its_error_for_result() -> None:
    calls: list[int] = []

    def add(a: int, *, b: int) -> int:
        calls.append(a)
        return a + b

    done = InPlace().submit(add, 1, b=2)
    assert isinstance(done, Future)
    assert calls == [1]
    assert done.result() == 3

    def fail() -> None:
        raise ValueError("bad window")

    failed = InPlace().submit(fail)
    with pytest.raises(ValueError, match="bad window"):
        failed.result()
