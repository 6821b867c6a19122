"""Operators' input shapes (Kineto `args["Input Dims"]`, written when the profiler ran with record_shapes=True)
as one dictionary-encoded string column, ops.input_dims.

The fast path keeps each operator's `Input Dims` as the raw JSON text (msgspec.Raw: skipped, not parsed into
lists); the texts of a slice become one Arrow binary array (their bytes joined, offsets from their lengths),
dictionary-encoded, and only the distinct values are normalized (whitespace dropped, then ", " between items: a
pretty-printed trace and a compact one give the same text, e.g. "[[8, 3, 224, 224], [64, 3, 7, 7], []]").
Absent or JSON null -> null.

The same path keeps `Input type` (ops.input_types, '["float", "c10::BFloat16", "Int"]') and `Concrete Inputs`
(ops.concrete_inputs, the non-tensor arguments' values as texts, '["", "", "[1, 1]", "False"]'; torch >= 2.1),
normalized by normalize_json (re-encoded compactly: type names keep their inner spaces, "long int").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ktrace.model.secrets import scrub_text

_SPACE = re.compile(r"\s+")


def _text(value: Any) -> bytes | msgspec.Raw:
    """The JSON text of one Input Dims value: raw from the fast path, re-encoded from the slow path's lists."""
    if type(value) is msgspec.Raw:
        return value
    try:
        return msgspec.json.encode(value)
    except (TypeError, ValueError, OverflowError):  # not JSON-encodable (cannot come from a JSON trace): absent
        return b"null"


def normalize_dims(text: str) -> str | None:
    """One Input Dims JSON text in the column's form (no whitespace, ", " between items); None for null. Secrets
    are scrubbed first: dropping the spaces would hide `password hunter2` or `curl -u u:pw` from the scrubber."""
    compact = _SPACE.sub("", scrub_text(text)[0])
    return None if compact in ("null", "") else compact.replace(",", ", ")


def normalize_json(text: str) -> str | None:
    """One JSON list's text (Input type, Concrete Inputs) re-encoded with ", " between items, secrets scrubbed
    first; None for null, for anything but a list, or for text that is not JSON."""
    try:
        value = msgspec.json.decode(scrub_text(text)[0])
    except msgspec.DecodeError:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else None


def shapes_array(values: Sequence[Any], normalize: Callable[[str], str | None] = normalize_dims) -> pa.Array:
    """ops.input_dims of a slice of operators: the normalized Input Dims text, dictionary-encoded; null where
    an operator has none. With normalize_json: ops.input_types or ops.concrete_inputs."""
    if not values:
        return pa.array([], pa.string()).dictionary_encode()
    parts = [v if type(v) is msgspec.Raw else _text(v) for v in values]
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, count=len(parts)), out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(parts))]
    encoded = pa.Array.from_buffers(pa.large_binary(), len(parts), buffers).dictionary_encode()
    code_of: dict[str, int] = {}
    codes = [  # distinct raw text -> code of its normalized text (two raw forms of one shape share it); -1: null
        -1 if (d := normalize(t)) is None else code_of.setdefault(d, len(code_of))
        for t in (b.decode("utf-8", "replace") for b in encoded.dictionary.to_pylist())
    ]  # (raw text is not checked for UTF-8 on the fast path: a bad byte becomes U+FFFD, as elsewhere in the trace)
    indices = np.array(codes, np.int32)[encoded.indices.to_numpy(zero_copy_only=False)]
    return pa.DictionaryArray.from_arrays(pa.array(indices, mask=indices < 0), pa.array(list(code_of), pa.string()))
