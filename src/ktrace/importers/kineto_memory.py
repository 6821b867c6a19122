"""The Kineto caching-allocator events (`[memory]`, PyTorch `profile_memory=True`): their typed args and their decoding
on the slow path (the fast path decodes them with the event, kineto_schema.tagged_decoder)."""

from __future__ import annotations

from typing import Any

import msgspec

from ktrace.importers.kineto_decode_report import DecodeReport

MEMORY_EVENT = "[memory]"
"""Name of the allocator's instant events (category cpu_instant_event since PyTorch 2, none in 1.9)."""


class MemArgs(msgspec.Struct, gc=False):
    """The `args` of a caching-allocator event (`[memory]`, PyTorch `profile_memory`), decoded with the event in one
    pass like OpArgs. PyTorch 1.9 wrote only the device and Bytes; 2.x adds the address and the allocator's totals.
    Untyped, so no value fails the fast path (int_array coerces later)."""

    device_type: Any = msgspec.field(default=None, name="Device Type")
    device: Any = msgspec.field(default=None, name="Device Id")
    address: Any = msgspec.field(default=None, name="Addr")
    nbytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")


NO_MEM_ARGS = MemArgs()
_MEM_ARGS_LIST = msgspec.json.Decoder(list[MemArgs | None])


def decode_mem_args(raws: list[msgspec.Raw], report: DecodeReport) -> list[MemArgs]:
    """Decode the raw `args` of allocator events of a slow-path slice (PyTorch 1.9 wrote them without a category);
    an unreadable one counts as repaired and reads as no args."""
    try:
        return [a or NO_MEM_ARGS for a in _MEM_ARGS_LIST.decode(b"[" + b",".join(raws) + b"]")]
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass
    out: list[MemArgs] = []
    for raw in raws:
        try:
            out.append(msgspec.convert(msgspec.json.decode(raw), MemArgs, strict=False) or NO_MEM_ARGS)
        except (msgspec.DecodeError, UnicodeDecodeError, TypeError, ValueError, OverflowError):
            out.append(NO_MEM_ARGS)
            report.repaired_events += 1
    return out
