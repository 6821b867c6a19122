"""The hardware rules: RooflineGap (operators far below their roofline) and LowOccupancy (kernels at a low
estimated achieved occupancy), their TOML thresholds and the rules file's GPU peaks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.real_traces import fixture_path

import ktrace
from ktrace.analysis.index import TraceIndex
from ktrace.analysis.roofline import roofline
from ktrace.analysis.rules.config import RulesConfig, load_config
from ktrace.analysis.rules.engine import all_rules, evaluate, rule_by_name
from ktrace.model.builder import TraceBuilder
from ktrace.model.trace import Trace, TraceMeta

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


@pytest.fixture(scope="module")
def owlv2() -> Trace:
    return ktrace.open(fixture_path("tracelens"))


def run(trace: Trace, name: str, config: RulesConfig | None = None):
    return evaluate(rule_by_name(name), trace, TraceIndex(trace), config or RulesConfig())


def config_file(tmp_path: Path, text: str) -> RulesConfig:
    path = tmp_path / "rules.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, all_rules())


def test_roofline_gap_names_the_operators_the_roofline_puts_far_below_it(owlv2: Trace) -> None:
    """Every (operator, shapes, dtype) of the summary's roofline holding >= 10 % of the GPU time at < 30 % of its
    roofline is one finding, and no other (on owlv2: softmax at 23 %, a bmm at 24 %; linear at 50 % is not)."""
    r = roofline(owlv2)
    share = 100 * pl.col("gpu_time_ns") / r.gpu_time_ns
    expected = r.operators.filter((share >= 10) & (pl.col("pct_of_peak") < 30))
    assert expected.height == 2
    result = run(owlv2, "RooflineGap")
    assert len(result.findings) == expected.height and result.triggered == expected.height
    for finding, row in zip(result.findings, expected.iter_rows(named=True), strict=True):
        assert finding.message.startswith(f"{row['name']} {row['input_dims']} ({row['dtype']})")
        assert f"{row['pct_of_peak']:.1f} % of its roofline" in finding.message
        # the evidence: the operator's calls, longest GPU time first, each inside its own span
        assert len(finding.evidence) == 10 and all(e.name == row["name"] for e in finding.evidence)
        values = [e.value for e in finding.evidence]
        assert values == sorted(values, reverse=True) and sum(values) <= row["gpu_time_ns"] / 1e6
        assert all(e.start_ns < e.end_ns for e in finding.evidence)
    assert result.datapoints == r.operators.filter(pl.col("pct_of_peak").is_not_null()).height


def test_roofline_gap_thresholds_come_from_the_toml(owlv2: Trace, tmp_path: Path) -> None:
    stricter = config_file(tmp_path, "[RooflineGap]\nmax_pct_of_peak = 24.0\nmax_evidence = 3\n")
    result = run(owlv2, "RooflineGap", stricter)
    assert [f.message.split(" ")[0] for f in result.findings] == ["aten::softmax"]
    assert len(result.findings[0].evidence) == 3
    assert not run(owlv2, "RooflineGap", config_file(tmp_path, "[RooflineGap]\nmin_time_pct = 50\n")).fired


def test_gpu_peaks_from_the_rules_file_move_the_roofline(owlv2: Trace, tmp_path: Path) -> None:
    """softmax is memory-bound at ~0.79 TB/s: against a 2 TB/s override it reaches ~39 % and no longer fires."""
    config = config_file(tmp_path, '[gpu_peaks."H100"]\nhbm_tbps = 2.0\n')
    assert config.gpu_peaks["H100"].hbm_tbps == 2.0 and config.gpu_peaks["H100"].bf16 == 989.5  # the rest kept
    names = [f.message.split(" ")[0] for f in run(owlv2, "RooflineGap", config).findings]
    assert "aten::softmax" not in names


def _renamed_gpu(trace: Trace, name: str) -> Trace:
    devices = trace.devices.with_columns(pl.lit(name).cast(pl.Categorical).alias("name"))
    return replace(trace, devices=devices)


def test_unknown_gpu_skips_until_the_rules_file_adds_it(owlv2: Trace, tmp_path: Path) -> None:
    unknown = _renamed_gpu(owlv2, "Imaginary GPU 9000")
    result = run(unknown, "RooflineGap")
    assert result.skipped is not None and "'Imaginary GPU 9000' is not in the peak table" in result.skipped
    added = config_file(tmp_path, '[gpu_peaks."Imaginary GPU"]\nhbm_tbps = 3.35\nbf16 = 989.5\n')
    assert len(run(unknown, "RooflineGap", added).findings) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[gpu_peaks."NewGPU"]\nbf16 = 100\n', "hbm_tbps is needed"),
        ('[gpu_peaks."H100"]\nbf17 = 100\n', "unknown key 'bf17'"),
        ('[gpu_peaks."H100"]\nbf16 = -1\n', "not a positive number"),
        ("gpu_peaks = 3\n", "one table per GPU"),
    ],
)
def test_bad_gpu_peaks_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    from ktrace.model.errors import ExitCode, KtraceError

    with pytest.raises(KtraceError, match=message) as err:
        config_file(tmp_path, text)
    assert err.value.exit_code == ExitCode.USAGE


def test_roofline_gap_skips_a_trace_without_shapes() -> None:
    trace = ktrace.open(fixture_path("nccl"))
    assert "record_shapes=True" in (run(trace, "RooflineGap").skipped or "")


def occupancy_trace() -> Trace:
    """4 kernel names: 'slow' 60 % of the time at occupancy 20/60 (time-weighted 50... see the test), 'busy' at 80,
    'unknown' at 0 (Kineto could not estimate), an NCCL kernel at 10."""
    b = TraceBuilder(node="n0", rank=0, meta=TraceMeta(source="synthetic"))
    rows = [  # name, duration ms, occupancy %, grid x, registers, static shared, dynamic shared
        ("slow", 1, 20, 4, 32, 1024, None),
        ("slow", 3, 60, 12, 64, 0, 2048),
        ("low", 2, 10, 8, 255, 0, 0),
        ("busy", 2, 80, 8, 16, 0, 0),
        ("unknown", 1, 0, 8, 16, 0, 0),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 10, 8, 96, 0, 0),
    ]
    durs = np.array([r[1] * MS for r in rows], np.int64)
    starts = T0 + np.concatenate([[0], np.cumsum(durs)[:-1]])
    n = len(rows)
    b.add(
        "kernels",
        {
            "start_ns": starts,
            "end_ns": starts + durs,
            "device": np.zeros(n, np.int32),
            "stream": np.full(n, 7),
            "correlation_id": np.arange(1, n + 1),
            "name": [r[0] for r in rows],
            "est_occupancy_pct": np.array([r[2] for r in rows], np.int32),
            "grid_x": np.array([r[3] for r in rows], np.int32),
            "grid_y": np.ones(n, np.int32),
            "grid_z": np.ones(n, np.int32),
            "registers_per_thread": np.array([r[4] for r in rows], np.int32),
            "static_shared_bytes": pl.Series([r[5] for r in rows], dtype=pl.Int32).to_arrow(),
            "dynamic_shared_bytes": pl.Series([r[6] for r in rows], dtype=pl.Int32).to_arrow(),
        },
    )
    b.add("devices", {"device": np.zeros(1, np.int32), "name": ["NVIDIA A100-SXM4-80GB"], "sm_count": [8]})
    return b.build()


def test_kernel_efficiency_is_time_weighted_per_name() -> None:
    from ktrace.analysis.kernels import kernel_efficiency

    eff = {r["name"]: r for r in kernel_efficiency(occupancy_trace()).iter_rows(named=True)}
    slow = eff["slow"]  # 1 ms and 3 ms launches: each figure weighted 1:3
    assert slow["est_occupancy_pct"] == pytest.approx((20 * 1 + 60 * 3) / 4)
    assert slow["blocks_per_sm"] == pytest.approx((4 / 8 * 1 + 12 / 8 * 3) / 4)
    assert slow["registers_per_thread"] == pytest.approx((32 * 1 + 64 * 3) / 4)
    assert slow["shared_bytes"] == pytest.approx((1024 * 1 + 2048 * 3) / 4)
    assert slow["occupancy_ns"] == 4 * MS
    assert eff["unknown"]["est_occupancy_pct"] is None and eff["unknown"]["occupancy_ns"] == 0  # 0: not estimated


def test_low_occupancy_judges_time_weighted_occupancy_of_big_kernels() -> None:
    trace = occupancy_trace()  # 10 ms in all: slow 40 %, low 20 %, busy 20 %, unknown 10 %, nccl 10 %
    result = run(trace, "LowOccupancy")
    assert [e.name for e in result.findings[0].evidence] == ["low"]  # slow's weighted 50 % is above 30
    assert result.datapoints == 3  # slow, low, busy: unknown has no occupancy, NCCL is communication
    config = RulesConfig(params={"LowOccupancy": {"occupancy_pct": 55.0}})
    assert [e.name for e in run(trace, "LowOccupancy", config).findings[0].evidence] == ["slow", "low"]
    config = RulesConfig(params={"LowOccupancy": {"occupancy_pct": 55.0, "min_time_pct": 30.0}})
    assert [e.name for e in run(trace, "LowOccupancy", config).findings[0].evidence] == ["slow"]


def test_low_occupancy_skips_a_trace_without_occupancy() -> None:
    trace = ktrace.open(fixture_path("power_iteration"))
    assert "est. achieved occupancy" in (run(trace, "LowOccupancy").skipped or "")


def test_hardware_rules_run_per_rank() -> None:
    assert {rule_by_name(n).fleet_mode for n in ("RooflineGap", "LowOccupancy")} == {"per rank"}


def test_the_reports_roofline_reads_the_rules_files_gpu_peaks(owlv2: Trace, tmp_path: Path) -> None:
    """build_dashboard (ktrace report --rules) hands the rules file's peaks to the summary's roofline: an unknown GPU
    has FLOPs and time without percentages until the file adds it."""
    from ktrace.analysis.dashboard import build_dashboard
    from ktrace.presentation.hardware_json import roofline_dict
    from ktrace.presentation.json_rows import frame_records

    unknown = _renamed_gpu(owlv2, "Imaginary GPU 9000")
    bare = build_dashboard(unknown).summary.roofline
    assert bare is not None and bare.peaks is None
    assert bare.operators["pct_of_peak"].null_count() == bare.operators.height
    assert bare.operators["flops"].sum() > 0 and bare.operators["gpu_time_ns"].sum() > 0
    assert "'Imaginary GPU 9000' is not in the peak table" in roofline_dict(bare, frame_records)["note"]
    added = config_file(tmp_path, '[gpu_peaks."Imaginary GPU"]\nhbm_tbps = 3.35\nbf16 = 989.5\n')
    known = build_dashboard(unknown, config=added).summary.roofline
    assert known is not None and known.peaks is not None and known.peaks.source == "rules file"
    assert known.operators["pct_of_peak"].to_list() == roofline(owlv2).operators["pct_of_peak"].to_list()


def test_the_summary_and_the_rule_share_one_modeled_calls_per_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """report and check computed the roofline's operator calls twice (the rule kept its own slot); now once."""
    from ktrace.analysis import roofline as roofline_module
    from ktrace.analysis.dashboard import build_dashboard

    computed = []
    original = roofline_module._modeled_calls
    monkeypatch.setattr(roofline_module, "_modeled_calls", lambda *a: computed.append(1) or original(*a))
    build_dashboard(ktrace.open(fixture_path("tracelens")))
    assert len(computed) == 1
