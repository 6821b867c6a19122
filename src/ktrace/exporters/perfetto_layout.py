"""The Perfetto track tree (processes, threads, GPU groups, streams, counters) as protobuf descriptors."""

from __future__ import annotations

from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    CounterDescriptor,
    ProcessDescriptor,
    ThreadDescriptor,
    TracePacket,
    TrackDescriptor,
)

from ktrace.exporters.track_layout import counter_title

TrackKey = tuple[object, ...]

_PERCENT = ("util", "_pct")
_UNIT_NAMES = {"_w": "W", "_mhz": "MHz"}


def counter_descriptor(metric: str) -> CounterDescriptor:
    """Units of a metric: bytes for *_bytes, "%" (one shared y axis) for utilization, W, MHz."""
    if metric.endswith("_bytes"):
        return CounterDescriptor(unit=CounterDescriptor.UNIT_SIZE_BYTES)
    if any(p in metric for p in _PERCENT):
        return CounterDescriptor(unit_name="%", y_axis_share_key="percent")
    for suffix, unit in _UNIT_NAMES.items():
        if metric.endswith(suffix):
            return CounterDescriptor(unit_name=unit)
    return CounterDescriptor(unit=CounterDescriptor.UNIT_COUNT)


@dataclass
class TrackTree:
    """Allocates small sequential track uuids, synthetic unique pids/tids, and their descriptor packets."""

    uuids: dict[TrackKey, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    parents: dict[int, int] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    counter_tracks: set[int] = field(default_factory=set)
    threads: set[int] = field(default_factory=set)
    pending: list[TracePacket] = field(default_factory=list)
    _next_uuid: int = 1
    _next_pid: int = 1
    _next_tid: int = 1

    def __post_init__(self) -> None:
        root = TrackDescriptor(
            uuid=0,
            process_ordering=TrackDescriptor.PROCESS_ORDERING_EXPLICIT,
            thread_ordering=TrackDescriptor.THREAD_ORDERING_EXPLICIT,
        )
        self.pending.append(TracePacket(track_descriptor=root))

    def _new(self, key: TrackKey, name: str, parent: int, desc: TrackDescriptor) -> int:
        uuid = self._next_uuid
        self._next_uuid += 1
        self.uuids[key] = uuid
        self.names[uuid] = name
        self.parents[uuid] = parent
        desc.uuid = uuid
        self.pending.append(TracePacket(track_descriptor=desc))
        return uuid

    def process(self, key: TrackKey, name: str, order: int) -> int:
        """A process track (one per rank, one per node for node-level counters) with a synthetic pid."""
        if key in self.uuids:
            return self.uuids[key]
        pid = self._next_pid
        self._next_pid += 1
        uuid = self._new(
            key,
            name,
            0,
            TrackDescriptor(sibling_order_rank=order, process=ProcessDescriptor(pid=pid, process_name=name)),
        )
        self.pids[uuid] = pid
        return uuid

    def thread(self, key: TrackKey, process: int, name: str, order: int) -> int:
        """A thread track of `process` with a synthetic tid (the real one goes in the name)."""
        if key in self.uuids:
            return self.uuids[key]
        tid = self._next_tid
        self._next_tid += 1
        uuid = self._new(
            key,
            name,
            process,
            TrackDescriptor(
                sibling_order_rank=order, thread=ThreadDescriptor(pid=self.pids[process], tid=tid, thread_name=name)
            ),
        )
        self.threads.add(uuid)
        return uuid

    def custom(
        self, key: TrackKey, parent: int, name: str, order: int, *, group: bool = False, description: str = ""
    ) -> int:
        """A named slice track (or, with group=True, a group whose children keep their explicit order)."""
        if key in self.uuids:
            return self.uuids[key]
        desc = TrackDescriptor(
            name=name, sibling_order_rank=order, sibling_merge_behavior=TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
        )
        if parent:
            desc.parent_uuid = parent
        if group:
            desc.child_ordering = TrackDescriptor.EXPLICIT
        if description:
            desc.description = description
        return self._new(key, name, parent, desc)

    def counter(self, key: TrackKey, parent: int, metric: str, instance: int | None, order: int) -> int:
        """A counter track for one (metric, instance) under a process track."""
        if key in self.uuids:
            return self.uuids[key]
        name = counter_title(metric, instance)
        desc = TrackDescriptor(
            name=name,
            parent_uuid=parent,
            sibling_order_rank=order,
            counter=counter_descriptor(metric),
            description=f"ktrace metric {metric}",
        )
        uuid = self._new(key, name, parent, desc)
        self.counter_tracks.add(uuid)
        return uuid

    def lane(self, base: int, lane: int) -> int:
        """Overflow track `lane` (>= 1) beside track `base`, for slices that would break its nesting."""
        key: TrackKey = ("lane", base, lane)
        if key in self.uuids:
            return self.uuids[key]
        parent = base if base in self.threads or base in self.pids else self.parents.get(base, 0)
        return self.custom(
            key,
            parent,
            f"{self.names[base]} (overlap {lane})",
            10_000 + lane,
            description="slices that overlap others on the track without nesting",
        )

    def take_packets(self) -> list[TracePacket]:
        """Descriptor packets created since the last call (write them before their tracks' events)."""
        out, self.pending = self.pending, []
        return out
