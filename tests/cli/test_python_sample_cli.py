"""`ktrace run --python-sample MS` end to end on a CPU training loop (no GPU): the samples name the planted hot
function first, the summary JSON carries them, no tracing hook runs in the program, a --steps window bounds them,
and a bad interval is a one-line usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from ktrace.model import store
from ktrace.model.errors import ExitCode

PY = sys.executable

TRAIN = """
import sys, threading, ktrace

def planted_hot_function(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total

def light_work(n):
    return sum(range(n))

hooks = []
for step in range(STEPS):
    ktrace.step()
    with ktrace.annotate("forward"):
        planted_hot_function(120_000)
        light_work(5_000)
    hooks.append((sys.gettrace(), sys.getprofile()))
print("hooks", sorted({repr(h) for h in hooks}), "main", threading.get_native_id())
"""


def run_traced(tmp_path: Path, *options: str, steps: int = 40) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(TRAIN.replace("STEPS", str(steps)))
    return subprocess.run(
        [PY, "-m", "ktrace", "run", "--no-gpu", "--no-counters", "-o", "t.ktrace", *options, "--", PY, "train.py"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=os.environ.copy(),
    )


def test_the_samples_name_the_planted_hot_function_first(tmp_path: Path) -> None:
    res = run_traced(tmp_path, "--python-sample", "5")
    assert res.returncode == 0, res.stderr
    # the sampler is a thread reading frames: the program never sees a trace or profile hook
    assert "hooks ['(None, None)']" in res.stdout
    main_tid = int(res.stdout.split("main")[-1])
    trace = store.read(tmp_path / "t.ktrace")
    assert trace.samples.height > 20
    assert set(trace.samples["tid"].to_list()) == {main_tid}  # ktrace's own threads are never sampled
    stacks = trace.samples["stack"].cast(pl.String)
    assert not stacks.str.contains("_bootstrap_inner").any()  # no thread started by `threading` (ktrace's are)
    summary = subprocess.run(
        [PY, "-m", "ktrace", "summary", "--json", "t.ktrace"], capture_output=True, text=True, cwd=tmp_path
    )
    assert summary.returncode == 0, summary.stderr
    profile = json.loads(summary.stdout)["python_profile"]
    top = profile["functions"][0]
    assert top["function"].endswith("train.py:4 planted_hot_function")  # (the startup's imports are sampled too)
    assert top["self_samples"] > 2 * profile["functions"][1]["self_samples"]
    assert profile["steps"]["with_samples"] > 10
    assert profile["steps"]["slowest"]["samples"] > 0
    text = subprocess.run(
        [PY, "-m", "ktrace", "summary", "t.ktrace"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert "Top Python functions" in text.stdout and "planted_hot_function" in text.stdout


def test_a_steps_window_bounds_the_samples(tmp_path: Path) -> None:
    res = run_traced(tmp_path, "--python-sample", "5", "--steps", "10:20")
    assert res.returncode == 0, res.stderr
    trace = store.read(tmp_path / "t.ktrace")
    steps = trace.ranges.filter(pl.col("domain").cast(pl.String) == "profiler_step")
    assert trace.samples.height > 0
    lo, hi = int(steps["start_ns"].min()), int(steps["end_ns"].max())  # type: ignore[arg-type]
    assert lo <= int(trace.samples["ts_ns"].min()) and int(trace.samples["ts_ns"].max()) <= hi + 20_000_000  # type: ignore[arg-type]


def test_without_the_option_no_samples(tmp_path: Path) -> None:
    res = run_traced(tmp_path, steps=3)
    assert res.returncode == 0, res.stderr
    assert store.read(tmp_path / "t.ktrace").samples.height == 0


def test_a_bad_interval_is_a_one_line_usage_error(tmp_path: Path) -> None:
    res = run_traced(tmp_path, "--python-sample", "0", steps=1)
    assert res.returncode == ExitCode.USAGE
    assert res.stderr.strip().count("\n") == 0 and "--python-sample 0" in res.stderr and "Traceback" not in res.stderr
