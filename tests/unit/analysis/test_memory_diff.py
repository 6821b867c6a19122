"""GPU memory in `ktrace diff`: a hand-built allocator trace against a copy without one block (checked by hand),
and two real traces with [memory] events through the CLI (JSON and terminal)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from reference.memory_trace import memory_trace

from ktrace.analysis.memory_diff import diff_memory
from ktrace.cli import main
from ktrace.model import Trace
from ktrace.model.schema import SCHEMAS

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "traces"
RESNET = FIX / "kineto-resnet50-v100-pt1.9"
TRACELENS = FIX / "tracelens-h100-hf-inference"
ALEXNET = FIX / "hta-a100-alexnet-tiny"


def _without_block(trace: Trace, address: int, reserved: int) -> Trace:
    """The trace without the allocation and free of `address`; totals recomputed (+64 bytes before the trace on
    device 0, as memory_trace), reserved bytes set to `reserved`."""
    kept = trace.allocations.filter(pl.col("address") != address)
    running = pl.col("bytes").cum_sum().over("device") + pl.when(pl.col("device") == 0).then(64).otherwise(0)
    kept = kept.with_columns(total_allocated=running, total_reserved=pl.lit(reserved, pl.Int64)).cast(
        {
            "total_allocated": trace.allocations.schema["total_allocated"],
            "total_reserved": trace.allocations.schema["total_reserved"],
        }
    )
    frames = {name: trace.table(name) for name in SCHEMAS} | {"allocations": kept}
    return Trace(**frames, meta=trace.meta)


def test_hand_built_peaks_and_operators() -> None:
    """A: device 0 peaks at 964 bytes (64 + 100 + 300 + 500, aten::mm's block C live), reserved 2048; device 1
    at 1000. B lacks block C: device 0 peaks at 464 (64 + 100 + 300), reserved 4096; device 1 unchanged.
    aten::mm allocated 500 bytes in A and none in B; the other operators the same."""
    a = memory_trace()
    b = _without_block(a, 0xC, 4096)
    d = diff_memory(a, b)
    assert d is not None and (d.source_a, d.source_b) == ("allocator", "allocator")
    assert d.devices.select(
        "rank", "device", "peak_allocated_a", "peak_allocated_b", "peak_allocated_delta"
    ).rows() == [(0, 0, 964, 464, -500), (0, 1, 1000, 1000, 0)]
    reserved = d.devices.select("peak_reserved_a", "peak_reserved_b", "peak_reserved_delta").rows()
    assert reserved == [(2048, 4096, 2048)] * 2
    ops = {r["operator"]: r for r in d.operators.iter_rows(named=True)}
    assert d.operators.row(0, named=True)["operator"] == "aten::mm"
    assert (ops["aten::mm"]["allocated_a"], ops["aten::mm"]["allocated_b"], ops["aten::mm"]["allocated_delta"]) == (
        500,
        0,
        -500,
    )
    assert ops["aten::zeros"]["allocated_delta"] == 0 and ops["aten::zeros"]["allocated_a"] == 300
    assert ops[None]["allocations_a"] == 2 and ops[None]["allocated_a"] == 1050  # outside every operator


def test_no_memory_in_one_trace_is_none() -> None:
    a = memory_trace()
    empty = Trace(**({name: a.table(name) for name in SCHEMAS} | {"allocations": a.allocations.head(0)}), meta=a.meta)
    assert diff_memory(a, empty) is None and diff_memory(empty, a) is None


def _one(folder: Path) -> str:
    return str(next(folder.glob("*.json.gz")))


@pytest.mark.skipif(not (RESNET.exists() and TRACELENS.exists()), reason="real traces missing")
def test_cli_diff_of_two_real_traces_with_memory(capsys: pytest.CaptureFixture[str]) -> None:
    """ResNet-50 (V100, PyTorch 1.9: no allocator totals, so no reserved bytes) against the H100 HF inference
    trace: one device each, paired as rank 0 device 0; the peaks are each trace's own memory timeline peak."""
    from ktrace.analysis.memory_timeline import memory_timeline
    from ktrace.importers import load

    a_path, b_path = _one(RESNET), _one(TRACELENS)
    peaks = [int(memory_timeline(load(p)).per_device["peak_allocated_bytes"][0]) for p in (a_path, b_path)]  # type: ignore[union-attr]
    main(["diff", a_path, b_path, "--json"])
    doc = json.loads(capsys.readouterr().out)
    mem = doc["memory"]
    assert (mem["source_a"], mem["source_b"]) == ("allocator", "allocator")
    [dev] = mem["devices"]
    assert (dev["peak_allocated_a"], dev["peak_allocated_b"]) == tuple(peaks)
    assert dev["peak_allocated_delta"] == peaks[1] - peaks[0]
    assert dev["peak_reserved_a"] is None and dev["peak_reserved_b"] > dev["peak_allocated_b"]
    top = mem["operators"][0]
    assert abs(top["allocated_delta"]) >= max(abs(o["allocated_delta"]) for o in mem["operators"])
    main(["diff", a_path, b_path])
    out = capsys.readouterr().out
    assert "GPU memory: peak per device" in out and "allocating operators that changed most" in out


@pytest.mark.skipif(not (RESNET.exists() and ALEXNET.exists()), reason="real traces missing")
def test_cli_diff_without_memory_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    main(["diff", _one(RESNET), _one(ALEXNET), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory"] is None and "B has no GPU memory timeline" in doc["memory_note"]
    main(["diff", _one(RESNET), _one(ALEXNET), "--markdown"])
    assert "B has no GPU memory timeline" in capsys.readouterr().out


def test_host_names_reach_the_terminal_table_printable() -> None:
    """A host named with an OSC escape must not drive the user's terminal from the memory table."""
    from rich.console import Console

    from ktrace.report.diff_report import build_diff, render_diff_terminal

    a = memory_trace()
    evil = "h\x1b]0;pwned\x07"
    frames = {name: a.table(name) for name in SCHEMAS}
    renamed = {name: f.with_columns(pl.lit(evil).cast(f.schema["node"]).alias("node")) for name, f in frames.items()}
    b = Trace(**renamed, meta=a.meta)
    console = Console(width=120, record=True, color_system=None, file=io.StringIO())
    render_diff_terminal(build_diff(a, b), console)
    text = console.export_text()
    assert "\x1b" not in text and "h\\x1b]0;pwned\\x07/0/0" in text


def test_diff_top_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    a = str(next(ALEXNET.glob("*.json.gz")))
    assert main(["diff", a, a, "--top", "-2"]) == 2
    assert "--top must be at least 1" in capsys.readouterr().err


def test_allocator_against_nvml_peaks_are_flagged_as_different_measures() -> None:
    import dataclasses

    from ktrace.report.diff_report import build_diff, render_diff_markdown

    a = memory_trace()
    diff = build_diff(a, _without_block(a, 0xC, 4096))
    assert diff.memory is not None and "not the same measure" not in render_diff_markdown(diff)
    mixed = dataclasses.replace(diff, memory=dataclasses.replace(diff.memory, source_b="nvml"))
    assert "A's memory comes from the PyTorch allocator's events" in render_diff_markdown(mixed)
    assert "NVML counters" in render_diff_markdown(mixed)
