"""ktrace run's clock pairs (CLOCK_REALTIME with the CUPTI clock, at GPU start and at close), on a stand-in GPU clock.

Not run on a GPU here: the CUPTI side is one call (`cupti.get_timestamp()` in CuptiBackend.gpu_timestamp).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import polars as pl

from ktrace.model import store
from ktrace.model.clock import ClockPair
from ktrace.model.clock_estimate import align_hosts, rank_clock_inputs
from ktrace.testing.fleet import FleetConfig, generate_fleet
from ktrace.tracer.clock_pairs import read_clock_pair
from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.finalize import finalize_run
from ktrace.tracer.session import CaptureSession

AHEAD_NS = 3_000_000


class _ClockOnlyBackend:
    """A GPU backend with no records whose clock runs 3 ms ahead of CLOCK_REALTIME."""

    def flush(self, forced: bool = False) -> None:
        pass

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        return {}

    def set_recording(self, on: bool) -> None:
        pass

    def stop(self) -> None:
        pass

    def health(self) -> dict[str, int]:
        return {}

    def name_of(self, domain: str, cbid: int) -> str:
        return ""

    def take_notes(self) -> list[str]:
        return []

    def gpu_timestamp(self) -> int:
        return time.time_ns() + AHEAD_NS


def test_the_tightest_read_is_kept() -> None:
    calls = iter(range(100))

    def slow_then_fast() -> int:
        if next(calls) < 3:
            time.sleep(0.005)
        return time.time_ns() + AHEAD_NS

    pair = read_clock_pair(slow_then_fast, reads=8)
    assert pair.error_ns < 2_000_000  # not one of the 5 ms reads
    assert abs(pair.gpu_ns - pair.realtime_ns - AHEAD_NS) <= pair.error_ns + 1_000
    assert 0 < pair.monotonic_ns <= time.monotonic_ns()


def test_a_capture_keeps_its_clock_pairs_in_meta_and_notes_a_far_gpu_clock(tmp_path: Path) -> None:
    root = tmp_path / "run.ktrace"
    session = CaptureSession(root, CaptureConfig(), "hostA", 0)
    session.backend = _ClockOnlyBackend()
    session.record_clock_pair()  # as hook.start_gpu does once CUPTI started
    session.close()  # reads the second pair before stopping the backend
    partition = json.loads((root / "node=hostA" / "rank=0" / "partition.json").read_text())
    assert len(partition["clock_pairs"]) == 2
    result = finalize_run(root, ["python", "train.py"], CaptureConfig(), 0, [], "hostA", 0)
    meta = json.loads((root / "meta.json").read_text())
    pairs = [ClockPair.from_dict(p) for p in meta["capture"]["clock_pairs"]["hostA/0"]]
    assert len(pairs) == 2 and pairs[0].realtime_ns <= pairs[1].realtime_ns
    assert all(abs(p.gpu_ns - p.realtime_ns - AHEAD_NS) <= p.error_ns + 1_000_000 for p in pairs)
    assert any("hostA/0: the CUPTI clock is +3.0" in n and "off CLOCK_REALTIME" in n for n in result.notes)
    inputs = rank_clock_inputs(store.read(root))
    assert [(i.node, i.rank, i.clock_pairs) for i in inputs] == [("hostA", 0, tuple(pairs))]


def test_clock_pairs_align_a_multi_host_trace_without_collectives() -> None:
    """Two hosts' captures merged: no collectives to match, so each host's GPU clock goes on its CLOCK_REALTIME."""
    trace = generate_fleet(FleetConfig(ranks=4, hosts=2, steps=2, max_offset_ns=0)).trace
    trace = dataclasses.replace(trace, kernels=trace.kernels.filter(pl.col("collective").is_null()))
    t0 = 1_700_000_000_000_000_000

    def pairs(gpu_ahead_ns: int) -> list[dict[str, int]]:
        return [ClockPair(realtime_ns=t, gpu_ns=t + gpu_ahead_ns).to_dict() for t in (t0, t0 + 10**10)]

    capture = {"clock_pairs": {f"node{r // 2}/{r}": pairs(7_000_000 if r >= 2 else 0) for r in range(4)}}
    aligned = align_hosts(trace.with_meta(dataclasses.replace(trace.meta, capture=capture)))
    alignment = aligned.meta.clock_alignment
    assert alignment is not None and alignment.method == "clock_pairs" and alignment.applied
    assert [(h.host, h.offset_ns, h.matched) for h in alignment.hosts] == [("node0", 0, 2), ("node1", 7_000_000, 2)]
    moved = (trace.kernels["start_ns"] - aligned.kernels["start_ns"]).to_numpy()
    on1 = (trace.kernels["node"].cast(pl.String) == "node1").to_numpy()
    assert (moved[on1] == 7_000_000).all() and (moved[~on1] == 0).all()
