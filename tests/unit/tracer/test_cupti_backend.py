"""The CUPTI glue against a fake `cupti.cupti` module: enabling, callbacks, flush, windows, stop, errors."""

from __future__ import annotations

import enum
from types import SimpleNamespace
from typing import Any

import pytest
from cupti_support import fake_record

from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.cupti_backend import BackendUnavailable, CuptiBackend, explain_cupti_error
from ktrace.tracer.records import ACTIVITY_KIND


@pytest.fixture(autouse=True)
def _cupti_pythons_callbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests drive cupti-python's callbacks (the fast path, test_native_buffers.py, needs a libcupti)."""
    monkeypatch.setenv("KTRACE_FAST_DECODE", "0")


class FakeCupti:
    """Just the cupti-python 13.4 surface ktrace uses; records calls, delivers `pending` on flush."""

    ActivityKind = enum.IntEnum("ActivityKind", ACTIVITY_KIND)
    ActivityThreadIdType = SimpleNamespace(SYSTEM=1)
    RuntimeApiTraceCbid = enum.IntEnum(
        "RuntimeApiTraceCbid", {"cudaLaunchKernel_v7000": 211, "cudaGetDevice_v3020": 17}
    )
    DriverApiTraceCbid = enum.IntEnum(
        "DriverApiTraceCbid",
        {"cuLaunchKernel": 307, "cuProfilerStart": 435, "cuProfilerStop": 436, "cuCtxGetCurrent": 9},
    )
    ApiCallbackSite = SimpleNamespace(API_ENTER=0, API_EXIT=1)
    CallbackDomain = SimpleNamespace(DRIVER_API=1)
    SUBSCRIBER_PARAMS_SIZE = 64

    class SubscriberParams:
        ptr = 1234

    def __init__(self, busy: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.enabled: set[int] = set()
        self.pending: list[Any] = []
        self.busy = busy
        self.callbacks: Any = None

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, *args))
            return 0

        return call

    def is_tracing_session_running(self) -> int:
        return int(self.busy)

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        self.callbacks = (requested, completed)

    def activity_enable(self, kind: int) -> None:
        self.enabled.add(int(kind))

    def activity_enable_and_dump(self, kind: int) -> None:
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag: int) -> None:
        self.calls.append(("flush", flag))
        if self.pending:
            batch, self.pending = self.pending, []
            self.callbacks[1](batch)

    def subscribe_v2(self, callback: Any, userdata: Any, ptr: int) -> str:
        self.api_callback = callback
        return "handle"


def test_start_enables_kinds_kernels_first_and_filters_noise() -> None:
    fake = FakeCupti()
    backend = CuptiBackend(CaptureConfig(), fake)
    backend.start()
    assert fake.enabled >= {
        ACTIVITY_KIND[k]
        for k in ("CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "MARKER", "OVERHEAD")
    }
    assert fake.callbacks[0]() == (8 << 20, 0)
    assert ("activity_enable_runtime_api", FakeCupti.RuntimeApiTraceCbid.cudaGetDevice_v3020, 0) in fake.calls
    assert ("activity_enable_driver_api", FakeCupti.DriverApiTraceCbid.cuCtxGetCurrent, 0) in fake.calls
    assert ("activity_enable_latency_timestamps", 1) in fake.calls


def test_flush_delivers_copied_rows_and_names_apis() -> None:
    fake = FakeCupti()
    backend = CuptiBackend(CaptureConfig(), fake)
    backend.start()
    fake.pending = [
        fake_record("RUNTIME", start=1, end=2, cbid=211, correlation_id=5),
        fake_record("CONCURRENT_KERNEL", start=3, end=4, name="k", correlation_id=5),
    ]
    backend.flush()
    rows = backend.drain()
    assert [len(rows["RUNTIME"]), len(rows["CONCURRENT_KERNEL"])] == [1, 1]
    assert backend.drain() == {}
    assert backend.name_of("runtime", 211) == "cudaLaunchKernel"
    assert backend.health() == {"cupti_buffers": 1, "fast_path_disabled": 1}  # KTRACE_FAST_DECODE=0 here


def test_windows_toggle_cheap_kinds_and_keep_kernels() -> None:
    fake = FakeCupti()
    backend = CuptiBackend(CaptureConfig(), fake)
    backend.start()
    backend.set_recording(False)
    assert ACTIVITY_KIND["RUNTIME"] not in fake.enabled and ACTIVITY_KIND["CONCURRENT_KERNEL"] in fake.enabled
    backend.set_recording(True)
    assert ACTIVITY_KIND["RUNTIME"] in fake.enabled


def test_profiler_api_callbacks_open_and_close_the_window() -> None:
    fake = FakeCupti()
    seen: list[bool] = []
    backend = CuptiBackend(CaptureConfig(capture_range="cudaProfilerApi"), fake, on_window=seen.append)
    backend.start()
    cb = fake.api_callback
    cb(None, 1, FakeCupti.DriverApiTraceCbid.cuProfilerStart, SimpleNamespace(callback_site=1))
    cb(None, 1, FakeCupti.DriverApiTraceCbid.cuProfilerStop, SimpleNamespace(callback_site=0))
    cb(None, 1, FakeCupti.DriverApiTraceCbid.cuProfilerStart, SimpleNamespace(callback_site=0))  # ENTER: ignored
    assert seen == [True, False]


def test_stop_disables_everything_and_force_flushes() -> None:
    fake = FakeCupti()
    backend = CuptiBackend(CaptureConfig(), fake)
    backend.start()
    backend.stop()
    assert fake.enabled == set() and ("flush", 1) in fake.calls


def test_another_cupti_user_is_one_clear_line() -> None:
    with pytest.raises(BackendUnavailable, match="another CUPTI user"):
        CuptiBackend(CaptureConfig(), FakeCupti(busy=True)).start()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("CUDA driver is not found (libcuda.so.1: cannot open shared object file)", "no NVIDIA driver"),
        ("only CUDA 13.0 or later driver is supported", "ktrace[cu12]"),
        ("cuptiError ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", "torch.profiler"),
    ],
)
def test_cupti_errors_become_actionable_lines(error: str, expected: str) -> None:
    line = explain_cupti_error(RuntimeError(error))
    assert expected in line and "\n" not in line
