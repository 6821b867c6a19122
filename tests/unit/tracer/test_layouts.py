"""CUPTI record layouts: every field checked against cupti-python's own numpy dtypes; the release table."""

from __future__ import annotations

import pytest
from cupti_support import HAVE_CUPTI

from ktrace.tracer.layouts import FIELDS, RELEASES, SIZES, STRUCTS, layout_for, record_dtype, release_of
from ktrace.tracer.records import ACTIVITY_KIND, FIELDS_BY_KIND


def _cupti_dtype_name(struct: str) -> str:
    snake = (
        struct.lower()
        .replace("memcpyptop", "memcpy_pto_p")
        .replace("externalcorrelation", "external_correlation")
        .replace("markerdata", "marker_data")
    )
    return f"activity_{snake}_dtype"


@pytest.mark.skipif(not HAVE_CUPTI, reason="cupti-python not installed: its record dtypes are not available")
@pytest.mark.parametrize("struct", sorted(STRUCTS))
def test_every_field_sits_where_cupti_python_puts_it(struct: str) -> None:
    from cupti import cupti

    reference = getattr(cupti, _cupti_dtype_name(struct), None)
    if reference is None:
        assert struct == "Context2", f"cupti-python 13.4 has no dtype for {struct}"
        pytest.skip("cupti-python 13.4 declares no Context2 (CUPTI 12.4's context record)")
    mine = record_dtype(struct)
    assert mine.itemsize == reference.itemsize
    for name in mine.names or ():
        dtype, offset = reference, 0
        for part in name.split("."):
            dtype, at = dtype.fields[part][:2]
            offset += at
        field, at = (mine.fields or {})[name][:2]
        assert (at, field.itemsize) == (offset, dtype.itemsize), name
        if name not in ("name", "domain"):  # C strings: cupti-python says i8, the fast path reads an address
            assert field.kind == dtype.kind, name


def test_layouts_read_every_field_the_tracer_copies() -> None:
    for kind, names in FIELDS_BY_KIND.items():
        assert {f[0] for f in FIELDS[kind]} == set(names), kind


def test_release_numbers() -> None:
    assert release_of(130401) == (13, 4) and release_of(130500) == (13, 5) and release_of(28) == (12, 9)
    assert release_of(22) == (12, 4) and release_of(23) is None
    assert layout_for(130600, ACTIVITY_KIND) is None  # a release nobody has described: the slow path
    assert layout_for(140000, ACTIVITY_KIND) is None


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_release_sizes_records_by_its_structs(release: tuple[int, int]) -> None:
    api = (
        release[0] * 10000 + release[1] * 100
        if release[0] >= 13
        else {(12, 4): 22, (12, 6): 24, (12, 8): 26, (12, 9): 28}[release]
    )
    layout = layout_for(api, ACTIVITY_KIND)
    assert layout is not None and layout.release == release
    for kind, struct in layout.struct_of.items():
        assert layout.sizes[kind] == SIZES[struct] == layout.dtypes[kind].itemsize
        assert SIZES[struct] % 8 == 0  # CUPTI_PACKED_ALIGNMENT: every record starts 8-byte aligned
    # What libcupti 12.x's own walker stepped by, without a GPU (layouts.py docstring):
    if release == (12, 9):
        probed = {
            1: 96,
            2: 88,
            4: 40,
            5: 40,
            8: 184,
            9: 32,
            10: 208,
            11: 32,
            12: 56,
            13: 32,
            17: 56,
            22: 96,
            37: 24,
            38: 56,
            39: 24,
        }
        assert {k: int(layout.sizes[k]) for k in probed} == probed


def _libcuptis() -> list[str]:
    import glob

    return sorted(
        {
            p
            for pattern in ("/usr/local/cuda*/lib*/libcupti.so.*", "/usr/lib/x86_64-linux-gnu/libcupti.so.*")
            for p in glob.glob(pattern)
            if p.rsplit(".so.", 1)[1].isdigit()
        }
    )


@pytest.mark.parametrize(
    "library",
    _libcuptis()
    or [
        pytest.param(
            "",
            marks=pytest.mark.skip(
                reason="no libcupti on this machine: its own walker cannot be asked for record sizes"
            ),
        )
    ],
)
def test_libcuptis_own_walker_steps_by_the_layout_sizes(library: str) -> None:
    """A real libcupti (one that starts without a driver) walks a synthetic buffer: every kind's step is
    the size the layout of that libcupti's release gives."""
    import ctypes

    import numpy as np

    lib = ctypes.CDLL(library)
    version = ctypes.c_uint32(0)
    if lib.cuptiGetVersion(ctypes.byref(version)) != 0:
        pytest.skip(f"{library} does not start without a GPU driver")
    layout = layout_for(version.value, ACTIVITY_KIND)
    assert layout is not None, f"CUPTI API version {version.value} of {library} has no layout"
    step = lib.cuptiActivityGetNextRecord
    step.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    words = np.zeros(1024, np.uint32)
    for kind, size in ((k, int(layout.sizes[k])) for k in layout.struct_of):
        words[::2] = ACTIVITY_KIND["EXTERNAL_CORRELATION"]  # whatever follows the record is a valid record
        words[0] = kind
        record = ctypes.c_void_p(None)
        assert step(words.ctypes.data, words.nbytes, ctypes.byref(record)) == 0
        assert step(words.ctypes.data, words.nbytes, ctypes.byref(record)) == 0
        assert record.value - words.ctypes.data == size, (layout.name_of[kind], layout.struct_of[kind])
