"""The export loaded by the real trace_processor: no error stats, and the same slice/flow/counter counts.

trace_processor_shell is not installable offline (perfetto.md §3.1): set KTRACE_TRACE_PROCESSOR to its path to run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reference.perfetto_validate import validate_perfetto

from ktrace.exporters.perfetto import export_perfetto
from ktrace.testing import SyntheticConfig, generate

BINARY = os.environ.get("KTRACE_TRACE_PROCESSOR", "")

pytestmark = pytest.mark.skipif(
    not BINARY or not Path(BINARY).is_file(),
    reason="set KTRACE_TRACE_PROCESSOR to a trace_processor_shell binary to check exports with the real importer",
)


def test_trace_processor_imports_the_export_without_errors(tmp_path: Path) -> None:
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    trace = generate(SyntheticConfig(steps=3, kernels_per_step=30, ranks=2, nodes=2, seed=5))
    path = tmp_path / "t.pftrace"
    export_perfetto(
        trace, path, findings=[{"rule": "R", "severity": "info", "message": "m", "start_ns": trace.span_ns()[0]}]
    )  # type: ignore[index]
    report = validate_perfetto(path)
    tp = TraceProcessor(trace=str(path), config=TraceProcessorConfig(bin_path=BINARY))
    try:
        errors = [
            (r.name, r.idx, r.value)
            for r in tp.query(
                "select name, idx, value from stats where severity in ('error', 'data_loss') and value > 0"
            )
        ]
        assert errors == []
        slices, flows, counters = (
            next(iter(tp.query(f"select count(*) as n from {table}"))).n for table in ("slice", "flow", "counter")
        )
    finally:
        tp.close()
    assert slices == len(report.slices) + report.instants
    assert flows == report.arrows
    assert counters == report.counters
