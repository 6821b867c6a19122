"""collectives.collectives: NCCL calls by message size with nccl-tests' algbw and busbw, checked against
hand-computed values on generated traces and against a reading of the real traces' raw JSON
(benchmarks/check_busbw.py, which uses no ktrace code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.real_traces import benchmark_script, fixture_path

import ktrace
from ktrace.analysis.collectives import NO_COLLECTIVES, NO_MESSAGE_SIZES, collective_kind, collectives
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)"


def _trace(calls: list[dict[str, Any]]) -> Trace:
    """One rank's kernels: each call a dict of name, start, duration and the collective args (None: absent)."""
    b = TraceBuilder("n0", 0)
    keys = ("collective", "in_nelems", "out_nelems", "comm_dtype", "group_size")
    b.add(
        "kernels",
        {
            "start_ns": [c["start"] for c in calls],
            "end_ns": [c["start"] + c["dur"] for c in calls],
            "device": [0] * len(calls),
            "stream": [7] * len(calls),
            "name": [c.get("name", ALLREDUCE) for c in calls],
            **{k: [c.get(k) for c in calls] for k in keys},
        },
    )
    return b.build()


def _call(start: int, dur: int, coll: str, dtype: str, n_in: int, n_out: int, group: int) -> dict[str, Any]:
    return {
        "start": start,
        "dur": dur,
        "collective": coll,
        "comm_dtype": dtype,
        "in_nelems": n_in,
        "out_nelems": n_out,
        "group_size": group,
    }


def _rows(trace: Trace) -> dict[tuple[str, str, int, int], dict[str, Any]]:
    frame = collectives(trace).by_size
    return {(r["collective"], r["dtype"], r["bytes"], r["group_size"]): r for r in frame.iter_rows(named=True)}


def test_algbw_is_bytes_over_the_mean_time_and_busbw_scales_it_per_collective() -> None:
    trace = _trace(
        [
            _call(0, 1_000, "allreduce", "Float", 1024, 1024, 4),  # S = 4096 B
            _call(10_000, 3_000, "allreduce", "Float", 1024, 1024, 4),
            _call(20_000, 1_024, "_allgather_base", "BFloat16", 256, 1024, 4),  # S = the output: 2048 B
            _call(30_000, 512, "reduce_scatter_tensor_coalesced", "Half", 1024, 256, 4),  # S = the input: 2048 B
            _call(40_000, 40, "broadcast", "Long", 10, 10, 8),  # 80 B
            _call(50_000, 100, "send", "Byte", 300, 300, 2),
            _call(60_000, 100, "barrier", "Float", 1, 1, 4),  # no busbw definition
            {"start": 70_000, "dur": 5, "name": "sgemm"},  # not a collective
        ]
    )
    rows = _rows(trace)
    ar = rows[("all_reduce", "Float", 4096, 4)]
    assert (ar["count"], ar["time_ns"], ar["median_ns"]) == (2, 4_000, 2_000.0)
    assert ar["algbw_gbps"] == pytest.approx(4096 / 2_000)  # 2.048 GB/s
    assert ar["busbw_gbps"] == pytest.approx(2.048 * 2 * 3 / 4)
    ag = rows[("all_gather", "BFloat16", 2048, 4)]
    assert (ag["algbw_gbps"], ag["busbw_gbps"]) == pytest.approx((2.0, 1.5))
    rs = rows[("reduce_scatter", "Half", 2048, 4)]
    assert (rs["algbw_gbps"], rs["busbw_gbps"]) == pytest.approx((4.0, 3.0))
    bc = rows[("broadcast", "Long", 80, 8)]
    assert (bc["algbw_gbps"], bc["busbw_gbps"]) == pytest.approx((2.0, 2.0))
    assert rows[("send", "Byte", 300, 2)]["busbw_gbps"] == pytest.approx(3.0)
    barrier = rows[("barrier", "Float", 4, 4)]
    assert barrier["algbw_gbps"] == pytest.approx(0.04) and barrier["busbw_gbps"] is None
    result = collectives(trace)
    assert (result.calls, result.sized_calls, result.reason, result.definition) == (7, 7, None, "nccl-tests")
    assert list(collectives(trace).by_size["collective"])[0] == "all_reduce"  # largest total time first


def test_a_call_of_an_unknown_dtype_has_no_size() -> None:
    trace = _trace([_call(0, 100, "allreduce", "Float", 8, 8, 2), _call(500, 100, "allreduce", "Quaternion", 8, 8, 2)])
    result = collectives(trace)
    assert (result.calls, result.sized_calls, result.by_size.height) == (2, 1, 1)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("allreduce", "all_reduce"),
        ("allreduce_coalesced", "all_reduce"),
        ("all_gather_into_tensor_coalesced", "all_gather"),
        ("_reduce_scatter_base", "reduce_scatter"),
        ("alltoall_base", "all_to_all"),
        ("reduce", "reduce"),
        ("recv", "recv"),
        ("gather", "gather"),
    ],
)
def test_kineto_collective_names_map_to_nccl_tests_collectives(name: str, kind: str) -> None:
    assert collective_kind(name) == kind


def test_an_empty_section_says_why() -> None:
    compute = _trace([{"start": 0, "dur": 5, "name": "sgemm"}])
    assert collectives(compute).reason == NO_COLLECTIVES
    bare = _trace([{"start": 0, "dur": 5}])  # a NCCL kernel without the collective args (older PyTorch)
    result = collectives(bare)
    assert (result.reason, result.calls, result.by_size.height) == (NO_MESSAGE_SIZES, 1, 0)


@pytest.mark.parametrize("name", ["nccl", "dlrm"])
def test_busbw_matches_a_reading_of_the_raw_json(name: str) -> None:
    path = fixture_path(name)
    files = sorted(path.glob("*.json.gz")) if path.is_dir() else [Path(path)]
    expected = benchmark_script("check_busbw").busbw_rows(files)
    got = collectives(ktrace.open(path)).by_size
    assert got.height == len(expected)
    for row in got.iter_rows(named=True):
        want = expected[(row["collective"], row["dtype"], row["bytes"], row["group_size"])]
        assert (row["count"], row["time_ns"]) == (want["count"], pytest.approx(want["time_ns"], abs=row["count"]))
        assert row["busbw_gbps"] == pytest.approx(want["busbw_gbps"], rel=1e-3)  # ns rounding of µs times
    if name == "nccl":
        assert got.height == 7  # 5 all_reduce sizes, 2 broadcasts


def test_the_summary_json_has_the_collectives_key() -> None:
    from ktrace.analysis.summary import summarize
    from ktrace.presentation.summary_json import summary_to_dict

    got = summary_to_dict(summarize(ktrace.open(fixture_path("nccl"))))["collectives"]
    assert (got["definition"], got["calls"], got["sized_calls"], len(got["by_size"])) == ("nccl-tests", 21, 21, 7)
    assert set(got["by_size"][0]) >= {"collective", "dtype", "bytes", "group_size", "count", "time_ns"}
    assert "reason" not in got and got["skew"]["reason"].startswith("one rank")
    empty = summary_to_dict(summarize(_trace([{"start": 0, "dur": 5, "name": "sgemm"}])))["collectives"]
    assert (empty["by_size"], empty["reason"], empty["skew"]["reason"]) == ([], NO_COLLECTIVES, NO_COLLECTIVES)
