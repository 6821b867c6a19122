"""Timeline and health rules on traces built to trigger them, and on twins built not to."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ktrace.testing import SyntheticConfig, generate


def test_pageable_memcpy_fires_on_pageable_copies_only(tb):
    hot = tb.run_rule(generate(SyntheticConfig(steps=10, kernels_per_step=20, pageable_fraction=1.0)), "PageableMemcpy")
    assert hot.fired and hot.triggered == 10  # one per-step HtoD copy per step, all pageable
    assert hot.findings[0].evidence[0].kind == "memcpy"
    cold = tb.run_rule(
        generate(SyntheticConfig(steps=10, kernels_per_step=20, pageable_fraction=0.0)), "PageableMemcpy"
    )
    assert not cold.fired and cold.triggered == 0 and cold.datapoints == 14  # 10 step copies + 4 init copies


def _memcpy_api(name: str):
    def add(b):
        b.add(
            "api",
            {
                "start_ns": [b_T0 := 1_700_000_000_000_000_000],
                "end_ns": [b_T0 + 2_000_000],
                "pid": [1],
                "tid": [1],
                "correlation_id": [99],
                "domain": ["runtime"],
                "name": [name],
            },
        )

    return add


@pytest.mark.parametrize(
    ("api", "fires"),
    [("cudaMemcpy", True), ("cuMemsetD8_v2", True), ("cudaMemcpyAsync", False), ("cudaMemsetAsync", False)],
)
def test_sync_memcpy_by_api_name(tb, api, fires):
    result = tb.run_rule(tb.build(tb.steady(10), _memcpy_api(api)), "SyncMemcpy")
    assert result.fired is fires and result.datapoints == 1


def test_excessive_sync_share_of_host_time(tb):
    def syncs(dur):
        def add(b):
            start = tb.T0 + np.arange(10, dtype=np.int64) * 2 * tb.MS
            b.add(
                "api",
                {
                    "start_ns": start,
                    "end_ns": start + dur,
                    "pid": np.ones(10),
                    "tid": np.ones(10),
                    "correlation_id": np.arange(1000, 1010),
                    "domain": ["runtime"] * 10,
                    "name": ["cudaStreamSynchronize"] * 10,
                },
            )

        return add

    slow = tb.run_rule(tb.build(tb.steady(200), syncs(tb.MS)), "ExcessiveSync")
    assert slow.fired and "10 calls" in slow.findings[0].message
    quick = tb.run_rule(tb.build(tb.steady(200), syncs(10 * tb.US)), "ExcessiveSync")
    assert not quick.fired
    assert not tb.run_rule(tb.build(tb.steady(200), syncs(tb.MS)), "ExcessiveSync", "max_time_pct=80").fired


def _gap_trace(tb, gap_ns):
    def add(b):
        first = tb.T0 + np.arange(10, dtype=np.int64) * 100 * tb.US
        second = first[-1] + 100 * tb.US + gap_ns + np.arange(10, dtype=np.int64) * 100 * tb.US
        tb.launches(b, np.concatenate([first, second]), np.full(20, 80 * tb.US, np.int64), latency=10 * tb.US)
        b.add(
            "api",
            {
                "start_ns": [first[-1] + 200 * tb.US],
                "end_ns": [second[0] - 30 * tb.US],
                "pid": [1],
                "tid": [1],
                "correlation_id": [500],
                "domain": ["runtime"],
                "name": ["cudaDeviceSynchronize"],
            },
        )

    return tb.build(add)


def test_gpu_gaps_reports_the_gap_and_the_cpu_activity(tb):
    result = tb.run_rule(_gap_trace(tb, 700 * tb.MS), "GPUGaps")
    assert result.fired and result.triggered == 1
    ev = result.findings[0].evidence[0]
    assert ev.kind == "gap" and 700 * tb.MS <= ev.end_ns - ev.start_ns < 701 * tb.MS
    assert ev.name.startswith("CPU: cudaDeviceSynchronize")
    assert not tb.run_rule(_gap_trace(tb, 100 * tb.MS), "GPUGaps").fired
    assert tb.run_rule(_gap_trace(tb, 100 * tb.MS), "GPUGaps", "gap_ms=50").fired


def test_launch_bound_kernels(tb):
    tiny = tb.run_rule(tb.build(tb.steady(300, period=20 * tb.US, dur=2 * tb.US)), "LaunchBoundKernels")
    assert tiny.fired and tiny.triggered == 300 and tiny.findings[0].evidence[0].name == "gemm_kernel"
    assert not tb.run_rule(tb.build(tb.steady(300, dur=80 * tb.US)), "LaunchBoundKernels").fired


def test_high_launch_latency_only_counts_an_idle_stream(tb):
    # Each kernel starts 400 µs after its launch returned, with the stream idle: launch overhead.
    late = tb.build(tb.steady(100, period=1000 * tb.US, dur=50 * tb.US, latency=400 * tb.US))
    result = tb.run_rule(late, "HighLaunchLatency")
    assert result.fired and result.triggered == 100
    assert result.details["latency_us"]["queue_delay_p50"] == pytest.approx(400.0)
    # Same 400 µs end->start delay, but queued behind earlier kernels on a busy stream: not overhead.
    queued = tb.build(tb.steady(100, period=100 * tb.US, dur=100 * tb.US, latency=400 * tb.US))
    assert not tb.run_rule(queued, "HighLaunchLatency").fired


def _devices(major):
    def add(b):
        b.add("devices", {"device": [0], "name": ["GPU"], "compute_major": [major], "compute_minor": [0]})

    return add


def test_fp32_matmul(tb):
    sgemm = tb.build(tb.steady(50, name="ampere_sgemm_128x64_nn"), _devices(8))
    result = tb.run_rule(sgemm, "FP32Matmul")
    assert result.fired and "TF32 or BF16" in result.findings[0].message
    bf16 = tb.build(tb.steady(50, name="sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64"), _devices(9))
    assert not tb.run_rule(bf16, "FP32Matmul").fired
    old = tb.build(tb.steady(50, name="maxwell_sgemm_128x64_nn"), _devices(6))
    assert tb.run_rule(old, "FP32Matmul").skipped


def test_comm_not_overlapped(tb):
    def comm(overlapped):
        def add(b):
            tb.launches(
                b,
                np.array([tb.T0 + 1000 * tb.US]),
                np.array([500 * tb.US]),
                name="ncclKernel_AllReduce_RING_LL_Sum_float",
                stream=13,
                first_corr=900,
            )
            if overlapped:
                tb.launches(b, np.array([tb.T0 + 1000 * tb.US]), np.array([500 * tb.US]), first_corr=950)

        return add

    exposed = tb.run_rule(tb.build(tb.steady(10), comm(False)), "CommNotOverlapped")
    assert exposed.fired
    hidden = tb.run_rule(tb.build(tb.steady(10), comm(True)), "CommNotOverlapped")
    assert not hidden.fired
    assert tb.run_rule(tb.build(tb.steady(10)), "CommNotOverlapped").skipped


def test_dropped_records_reads_health(tb):
    trace = tb.build(tb.steady(10))
    assert not tb.run_rule(trace, "DroppedRecords").fired
    lossy = trace.with_meta(trace.meta.with_health({"cupti_dropped_records": 12}))
    result = tb.run_rule(lossy, "DroppedRecords")
    assert result.fired and result.findings[0].severity == "error" and result.triggered == 12


def test_orphan_records(tb):
    def orphans(b):
        b.add(
            "kernels",
            {
                "start_ns": tb.T0 + np.arange(20, dtype=np.int64) * tb.US,
                "end_ns": tb.T0 + np.arange(20, dtype=np.int64) * tb.US + 500,
                "device": np.zeros(20, np.int32),
                "stream": np.full(20, 9),
                "correlation_id": np.arange(5000, 5020),
                "name": ["k"] * 20,
            },
        )

    assert tb.run_rule(tb.build(tb.steady(100), orphans), "OrphanRecords").fired
    assert not tb.run_rule(tb.build(tb.steady(100)), "OrphanRecords").fired


def test_clock_problems_kernel_before_its_launch(tb):
    early = tb.build(tb.steady(100, latency=-200 * tb.US))  # each kernel starts 195 µs before its launch began
    result = tb.run_rule(early, "ClockProblems")
    assert result.fired and result.details["launch_after_run"] == 100
    assert not tb.run_rule(tb.build(tb.steady(100)), "ClockProblems").fired


def test_every_rule_runs_on_an_empty_trace(tb):
    from ktrace.analysis.rules.engine import run_rules
    from ktrace.model.trace import Trace

    report = run_rules(Trace.from_arrow({}))
    assert not report.findings
    assert all(r.skipped or r.datapoints == 0 for r in report.results)


def test_findings_keep_the_fields_exporters_use(tb):
    result = tb.run_rule(_gap_trace(tb, 700 * tb.MS), "GPUGaps")
    f = result.findings[0]
    assert {"rule", "severity", "message", "evidence"} <= {x.name for x in dataclasses.fields(f)}
    ev = f.evidence[0]
    assert ev.start_ns and ev.end_ns and ev.node == "n0" and ev.rank == 0
