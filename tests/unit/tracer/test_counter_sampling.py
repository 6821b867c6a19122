"""Counters sampled for real: psutil host metrics, NVML when present, perf events when allowed."""

from __future__ import annotations

import os
from pathlib import Path

from ktrace.model import store
from ktrace.model.schema import COUNTER_METRICS, NODE_RANK
from ktrace.tracer.counters import CounterSampler, HostCounters, open_gpu_counters
from ktrace.tracer.perf_counters import open_perf_counters


def test_host_counters_sample_every_host_metric() -> None:
    host = HostCounters()
    sum(range(200_000))
    rows = host.sample()
    metrics = {m for m, _, _ in rows}
    assert {"cpu.util", "cpu.core.util", "mem.used_bytes", "mem.util", "cpu.iowait_pct"} <= metrics
    assert metrics <= set(COUNTER_METRICS)
    cores = [i for m, i, _ in rows if m == "cpu.core.util"]
    assert cores == list(range(os.cpu_count() or 1))
    assert all(0 <= v <= 100 for m, _, v in rows if m.endswith("util"))


def test_gpu_and_perf_counters_work_or_say_why_in_one_line() -> None:
    gpu, why = open_gpu_counters()
    assert (gpu is None) != (why is None)
    if gpu is not None:
        assert {m for m, _, _ in gpu.sample()} <= set(COUNTER_METRICS)
        gpu.close()
    else:
        assert "\n" not in why
    perf, why = open_perf_counters(os.getpid())
    if perf is None:
        assert why is not None and "unavailable" in why
    else:
        sum(range(100_000))
        assert set(perf.read_deltas()) <= {"cpu.cycles", "cpu.instructions", "cpu.itlb_misses"}
        perf.close()


def test_sampler_writes_node_level_rows(tmp_path: Path) -> None:
    import time

    sampler = CounterSampler(tmp_path / "r.ktrace", "host", 100, os.getpid(), gpu=False)
    sampler.start()
    time.sleep(0.45)
    sampler.stop()
    store.finalize(tmp_path / "r.ktrace")
    t = store.read(tmp_path / "r.ktrace")
    assert set(t.counters["rank"].to_list()) == {NODE_RANK}
    ts = t.counters.filter(t.counters["metric"].cast(str) == "cpu.util")["ts_ns"].to_list()
    assert len(ts) >= 4 and all(b > a for a, b in zip(ts, ts[1:], strict=False))
