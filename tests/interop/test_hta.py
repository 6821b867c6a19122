"""HTA (HolisticTraceAnalysis) reads ktrace's Kineto export as its own (issue 32): in a venv of its own (hta_venv),
run by subprocess in its exact mode (HTA_DISABLE_NS_ROUNDING=1).

- Every Kineto fixture: HTA's temporal, idle-time and GPU kernel breakdowns of the export equal those of the original
  file(s), row for row.
- A synthetic `ktrace run`-like capture and the nsys fixtures, which HTA cannot read themselves: HTA's numbers of the
  export equal ktrace's own analyses of what HTA reads (it drops the GPU work of the last ProfilerStep) where both
  define the same thing: kernel time per rank and name; computation time (HTA's and comm_compute_overlap's), busy
  time and span of the GPU work, which HTA's syncs on a stream add to (hta_against_ktrace).

Skipped, with the reason in the summary, where the venv cannot be built (no network, no package index).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hta_venv import VenvUnavailable, hta_python
from real_traces import REAL_TRACES

import ktrace
from ktrace.analysis.kernels import kernel_stats
from ktrace.analysis.overlap import comm_compute_overlap
from ktrace.analysis.utilization import busy_time
from ktrace.exporters.kineto_events import SYNC_KIND_NAMES
from ktrace.exporters.kineto_json import export_kineto
from ktrace.model.trace import Trace
from ktrace.testing import SyntheticConfig, generate

pytestmark = pytest.mark.interop

SCRIPT = Path(__file__).with_name("hta_breakdowns.py")
KINETO_TRACES = tuple(name for name, path in REAL_TRACES.items() if not path.endswith(".sqlite"))
NSYS_TRACES = tuple(name for name, path in REAL_TRACES.items() if path.endswith(".sqlite"))
HTA_TIMEOUT_S = 300
HTA_OTHER = "^.*Sync"
"""GPU event names HTA gives the kernel type OTHER (its NCCL_COMPUTE_KERNEL_RE, `re.match`ed, less NCCL and memory):
left out of its kernel breakdown."""
Breakdowns = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="session")
def hta() -> Path:
    """The HTA venv's python; the test is skipped, saying why, where it cannot be built."""
    try:
        return hta_python()
    except VenvUnavailable as exc:
        pytest.skip(f"HTA interop NOT checked: its venv could not be built: {exc}")


def run_hta(python: Path, folders: list[Path], out: Path) -> dict[str, Breakdowns]:
    """HTA's breakdowns of each folder of rank files (hta_breakdowns.py in the HTA venv)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["HTA_DISABLE_NS_ROUNDING"] = "1"
    command = [str(python), str(SCRIPT), str(out), *map(str, folders)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=HTA_TIMEOUT_S, check=False)
    assert done.returncode == 0, f"HTA failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    results: dict[str, Breakdowns] = json.loads(out.read_text())
    return results


def export_folder(trace: Trace, folder: Path) -> Path:
    folder.mkdir()
    export_kineto(trace, folder)
    return folder


@pytest.mark.parametrize("name", KINETO_TRACES)
def test_hta_gives_the_export_the_numbers_of_the_original(
    name: str, hta: Path, real_trace_path: Any, tmp_path: Path
) -> None:
    source = real_trace_path(name)
    original = tmp_path / "original"  # the rank files alone: HTA reads every JSON of its folder
    original.mkdir()
    for file in sorted(source.glob("*.pt.trace.json.gz")) if source.is_dir() else [source]:
        (original / file.name).symlink_to(file)
    exported = export_folder(ktrace.open(str(source)), tmp_path / "export")
    results = run_hta(hta, [original, exported], tmp_path / "hta.json")
    theirs, ours = results[str(original)], results[str(exported)]
    assert theirs["kernels"] and theirs["temporal"]
    for breakdown in ("temporal", "idle", "kernel_types", "kernels"):
        assert ours[breakdown] == theirs[breakdown], breakdown


def as_hta_reads(trace: Trace) -> Trace:
    """The GPU rows HTA analyses: on a trace with two or more ProfilerStep ranges, only those launched (by
    correlation id) before the rank's last step starts (HTA drops the last, maybe incomplete, step)."""
    steps = trace.ranges.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"))
    if steps["name"].n_unique() < 2:
        return trace
    last = steps.group_by("node", "rank").agg(last_ns=pl.col("start_ns").max())
    launched = trace.api.join(last, on=["node", "rank"]).filter(pl.col("start_ns") < pl.col("last_ns"))
    keys = launched.select("node", "rank", "correlation_id")

    def kept(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.join(keys, on=["node", "rank", "correlation_id"], how="semi")

    tables = {name: trace.table(name) for name in trace.counts()}
    return Trace(
        **{**tables, "kernels": kept(trace.kernels), "memory": kept(trace.memory), "syncs": kept(trace.syncs)},
        meta=trace.meta,
    )


def hta_against_ktrace(trace: Trace, hta: Path, tmp_path: Path) -> None:
    """HTA's numbers of the Kineto export of `trace` against ktrace's own analyses of what HTA reads of it.

    HTA takes every GPU event on a stream for a kernel, a sync on a stream among them: in its busy time and span, and
    as a COMPUTATION kernel where the name does not match `.*Sync` ("Stream Wait Event"; "Stream Sync" is OTHER);
    ktrace's kernel statistics, computation and busy time are of kernels and memory. So HTA's rows per name are
    ktrace's kernels and such syncs, and its times equal ktrace's on a rank without syncs on a stream, else are more
    by at most their time."""
    exported = export_folder(trace, tmp_path / "export")
    hta_numbers = run_hta(hta, [exported], tmp_path / "hta.json")[str(exported)]
    read = as_hta_reads(trace)
    per_name = {
        (row["rank"], row["name"]): row["sum (us)"] for row in hta_numbers["kernels"] if row["kernel_type"] != "MEMORY"
    }
    syncs = read.syncs.filter(pl.col("stream").is_not_null()).with_columns(
        name=pl.col("sync_type").cast(pl.String).replace_strict(SYNC_KIND_NAMES, default="Unknown"),
        total_ns=pl.col("end_ns") - pl.col("start_ns"),
    )
    rows = (
        pl.concat(
            [
                kernel_stats(read, per_rank=True).select("rank", "name", "total_ns"),
                syncs.filter(~pl.col("name").str.contains(HTA_OTHER)).select("rank", "name", "total_ns"),
            ]
        )
        .group_by("rank", "name")
        .agg(pl.col("total_ns").sum())
    )
    assert per_name == pytest.approx({(r, n): ns / 1000 for r, n, ns in rows.iter_rows()}, rel=1e-12, abs=1e-6)
    slack = dict(syncs.group_by("rank").agg(pl.col("total_ns").sum() / 1000).iter_rows())
    compute = dict(comm_compute_overlap(read).select("rank", pl.col("compute_ns") / 1000).iter_rows())
    busy = busy_time(read, per="rank").select("rank", pl.col("busy_ns") / 1000, pl.col("span_ns") / 1000)
    for rank, busy_us, span_us in busy.iter_rows():
        (row,) = [row for row in hta_numbers["temporal"] if row["rank"] == rank]
        hta_busy = row["kernel_time(us)"] - row["idle_time(us)"]
        if rank not in slack:
            assert (row["compute_time(us)"], hta_busy, row["kernel_time(us)"]) == pytest.approx(
                (compute[rank], busy_us, span_us), abs=1e-6
            )
        else:
            assert compute[rank] - 1e-6 <= row["compute_time(us)"] <= compute[rank] + slack[rank] + 1e-6
            assert busy_us - 1e-6 <= hta_busy <= busy_us + slack[rank] + 1e-6


def test_hta_reads_a_run_capture_as_ktrace_does(hta: Path, tmp_path: Path) -> None:
    trace = generate(SyntheticConfig(steps=4, kernels_per_step=40, ranks=2, seed=5))  # NCCL kernels on 2 ranks
    assert trace.kernels.filter(pl.col("name").cast(pl.String).str.contains("nccl")).height
    hta_against_ktrace(trace, hta, tmp_path)


@pytest.mark.parametrize("name", NSYS_TRACES)
def test_hta_reads_an_nsys_import_as_ktrace_does(name: str, hta: Path, real_trace_path: Any, tmp_path: Path) -> None:
    hta_against_ktrace(ktrace.open(str(real_trace_path(name))), hta, tmp_path)
