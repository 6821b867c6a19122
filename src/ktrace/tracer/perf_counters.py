"""CPU hardware counters (cycles, instructions, iTLB misses) of the traced command via perf_event_open.

User-space counts of the command's process and the threads/children it creates after attaching
(`inherit`), readable at perf_event_paranoid <= 2. Children's counts join the total when they exit.
Virtual machines and containers often expose no hardware counters: then `open_perf_counters` returns
the reason in one line and ktrace records none.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE = 0, 3
PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS = 0, 1
PERF_COUNT_HW_CACHE_ITLB, OP_READ, RESULT_MISS = 4, 0, 1
FLAG_INHERIT, FLAG_EXCLUDE_KERNEL, FLAG_EXCLUDE_HV = 1 << 1, 1 << 5, 1 << 6
PERF_ATTR_SIZE_VER0 = 64
SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331}
"""perf_event_open syscall numbers per architecture."""

EVENTS: dict[str, tuple[int, int]] = {
    "cpu.cycles": (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    "cpu.instructions": (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
    "cpu.itlb_misses": (PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_ITLB | (OP_READ << 8) | (RESULT_MISS << 16)),
}
"""Counter metric name -> (perf type, config)."""


def _attr(kind: int, config: int) -> bytes:
    """struct perf_event_attr (version 0 layout: type, size, config, sample_period, sample_type,
    read_format, flags bitfield, wakeup_events, bp_type, config1)."""
    flags = FLAG_INHERIT | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV
    return struct.pack("=IIQQQQQIIQ", kind, PERF_ATTR_SIZE_VER0, config, 0, 0, 0, flags, 0, 0, 0)


class PerfCounters:
    """Open counters on one process; `read_deltas()` gives counts since the previous read."""

    def __init__(self, fds: dict[str, int]) -> None:
        self.fds = fds
        self._last = dict.fromkeys(fds, 0)

    def read_deltas(self) -> dict[str, float]:
        """metric -> count since the last call (counters that fail to read are skipped)."""
        out: dict[str, float] = {}
        for metric, fd in self.fds.items():
            try:
                value = struct.unpack("=Q", os.read(fd, 8))[0]
            except (OSError, struct.error):
                continue
            out[metric] = float(value - self._last[metric])
            self._last[metric] = value
        return out

    def close(self) -> None:
        """Close every counter."""
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = {}


def open_perf_counters(pid: int) -> tuple[PerfCounters | None, str | None]:
    """Counters attached to `pid`; (None, one-line reason) when the kernel does not allow any."""
    nr = SYSCALL_NR.get(platform.machine())
    if nr is None or not hasattr(ctypes, "CDLL"):
        return None, f"CPU hardware counters unavailable: perf_event_open not supported on {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    fds: dict[str, int] = {}
    failures: list[str] = []
    for metric, (kind, config) in EVENTS.items():
        attr = ctypes.create_string_buffer(_attr(kind, config), PERF_ATTR_SIZE_VER0 * 2)
        fd = libc.syscall(nr, attr, pid, -1, -1, 0)
        if fd < 0:
            err = ctypes.get_errno()
            failures.append(f"{metric.removeprefix('cpu.')}: {errno.errorcode.get(err, err)}")
        else:
            fds[metric] = fd
    if not fds:
        return None, (
            "CPU hardware counters (cycles, instructions, iTLB misses) unavailable: perf_event_open "
            f"refused ({', '.join(failures)}; perf_event_paranoid={_paranoid()}; VMs often have none)"
        )
    return PerfCounters(fds), None


def _paranoid() -> str:
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return f.read().strip()
    except OSError:
        return "?"
