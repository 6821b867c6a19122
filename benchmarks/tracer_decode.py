"""The tracer's fast path (issue #14) on synthetic CUPTI buffers, without a GPU.

    python benchmarks/tracer_decode.py            # ~1-2 minutes; cupti-python importable for the reference

1. Decode throughput: 8 MB buffers in CUPTI 13.4's byte layout (a training step's record mix) decoded
   (a) by the fast path (buffer -> per-kind columns: numba walk + field reads), and then on to Arrow tables
   (RecordDecoder), and (b) by today's path: cupti-python's own record objects (its parseActivityStruct, as
   its buffer callback does) copied out by RecordExtractor, then RecordDecoder. Records/s of one thread's
   CPU time (time.thread_time) and of wall time. Goal: fast >= 10 M records/s on one core.
2. Interference: a pure-Python loop (the training thread) runs alone, then while the tracer consumes
   buffers at 200 k and at 1 M records/s: a C thread (tests/unit/tracer/cupti_standin.c, built with gcc)
   calls ktrace's registered callbacks as CUPTI would (the pool's buffers hold the records already: CUPTI's
   own copying is not the tracer's cost), the decoder thread decodes, and a writer thread drains and
   converts to Arrow once a second. Goal: slowdown <= 3 % at 200 k records/s.
The last line sums both: `decode: fast <N> records/s, reference <M> records/s; interference at 200k
records/s: <P> %`.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ktrace.tracer.columns import RecordDecoder, generic_api_name  # noqa: E402
from ktrace.tracer.fast_decode import FastDecoder, by_name  # noqa: E402
from ktrace.tracer.fast_path import FastPath, cupti_python_parser  # noqa: E402
from ktrace.tracer.layouts import Layout, layout_for  # noqa: E402
from ktrace.tracer.records import ACTIVITY_KIND, RecordExtractor  # noqa: E402
from ktrace.tracer.synthetic_buffers import SyntheticBuffer, random_buffer  # noqa: E402

BUFFER_RECORDS = 65_000
"""~8 MB of the benchmark mix: the tracer's default buffer size."""


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _timed(fn: Any, repeat: int) -> tuple[float, float]:
    """Best (thread CPU seconds, wall seconds) of `repeat` calls."""
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = time.thread_time(), time.perf_counter()
        fn()
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    return min(cpu), min(wall)


def decode_throughput(layout: Layout, buf: SyntheticBuffer) -> tuple[float, float | None]:
    n = len(buf.offsets)
    fast = FastDecoder(layout)
    fast.decode(buf.data, buf.valid)  # compile (or load numba's cache) outside the timing
    cpu, wall = _timed(lambda: fast.decode(buf.data, buf.valid), 7)
    print(
        f"fast path, buffer -> columns:        {_rate(n, cpu) / 1e6:6.2f} M records/s CPU "
        f"({_rate(n, wall) / 1e6:.2f} M/s wall), {n:,} records, {buf.valid / 2**20:.1f} MB"
    )

    def fast_tables() -> None:
        RecordDecoder(generic_api_name, pid=1).decode(by_name([fast.decode(buf.data, buf.valid)], layout))

    cpu_t, wall_t = _timed(fast_tables, 5)
    print(
        f"fast path, buffer -> Arrow tables:   {_rate(n, cpu_t) / 1e6:6.2f} M records/s CPU "
        f"({_rate(n, wall_t) / 1e6:.2f} M/s wall)"
    )
    parse = cupti_python_parser()
    if parse is None:
        print("reference: cupti-python is not importable here: today's path cannot be timed")
        return _rate(n, cpu), None
    offsets = (buf.offsets + buf.address).tolist()
    m = 20_000  # today's path is ~100x slower: time a slice

    def reference(tables: bool) -> None:
        records = [parse(buf.address, buf.valid, at) for at in offsets[:m]]
        rows: dict[int, list[tuple[Any, ...]]] = {}
        extractor = RecordExtractor()
        extractor.extract(records, rows)
        if tables:
            RecordDecoder(generic_api_name, pid=1).decode(extractor.by_name(rows))

    cpu_r, wall_r = _timed(lambda: reference(False), 3)
    print(
        f"today's path, records -> tuples:     {_rate(m, cpu_r) / 1e6:6.2f} M records/s CPU "
        f"({_rate(m, wall_r) / 1e6:.2f} M/s wall; cupti-python 13.4's classes)"
    )
    cpu_rt, wall_rt = _timed(lambda: reference(True), 3)
    print(
        f"today's path, records -> Arrow:      {_rate(m, cpu_rt) / 1e6:6.2f} M records/s CPU "
        f"({_rate(m, wall_rt) / 1e6:.2f} M/s wall)"
    )
    return _rate(n, cpu), _rate(m, cpu_r)


def _standin() -> Any:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None
    out = Path(tempfile.mkdtemp(prefix="ktrace-bench-")) / "libcupti_standin.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-pthread", str(ROOT / "tests/unit/tracer/cupti_standin.c"), "-o", str(out)],
        check=True,
    )
    return ctypes.CDLL(str(out))


def _python_loop(n: int) -> float:
    """The training thread: pure-Python work that needs the GIL the whole time."""
    start = time.perf_counter()
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1_000_003
    return time.perf_counter() - start


class Tracer:
    """The fast path fed at `rate` records/s by the stand-in's C thread; a writer drains once a second."""

    def __init__(self, lib: Any, layout: Layout, buf: SyntheticBuffer, rate: float) -> None:
        sizes = layout.sizes.astype(np.int64)
        lib.standin_set(
            ctypes.c_uint32(130401),
            ctypes.c_void_p(buf.address),
            ctypes.c_size_t(buf.valid),
            1,
            sizes.ctypes.data_as(ctypes.c_void_p),
        )
        self.path = FastPath(lib, layout, cupti_python_parser() or _no_reference, ACTIVITY_KIND, 8 << 20)
        self.path.checks_left = 0  # the self-checks are a start-up cost, not a steady one
        self.path.buffers.on_start = lambda: self.path.decoder.decode(buf.data, buf.valid) and None  # numba loaded
        for array in self.path.buffers.pool.arrays():  # CUPTI fills buffers on its own thread: not timed here
            array[: buf.valid] = buf.data[: buf.valid]
        lib.standin_copy(0)
        self.path.register()
        self.lib, self.interval = lib, len(buf.offsets) / rate
        self.stop = threading.Event()
        self.records = 0
        self.threads = [threading.Thread(target=self._deliver), threading.Thread(target=self._write)]

    def _deliver(self) -> None:
        due = time.perf_counter()
        while not self.stop.is_set():
            self.lib.cuptiActivityFlushAll(0)  # one buffer, delivered from a pthread through the callbacks
            due += self.interval
            self.stop.wait(max(0.0, due - time.perf_counter()))

    def _write(self) -> None:
        decoder = RecordDecoder(generic_api_name, pid=1)
        while not self.stop.wait(1.0):
            batch = self.path.drain()
            self.records += sum(len(v) for v in batch.values())
            decoder.decode(batch)

    def __enter__(self) -> Tracer:
        self.path.buffers.wait_idle()  # numba loaded and compiled before the clock starts
        for t in self.threads:
            t.start()
        return self

    def cpu_seconds(self) -> float:
        """CPU time of the tracer's own threads so far (decoder and writer; the feeder stands for CUPTI)."""
        threads = [t for t in (self.path.buffers._thread, self.threads[1]) if t is not None and t.ident]
        return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threads if t.is_alive())

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        self.path.stop()


_SPIN: list[Any] = []


def _spinner() -> tuple[Any, float]:
    """A numba loop that runs without the GIL, and its iterations per second (measured once)."""
    if not _SPIN:
        import numba

        @numba.njit(nogil=True)
        def spin(n: int) -> int:  # pragma: no cover - numba
            acc = 0
            for i in range(n):
                acc = (acc * 31 + i) % 1_000_003
            return acc

        spin(10)
        n, start = 2_000_000, time.thread_time()
        spin(n)
        _SPIN.extend([spin, n / max(time.thread_time() - start, 1e-9)])
    return _SPIN[0], _SPIN[1]


def _burn(duty: float, stop: threading.Event) -> None:
    """The control: `duty` of one core burned in C with no GIL (what the tracer's CPU alone costs here)."""
    spin, per_second = _spinner()
    while not stop.is_set():
        spin(int(per_second * 0.01 * duty))
        stop.wait(0.01 * (1.0 - duty))


def _no_reference(buffer: int, valid: int, record: int) -> Any:
    raise RuntimeError("no cupti-python: the self-check is skipped in this benchmark")


def interference(layout: Layout, buf: SyntheticBuffer, rounds: int = 5, loops: int = 35_000_000) -> dict[str, float]:
    lib = _standin()
    if lib is None:
        print("interference: no C compiler to build the CUPTI stand-in; not measured")
        return {}
    # ~3 s a timed loop on this VM: at 200 k records/s (8 MB buffers, ~3 a second; the writer drains once a
    # second) a window of 0.24 s saw zero or one buffer, and the figure was noise
    _python_loop(loops // 10)
    _spinner()
    labels = ("200k", "1M")
    conditions = [*labels, *(f"control {k}" for k in labels)]
    alone: list[float] = []
    slowdown: dict[str, list[float]] = {k: [] for k in conditions}
    delivered: dict[str, list[float]] = {k: [] for k in labels}
    duty: dict[str, list[float]] = {k: [] for k in labels}
    before = _python_loop(loops)
    for _ in range(rounds):
        # Paired: each condition is compared with the loop alone just before and just after it (the mean of the
        # two), so the VM's slow drift between rounds (2.4 s one minute, 2.7 s the next) cancels out
        times: dict[str, float] = {}
        for label, rate in (("200k", 200_000.0), ("1M", 1_000_000.0)):
            with Tracer(lib, layout, buf, rate) as tracer:
                cpu0 = tracer.cpu_seconds()
                times[label] = _python_loop(loops)
                duty[label].append((tracer.cpu_seconds() - cpu0) / times[label])
            delivered[label].append(tracer.path.health().get("fast_path_records", 0) / max(times[label], 1e-9))
            stop = threading.Event()
            burner = threading.Thread(target=_burn, args=(min(1.0, duty[label][-1]), stop))
            burner.start()
            times[f"control {label}"] = _python_loop(loops)
            stop.set()
            burner.join()
        after = _python_loop(loops)
        base = (before + after) / 2
        alone.append(base)
        for k in conditions:
            slowdown[k].append(100.0 * (times[k] / base - 1.0))
        before = after
    out = {}
    print(
        f"pure-Python loop alone: {statistics.median(alone):.3f} s (median of {rounds} rounds, each condition "
        f"paired with the loop alone just before and after it); load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )

    def spread(values: list[float]) -> str:
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        return f"{statistics.median(values):+.1f} % (quartiles {q[0]:+.1f} / {q[2]:+.1f})"

    for label in labels:
        out[label] = statistics.median(slowdown[label])
        print(
            f"  beside the tracer at {label:>4} records/s: slowdown {spread(slowdown[label])}; delivered "
            f"~{statistics.median(delivered[label]) / 1e3:,.0f} k records/s; tracer threads used "
            f"{100 * statistics.median(duty[label]):.1f} % of a core; the same CPU burned without the GIL: "
            f"{spread(slowdown[f'control {label}'])}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the interference test (median)")
    parser.add_argument(
        "--loops",
        type=int,
        default=35_000_000,
        help="iterations of the pure-Python loop timed in each condition (~3 s on a 2-core VM)",
    )
    args = parser.parse_args(argv)
    layout = layout_for(130401, ACTIVITY_KIND)
    assert layout is not None
    buf = random_buffer(BUFFER_RECORDS, layout, ACTIVITY_KIND, seed=1)
    fast, reference = decode_throughput(layout, buf)
    slowdown = interference(layout, buf, args.rounds, args.loops)
    ref = f"{reference:,.0f}" if reference is not None else "n/a"
    p200 = f"{slowdown['200k']:.1f}" if slowdown else "n/a"
    print(f"decode: fast {fast:,.0f} records/s, reference {ref} records/s; interference at 200k records/s: {p200} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
