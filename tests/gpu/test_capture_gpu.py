"""GPU capture end to end (skipped without an NVIDIA GPU, PyTorch and cupti-python)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ktrace.model import store


def _gpu_reason() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "PyTorch not installed"
    if importlib.util.find_spec("cupti") is None:
        return "cupti-python not installed (pip install 'ktrace[cu13]' or 'ktrace[cu12]')"
    import torch

    return None if torch.cuda.is_available() else "no CUDA GPU visible to PyTorch"


REASON = _gpu_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
LOOP = Path(__file__).with_name("train_loop.py")
PY = sys.executable


def _run(*args: str, cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("gpu")
    res = _run(
        PY, "-m", "ktrace", "run", "-o", "t.ktrace", "--steps", "5:15", "--", PY, str(LOOP), "--steps", "20", cwd=tmp
    )
    assert res.returncode == 0, res.stderr
    ref = _run(PY, str(LOOP), "--steps", "20", "--window", "5:15", "--torch-profiler", cwd=tmp)
    assert ref.returncode == 0, ref.stderr
    return store.read(tmp / "t.ktrace"), json.loads(ref.stdout.strip().splitlines()[-1]), res.stderr


def test_kernel_count_matches_torch_profiler(captured) -> None:  # type: ignore[no-untyped-def]
    trace, ref, log = captured
    assert trace.kernels.height > 0, log
    assert trace.kernels.height == ref["torch_profiler_kernels"]


def test_launches_join_at_least_99_percent_of_kernels(captured) -> None:  # type: ignore[no-untyped-def]
    trace, _, _ = captured
    joined = trace.kernels.join(trace.api.select("correlation_id").unique(), on="correlation_id", how="semi")
    assert joined.height >= 0.99 * trace.kernels.height


def test_memcpy_kinds_syncs_and_nvtx(captured) -> None:  # type: ignore[no-untyped-def]
    trace, _, _ = captured
    htod = trace.memory.filter(trace.memory["copy_kind"].cast(str) == "HtoD")
    assert {"pinned", "pageable"} <= set(htod["src_kind"].cast(str).to_list())
    assert trace.syncs.height > 0
    names = set(trace.ranges["name"].cast(str).to_list())
    assert {"nvtx_range", "forward", "backward"} <= names
    assert trace.devices.height >= 1
    assert trace.meta.health.get("dropped_records", 0) == 0


def test_two_process_torchrun_gives_two_ranks(tmp_path: Path) -> None:
    if shutil.which("torchrun") is None:
        pytest.skip("torchrun not on PATH")
    worker = tmp_path / "w.py"
    worker.write_text("import torch\nx = torch.ones(1024, device='cuda')\nprint((x * 2).sum().item())\n")
    res = _run(
        PY,
        "-m",
        "ktrace",
        "run",
        "-o",
        "d.ktrace",
        "--",
        "torchrun",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(worker),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    trace = store.read(tmp_path / "d.ktrace")
    assert sorted(r for _, r in trace.ranks if r >= 0) == [0, 1]
    assert trace.kernels.height >= 2
