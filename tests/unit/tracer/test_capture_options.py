"""Capture options, process selection, windows and pre-flight messages."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ktrace.tracer.config import CaptureConfig, ConfigError, check_interval, parse_kinds, parse_ranks, parse_steps
from ktrace.tracer.hook import CudaImportWatcher, claim_partition, env_rank, skip_reason
from ktrace.tracer.preflight import gpu_capture_problem
from ktrace.tracer.windows import Windows


def test_config_round_trips_through_the_environment() -> None:
    cfg = CaptureConfig(kinds=("kernel", "nvtx"), steps=(3, 9), ranks=(0, 2), interval_ms=100, t0_ns=5)
    back = CaptureConfig.from_json(cfg.to_json())
    assert back == cfg
    assert back.activity_kinds() == ["CONCURRENT_KERNEL", "MARKER", "MARKER_DATA", "NAME"]
    assert CaptureConfig.from_environ({"KTRACE_CONFIG": "{not json"}) == CaptureConfig()


@pytest.mark.parametrize(("text", "expected"), [("10:20", (10, 20)), (":5", (0, 5))])
def test_steps_parse(text: str, expected: tuple[int, int]) -> None:
    assert parse_steps(text) == expected


@pytest.mark.parametrize("bad", ["10", "5:5", "a:b", "-1:3", "7:2"])
def test_bad_steps_are_rejected(bad: str) -> None:
    with pytest.raises(ConfigError, match="--steps"):
        parse_steps(bad)


def test_kinds_ranks_and_interval_validation() -> None:
    assert parse_kinds("kernel,memcpy,kernel") == ("kernel", "memcpy")
    assert parse_ranks("0,4-6") == (0, 4, 5, 6)
    with pytest.raises(ConfigError, match="choose from"):
        parse_kinds("kernels")
    for ms in (99, 60_001):
        with pytest.raises(ConfigError, match="between 100 and 60000"):
            check_interval(ms)


@pytest.mark.parametrize(
    ("argv", "env", "skipped"),
    [
        (["python", "train.py"], {}, False),
        (
            ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"],
            {},
            True,
        ),
        (["/usr/bin/python", "/venv/bin/torchrun", "--nproc-per-node", "2", "t.py"], {}, True),
        (["python", "-m", "torch.distributed.run", "t.py"], {}, True),
        (["python", "-m", "torch.distributed.run", "t.py"], {"LOCAL_RANK": "0"}, False),
        (["python", "t.py"], {"RANK": "3"}, True),  # not in --ranks 0,1
    ],
)
def test_process_selection(argv: list[str], env: dict[str, str], skipped: bool) -> None:
    config = CaptureConfig(ranks=(0, 1))
    assert (skip_reason(config, argv, env) is not None) == skipped
    if skipped and "--multiprocessing-fork" in argv:
        assert skip_reason(CaptureConfig(trace_children=True), argv, env) is None


def test_rank_comes_from_rank_then_local_rank() -> None:
    assert env_rank({"RANK": "5", "LOCAL_RANK": "1"}) == 5
    assert env_rank({"LOCAL_RANK": "1"}) == 1
    assert env_rank({"RANK": "x"}) is None


def test_a_taken_partition_falls_back_to_the_pid(tmp_path: Path) -> None:
    assert claim_partition(tmp_path, "host", 0, 111) == 0
    assert claim_partition(tmp_path, "host", 0, 222) == 222
    assert (tmp_path / "node=host" / "rank=222" / ".owner").read_text() == "222"


def test_import_watcher_fires_once_for_cuda_libraries() -> None:
    fired: list[str] = []
    watcher = CudaImportWatcher(fired.append)
    sys.meta_path.insert(0, watcher)
    try:
        watcher.find_spec("numpy", None)
        watcher.find_spec("torch.cuda", None)
        watcher.find_spec("cupy", None)
    finally:
        if watcher in sys.meta_path:
            sys.meta_path.remove(watcher)
    assert fired == ["torch.cuda"]


def test_windows_keep_rows_that_start_inside() -> None:
    changes: list[bool] = []
    w = Windows(False, on_change=changes.append)
    w.open(100)
    w.close(200)
    w.close(250)  # already closed: no change
    w.open(300)
    starts = np.array([50, 100, 199, 200, 299, 10**12])
    assert w.mask(starts).tolist() == [False, True, True, False, False, True]
    assert changes == [True, False, True]
    assert Windows(True).mask(starts).all()


@pytest.mark.parametrize(
    ("driver", "cupti", "expected"),
    [
        (None, None, "no NVIDIA driver"),
        (12040, None, "pip install 'ktrace[cu12]'"),
        (13000, None, "pip install 'ktrace[cu13]'"),
        (12080, "13.4.0", "needs a CUDA 13 driver"),
        (13000, "13.4.0", None),
        (12080, "12.8.0", None),
    ],
)
def test_preflight_says_what_is_missing_and_how_to_fix_it(
    driver: int | None, cupti: str | None, expected: str | None
) -> None:
    line = gpu_capture_problem(driver, cupti, probe=False)
    if expected is None:
        assert line is None
    else:
        assert line is not None and expected in line and "\n" not in line


def test_start_gpu_notes_one_line_when_capture_cannot_run(tmp_path: Path) -> None:
    from ktrace.tracer.hook import start_gpu
    from ktrace.tracer.session import CaptureSession

    session = CaptureSession(tmp_path, CaptureConfig(), "host", 0)
    start_gpu(session, "torch")
    problem = gpu_capture_problem()
    if problem is not None:  # this machine: no driver and/or no cupti-python
        assert session.notes == [problem] and session.backend is None
