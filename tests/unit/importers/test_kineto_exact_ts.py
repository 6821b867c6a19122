"""Kineto timestamps in epoch µs with a nanosecond fraction (1712195495505583.123) are read to the exact ns.

float64 spaces values of 1.7e15 by 0.25 µs, so reading such a `ts` as a float moves it by up to 125 ns; the
importer reads these slices again with the fraction kept as decimal text (kineto_schema.ExactEvent).
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from real_traces import fixture_path

import ktrace.importers.kineto_decode as kineto_decode
from ktrace.analysis.latency import launch_latency
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_schema import EXACT_FROM_US
from ktrace.importers.kineto_times import LostNanoseconds, exact_ns, ts_columns

PID, TID = 4242, 4243
T0 = 1712195495505583  # µs since the epoch (April 2024): float64 spacing 0.25 µs


def _x(cat: str, name: str, ts: str, dur: str, **args: Any) -> str:
    """One event as JSON text, `ts` and `dur` written as given (json.dumps would go through float)."""
    gpu = cat == "kernel"
    place = {"pid": 0 if gpu else PID, "tid": 7 if gpu else TID}
    head = json.dumps({"ph": "X", "cat": cat, "name": name, **place, "args": args})[:-1]
    return f'{head}, "ts": {ts}, "dur": {dur}}}'


def _write(tmp_path: Path, events: list[str], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + ",\n".join(events) + "]}")
    return path


def _launch_job(first: int = T0) -> list[str]:
    """A launch ending 1 ns before its kernel starts (queued); in float64 the kernel starts 125 ns earlier."""
    return [
        _x("cuda_runtime", "cudaLaunchKernel", f"{first}.123", "4.000", correlation=1),
        _x("kernel", "k", f"{first + 4}.124", "1.001", correlation=1, device=0, stream=7),
    ]


def test_ns_fractions_of_epoch_microseconds_are_exact(tmp_path: Path) -> None:
    trace = import_kineto(_write(tmp_path, _launch_job()))
    k = trace.kernels
    assert (k["start_ns"][0], k["end_ns"][0]) == ((T0 + 4) * 1000 + 124, (T0 + 5) * 1000 + 125)
    assert k["end_ns"][0] - k["start_ns"][0] == 1001
    assert (trace.api["start_ns"][0], trace.api["end_ns"][0]) == (T0 * 1000 + 123, (T0 + 4) * 1000 + 123)
    assert trace.span_ns() == (T0 * 1000 + 123, (T0 + 5) * 1000 + 125)
    lat = launch_latency(trace)
    assert lat["queue_delay_ns"].to_list() == [1]
    assert lat["queued"].to_list() == [True]


def test_a_fraction_float64_rounds_to_a_whole_microsecond_is_kept(tmp_path: Path) -> None:
    """.001 reads as .000 in float64 at this magnitude: the text, not the float, says the slice has fractions."""
    path = _write(tmp_path, [_x("kernel", "k", f"{T0}.001", "2.5", correlation=1, device=0, stream=7)])
    k = import_kineto(path).kernels
    assert (k["start_ns"][0], k["end_ns"][0]) == (T0 * 1000 + 1, T0 * 1000 + 2501)


def test_every_slice_is_exact_after_the_first_that_needed_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small slices: whole µs first (fast path), then fractions (decoded again, and the rest decoded exactly),
    with a wrongly typed field (pid as a float) that sends one event through the lenient path."""
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", 256)
    whole = [_x("kernel", f"w{i}", str(T0 + i), "1", correlation=i, device=0, stream=7) for i in range(6)]
    frac = [
        _x("kernel", f"f{i}", f"{T0 + 10 + i}.{i + 1:03d}", "0.999", correlation=10 + i, device=0, stream=7)
        for i in range(12)
    ]
    odd = f'{{"ph": "X", "cat": "kernel", "name": "odd", "pid": 0.0, "tid": 7, "ts": "{T0 + 40}.777", "dur": 1}}'
    k = import_kineto(_write(tmp_path, [*whole, *frac, odd])).kernels.sort("start_ns")
    want = (
        [(T0 + i) * 1000 for i in range(6)]
        + [(T0 + 10 + i) * 1000 + i + 1 for i in range(12)]
        + [(T0 + 40) * 1000 + 777]
    )
    assert k["start_ns"].to_list() == want
    assert (k["end_ns"] - k["start_ns"]).to_list() == [1000] * 6 + [999] * 12 + [1000]


def test_relative_and_small_fractional_times_keep_the_fast_path(tmp_path: Path) -> None:
    """Below EXACT_FROM_US µs float64 holds the ns: 2024+ traces (relative to baseTimeNanoseconds) stay fast."""
    assert ts_columns([4458676983543.183, 12.5]).keys() == {"ts"}
    assert ts_columns([T0, T0 + 1]).keys() == {"ts"}
    assert ts_columns([1.5, float("inf"), 1e300]).keys() == {"ts"}  # dropped later as bad times: no exact read
    with pytest.raises(LostNanoseconds):
        ts_columns([1.5, float(T0) + 0.25])
    exact = ts_columns([Decimal(f"{T0}.123"), T0])
    assert exact["ts"].to_pylist() == [float(T0), float(T0)]
    assert exact["ts_frac_ns"].to_pylist() == [123, 0]


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1712195495505583.123", 1712195495505583123),
        ("-5.123", -5123),
        ("0.0005", 0),
        ("0.0015", 2),
        ("1.7121954955055831234e15", 1712195495505583123),
        ("1e400", None),
        ("7", 7000),
    ],
)
def test_exact_ns_rounds_half_to_even_below_a_nanosecond(text: str, ns: int | None) -> None:
    value: Any = int(text) if text.lstrip("-").isdigit() else Decimal(text)
    assert exact_ns(value) == ns


def test_the_bound_is_where_float64_stops_holding_nanoseconds() -> None:
    """Just below 2**43 µs every ns fraction survives float64; just above, some do not."""
    below = [EXACT_FROM_US - 1 + f / 1000 for f in range(1000)]
    assert [int(exact_ns(v) or 0) % 1000 for v in below] == list(range(1000))
    above = [float(Decimal(EXACT_FROM_US) + Decimal(f) / 1000) for f in range(1000)]
    assert any(round((v - int(v)) * 1000) != f for f, v in enumerate(above))


@settings(max_examples=200, deadline=None)
@given(ns=st.integers(-(2**60), 2**60))
def test_every_nanosecond_survives_the_exact_columns(ns: int) -> None:
    text = f"{'-' if ns < 0 else ''}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"
    cols = ts_columns([Decimal(text)])
    assert int(cols["ts"][0].as_py()) * 1000 + cols["ts_frac_ns"][0].as_py() == ns


def test_a_real_trace_in_epoch_microseconds_keeps_every_nanosecond(tmp_path: Path) -> None:
    """The real NCCL trace (µs relative to baseTimeNanoseconds, 3 decimals) rewritten as absolute epoch µs, the
    form of 2023-24 Kineto ns traces: every start and end is the same nanosecond either way."""
    data = gzip.decompress(fixture_path("nccl").read_bytes())
    base = re.search(rb'"baseTimeNanoseconds":\s*(\d+)', data)
    assert base is not None and int(base.group(1)) % 1000 == 0
    base_us = int(base.group(1)) // 1000
    absolute = re.sub(rb'"ts":\s*(\d+)', lambda m: b'"ts": %d' % (int(m.group(1)) + base_us), data)
    path = tmp_path / "absolute.json"
    path.write_bytes(absolute.replace(base.group(0), b'"baseTimeNanoseconds": 0'))
    assert re.search(rb'"ts": 17\d{14}\.\d*[1-9]', path.read_bytes())  # fractions at epoch magnitude
    want, got = import_kineto(fixture_path("nccl")), import_kineto(path)
    for name in ("kernels", "api", "memory", "ranges"):
        cols = ["start_ns", "end_ns"]
        assert getattr(got, name).select(cols).equals(getattr(want, name).select(cols)), name
