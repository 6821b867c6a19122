"""The Kineto importer's caps on hostile files: top-level traceEvents only, deep nesting, huge events, whitespace
and decompression bombs, folders of too many files (issue #20 §4). Each cap is lowered here so the inputs stay small.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import msgspec
import pytest
from property.hostile_corpus import decoy, deep_args, deep_event_list, gzip_stream, kineto_doc, write_json

from ktrace.importers import kineto_decode, kineto_limits, locate
from ktrace.importers.kineto import import_kineto
from ktrace.importers.kineto_json_repair import DeepJSONError, decode_shallow_if_deep
from ktrace.importers.kineto_limits import MAX_DEPTH, TopLevelKey, flatten_deep, squeeze_whitespace
from ktrace.importers.kineto_schema import DecodeReport
from ktrace.model.errors import TraceFormatError


def test_top_level_key_skips_a_decoy_nested_in_metadata() -> None:
    text = b'{"metadata": {"traceEvents": [1], "s": "\\"traceEvents\\": ["}, "traceEvents": [2]}'
    key = TopLevelKey()
    for end in range(1, len(text)):  # fed as the head grows byte by byte, it never settles early
        found = key.find(text[:end])
        if found is not None:
            break
    assert found == text.rindex(b"[2") + 1


def test_a_decoy_traceevents_in_metadata_is_not_imported(tmp_path: Path) -> None:
    trace = import_kineto(decoy(tmp_path, False))
    assert sorted(set(trace.kernels["name"].cast(str).to_list())) == sorted(f"real{i}" for i in range(30))
    assert trace.kernels.height == 30


def test_flatten_deep_replaces_only_what_is_too_deep() -> None:
    data = b'[{"a": [[[1]]], "s": "[[[[["}, 2]'
    assert flatten_deep(data, limit=3) == (b'[{"a": [null], "s": "[[[[["}, 2]', 1)
    assert flatten_deep(data, limit=10) == (data, 0)


@pytest.mark.parametrize("make", [deep_args, deep_event_list])
def test_deep_nesting_is_flattened_not_a_recursion_error(tmp_path: Path, make) -> None:  # type: ignore[no-untyped-def]
    trace = import_kineto(make(tmp_path, False))
    assert any("nested deeper than" in n for n in trace.meta.notes)
    assert trace.kernels.height == (2 if make is deep_args else 0)


def test_whitespace_runs_are_squeezed() -> None:
    block = b'{"a": 1}' + b" " * 10_000 + b"," + b"\n" * 5000 + b"{}" + b" " * 100
    out, n = squeeze_whitespace(block)
    assert out == b'{"a": 1} ,\n{}' + b" " * 100 and n == 2


def test_a_whitespace_bomb_imports_in_bounded_memory(tmp_path: Path) -> None:
    trace = import_kineto(
        gzip_stream(
            tmp_path / "ws.json.gz",
            lambda: iter(
                [
                    b'{"schemaVersion": 1, "traceEvents": [',
                    *[b" " * (1 << 20)] * 64,
                    json.dumps(kineto_doc(["k0"])["traceEvents"])[1:].encode(),
                    b"}",
                ]
            ),
        )
    )
    assert trace.kernels.height == 1
    assert any("whitespace" in n for n in trace.meta.notes)


def test_an_oversized_event_is_skipped_and_the_rest_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_decode, "MAX_EVENT_BYTES", 64 << 10)
    monkeypatch.setattr(kineto_decode, "CHUNK_BYTES", 16 << 10)
    doc = kineto_doc([f"k{i}" for i in range(200)])
    doc["traceEvents"][101]["name"] = "A" * (1 << 20)  # a kernel with a 1 MiB name
    doc["traceEvents"][150]["args"]["blob"] = "},{" * 100_000  # boundaries inside a string: no quadratic retry
    trace = import_kineto(write_json(tmp_path / "big.json", doc))
    assert 197 <= trace.kernels.height <= 199
    assert any("events of more than 0 MiB skipped" in n for n in trace.meta.notes)
    assert trace.meta.health["dropped_events"] >= 1


def test_a_decompression_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_limits, "MIN_BOMB_BYTES", 4 << 20)
    events = json.dumps(kineto_doc([f"k{i}" for i in range(5)])["traceEvents"])[1:-1].encode()
    path = gzip_stream(
        tmp_path / "bomb.json.gz",
        lambda: iter(
            [b'{"schemaVersion": 1, "traceEvents": [', events, *[b", " + events] * 4, b", {}" * (8 << 20), b"]}"]
        ),
    )
    trace = import_kineto(path)
    assert trace.kernels.height == 25
    assert trace.meta.health["truncated_input"] == 1
    assert any("decompression bomb" in n for n in trace.meta.notes)


def test_a_huge_header_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_decode, "MAX_EVENT_BYTES", 1 << 20)
    doc = kineto_doc(["k0"])
    path = write_json(tmp_path / "h.json", {"metadata": {"blob": "B" * (3 << 20)}, **doc})
    with pytest.raises(TraceFormatError, match="before the top-level traceEvents"):
        import_kineto(path)


def test_too_many_rank_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_limits, "MAX_RANK_FILES", 3)
    for r in range(4):
        write_json(tmp_path / f"rank{r}.json", kineto_doc(["k0"]))
    with pytest.raises(TraceFormatError, match="4 .json files, more than the 3 rank files"):
        locate(tmp_path)


def test_rank_files_beside_a_stray_meta_json_open_as_kineto(tmp_path: Path) -> None:
    for r in range(2):
        (tmp_path / f"rank{r}.json.gz").write_bytes(gzip.compress(json.dumps(kineto_doc(["k0", "k1"])).encode()))
    (tmp_path / "meta.json").write_text("{}")
    assert locate(tmp_path) == ("kineto", tmp_path)
    (tmp_path / "node=a").mkdir()
    assert locate(tmp_path)[0] == "ktrace"


def test_huge_ids_and_hosts_import(tmp_path: Path) -> None:
    doc = kineto_doc(["k0", "k1"], host="h" * 300)
    doc["traceEvents"][2]["tid"] = -1e20
    trace = import_kineto(write_json(tmp_path / "t.json", doc))
    assert trace.kernels.height == 2 and trace.meta.hosts == ("h" * 300,)


def test_one_fallback_decodes_json_nested_too_deep() -> None:
    """decode_shallow_if_deep is the one place that turns msgspec's RecursionError into flattened data (noted
    once); invalid deep data raises DeepJSONError, whose offsets are shifted back by `shift` bytes."""
    report = DecodeReport()
    deep = b"[" * 5000 + b"]" * 5000
    value = decode_shallow_if_deep(msgspec.json.decode, deep, report)
    assert json.dumps(value).count("[") == MAX_DEPTH
    decode_shallow_if_deep(msgspec.json.decode, deep, report)
    assert report.notes == [f"values nested deeper than {MAX_DEPTH} levels replaced by null"]
    with pytest.raises(DeepJSONError, match="trailing characters") as caught:
        decode_shallow_if_deep(msgspec.json.decode, deep + b" x", report)
    with pytest.raises(msgspec.DecodeError) as shallow:  # the same fault in data that needs no flattening
        msgspec.json.decode(b"[]" + b" x")
    at = int(re.search(r"byte (\d+)", str(shallow.value)).group(1)) + len(deep) - 2  # type: ignore[union-attr]
    assert f"(byte {at - caught.value.shift})" in str(caught.value)
