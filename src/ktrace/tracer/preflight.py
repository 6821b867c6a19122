"""Pre-flight checks for GPU capture: driver present, cupti-python installed, CUDA majors matching.

Cheap (ctypes and package metadata, no `import cupti`), so the launcher and every traced process can
say in one line what is missing and how to fix it before paying for CUPTI.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util


def driver_cuda_version() -> int | None:
    """The CUDA version the driver supports (e.g. 12040), or None without a usable libcuda."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    try:
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except AttributeError:
        return None
    return int(version.value) or None


def cupti_python_version() -> str | None:
    """Installed cupti-python version, or None."""
    try:
        return importlib.metadata.version("cupti-python")
    except importlib.metadata.PackageNotFoundError:
        return None if importlib.util.find_spec("cupti") is None else "unknown"


def _extra_for(driver: int | None) -> str:
    return "ktrace[cu12]" if driver is not None and driver < 13000 else "ktrace[cu13]"


def gpu_capture_problem(driver: int | None = None, cupti: str | None = None, *, probe: bool = True) -> str | None:
    """One line saying why GPU capture cannot run here and how to fix it; None when it can.

    Args:
        driver: driver CUDA version (probed when None and `probe`).
        cupti: cupti-python version (probed when None and `probe`).
        probe: look the two up on this machine.
    """
    if probe:
        driver = driver_cuda_version() if driver is None else driver
        cupti = cupti_python_version() if cupti is None else cupti
    if driver is None:
        hint = "" if cupti else f"; for GPU capture install the driver and pip install '{_extra_for(None)}'"
        return f"no NVIDIA driver (libcuda.so.1 not found): GPU activity not recorded, CPU side and counters only{hint}"
    major = driver // 1000
    if cupti is None:
        return f"cupti-python is not installed: GPU activity not recorded; pip install '{_extra_for(driver)}'"
    cupti_major = int(cupti.split(".")[0]) if cupti[:1].isdigit() else None
    if cupti_major is not None and cupti_major > major:
        return (
            f"cupti-python {cupti} needs a CUDA {cupti_major} driver but this driver supports CUDA "
            f"{major}.{driver % 1000 // 10}: GPU activity not recorded; pip install '{_extra_for(driver)}'"
        )
    if cupti_major == 12 and driver < 12040:
        return f"cupti-python {cupti} needs a CUDA >= 12.4 driver: GPU activity not recorded; update the driver"
    return None
