"""Requests to a running capture (`ktrace ctl`) and the traced processes' answers, as files in the store.

`ktrace ctl` writes its request into the capture marker at the store's root (`.capture`, written whole with
write_atomically, so a traced process reads either the old requests or the new ones): a JSON object whose
"requests" list holds the latest requests, each with an increasing `seq`. Every traced process's writer thread
checks the marker about once a second, applies the requests it has not applied yet, in order, and answers in its
own partition.json under "control": the newest `seq` it applied, whether that worked and a line saying what it
did. Stdlib only: the traced processes import it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from ktrace.model.layout import PARTITION_META_FILE
from ktrace.model.outputs import CAPTURE_MARKER, write_atomically

__all__ = ["ACTIONS", "CONTROL_KEY", "ControlAnswer", "ControlRequest", "answer_of", "read_requests", "send_request"]

ACTIONS = ("start", "stop", "steps")
"""start: record from now; stop: stop recording now; steps: record steps A..B-1 (counted by ktrace.step())."""
CONTROL_KEY = "control"
"""The key of partition.json under which a traced process answers."""
KEPT_REQUESTS = 20
"""Requests kept in the marker: a process that checks late still applies every one sent since it last did."""


@dataclass(frozen=True)
class ControlRequest:
    """One request to a running capture."""

    seq: int
    """Increasing number of the request (1 for the first)."""
    action: str
    """One of ACTIONS."""
    steps: tuple[int, int] | None = None
    """[A, B) for "steps"."""
    sent_ns: int = 0
    """When `ktrace ctl` sent it (CLOCK_REALTIME)."""

    def to_dict(self) -> dict[str, Any]:
        """The marker's form."""
        return {
            "seq": self.seq,
            "action": self.action,
            "steps": list(self.steps) if self.steps else None,
            "sent_ns": self.sent_ns,
        }

    @classmethod
    def from_dict(cls, raw: object) -> ControlRequest | None:
        """Parse one request; None when malformed (it is then ignored)."""
        if not isinstance(raw, dict):
            return None
        seq, action, steps, sent = raw.get("seq"), raw.get("action"), raw.get("steps"), raw.get("sent_ns", 0)
        if not _is_int(seq) or action not in ACTIONS or not _is_int(sent):
            return None
        window: tuple[int, int] | None = None
        if action == "steps":
            if not (isinstance(steps, list) and len(steps) == 2 and all(_is_int(v) for v in steps)):
                return None
            if not 0 <= steps[0] < steps[1]:
                return None
            window = (steps[0], steps[1])
        return cls(seq, action, window, sent)


@dataclass(frozen=True)
class ControlAnswer:
    """A traced process's answer to the newest request it applied."""

    seq: int
    """The request answered (those before it were applied too)."""
    ok: bool
    """False when the process could not do what was asked (a step window that already began)."""
    message: str
    """What it did, or why not: one line."""
    pid: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The partition.json form."""
        return {"seq": self.seq, "ok": self.ok, "message": self.message, "pid": self.pid}

    @classmethod
    def from_dict(cls, raw: object) -> ControlAnswer | None:
        """Parse an answer; None when absent or malformed."""
        if not isinstance(raw, dict):
            return None
        seq, ok, message, pid = raw.get("seq"), raw.get("ok"), raw.get("message"), raw.get("pid", 0)
        if not _is_int(seq) or not isinstance(ok, bool) or not isinstance(message, str) or not _is_int(pid):
            return None
        return cls(seq, ok, message, pid)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def read_requests(root: Path) -> list[ControlRequest]:
    """The requests in the capture marker, oldest first ([] when it holds none or is unreadable)."""
    try:
        text = (root / CAPTURE_MARKER).read_bytes()[: 1 << 20]
        raw = json.loads(text) if text.strip() else {}
    except (OSError, ValueError, RecursionError):
        return []
    items = raw.get("requests") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        return []
    found = [r for r in map(ControlRequest.from_dict, items) if r is not None]
    return sorted(found, key=lambda r: r.seq)


def send_request(root: Path, action: str, steps: tuple[int, int] | None = None) -> ControlRequest:
    """Add a request to the capture marker of the live capture `root` (replaced whole); returns it."""
    earlier = read_requests(root)
    request = ControlRequest(max((r.seq for r in earlier), default=0) + 1, action, steps, time.time_ns())
    kept = [*earlier, request][-KEPT_REQUESTS:]
    text = json.dumps({"requests": [r.to_dict() for r in kept]}, indent=1)
    write_atomically(root / CAPTURE_MARKER, text.encode())
    return request


def answer_of(partition: Path) -> ControlAnswer | None:
    """The answer the partition folder's process gave last (None: it has answered nothing)."""
    try:
        raw = json.loads((partition / PARTITION_META_FILE).read_bytes()[: 1 << 20])
    except (OSError, ValueError, RecursionError):
        return None
    return ControlAnswer.from_dict(raw.get(CONTROL_KEY)) if isinstance(raw, dict) else None
