"""Operators' input shapes (Kineto args["Input Dims"], record_shapes=True) imported as ops.input_dims."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pytest

import ktrace
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_shapes import normalize_dims, shapes_array
from ktrace.model import store
from ktrace.model.trace import frame_from_columns


def _op(name: str, ts: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": 5, "args": args}


def _write(tmp_path: Path, events: list[dict[str, Any]], indent: int | None) -> Path:
    doc = {"schemaVersion": 1, "traceEvents": events}
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc, indent=indent).encode()))
    return path


@pytest.mark.parametrize("slow_path", [False, True])
@pytest.mark.parametrize("indent", [None, 2])
def test_input_dims_are_one_normalized_text_per_shape_and_null_without(
    tmp_path: Path, slow_path: bool, indent: int | None
) -> None:
    odd = [{"ph": "X", "cat": "some_future_category", "name": "x", "pid": 1, "tid": 2, "ts": 1, "dur": 1}]
    events = [
        _op("aten::conv2d", 10, **{"Input Dims": [[8, 3, 224, 224], [64, 3, 7, 7], []], "Input type": ["float"]}),
        _op("aten::conv2d", 20, **{"Input Dims": [[8, 3, 224, 224], [64, 3, 7, 7], []]}),
        _op("aten::relu", 30, **{"Input Dims": [[8, 64, 112, 112]]}),
        _op("aten::empty", 40, **{"External id": 3}),  # no shapes recorded
        _op("aten::zeros", 50, **{"Input Dims": None}),
        *(odd if slow_path else []),  # a category without a tagged type: the slice decodes as list[Event]
    ]
    ops = import_kineto(_write(tmp_path, events, indent)).ops.sort("start_ns")
    assert ops["input_dims"].cast(pl.String).to_list() == [
        "[[8, 3, 224, 224], [64, 3, 7, 7], []]",
        "[[8, 3, 224, 224], [64, 3, 7, 7], []]",
        "[[8, 64, 112, 112]]",
        None,
        None,
    ]
    assert ops["input_dims"].dtype == pl.Categorical


def test_invalid_utf8_in_input_dims_is_replaced_not_a_traceback(tmp_path: Path) -> None:
    """The fast path keeps Input Dims as raw bytes, unchecked: a bad byte there made Arrow's cast raise (found in
    review: `ktrace summary` printed a traceback)."""
    text = json.dumps({"schemaVersion": 1, "traceEvents": [_op("aten::mm", 10, **{"Input Dims": [[1, 2], "aXb"]})]})
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode().replace(b"aXb", b"a\xffb"))
    ops = import_kineto(path).ops
    assert ops["input_dims"].cast(pl.String).to_list() == ['[[1, 2], "a\ufffdb"]']


def test_shapes_array_shares_one_code_per_shape_whatever_the_spacing() -> None:
    raw = [msgspec.Raw(b"[[1,2],\n  []]"), msgspec.Raw(b"null"), [[1, 2], []], None, msgspec.Raw(b"[[3]]")]
    out = shapes_array(raw)
    assert out.to_pylist() == ["[[1, 2], []]", None, "[[1, 2], []]", None, "[[3]]"]
    assert out.dictionary.to_pylist() == ["[[1, 2], []]", "[[3]]"]
    assert shapes_array([]).to_pylist() == []
    assert normalize_dims(" null ") is None


def test_real_trace_with_record_shapes(real_trace_path) -> None:  # type: ignore[no-untyped-def]
    ops = ktrace.open(real_trace_path("resnet50")).ops
    dims = ops.filter(pl.col("name").cast(pl.String) == "aten::cudnn_convolution")["input_dims"].cast(pl.String)
    assert dims.null_count() == 0
    assert "[[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]" in dims.to_list()  # the stem conv
    frames = ktrace.open(real_trace_path("tracelens")).ops.filter(pl.col("category") == "python_function")
    assert frames["input_dims"].null_count() == frames.height  # Python frames carry no shapes


def test_shapes_survive_the_store_and_older_stores_read_null(tmp_path: Path, real_trace_path) -> None:  # type: ignore[no-untyped-def]
    trace = ktrace.open(real_trace_path("resnet50"))
    store.write(trace, tmp_path / "run.ktrace")
    back = store.read(tmp_path / "run.ktrace")
    assert back.ops["input_dims"].cast(pl.String).to_list() == trace.ops["input_dims"].cast(pl.String).to_list()
    older = trace.ops.drop("input_dims").to_arrow()  # a store written before the column
    assert frame_from_columns(older, "ops")["input_dims"].null_count() == trace.ops.height
