"""Counters sampled by the `ktrace run` launcher: CPU, memory, I/O (psutil), GPUs (NVML), perf events.

Rows go to the node's counters table (rank = NODE_RANK) with the metric names of
ktrace.model.schema.COUNTER_METRICS; `instance` is the core or GPU index, -1 for host totals. Byte and
event counters are deltas over the sampling interval.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

Sample = list[tuple[str, int, float]]
"""(metric, instance, value) rows of one sampling instant."""


class HostCounters:
    """CPU utilization (total and per core), I/O wait, memory, disk and network bytes via psutil."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        psutil.cpu_percent(percpu=True)  # primes the since-last-call counters
        psutil.cpu_times_percent()
        self._disk = self._disk_bytes()
        self._net = self._net_bytes()

    def _disk_bytes(self) -> tuple[int, int] | None:
        io = self.psutil.disk_io_counters()
        return None if io is None else (io.read_bytes, io.write_bytes)

    def _net_bytes(self) -> tuple[int, int] | None:
        io = self.psutil.net_io_counters()
        return None if io is None else (io.bytes_recv, io.bytes_sent)

    def sample(self) -> Sample:
        """One sample of every host metric."""
        ps = self.psutil
        rows: Sample = []
        cores = ps.cpu_percent(percpu=True)
        rows += [("cpu.core.util", i, float(v)) for i, v in enumerate(cores)]
        if cores:
            rows.append(("cpu.util", -1, float(sum(cores) / len(cores))))
        rows.append(("cpu.iowait_pct", -1, float(getattr(ps.cpu_times_percent(), "iowait", 0.0))))
        mem = ps.virtual_memory()
        rows += [("mem.used_bytes", -1, float(mem.total - mem.available)), ("mem.util", -1, float(mem.percent))]
        for names, attr, getter in (
            (("disk.read_bytes", "disk.write_bytes"), "_disk", self._disk_bytes),
            (("net.rx_bytes", "net.tx_bytes"), "_net", self._net_bytes),
        ):
            now, before = getter(), getattr(self, attr)
            if now is not None and before is not None:
                rows += [(names[0], -1, float(now[0] - before[0])), (names[1], -1, float(now[1] - before[1]))]
            setattr(self, attr, now)
        return rows


class GpuCounters:
    """Per-GPU utilization, memory, power and SM clock via NVML (nvidia-ml-py)."""

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

    def sample(self) -> Sample:
        """One sample of every GPU metric (a metric a GPU does not support is skipped)."""
        nv = self.nvml
        rows: Sample = []
        readers = (
            lambda h: [
                ("gpu.util", float(nv.nvmlDeviceGetUtilizationRates(h).gpu)),
                ("gpu.mem_util", float(nv.nvmlDeviceGetUtilizationRates(h).memory)),
            ],
            lambda h: [("gpu.mem_used_bytes", float(nv.nvmlDeviceGetMemoryInfo(h).used))],
            lambda h: [("gpu.power_w", nv.nvmlDeviceGetPowerUsage(h) / 1000.0)],
            lambda h: [("gpu.sm_clock_mhz", float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)))],
        )
        for i, handle in enumerate(self.handles):
            for read in readers:
                try:
                    rows += [(m, i, v) for m, v in read(handle)]
                except nv.NVMLError:
                    continue
        return rows

    def close(self) -> None:
        """Shut NVML down."""
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def open_gpu_counters() -> tuple[GpuCounters | None, str | None]:
    """NVML counters, or (None, one-line reason)."""
    try:
        counters = GpuCounters()
    except Exception as exc:  # pynvml raises NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"GPU counters unavailable: NVML failed ({type(exc).__name__}: {exc})"
    if not counters.handles:
        counters.close()
        return None, "GPU counters unavailable: NVML sees no GPU"
    return counters, None


class CounterSampler:
    """A daemon thread sampling every source at `interval_ms` and appending to the node's partition.

    Args:
        root: run folder.
        node: host name.
        interval_ms: sampling interval.
        pid: the traced command's pid (for CPU hardware counters), or None.
        gpu: also sample NVML.
    """

    def __init__(self, root: Path, node: str, interval_ms: int, pid: int | None, gpu: bool = True) -> None:
        from ktrace.model.capture import CaptureWriter
        from ktrace.model.schema import NODE_RANK
        from ktrace.tracer.perf_counters import open_perf_counters

        self.interval_s = interval_ms / 1000.0
        self.writer = CaptureWriter(root, node, NODE_RANK)
        self.notes: list[str] = []
        self.sources: list[Any] = [HostCounters()]
        if gpu:
            nvml, why = open_gpu_counters()
            self.sources += [nvml] if nvml else []
            self.notes += [why] if why else []
        self.perf = None
        if pid is not None:
            self.perf, why = open_perf_counters(pid)
            self.notes += [why] if why else []
        self.samples = 0
        self.failed: OSError | None = None
        """Why the sampling thread stopped writing (a full disk); stop() raises it."""
        self._rows: list[tuple[int, str, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ktrace-counters", daemon=True)

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def sample_once(self) -> None:
        """Take one sample of every source now."""
        ts = time.time_ns()
        for source in self.sources:
            try:
                self._rows += [(ts, m, i, v) for m, i, v in source.sample()]
            except Exception:
                continue
        if self.perf is not None:
            self._rows += [(ts, m, -1, v) for m, v in self.perf.read_deltas().items()]
        self.samples += 1

    def _loop(self) -> None:
        last_write = time.monotonic()
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.interval_s
            self.sample_once()
            if time.monotonic() - last_write >= 1.0:
                try:
                    self._write()
                except OSError as exc:  # a full disk: sampling ends, and stop() raises it (no thread traceback)
                    self.failed = exc
                    return
                last_write = time.monotonic()

    def _write(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        import pyarrow as pa

        c = list(zip(*rows, strict=False))
        self.writer.append(
            "counters",
            pa.table(
                {
                    "ts_ns": pa.array(c[0], pa.int64()),
                    "metric": pa.array(c[1], pa.string()),
                    "instance": pa.array(c[2], pa.int32()),
                    "value": pa.array(c[3], pa.float64()),
                }
            ),
        )
        self.writer.publish()  # readable while the job runs (ktrace.model.live), about once a second
        self.writer.write_partition_meta({}, [])

    def stop(self) -> None:
        """Take a last sample, write everything and close the sources."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            if self.failed is not None:
                raise self.failed
            self.sample_once()
            self._write()
        finally:
            self.writer.close()
            for source in self.sources:
                if isinstance(source, GpuCounters):
                    source.close()
            if self.perf is not None:
                self.perf.close()
