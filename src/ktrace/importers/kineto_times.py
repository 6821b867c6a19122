"""Kineto timestamps to exact nanoseconds: µs floats where float64 holds the ns fraction, the exact decimal text
where it may not (`LostNanoseconds` asks for the slice to be decoded again, exactly), and µs columns to int64 ns."""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from ktrace.importers.kineto_schema import EXACT_FROM_US, MAX_TS_US


class LostNanoseconds(Exception):
    """A timestamp of EXACT_FROM_US µs or more had a fraction: float64 may have rounded its nanoseconds."""


_NS = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)
_MAX_DIGITS = 19
"""Decimal timestamps with more integer digits are not times (and would not fit in int64 ns)."""


def exact_ns(value: Any) -> int | None:
    """µs (int, Decimal of the exact text, or a float below EXACT_FROM_US) -> int ns, rounded half to even
    below a nanosecond; None if it is not a finite number or too large to be a time."""
    if type(value) is int:
        return value * 1000 if abs(value) < 10**_MAX_DIGITS else None
    if isinstance(value, Decimal):
        if not value.is_finite() or value.adjusted() >= _MAX_DIGITS:
            return None
        return int(_NS.to_integral_value(_NS.scaleb(value, 3)))
    if isinstance(value, float) and math.isfinite(value):
        if EXACT_FROM_US <= abs(value) < MAX_TS_US:
            raise LostNanoseconds
        whole = math.floor(value)
        return whole * 1000 + round((value - whole) * 1000.0)
    return None


def ts_columns(values: list[Any]) -> dict[str, pa.Array]:
    """`ts` (float64 µs) and, where it cannot carry the ns fraction exactly, `ts_frac_ns` (0-999 ns after it).

    Values are ints (integer text) and floats (fast path), or ints and Decimals (exact decoding, see
    kineto_schema.ExactEvent). Raises LostNanoseconds for floats of EXACT_FROM_US µs or more (the slice is then
    decoded exactly); below that bound float64 holds the nanoseconds (see ts_to_ns).
    """
    try:
        ts = pa.array(values, type=pa.float64())  # (typed: inferring the type costs more)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # Decimals, or ints beyond int64
        ts = None
    if ts is not None:
        size = np.abs(ts.to_numpy(zero_copy_only=False))  # (numpy: pyarrow.compute costs ~1 ms per call here)
        if ((size >= EXACT_FROM_US) & (size < MAX_TS_US)).any() and float in set(map(type, values)):
            raise LostNanoseconds  # (larger times, inf too, are dropped later: they need no exact reading)
        return {"ts": ts}
    ns = [exact_ns(v) for v in values]
    return {
        "ts": pa.array([float(t // 1000) if t is not None else float("nan") for t in ns], pa.float64()),
        "ts_frac_ns": pa.array([t % 1000 if t is not None else 0 for t in ns], pa.int16()),
    }


_NS_BLOCK = 1 << 20
"""ts_to_ns converts this many values at a time: its temporaries stay ~8 MB each, whatever the column's length
(on a whole column of 5 M times they held ~0.3 GB of the import's peak, left in the C heap afterwards)."""


def ts_to_ns(ts_us: np.ndarray, base_ns: int) -> np.ndarray:
    """µs (int-valued or with ns decimals) -> int64 ns, exactly: integer part and fraction apart."""
    out = np.empty(len(ts_us), np.int64)
    for lo in range(0, len(ts_us), _NS_BLOCK):
        part = ts_us[lo : lo + _NS_BLOCK]
        whole = np.floor(part)
        frac_ns = np.rint((part - whole) * 1000.0).astype(np.int64)
        out[lo : lo + _NS_BLOCK] = whole.astype(np.int64) * 1000 + frac_ns + np.int64(base_ns)
    return out
