"""ktrace's own buffer callbacks, called by a C thread (a compiled libcupti stand-in), the queue, the decoder
thread, the self-check and the fallback to cupti-python's decoding."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cupti_support import HAVE_CUPTI

from ktrace.tracer.columns import RecordDecoder, generic_api_name
from ktrace.tracer.fast_path import FastPath, cupti_python_parser, first_difference
from ktrace.tracer.layouts import Layout, layout_for
from ktrace.tracer.records import ACTIVITY_KIND, Columns
from ktrace.tracer.synthetic_buffers import SyntheticBuffer, build, random_buffer

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """libcupti's entry points as a real shared library whose flush delivers buffers from a pthread."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler: the callbacks cannot be driven from a non-Python thread here")
    out = tmp_path_factory.mktemp("standin") / "libcupti_standin.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-pthread", str(HERE / "cupti_standin.c"), "-o", str(out)], check=True
    )
    return ctypes.CDLL(str(out))


def parser() -> Any:
    """cupti-python's record parser; without cupti-python, records viewed through the layout's own dtypes
    (the decoding itself is compared with cupti-python's classes in test_fast_decode.py)."""
    parse = cupti_python_parser() if HAVE_CUPTI else None
    if parse is not None:
        return parse
    from types import SimpleNamespace

    lay = layout_for(130401, ACTIVITY_KIND)
    assert lay is not None

    def view(buffer: int, valid: int, record: int) -> Any:
        kind = ctypes.c_uint32.from_address(record).value
        dtype = lay.dtypes[kind]
        rec = np.frombuffer((ctypes.c_uint8 * dtype.itemsize).from_address(record), dtype)[0]
        fields = {n: rec[n].item() for n in dtype.names or ()}
        for n in ("name", "domain"):
            if n in fields:
                fields[n] = ctypes.string_at(fields[n]).decode() if fields[n] else ""
        pt = SimpleNamespace(
            process_id=fields.pop("object_id.pt.process_id", 0), thread_id=fields.pop("object_id.pt.thread_id", 0)
        )
        return SimpleNamespace(object_id=SimpleNamespace(pt=pt), **fields)

    return view


def layout_13_4() -> Layout:
    lay = layout_for(130401, ACTIVITY_KIND)
    assert lay is not None
    return lay


def registered(standin: Any, records: int, seed: int, per_flush: int) -> tuple[FastPath, SyntheticBuffer]:
    """A fast path on the stand-in, callbacks registered; each flush delivers `per_flush` buffers of `records`."""
    source = random_buffer(records, layout_13_4(), ACTIVITY_KIND, seed=seed)
    path = fast_path(standin, source, layout_13_4(), per_flush=per_flush)
    path.register()
    return path, source


def fast_path(standin: Any, source: SyntheticBuffer, lay: Layout, per_flush: int = 1) -> FastPath:
    sizes = lay.sizes.astype(np.int64)
    standin.standin_set(
        ctypes.c_uint32(130401),
        ctypes.c_void_p(source.address),
        ctypes.c_size_t(source.valid),
        per_flush,
        sizes.ctypes.data_as(ctypes.c_void_p),
    )
    return FastPath(standin, lay, parser(), ACTIVITY_KIND, 1 << 20)


def test_buffers_from_a_c_thread_are_queued_decoded_and_drained(standin: Any) -> None:
    path, source = registered(standin, 5000, seed=4, per_flush=3)
    path.flush(forced=False)  # ctypes releases the GIL; the stand-in's pthread takes it for each callback
    batch = path.drain()
    assert isinstance(batch["RUNTIME"], Columns)
    assert sum(len(v) for v in batch.values()) == 3 * 5000
    health = path.health()
    assert health["cupti_buffers"] == 3 and health["fast_path_records"] == 15000 and "fast_path_disabled" not in health
    assert path.mismatch is None and path.checks_left == 0  # the first two buffers were checked both ways
    tables, _ = RecordDecoder(generic_api_name, pid=1).decode(batch)
    assert tables["kernels"].num_rows == 3 * int((source.kinds == ACTIVITY_KIND["CONCURRENT_KERNEL"]).sum())
    path.flush(forced=True)
    assert path.drain() != {} and path.buffers.pool.in_use == 0
    path.stop()


def test_callbacks_run_while_the_training_thread_holds_the_gil(standin: Any) -> None:
    path, _ = registered(standin, 2000, seed=5, per_flush=4)
    stop = threading.Event()

    def train() -> None:  # pure Python: holds the GIL except at the interpreter's switch points
        x = 0
        while not stop.is_set():
            x += 1

    worker = threading.Thread(target=train)
    worker.start()
    flusher = threading.Thread(target=path.flush, args=(False,))
    flusher.start()
    flusher.join(timeout=60)
    stop.set()
    worker.join()
    assert not flusher.is_alive(), "a callback waiting for the GIL never got it"
    assert sum(len(v) for v in path.drain().values()) == 4 * 2000
    path.stop()


def test_a_layout_that_disagrees_with_cupti_python_falls_back_for_the_run(standin: Any) -> None:
    lay = layout_for(130401, ACTIVITY_KIND)
    assert lay is not None
    wrong = layout_for(130401, ACTIVITY_KIND)
    assert wrong is not None
    api = ACTIVITY_KIND["RUNTIME"]
    fields = dict(wrong.dtypes[api].fields or {})
    names = list(fields)
    wrong.dtypes[api] = np.dtype(
        {
            "names": names,
            "formats": [fields[n][0] for n in names],
            "offsets": [fields[n][1] + (4 if n == "cbid" else 0) for n in names],
            "itemsize": wrong.dtypes[api].itemsize,
        }
    )  # cbid read 4 bytes off
    source = random_buffer(1000, lay, ACTIVITY_KIND, seed=6)
    path = fast_path(standin, source, wrong, per_flush=2)
    path.register()
    path.flush(forced=True)
    assert path.mismatch is not None and "RUNTIME" in path.mismatch and "cbid" in path.mismatch
    batch = path.drain()
    assert isinstance(batch["RUNTIME"], list) and sum(len(v) for v in batch.values()) == 2 * 1000
    assert path.health()["fast_path_disabled"] == 1
    right = {
        k: v.rows()
        for k, v in FastPath(standin, lay, parser(), ACTIVITY_KIND, 1 << 20)
        .decoder.decode(source.data, source.valid)
        .items()
    }
    assert sorted(batch["RUNTIME"]) == sorted(right[api] * 2)  # still every record, decoded the old way
    path.stop()


def test_first_difference_names_kind_record_and_field() -> None:
    cols = Columns([np.array([1, 2]), np.array([3, 4])], 2)
    assert first_difference({5: cols}, {5: [(1, 3), (2, 4)]}, {5: "EXTERNAL_CORRELATION"}) is None
    assert (
        first_difference({5: cols}, {5: [(1, 3), (2, 5)]}, {5: "OVERHEAD"}) == "OVERHEAD record 1 field start: 4 != 5"
    )
    assert "records" in (first_difference({5: cols}, {}, {5: "OVERHEAD"}) or "")


def test_start_up_check_passes_on_every_kind_of_the_release(standin: Any) -> None:
    lay = layout_13_4()
    path = FastPath(standin, lay, parser(), ACTIVITY_KIND, 1 << 20)
    assert path.start_up_check() is None
    empty = build([], lay, ACTIVITY_KIND)
    assert empty.valid == 0


def test_open_refuses_unknown_releases_and_missing_libraries(standin: Any, tmp_path: Path) -> None:
    path, why = FastPath.open(None, None, ACTIVITY_KIND, 1 << 20)
    assert path is None and "libcupti" in why
    if not HAVE_CUPTI:
        pytest.skip("cupti-python not installed: the comparison with its own record classes did not run")
    so = next(p for p in Path(standin._name).parent.iterdir() if p.suffix == ".so")
    standin.standin_set(
        ctypes.c_uint32(130900), None, ctypes.c_size_t(0), 1, np.zeros(256, np.int64).ctypes.data_as(ctypes.c_void_p)
    )
    path, why = FastPath.open(None, str(so), ACTIVITY_KIND, 1 << 20)
    assert path is None and why == "no record layout for CUPTI API version 130900"


def test_the_backend_runs_the_fast_path_on_the_loaded_libcupti(standin: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cupti_backend import FakeCupti

    from ktrace.tracer import cupti_backend
    from ktrace.tracer.config import CaptureConfig

    lay = layout_for(130401, ACTIVITY_KIND)
    assert lay is not None
    source = random_buffer(1500, lay, ACTIVITY_KIND, seed=8)
    fast_path(standin, source, lay, per_flush=2)
    monkeypatch.setattr(cupti_backend, "loaded_cupti_library", lambda: standin._name)
    monkeypatch.setattr("ktrace.tracer.fast_path.cupti_python_parser", parser)
    fake = FakeCupti()
    backend = cupti_backend.CuptiBackend(CaptureConfig(), fake)
    notes = backend.start()
    assert backend.fast is not None and not any("one by one" in n for n in notes)
    assert fake.callbacks is None  # cupti-python's per-record callbacks are not registered
    backend.set_recording(False)  # through libcupti directly (ctypes: no GIL held while CUPTI waits)
    backend.set_recording(True)
    assert standin.standin_enabled(ACTIVITY_KIND["RUNTIME"]) and standin.standin_enabled(ACTIVITY_KIND["MEMCPY"])
    backend.set_recording(False)
    assert not standin.standin_enabled(ACTIVITY_KIND["RUNTIME"])
    backend.flush()
    batch = backend.drain()
    assert sum(len(v) for v in batch.values()) == 3000 and backend.take_notes() == []
    backend.stop()
    health = backend.health()
    assert health["cupti_buffers"] == 4 and health["fast_path_records"] == 6000  # the stop's forced flush: 2 more
    assert health["buffers_in_flight_max"] >= 1


def test_the_backend_falls_back_in_one_line_without_a_layout(standin: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cupti_backend import FakeCupti

    from ktrace.tracer import cupti_backend
    from ktrace.tracer.config import CaptureConfig

    standin.standin_set(
        ctypes.c_uint32(120300), None, ctypes.c_size_t(0), 1, np.zeros(256, np.int64).ctypes.data_as(ctypes.c_void_p)
    )
    monkeypatch.setattr(cupti_backend, "loaded_cupti_library", lambda: standin._name)
    monkeypatch.setattr("ktrace.tracer.fast_path.cupti_python_parser", parser)
    fake = FakeCupti()
    backend = cupti_backend.CuptiBackend(CaptureConfig(), fake)
    notes = backend.start()
    assert backend.fast is None and fake.callbacks is not None
    assert [n for n in notes if "one by one" in n] == [
        "ktrace: CUPTI records decoded one by one through cupti-python (slower): "
        "no record layout for CUPTI API version 120300"
    ]
    assert backend.health()["fast_path_disabled"] == 1


def test_waiting_for_the_decoder_is_bounded() -> None:
    from ktrace.tracer.native_buffers import BufferPool, NativeBuffers

    release = threading.Event()
    buffers = NativeBuffers(BufferPool(64, 1), lambda array, valid: release.wait(10) and None)
    buffers.start()
    address = buffers.pool.take()
    buffers.completed(None, 0, address, 64, 8)  # the C function pointer CUPTI would call
    assert buffers.wait_idle(timeout=0.2) is False and buffers.health["decode_wait_timeouts"] == 1
    release.set()
    assert buffers.wait_idle(timeout=10) is True and buffers.pool.in_use == 0
    buffers.stop()
    assert buffers.health["cupti_buffers"] == 1


def _captured(tmp_path: Path, backend: Any, name: str) -> Any:
    from ktrace.model import store
    from ktrace.tracer.config import CaptureConfig
    from ktrace.tracer.session import CaptureSession

    session = CaptureSession(tmp_path / name, CaptureConfig(), "host", 0)
    session.backend = backend
    session.close()  # stop: disable, force-flush, decode, write, close the partition
    store.finalize(tmp_path / name)
    return store.read(tmp_path / name)


def test_a_capture_is_the_same_through_either_path(
    standin: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same buffer delivered through ktrace's callbacks (fast) and as cupti-python records (today's path)
    gives the same trace in the store."""
    from test_cupti_backend import FakeCupti

    from ktrace.tracer import cupti_backend
    from ktrace.tracer.config import CaptureConfig

    lay = layout_13_4()
    kinds = {
        "CONCURRENT_KERNEL": 4.0,
        "RUNTIME": 4.0,
        "DRIVER": 1.0,
        "MEMCPY": 1.0,
        "MEMSET": 1.0,
        "SYNCHRONIZATION": 1.0,
        "EXTERNAL_CORRELATION": 1.0,
        "CONTEXT": 0.1,
    }
    source = random_buffer(3000, lay, ACTIVITY_KIND, mix=kinds, seed=12, names=9)
    fast_path(standin, source, lay, per_flush=1)
    monkeypatch.setattr(cupti_backend, "loaded_cupti_library", lambda: standin._name)
    monkeypatch.setattr("ktrace.tracer.fast_path.cupti_python_parser", parser)
    fast_backend = cupti_backend.CuptiBackend(CaptureConfig(), FakeCupti())
    fast_backend.start()
    assert fast_backend.fast is not None
    fast = _captured(tmp_path, fast_backend, "fast.ktrace")

    monkeypatch.setenv("KTRACE_FAST_DECODE", "0")
    fake = FakeCupti()
    slow_backend = cupti_backend.CuptiBackend(CaptureConfig(), fake)
    slow_backend.start()
    view = parser()
    fake.pending = [view(source.address, source.valid, source.address + at) for at in source.offsets.tolist()]
    slow = _captured(tmp_path, slow_backend, "slow.ktrace")
    for table in ("kernels", "api", "memory", "syncs"):
        a, b = getattr(fast, table), getattr(slow, table)
        assert a.height > 0 and a.columns == b.columns and a.dtypes == b.dtypes, table
        assert a.sort(a.columns).equals(b.sort(b.columns)), table
    assert fast.meta.health["fast_path_records"] == len(source.offsets)


def test_without_numba_the_fast_path_stands_aside_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture-only install without numba: cupti-python's own callbacks are used, and the reason is the real one
    (before, ktrace's callbacks were registered anyway and the run fell back to a slower walker, saying the
    decoders "disagreed")."""
    import sys

    from ktrace.tracer.fast_path import FastPath

    monkeypatch.setitem(sys.modules, "numba", None)
    fast, why = FastPath.open(None, "/nonexistent/libcupti.so", {"KERNEL": 10}, 1 << 20)
    assert fast is None and why.startswith("numba is not installed")
