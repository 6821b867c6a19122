"""What the Perfetto and Chrome JSON exporters share, free of protobuf: counter track titles. (Overlap lanes that
keep every slice on a track properly nested are model.nesting's, shared with the importers.)"""

from __future__ import annotations

COUNTER_TITLES = {
    "cpu.util": "CPU utilization", "cpu.core.util": "CPU core {i} utilization", "cpu.iowait_pct": "CPU I/O wait",
    "mem.used_bytes": "Host memory used", "mem.util": "Host memory utilization",
    "disk.read_bytes": "Disk read", "disk.write_bytes": "Disk write",
    "net.rx_bytes": "Network received", "net.tx_bytes": "Network sent",
    "gpu.util": "GPU {i} utilization", "gpu.mem_util": "GPU {i} memory utilization",
    "gpu.mem_used_bytes": "GPU {i} memory used", "gpu.power_w": "GPU {i} power",
    "gpu.sm_clock_mhz": "GPU {i} SM clock",
}
"""Counter metric -> display name ({i}: the instance: core, GPU or NIC index)."""


def counter_title(metric: str, instance: int | None) -> str:
    """Display name of a counter track, e.g. ("gpu.util", 0) -> "GPU 0 utilization"."""
    title = COUNTER_TITLES.get(metric)
    has_instance = instance is not None and instance >= 0
    if title is None:
        return f"{metric} [{instance}]" if has_instance else metric
    if "{i}" in title:
        return title.format(i=instance if has_instance else "").replace("  ", " ")
    return f"{title} [{instance}]" if has_instance else title
