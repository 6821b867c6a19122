"""What decoding a Kineto file finds besides events (its header, the events dropped or repaired), filled by every
decoding step: the schema's (kineto_schema), the allocator events' (kineto_memory) and the slicer's (kineto_decode).

Its own module so that kineto_schema, which holds kineto_memory's MemArgs in its event types, and kineto_memory,
which counts repaired args here, do not import each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DecodeReport:
    """What decoding found besides events: the header, and what had to be dropped or repaired."""

    header: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    dropped_events: int = 0
    repaired_events: int = 0
    truncated: bool = False
    """The text ended before traceEvents was closed."""
    notes: list[str] = field(default_factory=list)
    exact_ts: bool = False
    """A slice had fractional epoch timestamps (see EXACT_FROM_US): the slices after it are decoded exactly."""
