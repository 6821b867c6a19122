"""A Kineto file cut short keeps every event that is whole: cut right after a comma, its last event is whole
(it was dropped: "1 unreadable event(s) dropped"); cut inside an event, that one event is dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktrace.importers.kineto import import_kineto


def _events(n: int) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for i in range(n):
        launch = {"correlation": 100 + i, "cbid": 211}
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2})
        events[-1].update(ts=1000 + 100 * i, dur=2, args=launch)
        kernel = {"correlation": 100 + i, "device": 0, "stream": 7}
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1005 + 100 * i})
        events[-1].update(dur=4, args=kernel)
    return events


@pytest.mark.parametrize("cut", [",", ", ", ",\n  ", " ,"])
def test_a_file_cut_after_a_comma_keeps_its_last_event(tmp_path: Path, cut: str) -> None:
    text = json.dumps({"schemaVersion": 1, "traceEvents": _events(5)})
    path = tmp_path / "cut.json"
    path.write_text(text[: text.rindex("]")] + cut)
    trace = import_kineto(path)
    assert (trace.kernels.height, trace.api.height) == (5, 5)
    assert trace.meta.health["dropped_events"] == 0
    assert any("ends inside traceEvents" in note for note in trace.meta.notes)


def test_a_file_cut_inside_an_event_drops_that_event_only(tmp_path: Path) -> None:
    text = json.dumps({"schemaVersion": 1, "traceEvents": _events(5)})
    path = tmp_path / "cut.json"
    last = text.rindex("{")
    path.write_text(text[: text.index(",", last) + 1])  # inside the last event, after one of its commas
    trace = import_kineto(path)
    assert (trace.kernels.height, trace.api.height) == (4, 5)
    assert trace.meta.health["dropped_events"] == 1
