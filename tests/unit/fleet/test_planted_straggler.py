"""A planted straggler the tools must find: testing.fleet_job's straggler_delay_ms makes one rank of a tiled DLRM job
late at each step's first collective while the others wait inside it. At 16 and 64 ranks it is first in
stragglers.waited_for (summary JSON, terminal, Markdown and HTML reports), rank by rank on the in-process, local-process and
Dask engines and in one process; the template ranks that replay one source file are one row, not one row each."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from real_traces import fixture_path

from ktrace.cli import main
from ktrace.fleet.folder_import import import_folder
from ktrace.importers import load
from ktrace.model.alignment import with_clock
from ktrace.testing.fleet_job import MANIFEST, FleetJob, generate_fleet_job

DELAY_MS = 5.0
STEPS = 2


def _job(tmp_path_factory: pytest.TempPathFactory, ranks: int) -> tuple[FleetJob, Path]:
    folder = tmp_path_factory.mktemp(f"planted{ranks}")
    job = generate_fleet_job(
        fixture_path("dlrm"), folder / "job", ranks=ranks, steps=STEPS, stretch=1.0, straggler_delay_ms=DELAY_MS
    )
    import_folder(job.folder, folder / "job.ktrace", workers=1)
    return job, folder / "job.ktrace"


@pytest.fixture(scope="module")
def job16(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetJob, Path]:
    return _job(tmp_path_factory, 16)


@pytest.fixture(scope="module")
def job64(tmp_path_factory: pytest.TempPathFactory) -> tuple[FleetJob, Path]:
    return _job(tmp_path_factory, 64)


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    distributed = pytest.importorskip(
        "distributed",
        reason="LOUD SKIP: dask[distributed] (the ktrace[dask] extra) is missing; the Dask path is untested",
    )
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=":0"
    ) as cluster:
        yield str(cluster.scheduler_address)


def _planted(job: FleetJob) -> tuple[str, int]:
    return job.host_of_rank[job.straggler_rank], job.straggler_rank


def _engine_args(kind: str, request: pytest.FixtureRequest) -> list[str]:
    if kind == "dask":
        return ["--cluster", request.getfixturevalue("dask_address")]
    return {"in-process": ["--workers", "1"], "processes": ["--workers", "2"], "one process": ["--one-process"]}[kind]


def _stragglers(doc: dict[str, Any]) -> dict[str, Any]:
    """The stragglers of a summary JSON: the rank-by-rank one's ({"fleet": ...}) or one process's."""
    found: dict[str, Any] = doc["fleet"]["stragglers"] if "fleet" in doc else doc["stragglers"]
    return found


def test_the_manifest_records_the_delay_and_the_collectives_end_together(job16: tuple[FleetJob, Path]) -> None:
    job, path = job16
    manifest = json.loads((job.folder / MANIFEST).read_text())
    assert manifest["straggler"] == {"rank": 8, "host": "node001", "kernel_stretch": 1.0, "delay_ms": DELAY_MS}
    assert job.delay_ns == DELAY_MS * 1e6
    kernels = with_clock(load(path), "raw").kernels.with_columns(pl.col("name").cast(pl.String))
    nccl = kernels.filter(pl.col("name").str.starts_with("nccl")).sort("rank", "start_ns")
    # rank 8 replays rank 0's file on node001 (clock off by a planted offset): against rank 0 its collectives start
    # DELAY_MS later only where it is late (each step's first), end when rank 0's end, and rank 0 waits DELAY_MS longer
    offset = job.offsets_ns["node001"]
    late, twin = (nccl.filter(pl.col("rank") == r) for r in (8, 0))
    start_gap = (late["start_ns"] - offset - twin["start_ns"]).to_list()
    assert start_gap == [job.delay_ns if i % 8 == 0 else 0 for i in range(8 * STEPS)]
    assert (late["end_ns"] - offset - twin["end_ns"]).to_list() == [0] * (8 * STEPS)
    first = twin["end_ns"] - twin["start_ns"]
    assert (first.gather([0, 8]) > job.delay_ns).all()


ENGINES = [
    *(pytest.param(16, kind, id=f"16-{kind}") for kind in ("in-process", "processes", "dask", "one process")),
    pytest.param(64, "processes", id="64-processes"),
    pytest.param(64, "dask", id="64-dask"),
    # one process's analysis of the whole job and the in-process engine at 64 ranks: 30-60 s more on 2 cores
    pytest.param(64, "in-process", id="64-in-process", marks=pytest.mark.slow),
    pytest.param(64, "one process", id="64-one-process", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("ranks", "kind"), ENGINES)
def test_the_planted_rank_is_first_in_waited_for(
    ranks: int, kind: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    job, path = request.getfixturevalue(f"job{ranks}")
    assert main(["summary", str(path), "--json", *_engine_args(kind, request)]) == 0
    found = _stragglers(json.loads(capsys.readouterr().out))
    node, rank = _planted(job)
    first = found["waited_for"][0]
    assert (first["node"], first["rank"], first["ranks"]) == (node, rank, [rank])
    assert first["late_collectives"] == STEPS and first["why"].startswith("compute kernels +4.9")
    assert first["waited_ns_per_step"] > job.delay_ns > found["waited_for"][1]["waited_ns_per_step"]
    # the ranks replaying one source file tie: one row each, naming all of them
    rows = [(r["waited_ns_per_step"], r["why"]) for r in found["waited_for"]]
    assert len(rows) == len(set(rows)) == 4
    copies = found["waited_for"][1]["ranks"]
    assert copies == list(range(7, ranks, 8))


@pytest.mark.parametrize("ranks", [16, 64])
def test_terminal_and_markdown_name_the_planted_rank_first(
    ranks: int, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job, path = request.getfixturevalue(f"job{ranks}")
    node, rank = _planted(job)
    assert main(["summary", str(path), "--workers", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("ranks the others waited for"))
    header = next(i for i in range(title, len(lines)) if "waited per step" in lines[i])
    assert lines[header + 1].startswith("───") and lines[header + 2].strip().startswith(f"{node}/{rank} ")
    assert lines[header + 3].strip().startswith("ranks 7, 15")  # the template rank's copies: one row
    assert any(line.startswith(f"  why {node}/{rank}: compute kernels +4.9") for line in lines)
    report = tmp_path / "report.md"
    assert main(["report", str(path), "--workers", "2", "-o", str(report)]) == 0
    markdown = report.read_text()
    section = markdown[markdown.index("### Ranks the others waited for") : markdown.index("### Stragglers: step-time")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1].startswith(f"| {node}/{rank} |") and "compute kernels +4.9" in rows[1]
    copies = "ranks 7, 15, 23, 31, 39 +3 on 8 hosts" if ranks == 64 else "ranks 7, 15 on 2 hosts"  # fits 80 columns
    assert rows[2].startswith(f"| {copies} |") and "ranks 7, 15" not in "".join(rows[3:])
    # the step-time view too: the planted rank, then the naturally slowest template rank's copies in one row
    step_time = markdown[markdown.index("### Stragglers: step-time view") :].splitlines()
    rows = [line for line in step_time if line.startswith("| ") and "---" not in line]
    copies = "ranks 5, 13, 21, 29, 37 +3 on 8 hosts" if ranks == 64 else "ranks 5, 13 on 2 hosts"
    assert rows[1].startswith(f"| {node}/{rank} |") and rows[2].startswith(f"| {copies} | 21.0 % |")
    # and the HTML report: its Ranks section shows who was waited for too (it had only the step-time view)
    page = tmp_path / "report.html"
    assert main(["report", str(path), "--workers", "2", "-o", str(page)]) == 0
    text = page.read_text()
    ranks = text[text.index('<section id="ranks">') :]
    waited = ranks[ranks.index("<h3>Ranks the others waited for") : ranks.index("<h3>Stragglers: step-time")]
    cells = [re.sub(r"<[^>]+>", "", c) for c in waited.split("<td>")[1:]]
    assert cells[0] == f"{node}/{rank}" and any("compute kernels +4.9" in c for c in cells[:4])
