"""Fuzz the Kineto importer with 560 corrupted inputs: it returns a Trace or raises TraceFormatError, nothing else.

The full fuzz is marked slow (`pytest -m slow`); the default run tries a fifth of each family's examples.

Seeds are a 60-event cut of the real AlexNet fixture (every category of a 2023 trace) and a PyTorch 1.9
style variant. Corruptions: truncation (plain and gzip), byte edits, gzip-stream damage, and JSON
values of the wrong type put into events and the header; structure-aware mutations (deep nesting, decoy
traceEvents, oversized strings, whitespace runs, non-finite numbers). Slices are made tiny (see small_chunks) so
the splitter's retry and salvage paths run on small inputs.
"""

from __future__ import annotations

import atexit
import copy
import gzip
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_traces import fixture_path

from ktrace.importers import kineto_decode
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_workers import WORKERS_ENV
from ktrace.model.errors import TraceFormatError
from ktrace.model.trace import Trace
from ktrace.testing import assert_trace_equal

ALEXNET = fixture_path("alexnet")


SHARE = [pytest.param(1, id="all", marks=pytest.mark.slow), pytest.param(5, id="fifth")]
"""Which share of each family's examples a run tries: all of them (slow), or a fifth (the default run)."""


def fuzz(examples: int, body: Callable[..., None], **strategies: st.SearchStrategy[Any]) -> None:
    """Run `body` on `examples` drawn examples, whatever the hypothesis profile says; no example database."""
    run = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)(
        given(**strategies)(body)
    )
    run()


def _seed_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(ALEXNET.read_bytes()))
    events = doc["traceEvents"]
    keep = [
        e
        for e in events
        if e.get("cat")
        in ("kernel", "cuda_runtime", "gpu_memcpy", "gpu_memset", "cuda_sync", "user_annotation", "ac2g")
    ][:50]
    doc["traceEvents"] = keep + [e for e in events if e.get("ph") == "M"][:10]
    doc["baseTimeNanoseconds"] = 0
    doc["INFO"] = ["Record counts: Out-of-range = 3, Blocklisted runtime = 2"]
    return doc


SEED_DOC = _seed_doc()
SEED = json.dumps(SEED_DOC, indent=1).encode()
OLD_ERA = json.dumps(
    {
        "schemaVersion": 1,
        "traceEvents": [
            {
                **e,
                "cat": {"kernel": "Kernel", "cuda_runtime": "Runtime"}.get(e.get("cat", ""), e.get("cat")),
                "tid": f"stream {e['tid']}" if e.get("pid") == 0 else str(e.get("tid")),
            }
            for e in SEED_DOC["traceEvents"]
        ],
    }
).encode()
TMP = Path(tempfile.mkdtemp(prefix="ktrace-fuzz-"))
atexit.register(shutil.rmtree, TMP, True)
(TMP / "seed.json").write_bytes(SEED)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@contextmanager
def small_chunks(size: int = 4096) -> Iterator[None]:
    old = kineto_decode.CHUNK_BYTES
    kineto_decode.CHUNK_BYTES = size
    try:
        yield
    finally:
        kineto_decode.CHUNK_BYTES = old


def _survives(data: bytes, name: str = "fuzz.json") -> None:
    """Import `data`; anything but a Trace or a one-line TraceFormatError fails the test."""
    path = TMP / name
    path.write_bytes(data)
    with small_chunks():
        try:
            trace = import_kineto(path)
        except TraceFormatError as exc:
            assert str(exc) and "\n" not in str(exc)
            return
    assert isinstance(trace, Trace)
    trace.validate()
    trace.meta.to_json()


@pytest.mark.parametrize("share", SHARE)
def test_truncated(share: int) -> None:
    fuzz(100 // share, _truncated, seed=st.sampled_from([SEED, OLD_ERA]), cut=st.floats(0, 1), zipped=st.booleans())


def _truncated(seed: bytes, cut: float, zipped: bool) -> None:
    data = seed[: int(len(seed) * cut)]
    if zipped:
        _survives(gzip.compress(data, mtime=0)[: max(2, int(len(data) * cut))], "fuzz.json.gz")
    else:
        _survives(data)


@pytest.mark.parametrize("share", SHARE)
def test_byte_edits(share: int) -> None:
    fuzz(
        150 // share,
        _byte_edits,
        seed=st.sampled_from([SEED, OLD_ERA]),
        edits=st.lists(
            st.tuples(
                st.floats(0, 1), st.sampled_from(["flip", "insert", "delete"]), st.binary(min_size=1, max_size=3)
            ),
            min_size=1,
            max_size=8,
        ),
    )


def _byte_edits(seed: bytes, edits: list[tuple[float, str, bytes]]) -> None:
    data = bytearray(seed)
    for where, op, junk in edits:
        i = int(where * (len(data) - 1))
        if op == "flip":
            data[i] ^= junk[0] or 1
        elif op == "insert":
            data[i:i] = junk
        else:
            del data[i : i + len(junk)]
    _survives(bytes(data))


@pytest.mark.parametrize("share", SHARE)
def test_gzip_stream_damage(share: int) -> None:
    fuzz(100 // share, _gzip_stream_damage, where=st.floats(0, 1), junk=st.binary(min_size=1, max_size=16))


def _gzip_stream_damage(where: float, junk: bytes) -> None:
    data = bytearray(gzip.compress(SEED, mtime=0))
    i = 10 + int(where * (len(data) - 11))
    data[i : i + len(junk)] = junk
    _survives(bytes(data), "fuzz.json.gz")


@pytest.mark.parametrize("share", SHARE)
def test_wrong_types(share: int) -> None:
    fuzz(
        150 // share,
        _wrong_types,
        index=st.integers(0, len(SEED_DOC["traceEvents"]) - 1),
        key=st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"]),
        arg=st.sampled_from(
            [
                "correlation",
                "External id",
                "device",
                "stream",
                "bytes",
                "grid",
                "cuda_sync_kind",
                "registers per thread",
                "name",
            ]
        ),
        value=json_values,
        header_key=st.sampled_from(
            [
                "schemaVersion",
                "baseTimeNanoseconds",
                "distributedInfo",
                "deviceProperties",
                "INFO",
                "metadata",
                "traceName",
            ]
        ),
        header_value=json_values,
    )


def _wrong_types(index: int, key: str, arg: str, value: Any, header_key: str, header_value: Any) -> None:
    doc = json.loads(SEED)
    event = doc["traceEvents"][index]
    event[key] = value
    if isinstance(event.get("args"), dict):
        event["args"][arg] = copy.deepcopy(value)
    doc[header_key] = header_value
    _survives(json.dumps(doc).encode())


def _nested(depth: int, leaf: str = "1") -> str:
    return (
        "".join('{"a": [' if i % 2 else "[" for i in range(depth))
        + leaf
        + "".join("]}" if i % 2 else "]" for i in reversed(range(depth)))
    )


def _structural(doc_text: str, kind: str, where: float, size: int) -> bytes:
    """One structure-aware mutation of the seed's text (hostile files seen in issue #20)."""
    events = json.loads(doc_text)["traceEvents"]
    i = int(where * (len(events) - 1))
    anchor = json.dumps(events[i])[:-1]  # the event's text without its closing brace
    compact = json.dumps(json.loads(doc_text))
    if kind == "nest_args":  # deep nesting inside one event's args (msgspec recursion)
        return compact.replace(anchor, anchor + ', "deep": ' + _nested(size), 1).encode()
    if kind == "nest_event":  # an event that is itself a deep array
        return compact.replace(anchor + "}", _nested(size) + ", " + anchor + "}", 1).encode()
    if kind == "decoy":  # a traceEvents key nested before the real one
        decoy = '{"metadata": {"traceEvents": [' + json.dumps(events[i]) + "]}, "
        return (decoy + compact[1:]).encode()
    if kind == "huge_string":  # a name longer than the (lowered) event cap
        return compact.replace(anchor, anchor + ', "blob": "' + "A},{" * size + '"', 1).encode()
    if kind == "whitespace":
        return compact.replace(anchor, anchor + " " * (size * 64) + "\n" * (size * 64), 1).encode()
    number = ("1e999", "-1e999", "NaN", "Infinity", "1e308", "-0")[size % 6]  # not all valid JSON: damage too
    return re.sub(
        r'("(?:ts|dur|pid|tid)": )[-0-9.e]+', lambda m: m.group(1) + number, compact, count=size % 7 + 1
    ).encode()


@pytest.mark.parametrize("share", SHARE)
def test_structure_aware(share: int) -> None:
    fuzz(
        60 // share,
        _structure_aware,
        kind=st.sampled_from(["nest_args", "nest_event", "decoy", "huge_string", "whitespace", "non_finite"]),
        where=st.floats(0, 1),
        size=st.integers(1, 1500),
        zipped=st.booleans(),
    )


def _structure_aware(kind: str, where: float, size: int, zipped: bool) -> None:
    data = _structural(SEED.decode(), kind, where, size)
    old = kineto_decode.MAX_EVENT_BYTES
    kineto_decode.MAX_EVENT_BYTES = 2048  # with 4 KB slices: events over 2 KB are skipped
    try:
        if zipped:
            _survives(gzip.compress(data, mtime=0), "fuzz.json.gz")
        else:
            _survives(data)
    finally:
        kineto_decode.MAX_EVENT_BYTES = old
    if kind == "decoy":  # the decoy never replaces the real events
        path = TMP / "decoy.json"
        path.write_bytes(data)
        assert import_kineto(path).counts() == import_kineto(TMP / "seed.json").counts()


@pytest.mark.parametrize("share", SHARE)
def test_workers_read_damage_alike(share: int) -> None:
    """Decode workers (importers/kineto_workers) on damaged and hostile inputs: the same trace, or the same error,
    as the main process alone."""
    fuzz(
        100 // share,
        _workers_alike,
        seed=st.sampled_from([SEED, OLD_ERA]),
        edits=st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=4)), max_size=4),
        kind=st.sampled_from(["none", "nest_args", "huge_string", "whitespace", "non_finite"]),
        where=st.floats(0, 1),
        zipped=st.booleans(),
    )


def test_damaged_keys_after_the_events_are_read_alike_and_keep_the_header() -> None:
    """hypothesis's example (2026-11-27): the file's closing brace and a byte of an early event made NUL, a long
    whitespace run before the end. One process took the damaged keys after traceEvents for a damaged header and
    dropped the metadata (no devices); the workers, holding the damaged event when the file ended, took the file
    for truncated and dropped its last event too. Both now keep the header and every whole event."""
    edits = [(1.0, b"\x00"), (0.125, b"\x00")]
    _workers_alike(SEED, edits, "whitespace", 1.0, False)
    trace = _import_or_error(TMP / "workers.json", "0")
    assert isinstance(trace, Trace) and trace.devices.height == 1
    assert any("keys after traceEvents are damaged" in n for n in trace.meta.notes), trace.meta.notes
    assert trace.meta.health["dropped_events"] == 1


def test_a_damaged_closing_brace_is_read_alike() -> None:
    """hypothesis's second example (2026-11-27): the file ends `}]` and a NUL for its closing brace, with no keys
    after traceEvents, and an event made NUL at 3/4: the workers took the file for truncated (2 events dropped
    against 1)."""
    _workers_alike(OLD_ERA, [(1.0, b"\x00"), (0.75, b"\x00")], "none", 0.0, False)


@pytest.mark.parametrize("where", [0.75, 0.875])
def test_a_damaged_end_of_traceevents_after_nested_args_is_read_alike(where: float) -> None:
    """hypothesis's third example (2026-11-27): the `]` closing traceEvents made NUL, a damaged deeply nested event
    at 3/4 still buffered by the workers' reader: it stopped at the damaged event looking for the end of
    traceEvents (truncated, against one process's damaged keys), and then took a nested `}]]` for that end."""
    _workers_alike(OLD_ERA, [(0.75, b"\x00"), (0.99999, b"\x00")], "nest_args", where, False)


def _workers_alike(seed: bytes, edits: list[tuple[float, bytes]], kind: str, where: float, zipped: bool) -> None:
    data = bytearray(seed if kind == "none" else _structural(seed.decode(), kind, where, 600))
    for at, junk in edits:
        i = int(at * (len(data) - 1))
        data[i : i + len(junk)] = junk
    path = TMP / ("workers.json.gz" if zipped else "workers.json")
    path.write_bytes(gzip.compress(bytes(data), mtime=0) if zipped else bytes(data))
    parallel, alone = (_import_or_error(path, workers) for workers in ("2", "0"))
    if isinstance(alone, str):
        assert parallel == alone
    else:
        assert isinstance(parallel, Trace)
        assert_trace_equal(parallel, alone)


def _import_or_error(path: Path, workers: str) -> Trace | str:
    old = os.environ.get(WORKERS_ENV)
    os.environ[WORKERS_ENV] = workers
    try:
        with small_chunks(1024):
            return import_kineto(path)
    except TraceFormatError as exc:
        return str(exc)
    finally:
        if old is None:
            del os.environ[WORKERS_ENV]
        else:
            os.environ[WORKERS_ENV] = old
