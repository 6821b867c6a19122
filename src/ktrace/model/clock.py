"""Clock alignment of multi-host traces: the per-host offsets meta.json keeps, and what the estimator reads.

Hosts' clocks disagree (NTP keeps them within ~ms at best). `analysis.clock_alignment.estimate_offsets` finds each
host's offset (and drift) against a reference host from events that must coincide; `model.alignment` shifts the
timestamps by them. These types live in the model so that the store, the importers and the tracer (which may not
import analysis) share them; this module imports no polars, so the tracer's startup stays light.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ktrace.model.errors import ExitCode, KtraceError

CLOCK_ENV = "KTRACE_CLOCK"
"""Set to "raw" to read stores with each host's timestamps as recorded (default "aligned")."""
CLOCK_MODES = ("aligned", "raw")


def clock_mode(mode: str | None = None) -> str:
    """`mode`, else $KTRACE_CLOCK, else "aligned"; KtraceError (usage, exit 2) for anything else (model.alignment
    applies it; here, without polars, for the rank-by-rank summary's early start)."""
    value = (mode or os.environ.get(CLOCK_ENV) or "aligned").strip().lower()
    if value not in CLOCK_MODES:
        raise KtraceError(f"{CLOCK_ENV}={value!r}: expected one of {', '.join(CLOCK_MODES)}", ExitCode.USAGE)
    return value


METHODS = ("collectives:sequence", "collectives:order", "clock_pairs", "single_host", "none")
"""How an alignment was found: matched NCCL collectives (by sequence number and process group, or by their order
on each rank), the tracer's clock pairs, one host only (never shifted), or not at all (never shifted)."""


@dataclass(frozen=True)
class ClockPair:
    """Two clocks read together by `ktrace run` (best of several reads): CLOCK_REALTIME and the CUPTI clock."""

    realtime_ns: int
    gpu_ns: int
    """cupti.get_timestamp(): the clock of every GPU record (CLOCK_REALTIME-based on Linux)."""
    monotonic_ns: int = 0
    error_ns: int = 0
    """Half the time the reads took: the pair is exact to about this much."""

    def to_dict(self) -> dict[str, int]:
        """As stored in partition.json."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClockPair:
        """From partition.json; ValueError if a field is missing or not an integer."""
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in d]
        if missing:
            raise ValueError(f"clock pair without {', '.join(missing)}")
        values = {f.name: d[f.name] for f in dataclasses.fields(cls)}
        if any(not isinstance(v, int) or isinstance(v, bool) for v in values.values()):
            raise ValueError("clock pair fields must be integers")
        return cls(**values)


@dataclass(frozen=True)
class HostClock:
    """One host's clock against the reference host's: aligned = t - (offset_ns + drift_ppm * 1e-6 * (t - anchor_ns)),
    with t and anchor_ns read on this host's clock."""

    host: str
    offset_ns: int = 0
    """This host's clock minus the reference's at anchor_ns."""
    drift_ppm: float = 0.0
    """How fast this host's clock runs against the reference (µs per second); 0 unless fitting it helped."""
    anchor_ns: int = 0
    matched: int = 0
    """Events the estimate rests on (collectives matched with the reference host, or clock pairs)."""
    rejected: int = 0
    """Matched events left out as outliers."""
    residual_p50_ns: int | None = None
    residual_p99_ns: int | None = None
    """What remains, once aligned, of the mismatch of this host's ranks' collective ends with all ranks' median."""


@dataclass(frozen=True)
class ClockAlignment:
    """Per-host clock offsets of a trace, how they were found, and how well they fit (meta.json "clock_alignment")."""

    method: str = "none"
    """One of METHODS."""
    reference_host: str = ""
    hosts: tuple[HostClock, ...] = ()
    collectives: int = 0
    """Collectives matched across ranks."""
    residual_p50_ns: int | None = None
    residual_p99_ns: int | None = None
    """Over every rank and matched collective: |aligned end - median aligned end of that collective|."""
    note: str = ""
    """Why alignment was impossible, or what it assumes."""
    applied: bool = False
    """True when the timestamps next to this meta are already aligned (False: as recorded, each host's clock)."""

    @property
    def shifts(self) -> bool:
        """Whether aligning moves any timestamp (never for one host or when alignment was impossible)."""
        return self.method not in ("none", "single_host") and any(h.offset_ns or h.drift_ppm for h in self.hosts)

    def host(self, name: str) -> HostClock | None:
        """The clock of host `name`, if known."""
        return next((h for h in self.hosts if h.host == name), None)

    def to_dict(self) -> dict[str, Any]:
        """As stored in meta.json."""
        d = dataclasses.asdict(self)
        d["hosts"] = [dataclasses.asdict(h) for h in self.hosts]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClockAlignment:
        """From meta.json; ValueError (with what is wrong) unless every field has its type."""
        hosts = d.get("hosts", [])
        if not isinstance(hosts, list) or not all(isinstance(h, dict) for h in hosts):
            raise ValueError("clock_alignment.hosts must be a list of objects")
        parsed = tuple(_typed(HostClock, h, f"clock_alignment.hosts[{i}]") for i, h in enumerate(hosts))
        alignment = _typed(cls, {**d, "hosts": ()}, "clock_alignment")
        if alignment.method not in METHODS:
            raise ValueError(f"clock_alignment.method {alignment.method!r} is not one of {', '.join(METHODS)}")
        return dataclasses.replace(alignment, hosts=parsed)


_INT_LIMIT = 2**62
"""Integers of meta.json's clock_alignment (ns) lie within +/- this (146 years): a timestamp plus an offset stays in
an Int64 column."""
_DRIFT_LIMIT_PPM = 1e6
"""A clock that runs twice as fast as the reference's, or stands still: no host's does; more overflows the shift."""

_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "int | None": (int, type(None)),
}


def _typed(cls: type[Any], d: Mapping[str, Any], where: str) -> Any:
    """cls(**d) with unknown keys dropped and each known one checked against the field's annotation."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in d or f.name == "hosts":
            continue
        value: Any = d[f.name]
        kinds = _TYPES.get(str(f.type), (object,))
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValueError(f"{where}.{f.name} is {type(value).__name__}, expected {f.type}")
        if str(f.type) == "float":
            value = float(d[f.name])
            if not (math.isfinite(value) and abs(value) <= _DRIFT_LIMIT_PPM):
                raise ValueError(
                    f"{where}.{f.name} is {value!r}, expected a finite number within +/-{_DRIFT_LIMIT_PPM:g}"
                )
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT_LIMIT:
            raise ValueError(f"{where}.{f.name} is {value}, expected an integer within +/-2**62")
        kwargs[f.name] = value
    return cls(**kwargs)


def reference_clock_note(hosts: Sequence[str]) -> str:
    """The line `ktrace info` shows for a trace from `hosts` that carries no alignment (older stores, one host)."""
    if len(hosts) <= 1:
        return "one host: timestamps as recorded (never shifted)"
    return f"{len(hosts)} hosts, no clock alignment recorded: timestamps as each host recorded them"
