"""The command line reads traces with Arrow on the system allocator (lower peak RSS), unless the user chose a pool."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

_SCRIPT = """
import sys
from ktrace.cli.options import open_trace
trace = open_trace(sys.argv[1], progress=False)
import pyarrow
print(pyarrow.default_memory_pool().backend_name, trace.kernels.height)
"""


def _pool_after_open(path: Path, pool_env: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if pool_env:
        env["ARROW_DEFAULT_MEMORY_POOL"] = pool_env
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(path)], env=env, capture_output=True, text=True, check=True
    ).stdout
    return out.split()


def test_open_trace_switches_arrow_to_the_system_allocator(real_trace_path: Callable[[str], Path]) -> None:
    pool, kernels = _pool_after_open(real_trace_path("alexnet"), None)
    assert pool == "system" and int(kernels) > 0


@pytest.mark.parametrize("chosen", ["mimalloc", "jemalloc"])
def test_a_pool_the_user_chose_is_kept(real_trace_path: Callable[[str], Path], chosen: str) -> None:
    import pyarrow as pa

    if chosen not in pa.supported_memory_backends():
        pytest.skip(f"this pyarrow build has no {chosen}")
    assert _pool_after_open(real_trace_path("alexnet"), chosen)[0] == chosen
