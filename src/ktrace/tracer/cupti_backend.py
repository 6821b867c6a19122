"""The live CUPTI activity source, through cupti-python (imported lazily, only in traced processes).

Follows cupti.md §6.2 step 4: NVTX injection path, SYSTEM thread ids, latency timestamps, one
subscriber named "ktrace" (for cuProfilerStart/Stop windows), buffer callbacks, kinds (kernels first).
Buffers go through ktrace's own native callbacks and vectorized decoder (ktrace.tracer.fast_path) when
the loaded CUPTI release has a known layout and the self-check agrees; otherwise through cupti-python's
callbacks, which copy fields out of its record objects (ktrace.tracer.records). Flushing is driven by
the writer thread, never from a callback (cupti.md §1.3-1.4). KTRACE_FAST_DECODE=0 forces cupti-python's path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ktrace.tracer.config import CaptureConfig

INSTALL_HINT = "pip install 'ktrace[cu13]' (CUDA 13 driver) or 'ktrace[cu12]' (CUDA 12 driver)"
NOISY_RUNTIME = (
    "cudaGetDevice",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaStreamIsCapturing",
    "cudaGetDeviceCount",
)
NOISY_DRIVER = (
    "cuKernelGetAttribute",
    "cuDevicePrimaryCtxGetState",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuGetProcAddress",
)
"""API calls too frequent to be worth a record (Kineto's filter, cupti.md §1.6)."""
TOGGLED = ("RUNTIME", "DRIVER", "MEMCPY", "MEMCPY2", "MEMSET", "SYNCHRONIZATION")
"""Kinds switched off outside capture windows; kernels stay on (late enabling stalls, Kineto PR #542)."""


class BackendUnavailable(RuntimeError):
    """GPU capture cannot run in this process; the message says why and how to fix it (one line)."""


def load_cupti() -> Any:
    """Import cupti-python or explain in one line how to get it."""
    try:
        from cupti import cupti  # deferred: 0.6-0.9 s and ~60 MB RSS (cupti.md §5.2)
    except ImportError as exc:
        raise BackendUnavailable(
            f"cupti-python is not installed ({exc}); GPU activity not recorded: {INSTALL_HINT}"
        ) from None
    return cupti


def explain_cupti_error(exc: BaseException) -> str:
    """One actionable line for an error raised by cupti-python's first call."""
    text = str(exc)
    if "libcuda" in text or "driver is not found" in text.lower():
        return "no NVIDIA driver (libcuda.so.1 not found): GPU activity not recorded"
    if "only CUDA" in text and "driver is supported" in text:
        return f"cupti-python does not match this driver ({text}): {INSTALL_HINT}"
    if "MULTIPLE_SUBSCRIBERS" in text:
        return (
            "another CUPTI user (torch.profiler/Kineto, Nsight Systems or Compute) holds CUPTI in this "
            "process: GPU activity not recorded; profile with one tool at a time"
        )
    return f"CUPTI failed to start ({type(exc).__name__}: {text}): GPU activity not recorded"


def cupti_library_path(cupti: Any) -> str | None:
    """The libcupti file cupti-python loads (NVTX_INJECTION64_PATH must name exactly it, cupti.md §3.2)."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return str(load_nvidia_dynamic_lib("cupti").abs_path)
    except Exception:
        pass
    return loaded_cupti_library()


def loaded_cupti_library() -> str | None:
    """The libcupti already loaded into this process (by cupti-python's first calls), None when none is."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "/libcupti.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


class CuptiBackend:
    """Records CUPTI activity of this process into per-kind tuple lists (see GpuBackend).

    Args:
        config: capture options (kinds, buffer size, capture range).
        cupti: the `cupti.cupti` module (a fake in tests).
        on_window: called with True/False on cuProfilerStart/Stop (capture_range="cudaProfilerApi").
    """

    def __init__(self, config: CaptureConfig, cupti: Any, on_window: Callable[[bool], None] | None = None) -> None:
        from ktrace.tracer.records import RecordExtractor

        self.config, self.cupti, self.on_window = config, cupti, on_window
        kind_enum = cupti.ActivityKind
        self.kinds = {name: getattr(kind_enum, name) for name in config.activity_kinds() if hasattr(kind_enum, name)}
        self.missing_kinds = [n for n in config.activity_kinds() if n not in self.kinds]
        self.extractor = RecordExtractor(
            {
                n: int(getattr(kind_enum, n))
                for n in dir(kind_enum)
                if n.isupper() and isinstance(getattr(kind_enum, n, None), int)
            }
        )
        self._rows: dict[int, list[tuple[Any, ...]]] = {}
        self._lock = threading.Lock()
        self._counts = {"cupti_buffers": 0, "unknown_kind_records": 0}
        self._subscriber: Any = None
        self._anchor: dict[str, Any] = {}
        self._buffer_bytes = max(1, config.buffer_mb) << 20
        self.started = False
        self.recording = True
        self.fast: Any = None
        """ktrace.tracer.fast_path.FastPath when the fast path runs, else None."""
        self._notes_sent = False

    # ----- callbacks: run with the GIL on CUPTI and application threads; copy out only -----

    def _buffer_requested(self) -> tuple[int, int]:
        return self._buffer_bytes, 0

    def _buffer_completed(self, activities: list[Any]) -> None:
        local: dict[int, list[tuple[Any, ...]]] = {}
        skipped = self.extractor.extract(activities, local)
        with self._lock:
            for kind, rows in local.items():
                self._rows.setdefault(kind, []).extend(rows)
            self._counts["cupti_buffers"] += 1
            self._counts["unknown_kind_records"] += skipped

    def _api_callback(self, userdata: Any, domain: Any, cbid: Any, data: Any) -> None:
        cupti = self.cupti
        site = getattr(data, "callback_site", None)
        if cbid == cupti.DriverApiTraceCbid.cuProfilerStart and site == cupti.ApiCallbackSite.API_EXIT:
            if self.on_window:
                self.on_window(True)
        elif cbid == cupti.DriverApiTraceCbid.cuProfilerStop and site == cupti.ApiCallbackSite.API_ENTER:
            if self.on_window:
                self.on_window(False)

    # ----- control (writer thread / startup) -----

    def gpu_timestamp(self) -> int:
        """Now on the clock of the activity records (cupti.get_timestamp())."""
        return int(self.cupti.get_timestamp())

    def start(self) -> list[str]:
        """Attach CUPTI; returns notes for the user. Raises BackendUnavailable with one line on failure."""
        c = self.cupti
        notes: list[str] = []
        try:
            if c.is_tracing_session_running():
                raise BackendUnavailable(explain_cupti_error(RuntimeError("MULTIPLE_SUBSCRIBERS")))
        except AttributeError:
            pass
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendUnavailable(explain_cupti_error(exc)) from None
        if "MARKER" in self.kinds:
            notes += self._inject_nvtx()
        try:
            c.set_thread_id_type(c.ActivityThreadIdType.SYSTEM)
            self._latency_timestamps()
            self._subscribe()
            self._register_callbacks(notes)
            for name, kind in self.kinds.items():
                dump = name in ("DEVICE", "CONTEXT", "STREAM") and hasattr(c, "activity_enable_and_dump")
                (c.activity_enable_and_dump if dump else c.activity_enable)(kind)
            self._filter_noise()
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendUnavailable(explain_cupti_error(exc)) from None
        if self.missing_kinds:
            notes.append(
                f"this cupti-python has no activity kind(s) {', '.join(self.missing_kinds)} "
                "(cupti-python 12.x has no RUNTIME kind: driver API calls only)"
            )
        self.started = True
        return notes

    def _register_callbacks(self, notes: list[str]) -> None:
        from ktrace.tracer.fast_path import FastPath

        why = "KTRACE_FAST_DECODE=0"
        if os.environ.get("KTRACE_FAST_DECODE", "1") != "0":
            kind_values = {name: int(kind) for name, kind in self.kinds.items()}
            self.fast, why = FastPath.open(self.cupti, loaded_cupti_library(), kind_values, self._buffer_bytes)
        if self.fast is not None:
            self.fast.register()  # the decoder thread self-checks first; a difference shows in take_notes()
            return
        notes.append(f"ktrace: CUPTI records decoded one by one through cupti-python (slower): {why}")
        self._counts["fast_path_disabled"] = 1  # shown by `ktrace info` with the trace's health
        self.cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)

    def take_notes(self) -> list[str]:
        """Lines for the user that arose after start (a failed self-check on the first buffers), once."""
        if self.fast is None or self.fast.mismatch is None or self._notes_sent:
            return []
        self._notes_sent = True
        return [
            f"ktrace: the fast CUPTI decoder disagreed with cupti-python on the first buffers "
            f"({self.fast.mismatch}): the rest of this run is decoded through cupti-python (slower)"
        ]

    def _inject_nvtx(self) -> list[str]:
        path = cupti_library_path(self.cupti)
        current = os.environ.get("NVTX_INJECTION64_PATH")
        if path is None:
            return ["NVTX ranges not recorded: could not locate the libcupti that cupti-python loads"]
        if current and os.path.realpath(current) != os.path.realpath(path):
            return [f"NVTX_INJECTION64_PATH is already set to {current}: NVTX ranges may go to another tool"]
        os.environ["NVTX_INJECTION64_PATH"] = path
        return []

    def _latency_timestamps(self) -> None:
        fn = getattr(self.cupti, "activity_enable_latency_timestamps", None)
        if fn is not None:
            try:
                fn(1)  # only effective before CUDA init; queued/submitted stay null otherwise
            except Exception:
                pass

    def _subscribe(self) -> None:
        c = self.cupti
        if self.config.capture_range != "cudaProfilerApi":
            return
        params = c.SubscriberParams()
        params.struct_size = c.SUBSCRIBER_PARAMS_SIZE
        params.subscriber_name = "ktrace"
        self._anchor = {"params": params, "callback": self._api_callback}  # keep alive (cupyprof.py:736)
        try:
            self._subscriber = c.subscribe_v2(self._api_callback, self._anchor, params.ptr)
        except Exception as exc:
            old = getattr(params, "old_subscriber_name", "")
            raise BackendUnavailable(explain_cupti_error(exc) + (f" (held by {old!r})" if old else "")) from None
        for cbid in (c.DriverApiTraceCbid.cuProfilerStart, c.DriverApiTraceCbid.cuProfilerStop):
            c.enable_callback(1, self._subscriber, c.CallbackDomain.DRIVER_API, cbid)

    def _filter_noise(self) -> None:
        c = self.cupti
        for enum_names, fn_name, names in (
            (("RuntimeApiTraceCbid", "runtime_api_trace_cbid"), "activity_enable_runtime_api", NOISY_RUNTIME),
            (("DriverApiTraceCbid", "driver_api_trace_cbid"), "activity_enable_driver_api", NOISY_DRIVER),
        ):
            enum = next((getattr(c, e) for e in enum_names if hasattr(c, e)), None)
            fn = getattr(c, fn_name, None)
            if enum is None or fn is None:
                continue
            for member in enum:
                if member.name.rsplit("_v", 1)[0] in names:
                    try:
                        fn(member, 0)
                    except Exception:
                        pass

    def flush(self, forced: bool = False) -> None:
        """activity_flush_all from the writer thread (never from a callback)."""
        if not self.started:
            return
        if self.fast is not None:
            self.fast.flush(forced)
        else:
            self.cupti.activity_flush_all(1 if forced else 0)

    def drain(self) -> dict[str, Any]:
        """Take the decoded records, keyed by kind name (tuples, or Columns from the fast path)."""
        if self.fast is not None:
            return self.fast.drain()
        with self._lock:
            rows, self._rows = self._rows, {}
        return self.extractor.by_name(rows)

    def set_recording(self, on: bool) -> None:
        """Enable/disable the per-window kinds."""
        if not self.started or on == self.recording:
            return
        self.recording = on
        for name in TOGGLED:
            if name in self.kinds:
                self._enable(self.kinds[name], on)

    def _enable(self, kind: Any, on: bool) -> None:
        if self.fast is not None:
            self.fast.enable(kind, on)  # ctypes: no GIL while CUPTI may wait for the buffer thread
        else:
            (self.cupti.activity_enable if on else self.cupti.activity_disable)(kind)

    def stop(self) -> None:
        """Disable every kind and force-flush (cupti.md §1.3)."""
        if not self.started:
            return
        for kind in self.kinds.values():
            try:
                self._enable(kind, False)
            except Exception:
                pass
        self.flush(forced=True)
        if self.fast is not None:
            self.fast.stop()
        self._counts["dropped_records"] = self._dropped()
        if self._subscriber is not None:
            try:
                self.cupti.unsubscribe(self._subscriber)
            except Exception:
                pass
        self.started = False

    def _dropped(self) -> int:
        import ctypes

        dropped = ctypes.c_size_t(0)
        try:
            self.cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(dropped))
        except Exception:
            return 0
        return int(dropped.value)

    def health(self) -> dict[str, int]:
        """Buffers delivered, unknown records, dropped records; the fast path's buffers in flight and lag."""
        with self._lock:
            counts = {k: v for k, v in self._counts.items() if v}
        if self.fast is not None:
            for k, v in self.fast.health().items():
                counts[k] = counts.get(k, 0) + v
        return counts

    def name_of(self, domain: str, cbid: int) -> str:
        """API name from the cbid enums (offline table, cupti.md §2.3)."""
        from ktrace.tracer.columns import api_name_from_enums

        c = self.cupti
        runtime = next(
            (getattr(c, n) for n in ("RuntimeApiTraceCbid", "runtime_api_trace_cbid") if hasattr(c, n)), None
        )
        driver = next((getattr(c, n) for n in ("DriverApiTraceCbid", "driver_api_trace_cbid") if hasattr(c, n)), None)
        return api_name_from_enums(runtime, driver)(domain, cbid)
