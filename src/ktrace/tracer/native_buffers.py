"""ktrace's own CUPTI buffer callbacks: a preallocated buffer pool, a completed-buffer queue, a decoder thread.

Registered with libcupti itself (`cuptiActivityRegisterCallbacks` through ctypes), so Python runs once per
buffer (a few MB, tens of thousands of records), never once per record: buffer-requested hands out a pool
buffer, buffer-completed enqueues (address, valid bytes) and returns. ctypes takes the GIL for those few
microseconds; the decoding happens on the "ktrace-decoder" thread (numba, nogil). CUPTI calls that can
wait for the buffer thread (flush, disable) go through ctypes.CDLL, which releases the GIL while in CUPTI.
"""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ktrace.tracer.background import start_background

REQUESTED = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
"""void CUpti_BuffersCallbackRequestFunc(uint8_t **buffer, size_t *size, size_t *maxNumRecords)"""
COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
"""void CUpti_BuffersCallbackCompleteFunc(CUcontext, uint32_t streamId, uint8_t *buffer, size_t size, size_t valid)"""

OnBuffer = Callable[[np.ndarray, int], None]
"""(buffer as uint8, valid bytes) -> None: decodes one completed buffer (on the decoder thread)."""


class BufferPool:
    """Buffers of `size` bytes, 8-byte aligned, allocated up front; grows (and counts it) when all are in use.

    Args:
        size: bytes per buffer.
        count: buffers allocated at start.
    """

    def __init__(self, size: int, count: int) -> None:
        self.size = size
        self._arrays: dict[int, np.ndarray] = {}
        self._free: list[int] = []
        self._lock = threading.Lock()
        self.added = 0
        for _ in range(count):
            self._free.append(self._allocate())

    def _allocate(self) -> int:
        words = np.zeros(self.size // 8, np.uint64)  # uint64 words: 8-byte aligned
        address = int(words.ctypes.data)
        self._arrays[address] = words.view(np.uint8)
        return address

    def take(self) -> int:
        """The address of a free buffer."""
        with self._lock:
            if self._free:
                return self._free.pop()
            self.added += 1
            return self._allocate()

    def give_back(self, address: int) -> None:
        """Return a buffer once its records are decoded."""
        with self._lock:
            self._free.append(address)

    def array(self, address: int) -> np.ndarray | None:
        """The uint8 array of a buffer of this pool, None for an address the pool never handed out."""
        return self._arrays.get(address)

    def arrays(self) -> list[np.ndarray]:
        """Every buffer of the pool (a benchmark fills them once instead of once per delivery)."""
        with self._lock:
            return list(self._arrays.values())

    @property
    def in_use(self) -> int:
        """Buffers held by CUPTI or waiting to be decoded."""
        with self._lock:
            return len(self._arrays) - len(self._free)


class NativeBuffers:
    """The callbacks, the queue and the decoder thread.

    Args:
        pool: where buffers come from.
        on_buffer: decodes a completed buffer (runs on the decoder thread; exceptions are counted, not raised).
        on_start: runs first on the decoder thread (loading the decoder), before any buffer.
    """

    def __init__(self, pool: BufferPool, on_buffer: OnBuffer, on_start: Callable[[], None] | None = None) -> None:
        self.pool, self.on_buffer, self.on_start = pool, on_buffer, on_start
        self._queue: queue.Queue[tuple[int, int, int] | None] = queue.Queue()
        self.requested = REQUESTED(self._requested)
        self.completed = COMPLETED(self._completed)
        self.health: dict[str, int] = {}
        self.errors: list[str] = []
        self._thread: threading.Thread | None = None

    # ----- the callbacks: CUPTI's and the application's threads; no CUPTI call, no decoding -----

    def _requested(self, buffer: Any, size: Any, max_records: Any) -> None:
        buffer[0] = self.pool.take()
        size[0] = self.pool.size
        max_records[0] = 0

    def _completed(self, context: Any, stream_id: int, buffer: int, size: int, valid: int) -> None:
        self._queue.put((int(buffer or 0), int(valid), time.monotonic_ns()))

    # ----- the decoder thread -----

    def start(self) -> None:
        """Start the decoder thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="ktrace-decoder", daemon=True)
            start_background(self._thread)

    def _loop(self) -> None:
        if self.on_start is not None:
            try:
                self.on_start()
            except Exception as exc:
                self._add("decode_errors", 1)
                self.errors.append(f"{type(exc).__name__}: {exc}")
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._decode(*item)
            finally:
                self._queue.task_done()

    def _decode(self, address: int, valid: int, completed_ns: int) -> None:
        array = self.pool.array(address)
        self._max("buffers_in_flight_max", self.pool.in_use)
        if array is None:  # not ours: leave it alone
            self._add("foreign_buffers", 1)
            return
        try:
            if valid:
                self.on_buffer(array, valid)
        except Exception as exc:  # the job must never die because of the tracer
            self._add("decode_errors", 1)
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.pool.give_back(address)
        self._add("cupti_buffers", 1)
        self._max("decode_lag_ms_max", (time.monotonic_ns() - completed_ns) // 1_000_000)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until every buffer delivered so far is decoded (the writer thread, after a flush); False (and
        counted in health) if that takes longer than `timeout` seconds: the job is never held up for good."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._add("decode_wait_timeouts", 1)
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    def stop(self) -> None:
        """Decode what is queued, then end the decoder thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=60)
            self._thread = None
        self.health["buffers_added_to_pool"] = self.pool.added

    def _add(self, key: str, n: int) -> None:
        self.health[key] = self.health.get(key, 0) + n

    def _max(self, key: str, value: int) -> None:
        if value > self.health.get(key, 0):
            self.health[key] = int(value)
