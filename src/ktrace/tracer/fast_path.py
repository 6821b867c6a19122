"""The tracer's fast path: native buffer callbacks, vectorized decoding, a self-check against cupti-python.

Chosen at start-up when the loaded libcupti's release has a layout (ktrace.tracer.layouts) and cupti-python
exposes its own record parser (`cupti.utils.parseActivityStruct`, the function its buffer callback uses).
At start-up (a synthetic buffer of every enabled kind) and on the first `checked_buffers` real buffers,
every record is decoded both ways -- the fast decoder, and libcupti's walker plus cupti-python's record
classes -- and compared field by field. On any difference the run keeps cupti-python's decoding (one line
in the notes, `fast_path_disabled` in health).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ktrace.tracer.layouts import Layout, layout_for
from ktrace.tracer.native_buffers import BufferPool, NativeBuffers
from ktrace.tracer.records import Columns, RecordExtractor

Parse = Callable[[int, int, int], Any]
"""(buffer address, valid bytes, record address) -> cupti-python's record object (None: unknown kind)."""
CHECKED_BUFFERS = 2
CHECKED_RECORDS = 4096
"""Records compared per checked buffer: enough to meet every kind of a step, few enough (~20 ms of
cupti-python objects) not to hold the GIL for long at start-up."""
POOL_BUFFERS = 8
INT63 = 0x7FFF_FFFF_FFFF_FFFF


def cupti_python_parser() -> Parse | None:
    """cupti-python's own record parser (kind -> record class), None when this cupti-python has none."""
    try:
        from cupti import utils

        capsule = utils.__pyx_capi__["parseActivityStruct"]
    except (ImportError, AttributeError, KeyError):
        return None
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    pointer = api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))
    parse: Parse = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)(pointer)
    return parse


def libcupti_walker(lib: Any) -> Callable[[int, int, int | None], int | None]:
    """(buffer, valid, record address or None) -> the next record's address (None at the end), by libcupti."""
    fn = lib.cuptiActivityGetNextRecord
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    fn.restype = ctypes.c_int

    def next_record(buffer: int, valid: int, record: int | None) -> int | None:
        ptr = ctypes.c_void_p(record)
        return int(ptr.value) if fn(buffer, valid, ctypes.byref(ptr)) == 0 and ptr.value else None

    return next_record


def reference_decode(
    buffer: int,
    valid: int,
    next_record: Callable[[int, int, int | None], int | None],
    parse: Parse,
    extractor: RecordExtractor,
    limit: int | None = None,
) -> tuple[dict[int, list[tuple[Any, ...]]], list[int], int]:
    """Today's decoding of a raw buffer: libcupti's walker, cupti-python's classes, ktrace's copy-out.
    Returns (tuples per kind, each record's byte offset, the byte offset where it stopped: `valid`, or the
    start of record `limit` + 1)."""
    records: list[Any] = []
    offsets: list[int] = []
    at = next_record(buffer, valid, None)
    while at is not None:
        if limit is not None and len(offsets) == limit:
            break
        offsets.append(at - buffer)
        record = parse(buffer, valid, at)
        if record is not None:
            records.append(record)
        at = next_record(buffer, valid, at)
    rows: dict[int, list[tuple[Any, ...]]] = {}
    extractor.extract(records, rows)
    return rows, offsets, valid if at is None else at - buffer


def _normal(value: Any) -> Any:
    return value & INT63 if isinstance(value, int) and value > INT63 else value


def first_difference(
    fast: Mapping[int, Columns], reference: Mapping[int, list[tuple[Any, ...]]], names: Mapping[int, str]
) -> str | None:
    """Where the fast decoder and cupti-python disagree ("MEMCPY record 3 field 7: 5 != 6"), None if nowhere."""
    from ktrace.tracer.records import FIELDS_BY_KIND

    for kind in sorted(set(fast) | set(reference)):
        name = names.get(kind, str(kind))
        got, want = fast[kind].rows() if kind in fast else [], reference.get(kind, [])
        if len(got) != len(want):
            return f"{name}: {len(got)} records != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            w = tuple(_normal(v) for v in w)
            if g != w:
                j = next(j for j, (a, b) in enumerate(zip(g, w, strict=True)) if a != b)
                return f"{name} record {i} field {FIELDS_BY_KIND[name][j]}: {g[j]!r} != {w[j]!r}"
    return None


class FastPath:
    """Native callbacks plus the fast decoder, for one process.

    Args:
        lib: the libcupti that cupti-python loaded (ctypes.CDLL).
        layout: its release's record layouts.
        parse: cupti-python's record parser (the reference).
        kind_values: kind name -> numeric kind.
        buffer_bytes: CUPTI buffer size.
        next_record: libcupti's walker (default: `lib`'s cuptiActivityGetNextRecord).
    """

    def __init__(
        self,
        lib: Any,
        layout: Layout,
        parse: Parse,
        kind_values: Mapping[str, int],
        buffer_bytes: int,
        next_record: Callable[[int, int, int | None], int | None] | None = None,
    ) -> None:
        self.lib, self.layout, self.parse = lib, layout, parse
        self.extractor = RecordExtractor(kind_values)
        self.next_record = next_record or libcupti_walker(lib)
        self.kind_values = dict(kind_values)
        self.buffers = NativeBuffers(BufferPool(buffer_bytes, POOL_BUFFERS), self._on_buffer, self._start_up_check)
        self.checks_left = CHECKED_BUFFERS
        self.mismatch: str | None = None
        self._decoder: Any = None
        self._lock = threading.Lock()
        self._columns: list[dict[int, Columns]] = []
        self._rows: dict[int, list[tuple[Any, ...]]] = {}
        self._records = 0

    @classmethod
    def open(
        cls, cupti: Any, library: str | None, kind_values: Mapping[str, int], buffer_bytes: int
    ) -> tuple[FastPath | None, str]:
        """(the fast path, "") or (None, why not: one line)."""
        import importlib.util

        if importlib.util.find_spec("numba") is None:  # its buffer walk is a numba kernel
            return None, "numba is not installed (the cu12/cu13 extras bring it)"
        if library is None:
            return None, "could not locate the libcupti that cupti-python loads"
        parse = cupti_python_parser()
        if parse is None:
            return None, "this cupti-python has no record parser to check the fast decoder against"
        try:
            lib = ctypes.CDLL(library)
            version = ctypes.c_uint32(0)
            lib.cuptiGetVersion(ctypes.byref(version))
        except (OSError, AttributeError) as exc:
            return None, f"libcupti could not be called directly ({exc})"
        layout = layout_for(int(version.value), dict(kind_values))
        if layout is None:
            return None, f"no record layout for CUPTI API version {version.value}"
        return cls(lib, layout, parse, kind_values, buffer_bytes), ""

    # ----- control -----

    def register(self) -> None:
        """Hand libcupti ktrace's own buffer callbacks and start the decoder thread."""
        rc = self.lib.cuptiActivityRegisterCallbacks(self.buffers.requested, self.buffers.completed)
        if rc != 0:
            raise RuntimeError(f"cuptiActivityRegisterCallbacks returned {rc}")
        self.buffers.start()

    def enable(self, kind: int, on: bool) -> None:
        """cuptiActivityEnable/Disable without the GIL (disable may wait for the buffer thread)."""
        (self.lib.cuptiActivityEnable if on else self.lib.cuptiActivityDisable)(int(kind))

    def flush(self, forced: bool) -> None:
        """cuptiActivityFlushAll without the GIL, then wait until the delivered buffers are decoded."""
        self.lib.cuptiActivityFlushAll(1 if forced else 0)
        self.buffers.wait_idle()

    def stop(self) -> None:
        """End the decoder thread (after the final flush)."""
        self.buffers.stop()

    def _start_up_check(self) -> None:
        """First thing on the decoder thread (numba loads there, off the training thread)."""
        if self.mismatch is None:
            try:
                self.mismatch = self.start_up_check()
            except Exception as exc:  # numba missing, a layout bug: cupti-python's path for the run
                self.mismatch = f"the fast decoder could not start: {type(exc).__name__}: {exc}"

    def start_up_check(self) -> str | None:
        """Self-check on a synthetic buffer: two records of every kind this release has a layout for,
        random bytes apart from the kind and the C strings."""
        from ktrace.tracer.layouts import FIELDS
        from ktrace.tracer.synthetic_buffers import build

        names = {
            k: {f[0]: "ktrace_self_check" for f in FIELDS[k] if f[0] in ("name", "domain")}
            for k in self.kind_values
            if self.kind_values[k] in self.layout.struct_of
        }
        records = [(k, fields) for k, fields in names.items()] * 2
        buf = build(records, self.layout, self.kind_values, seed=1, spare=64)
        return self.self_check(buf.data, buf.valid, buf.offsets.tolist())

    def self_check(self, buffer: np.ndarray, valid: int, offsets: list[int] | None = None) -> str | None:
        """Decode `buffer` both ways; the first difference, or None. `offsets`: the records' byte offsets when
        known (a synthetic buffer); otherwise libcupti's walker finds them (the first CHECKED_RECORDS)."""
        if offsets is None:
            rows, offsets, valid = reference_decode(
                int(buffer.ctypes.data), valid, self.next_record, self.parse, self.extractor, CHECKED_RECORDS
            )
        else:
            base = int(buffer.ctypes.data)
            records = [r for r in (self.parse(base, valid, base + o) for o in offsets) if r is not None]
            rows = {}
            self.extractor.extract(records, rows)
        fast = self.decoder.decode(buffer, valid)
        walked = self.decoder.offsets(buffer, valid)[1].tolist()
        if walked != list(offsets):
            return f"record offsets differ from libcupti's walk ({len(walked)} vs {len(offsets)} records)"
        return first_difference(fast, rows, self.layout.name_of)

    @property
    def decoder(self) -> Any:
        """The fast decoder (numba is loaded on first use: on the decoder thread, not at start-up)."""
        if self._decoder is None:
            from ktrace.tracer.fast_decode import FastDecoder

            walker = self.next_record

            def step_over(buffer: int, valid: int, offset: int) -> int | None:
                nxt = walker(buffer, valid, buffer + offset)
                return None if nxt is None else nxt - buffer

            self._decoder = FastDecoder(self.layout, step_over=step_over)
        return self._decoder

    # ----- the decoder thread -----

    def _on_buffer(self, buffer: np.ndarray, valid: int) -> None:
        if self.mismatch is None:
            try:
                if self.checks_left > 0:
                    self.checks_left -= 1
                    self.mismatch = self.self_check(buffer, valid)
                decoded = self.decoder.decode(buffer, valid) if self.mismatch is None else None
            except Exception as exc:
                self.mismatch, decoded = f"the fast decoder failed: {type(exc).__name__}: {exc}", None
            if decoded is not None:
                with self._lock:
                    self._columns.append(decoded)
                    self._records += sum(len(c) for c in decoded.values())
                return
        rows, _, _ = reference_decode(int(buffer.ctypes.data), valid, self.next_record, self.parse, self.extractor)
        with self._lock:
            for kind, bucket in rows.items():
                self._rows.setdefault(kind, []).extend(bucket)

    def drain(self) -> dict[str, Any]:
        """Everything decoded so far, by kind name: Columns (fast) or tuples (after a fallback)."""
        from ktrace.tracer.fast_decode import by_name

        with self._lock:
            columns, self._columns = self._columns, []
            rows, self._rows = self._rows, {}
        named: dict[str, Any] = by_name(columns, self.layout) if columns else {}
        for name, bucket in self.extractor.by_name(rows).items():
            if name in named:  # the run switched paths inside this batch: one form per kind
                bucket = named[name].rows() + bucket
            named[name] = bucket
        return named

    def health(self) -> dict[str, int]:
        """Buffers, lag, in flight, unknown records; fast_path_disabled after a failed self-check."""
        health = dict(self.buffers.health)
        if self._decoder is not None:
            health.update(self._decoder.health)
        health["fast_path_records"] = self._records
        if self.mismatch is not None:
            health["fast_path_disabled"] = 1
        return {k: v for k, v in health.items() if v}
