"""Kineto JSON that msgspec refuses, made decodable: values nested deeper than kineto_limits.MAX_DEPTH flattened to
null (`decode_shallow_if_deep`, the one place that handles RecursionError), invalid UTF-8 replaced (`valid_utf8`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from ktrace.importers.kineto_decode_report import DecodeReport
from ktrace.importers.kineto_limits import MAX_DEPTH, flatten_deep


class DeepJSONError(msgspec.DecodeError):
    """Invalid JSON found after values nested too deep were flattened: the message's byte offsets are those of
    the flattened copy, which is `shift` bytes shorter (flattening shortens only deep values, so an offset
    counted from the end of the data stays right)."""

    def __init__(self, message: str, shift: int) -> None:
        super().__init__(message)
        self.shift = shift


_T = TypeVar("_T")


def decode_shallow_if_deep(
    decode: Callable[[bytes | bytearray | memoryview], _T], data: bytes | bytearray | memoryview, report: DecodeReport
) -> _T:
    """`decode(data)`; if msgspec recursed too deep, `decode` of `data` with values deeper than MAX_DEPTH
    replaced by null (noted once). The one place that handles RecursionError when decoding Kineto JSON.

    Raises DeepJSONError (a DecodeError) if the flattened copy does not decode either.
    """
    try:
        return decode(data)
    except RecursionError:
        pass
    flat, replaced = flatten_deep(data)
    note = f"values nested deeper than {MAX_DEPTH} levels replaced by null"
    if replaced and note not in report.notes:
        report.notes.append(note)
    try:
        return decode(flat)
    except msgspec.DecodeError as exc:
        raise DeepJSONError(str(exc), len(data) - len(flat)) from None


def valid_utf8(data: bytes | bytearray | memoryview) -> bytearray:
    """`data` with invalid UTF-8 sequences replaced (msgspec refuses them with UnicodeDecodeError)."""
    return bytearray(bytes(data).decode("utf-8", "replace").encode("utf-8"))
