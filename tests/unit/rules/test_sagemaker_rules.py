"""SageMaker Debugger's rules on traces built to trigger them, and on twins built not to."""

from __future__ import annotations

import numpy as np
import pytest

N = 40  # counter samples


def _steps(tb, durations_ms, gap_ms=1.0, first_ns=None):
    def add(b):
        start = first_ns if first_ns is not None else tb.T0
        starts, ends = [], []
        for d in durations_ms:
            starts.append(start)
            ends.append(start + int(d * tb.MS))
            start = ends[-1] + int(gap_ms * tb.MS)
        n = len(starts)
        b.add(
            "ranges",
            {
                "start_ns": starts,
                "end_ns": ends,
                "pid": [1] * n,
                "tid": [1] * n,
                "name": [f"ProfilerStep#{i}" for i in range(n)],
                "domain": ["profiler_step"] * n,
                "depth": [0] * n,
                "on_gpu": [False] * n,
            },
        )

    return add


def test_step_outlier(tb):
    durations = [10.0] * 57 + [60.0] * 3
    result = tb.run_rule(tb.build(_steps(tb, durations)), "StepOutlier", "n_outliers=2")
    assert result.fired and result.triggered == 3 and result.datapoints == 60
    assert {e.value for e in result.findings[0].evidence} == {60.0}
    assert not tb.run_rule(tb.build(_steps(tb, durations)), "StepOutlier").fired  # default n_outliers=10
    assert not tb.run_rule(tb.build(_steps(tb, [10.0] * 60)), "StepOutlier", "n_outliers=0").fired
    assert tb.run_rule(tb.build(_steps(tb, [10.0] * 2)), "StepOutlier").skipped


def _util(tb, gpu, cpu=None, iowait=None, mem=None):
    def add(b):
        tb.counters(b, "gpu.util", np.asarray(gpu, float), instance=0)
        if cpu is not None:
            tb.counters(b, "cpu.util", np.asarray(cpu, float))
        if iowait is not None:
            tb.counters(b, "cpu.iowait_pct", np.asarray(iowait, float))
        if mem is not None:
            tb.counters(b, "gpu.mem_used_bytes", np.asarray(mem, float) * 1e9, instance=0)
            b.add("devices", {"device": [0], "name": ["GPU"], "memory_bytes": [100_000_000_000]})

    return add


def test_low_gpu_utilization_underused_and_fluctuating(tb):
    low = tb.run_rule(tb.build(_util(tb, np.full(N, 20.0))), "LowGPUUtilization")
    assert low.fired and "underused" in low.findings[0].message and low.datapoints == N
    wobbly = tb.run_rule(tb.build(_util(tb, np.tile([95.0, 2.0], N // 2))), "LowGPUUtilization")
    assert wobbly.fired and "fluctuating" in wobbly.findings[0].message
    busy = tb.run_rule(tb.build(_util(tb, np.full(N, 90.0))), "LowGPUUtilization")
    assert not busy.fired


def test_low_gpu_utilization_from_the_timeline_without_counters(tb):
    sparse = tb.build(tb.steady(400, period=1000 * tb.US, dur=100 * tb.US))  # 10 % busy
    result = tb.run_rule(sparse, "LowGPUUtilization")
    assert result.fired and "(timeline)" in result.findings[0].message
    dense = tb.build(tb.steady(400, period=100 * tb.US, dur=99 * tb.US))
    assert not tb.run_rule(dense, "LowGPUUtilization").fired


@pytest.mark.parametrize(("rule", "metric_kw"), [("CPUBottleneck", "cpu"), ("IOBottleneck", "iowait")])
def test_cpu_and_io_bottleneck(tb, rule, metric_kw):
    hot = tb.run_rule(tb.build(_util(tb, np.full(N, 5.0), **{metric_kw: np.full(N, 95.0)})), rule)
    assert hot.fired and hot.triggered == N
    assert hot.findings[0].evidence[0].kind == "window"
    cool = tb.run_rule(tb.build(_util(tb, np.full(N, 5.0), **{metric_kw: np.full(N, 20.0)})), rule)
    assert not cool.fired
    assert tb.run_rule(tb.build(_util(tb, np.full(N, 5.0))), rule).skipped


def test_batch_size(tb):
    small = tb.build(_util(tb, np.full(N, 30.0), cpu=np.full(N, 20.0), mem=np.full(N, 10.0)))
    assert tb.run_rule(small, "BatchSize").fired
    full = tb.build(_util(tb, np.full(N, 30.0), cpu=np.full(N, 20.0), mem=np.full(N, 90.0)))
    assert not tb.run_rule(full, "BatchSize").fired


def test_gpu_memory_increase(tb):
    rising = tb.build(_util(tb, np.full(N, 90.0), mem=np.linspace(10, 50, N)))
    result = tb.run_rule(rising, "GPUMemoryIncrease")
    assert result.fired and result.details["series"][0]["rise_points"] > 30
    flat = tb.build(_util(tb, np.full(N, 90.0), mem=np.full(N, 40.0)))
    assert not tb.run_rule(flat, "GPUMemoryIncrease").fired


def test_load_balancing(tb):
    def ranks(idle_rank1):
        def add(b):
            tb.launches(b, tb.T0 + np.arange(400, dtype=np.int64) * 100 * tb.US, np.full(400, 95 * tb.US, np.int64))
            dur = 5 * tb.US if idle_rank1 else 95 * tb.US
            tb.launches(b, tb.T0 + np.arange(400, dtype=np.int64) * 100 * tb.US, np.full(400, dur, np.int64), rank=1)

        return add

    assert tb.run_rule(tb.build(ranks(True)), "LoadBalancing").fired
    assert not tb.run_rule(tb.build(ranks(False)), "LoadBalancing").fired
    assert tb.run_rule(tb.build(tb.steady(10)), "LoadBalancing").skipped


def test_max_initialization_time(tb):
    late = tb.build(tb.steady(10), _steps(tb, [10.0] * 5, first_ns=tb.T0 + 30 * 60 * 1000 * tb.MS))
    result = tb.run_rule(late, "MaxInitializationTime")
    assert result.fired and result.findings[0].evidence[0].name == "initialization"
    soon = tb.build(tb.steady(10), _steps(tb, [10.0] * 5, first_ns=tb.T0 + 60 * 1000 * tb.MS))
    assert not tb.run_rule(soon, "MaxInitializationTime").fired


def test_dataloader_share_of_the_loop(tb):
    def loader(ms):
        def add(b):
            starts = tb.T0 + np.arange(20, dtype=np.int64) * 11 * tb.MS
            b.add(
                "ranges",
                {
                    "start_ns": starts,
                    "end_ns": starts + int(ms * tb.MS),
                    "pid": [1] * 20,
                    "tid": [1] * 20,
                    "name": ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] * 20,
                    "domain": ["user_annotation"] * 20,
                    "depth": [1] * 20,
                    "on_gpu": [False] * 20,
                },
            )

        return add

    slow = tb.run_rule(tb.build(_steps(tb, [10.0] * 20), loader(3.0)), "Dataloader")
    assert slow.fired and slow.findings[0].evidence
    fast = tb.run_rule(tb.build(_steps(tb, [10.0] * 20), loader(0.1)), "Dataloader")
    assert not fast.fired
    assert tb.run_rule(tb.build(_steps(tb, [10.0] * 20)), "Dataloader").skipped


def test_load_balancing_one_rank_two_gpu_counters(tb):
    """One rank, but two gpu.util counter series: the rule compares them (it skips only below two histograms)."""

    def two_gpus(b):
        tb.counters(b, "gpu.util", np.full(40, 95.0), instance=0)
        tb.counters(b, "gpu.util", np.full(40, 5.0), instance=1)

    result = tb.run_rule(tb.build(tb.steady(10), two_gpus), "LoadBalancing")
    assert not result.skipped and result.fired and result.details["source"] == "counters"
    one_gpu = tb.build(tb.steady(10), lambda b: tb.counters(b, "gpu.util", np.full(40, 95.0), instance=0))
    assert tb.run_rule(one_gpu, "LoadBalancing").skipped
