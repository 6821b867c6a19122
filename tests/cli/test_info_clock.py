"""`ktrace info` on host clocks: per-host offsets and residual, the raw mode, one host, and impossible alignment."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest

from ktrace.cli import main
from ktrace.model import store
from ktrace.model.clock_estimate import align_hosts
from ktrace.testing import SyntheticConfig, generate
from ktrace.testing.fleet import FleetConfig, generate_fleet

ALIGNED = """\
clock   aligned to node0's clock by collectives:order: 6 collectives, residual p50 414 ns, p99 928 ns
┏━━━━━━━┳━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━┓
┃ host  ┃ offset    ┃ drift ┃ matched ┃ rejected ┃ residual p50 ┃ residual p99 ┃
┡━━━━━━━╇━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━┩
│ node0 │ 0 ns      │ -     │ 6       │ 0        │ 440 ns       │ 882 ns       │
│ node1 │ 701.91 ms │ -     │ 6       │ 0        │ 377 ns       │ 936 ns       │
└───────┴───────────┴───────┴─────────┴──────────┴──────────────┴──────────────┘
"""


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def _info(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["info", *args]) == 0
    return capsys.readouterr().out


def test_info_prints_each_hosts_offset_and_the_residual(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, wide: None
) -> None:
    fleet = generate_fleet(FleetConfig(ranks=8, hosts=2, steps=2))
    root = store.write(align_hosts(fleet.trace), tmp_path / "two.ktrace")
    out = _info(capsys, str(root))
    assert out[out.index("clock   ") :] == ALIGNED
    assert fleet.offsets_ns["node1"] == 701_913_529  # the 701.91 ms above
    monkeypatch.setenv("KTRACE_CLOCK", "raw")
    raw = _info(capsys, str(root))
    assert "clock   raw (KTRACE_CLOCK=raw); aligns to node0's clock by collectives:order: 6 collectives" in raw
    clock = json.loads(_info(capsys, str(root), "--json"))["clock"]
    assert clock["method"] == "collectives:order" and clock["applied"] is False
    assert [(h["host"], h["offset_ns"]) for h in clock["hosts"]] == [
        ("node0", 0),
        ("node1", 701_913_431),
    ]  # planted 701_913_529


def test_info_on_one_host_says_it_is_never_shifted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    root = store.write(generate(SyntheticConfig(steps=2, kernels_per_step=5)), tmp_path / "one.ktrace")
    assert "clock   one host: timestamps as recorded (never shifted)\n" in _info(capsys, str(root))
    assert json.loads(_info(capsys, str(root), "--json"))["clock"] == {
        "method": None,
        "note": "one host: timestamps as recorded (never shifted)",
    }


def test_info_says_when_alignment_was_impossible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    trace = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=1)).trace
    trace = dataclasses.replace(trace, kernels=trace.kernels.filter(pl.col("collective").is_null()))
    root = store.write(align_hosts(trace), tmp_path / "none.ktrace")
    assert (
        "clock   clock alignment impossible (no NCCL collectives for node1): "
        "timestamps left as each host recorded them\n"
    ) in _info(capsys, str(root))


def test_info_lists_devices_by_rank_number(tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    """A store reads its partitions in path order (rank=10 before rank=8): info listed devices that way."""
    root = store.write(generate_fleet(FleetConfig(ranks=12, hosts=1, steps=1)).trace, tmp_path / "twelve.ktrace")
    devices = json.loads(_info(capsys, str(root), "--json"))["devices"]
    assert [d["rank"] for d in devices] == list(range(12))
    lines = [line for line in _info(capsys, str(root)).splitlines() if line.startswith("device")]
    assert [int(line.split()[1].split("/")[1]) for line in lines] == list(range(12))


def test_info_calls_an_alignment_that_shifts_nothing_aligned_not_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    """Every offset 0 (or no host listed): reading leaves applied False, and info said "raw (KTRACE_CLOCK=raw)"
    although the variable was not set and the times are the aligned ones."""
    trace = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=1)).trace
    zero = dataclasses.replace(align_hosts(trace).meta.clock_alignment, applied=False)  # type: ignore[arg-type]
    zero = dataclasses.replace(zero, hosts=tuple(dataclasses.replace(h, offset_ns=0) for h in zero.hosts))
    root = store.write(trace.with_meta(dataclasses.replace(trace.meta, clock_alignment=zero)), tmp_path / "z.ktrace")
    out = _info(capsys, str(root))
    assert "clock   aligned to node0's clock by collectives:order" in out and "KTRACE_CLOCK" not in out
    assert json.loads(_info(capsys, str(root), "--json"))["clock"]["applied"] is True
