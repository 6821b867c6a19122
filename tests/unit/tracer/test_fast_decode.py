"""The fast decoder against cupti-python's own record classes, on buffers built byte for byte in CUPTI's layout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from cupti_support import HAVE_CUPTI
from hypothesis import given, settings
from hypothesis import strategies as st

from ktrace.tracer.columns import RecordDecoder, generic_api_name
from ktrace.tracer.fast_decode import FastDecoder, by_name
from ktrace.tracer.layouts import RELEASES, Layout, layout_for
from ktrace.tracer.records import ACTIVITY_KIND, FIELDS_BY_KIND, RecordExtractor
from ktrace.tracer.synthetic_buffers import SyntheticBuffer, build, random_buffer

needs_cupti = pytest.mark.skipif(not HAVE_CUPTI, reason="cupti-python not installed: its record classes are absent")
ALL_KINDS = {k: 1.0 for k in FIELDS_BY_KIND}
API = {(12, 4): 22, (12, 6): 24, (12, 8): 26, (12, 9): 28}


def layout(release: tuple[int, int]) -> Layout:
    found = layout_for(API.get(release, release[0] * 10000 + release[1] * 100), ACTIVITY_KIND)
    assert found is not None
    return found


def reference(buf: SyntheticBuffer, lay: Layout) -> dict[str, list[tuple[Any, ...]]]:
    """Today's path: cupti-python's record objects over the same bytes, copied out by RecordExtractor. For
    CUPTI 13.4+ through cupti-python's own kind -> class dispatch (parseActivityStruct, what its callback
    does); for older releases through the class the release's header names."""
    from cupti import cupti

    from ktrace.tracer.fast_path import cupti_python_parser

    parse = cupti_python_parser()
    assert parse is not None
    records = []
    for kind, at in zip(buf.kinds.tolist(), buf.offsets.tolist(), strict=True):
        if lay.release >= (13, 4):
            records.append(parse(buf.address, buf.valid, buf.address + at))
        else:
            cls = getattr(cupti, f"Activity{lay.struct_of[kind]}")
            records.append(cls.from_ptr(buf.address + at, readonly=True, owner=buf.data))
    rows: dict[int, list[tuple[Any, ...]]] = {}
    extractor = RecordExtractor()
    assert extractor.extract(records, rows) == 0
    return extractor.by_name(rows)


def masked(rows: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Random u64 bytes past int64: both paths keep the low 63 bits once in the tables; columns already do."""
    big = 0x7FFF_FFFF_FFFF_FFFF
    return {k: [tuple(x & big if isinstance(x, int) and x > big else x for x in r) for r in v] for k, v in rows.items()}


def fast(buf: SyntheticBuffer, lay: Layout) -> dict[str, Any]:
    return by_name([FastDecoder(lay).decode(buf.data, buf.valid)], lay)


def mix_for(release: tuple[int, int]) -> dict[str, float]:
    # cupti-python 13.4 has no class for CUPTI 12.4's Context2: its context records are left out there
    return {k: v for k, v in ALL_KINDS.items() if not (release == (12, 4) and k == "CONTEXT")}


@needs_cupti
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_kind_equals_cupti_pythons_classes(release: tuple[int, int]) -> None:
    lay = layout(release)
    buf = random_buffer(3000, lay, ACTIVITY_KIND, mix=mix_for(release), seed=release[1], names=17)
    want, got = reference(buf, lay), fast(buf, lay)
    assert set(got) == set(want)
    for kind, rows in want.items():
        assert got[kind].rows() == rows, kind


@needs_cupti
def test_odd_mixes_and_a_buffer_with_garbage_past_its_valid_size() -> None:
    lay = layout((13, 4))
    kernel = {"name": "void at::elementwise<float>(int)", "start": 5, "end": 9, "correlation_id": 1, "queued": 0}
    records = [
        ("MARKER", {"name": "step", "domain": "", "flags_": 2, "id": 7}),
        ("CONCURRENT_KERNEL", kernel),
        ("CONCURRENT_KERNEL", kernel),
        ("KERNEL", {"name": ""}),
        ("DEVICE", {"name": "H100"}),
        ("OVERHEAD", {}),
        ("MARKER", {"name": "", "domain": "", "flags_": 4, "id": 7}),
        ("NAME", {"name": "t"}),
    ]
    buf = build(records, lay, ACTIVITY_KIND, seed=3, spare=4096)
    got = fast(buf, lay)
    assert masked(reference(buf, lay)) == {k: v.rows() for k, v in got.items()}
    assert [r[6] for r in got["CONCURRENT_KERNEL"].rows()] == [kernel["name"]] * 2 + [""]
    one = build(records[:1], lay, ACTIVITY_KIND, spare=300)
    assert len(fast(one, lay)["MARKER"]) == 1


@needs_cupti
@settings(max_examples=40, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(sorted(FIELDS_BY_KIND)), min_size=0, max_size=40),
    release=st.sampled_from(sorted(RELEASES)),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_record_sequences_decode_like_cupti_python(
    kinds: list[str], release: tuple[int, int], seed: int
) -> None:
    lay = layout(release)
    kinds = [k for k in kinds if k in mix_for(release)]
    rng = np.random.default_rng(seed)
    records = [(k, {f: str(rng.integers(0, 3)) for f in ("name", "domain") if f in FIELDS_BY_KIND[k]}) for k in kinds]
    buf = build(records, lay, ACTIVITY_KIND, seed=seed, spare=int(rng.integers(0, 64)) * 8)
    got = fast(buf, lay)
    assert {k: v.rows() for k, v in got.items()} == masked(reference(buf, lay))


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(
        st.tuples(st.integers(1, 2**62), st.integers(0, 2**32 - 1), st.integers(-(2**31), 2**31 - 1)), max_size=30
    )
)
def test_fields_read_back_what_was_written(values: list[tuple[int, int, int]]) -> None:
    lay = layout((13, 5))
    records = [
        ("CONCURRENT_KERNEL", {"start": s, "end": s, "correlation_id": c, "grid_x": g, "name": f"k{c % 3}"})
        for s, c, g in values
    ] + [("RUNTIME", {"start": s, "cbid": c}) for s, c, _ in values]
    buf = build(records, lay, ACTIVITY_KIND)
    got = fast(buf, lay)
    if not values:
        assert got == {}
        return
    k = got["CONCURRENT_KERNEL"].cols
    assert k[0].tolist() == [s for s, _, _ in values] and k[5].tolist() == [c for _, c, _ in values]
    assert k[7].tolist() == [g for _, _, g in values] and k[6].to_pylist() == [f"k{c % 3}" for _, c, _ in values]
    assert got["RUNTIME"].cols[5].tolist() == [c for _, c, _ in values]


def test_tables_equal_through_the_decoder_including_u64_past_int64() -> None:
    """Columns and tuples give the same Arrow tables (schema, values, dictionary order)."""
    lay = layout((13, 4))
    buf = random_buffer(2000, lay, ACTIVITY_KIND, mix=ALL_KINDS, seed=9, names=5)
    buf.data[buf.offsets[0] + 8 : buf.offsets[0] + 16] = 0xFF  # a u64 field of the first record: 2**64 - 1
    decoded = fast(buf, lay)
    tuples = {k: v.rows() for k, v in decoded.items()}
    a, ha = RecordDecoder(generic_api_name, pid=1).decode(decoded)
    b, hb = RecordDecoder(generic_api_name, pid=1).decode(tuples)
    assert set(a) == set(b) and ha == hb and {"kernels", "api", "memory", "syncs"} <= set(a)
    for name in a:
        assert a[name].schema == b[name].schema and a[name].equals(b[name]), name


def test_an_unknown_kind_is_stepped_over_by_libcuptis_walker() -> None:
    lay = layout((13, 4))
    buf = build([("RUNTIME", {"cbid": 1}), ("MEMSET", {}), ("RUNTIME", {"cbid": 2})], lay, ACTIVITY_KIND)
    buf.data[40:44] = np.frombuffer(np.uint32(77).tobytes(), np.uint8)  # kind 77: no layout here
    alone = FastDecoder(lay)
    assert len(alone.decode(buf.data, buf.valid)[ACTIVITY_KIND["RUNTIME"]]) == 1
    assert alone.health == {"unknown_kind_records": 1, "undecoded_bytes": buf.valid - 40}
    stepped = FastDecoder(lay, step_over=lambda address, valid, at: at + 104)  # libcupti knows kind 77's size
    cols = stepped.decode(buf.data, buf.valid)[ACTIVITY_KIND["RUNTIME"]]
    assert cols.cols[5].tolist() == [1, 2] and stepped.health == {"unknown_kind_records": 1}


def test_empty_buffer() -> None:
    lay = layout((13, 4))
    assert FastDecoder(lay).decode(np.zeros(64, np.uint8), 0) == {}
    assert pa.__version__  # pyarrow is what the tables are made of
