"""CaptureConfig: what `ktrace run` records and when, passed to traced processes as JSON in KTRACE_CONFIG."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any

ENV_CAPTURE_DIR = "KTRACE_CAPTURE_DIR"
"""Run folder of the capture; its presence is what turns the startup hook on in a process."""
ENV_CONFIG = "KTRACE_CONFIG"
"""The CaptureConfig as JSON."""
ENV_LAUNCHER_PID = "KTRACE_LAUNCHER_PID"
"""pid of the `ktrace run` launcher (a traced process whose parent it is is the command itself)."""

ACTIVITY_GROUPS: dict[str, tuple[str, ...]] = {
    "kernel": ("CONCURRENT_KERNEL",),
    "runtime": ("RUNTIME",),
    "driver": ("DRIVER",),
    "memcpy": ("MEMCPY", "MEMCPY2"),
    "memset": ("MEMSET",),
    "sync": ("SYNCHRONIZATION",),
    "nvtx": ("MARKER", "MARKER_DATA", "NAME"),
    "external": ("EXTERNAL_CORRELATION",),
    "overhead": ("OVERHEAD",),
    "resources": ("DEVICE", "CONTEXT", "STREAM"),
}
"""`--kinds` names -> CUPTI ActivityKind member names (cupti.md §1.6)."""

DEFAULT_KINDS = tuple(ACTIVITY_GROUPS)
CAPTURE_RANGES = ("none", "cudaProfilerApi")
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 60_000
MIN_PUBLISH_S, MAX_PUBLISH_S = 0.5, 3600.0


class ConfigError(ValueError):
    """A capture option is out of range or malformed (the CLI turns it into a usage error)."""


@dataclass(frozen=True)
class CaptureConfig:
    """Capture options shared by the launcher and every traced process."""

    kinds: tuple[str, ...] = DEFAULT_KINDS
    """Activity groups to record (keys of ACTIVITY_GROUPS)."""
    gpu: bool = True
    """Start CUPTI in processes that import a CUDA library (False: CPU side only)."""
    interval_ms: int = 500
    """Counter sampling interval of the launcher."""
    counters: bool = True
    """Sample CPU/GPU counters from the launcher."""
    delay_s: float = 0.0
    """Start recording this long after the launch."""
    duration_s: float | None = None
    """Stop recording this long after it started (None: until the end)."""
    steps: tuple[int, int] | None = None
    """Record steps [A, B) counted by ktrace.step() (None: every step)."""
    capture_range: str = "none"
    """"cudaProfilerApi": record only between cudaProfilerStart/Stop (and ktrace.start()/stop())."""
    trace_children: bool = False
    """Also trace launcher agents and multiprocessing children (DataLoader workers)."""
    ranks: tuple[int, ...] | None = None
    """Trace only these ranks (None: all)."""
    buffer_mb: int = 8
    """Size of each CUPTI activity buffer."""
    flush_s: float = 1.0
    """The writer thread flushes CUPTI and appends rows at least this often."""
    publish_s: float = 5.0
    """What was appended is published (readable by `ktrace` verbs while the job runs) at least this often."""
    python_sample_ms: int | None = None
    """Sample every thread's Python stack this often, in ms (ktrace.tracer.python_sampler; None: off)."""
    t0_ns: int = 0
    """Launch time (time.time_ns() in the launcher): the origin of --delay and --duration."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Forward-compatible options unknown to this version."""

    @property
    def windowed(self) -> bool:
        """True when recording does not simply run from start to end."""
        return self.delay_s > 0 or self.duration_s is not None or self.steps is not None or self.capture_range != "none"

    def activity_kinds(self) -> list[str]:
        """CUPTI ActivityKind names to enable, in enabling order (kernels first: Kineto PR #542)."""
        names: list[str] = []
        for group in ("kernel", *self.kinds):
            if group in self.kinds:
                names.extend(k for k in ACTIVITY_GROUPS[group] if k not in names)
        return names

    def to_json(self) -> str:
        """Serialise for the KTRACE_CONFIG variable."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CaptureConfig:
        """Parse KTRACE_CONFIG; unknown keys go to `extra`, lists become tuples."""
        raw = json.loads(text) if text else {}
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in raw.items() if k in names}
        kwargs.setdefault("extra", {}).update({k: v for k, v in raw.items() if k not in names})
        for key in ("kinds", "steps", "ranks"):
            if kwargs.get(key) is not None:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> CaptureConfig:
        """The config of this traced process (defaults when KTRACE_CONFIG is unset or unreadable)."""
        env = os.environ if environ is None else environ
        try:
            return cls.from_json(env.get(ENV_CONFIG, ""))
        except (ValueError, TypeError):
            return cls()


def parse_steps(text: str) -> tuple[int, int]:
    """`A:B` -> (A, B): record steps A (inclusive) to B (exclusive), counted from 0 by ktrace.step()."""
    a, sep, b = text.partition(":")
    try:
        start, stop = int(a or 0), int(b)
    except ValueError:
        raise ConfigError(f"--steps {text!r}: expected A:B with integers, e.g. 10:20") from None
    if not sep or start < 0 or stop <= start:
        raise ConfigError(f"--steps {text!r}: expected A:B with 0 <= A < B, e.g. 10:20")
    return start, stop


def parse_kinds(text: str) -> tuple[str, ...]:
    """`kernel,memcpy,...` (or `all`) -> validated activity groups."""
    items = [k.strip() for k in text.split(",") if k.strip()]
    if items == ["all"]:
        return DEFAULT_KINDS
    unknown = [k for k in items if k not in ACTIVITY_GROUPS]
    if unknown or not items:
        raise ConfigError(
            f"--kinds: unknown kind(s) {', '.join(unknown) or '(none)'}; "
            f"choose from {', '.join(ACTIVITY_GROUPS)} or all"
        )
    return tuple(dict.fromkeys(items))


def parse_ranks(text: str) -> tuple[int, ...]:
    """`0,1,4-7` -> (0, 1, 4, 5, 6, 7)."""
    from ktrace.model.layout import parse_rank_list

    try:
        return parse_rank_list(text)
    except ValueError as exc:
        raise ConfigError(f"--ranks {text!r}: {exc}") from None


def check_publish(seconds: float) -> float:
    """Validate --publish (0.5 s to 1 hour)."""
    if not MIN_PUBLISH_S <= seconds <= MAX_PUBLISH_S:
        raise ConfigError(f"--publish {seconds:g}: must be between {MIN_PUBLISH_S:g} and {MAX_PUBLISH_S:g} seconds")
    return seconds


def check_interval(ms: int) -> int:
    """Validate --interval (100 ms to 60 s)."""
    if not MIN_INTERVAL_MS <= ms <= MAX_INTERVAL_MS:
        raise ConfigError(f"--interval {ms}: must be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} ms")
    return ms
