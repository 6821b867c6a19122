"""Following a capture in progress: when to re-read it, where the view goes as it grows, what the status line says.

`ktrace view` on a store that `ktrace run` is still writing re-reads it every few seconds in a worker (the whole
store: the track index is rebuilt whole anyway, and reading is under half of a refresh; benchmarks/live_view.py) and
swaps the new trace in. The view follows the newest records while they are in view; panning or zooming away holds
it (no more re-reads), `End` resumes. Live means ktrace.model.live.live_status says so; a re-read sees what the
traced processes published (complete batches). No textual here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ktrace.model.errors import KtraceError
from ktrace.model.live import live_status, published
from ktrace.model.store import partitions
from ktrace.model.trace import Trace
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.viewmodel import Viewport, format_duration

FOLLOW_EVERY_S = 2.0
"""Seconds between two looks at a followed capture (a look is a few stat calls; a re-read only when it grew)."""
BUSY_SHARE = 1.0
"""A re-read that took c seconds is followed by at least BUSY_SHARE * c seconds of rest: on a big capture the view
spends at most half a core re-reading (the job it watches may share the host), and the lag stays under about twice
a re-read (at 3.0, a quarter of a core, a 1 M-kernel capture lagged 20 s on a loaded 2-core VM)."""
FIT_SLACK = 0.05
"""A window whose start is within this share of its span from the trace's start shows the whole capture: it keeps
showing all of it as the capture grows (else it keeps its span and slides to the newest records)."""


def is_capture_in_progress(path: Path) -> bool:
    """True when `path` is a capture `ktrace run` is still recording (ktrace.model.live.live_status)."""
    return live_status(path) is not None


Signature = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
"""Per partition (node=…/rank=…), the published length of each of its capture streams."""


def store_signature(path: Path) -> Signature:
    """What each partition of a live capture has published (stream name -> bytes of complete batches): it changes
    when a traced process publishes new batches, and only then is a re-read worth it (a few small reads)."""
    try:
        folders = [folder for _, _, folder in partitions(path)]
    except (OSError, KtraceError):  # a partition appearing or a bad name: the re-read says what is wrong
        return ()
    signature: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for folder in folders:
        done = published(folder)
        streams = tuple(sorted(done.stream_bytes.items())) if done is not None else ()
        signature.append((f"{folder.parent.name}/{folder.name}", streams))
    return tuple(signature)


def rest_after(reload_s: float, every_s: float = FOLLOW_EVERY_S) -> float:
    """Seconds to wait before the next look after a re-read that took `reload_s` seconds."""
    return max(every_s, BUSY_SHARE * reload_s)


@dataclass(frozen=True)
class FollowState:
    """Where the view of a live capture stands (the app keeps one; None-like when the store is not live)."""

    live: bool = False
    """The store was a capture in progress when it was opened."""
    following: bool = True
    """The view moves with the newest records (False: held by a pan or zoom away from the end)."""
    ended: bool = False
    """The capture was finalized: nothing more will come."""
    newest_ns: int = 0
    """End of the newest record read (the trace's clock: ns since the epoch)."""
    recorded_ns: int = 0
    """Newest minus first record read."""
    trouble: str = ""
    """Why the last re-read failed (the view keeps what it had; the next look retries)."""

    def lag_s(self, now_ns: int | None = None) -> float:
        """Now minus the newest record shown, in seconds (how far behind the job the view is)."""
        return max(0.0, ((time.time_ns() if now_ns is None else now_ns) - self.newest_ns) / 1e9)

    def status(self, now_ns: int | None = None) -> str:
        """The status line's lead: "live 12 s, lag 1.4 s · " (held: "… held, End follows · "), or "capture ended
        · "; "" for a store that was never live."""
        if not self.live:
            return ""
        if self.ended:
            return f"capture ended ({format_duration(self.recorded_ns)}) · "
        text = f"● live {format_duration(self.recorded_ns)}, lag {self.lag_s(now_ns):.1f} s"
        if not self.following:
            text += ", held: End follows"
        if self.trouble:
            text += f" (re-read failed: {self.trouble})"
        return text + " · "

    def grown(self, index: TrackIndex, ended: bool) -> FollowState:
        """The state once a re-read gave this index (`ended`: it was the finalized capture)."""
        return replace(self, ended=ended, newest_ns=index.t1, recorded_ns=index.t1 - index.t0, trouble="")


def holds(end_ns: int, t1: int) -> bool:
    """True when a window set by the user, ending at `end_ns`, no longer shows the newest records (ending at `t1`):
    the view is held there and stops following."""
    return end_ns < t1


def followed_viewport(viewport: Viewport, old: TrackIndex, new: TrackIndex) -> Viewport:
    """Where a following view goes when the capture grows from `old` to `new`: a window that showed the whole
    capture shows the whole of it again; a zoomed one keeps its span and slides so that it ends at the newest
    records (with the small margin Viewport.show leaves)."""
    if viewport.start_ns <= old.t0 + FIT_SLACK * viewport.span_ns:
        return viewport.show(new.t0, new.t1)
    margin = viewport.span_ns // 50
    start = max(new.t0, new.t1 + margin - viewport.span_ns)
    return replace(viewport, start_ns=start, end_ns=start + viewport.span_ns)


def carried_rows(old: TrackIndex, rows: list[int], new: TrackIndex, defaults: list[int]) -> list[int]:
    """The timeline rows after a re-read: the rows shown before (by track key, in their order), then the new
    index's default rows that are new tracks (a thread or rank that appeared), which the user has not seen yet."""
    carried = [new.by_key[old.tracks[r].key] for r in rows if old.tracks[r].key in new.by_key]
    fresh = [d for d in defaults if new.tracks[d].key not in old.by_key and d not in carried]
    return carried + fresh


def carried_slice(old: TrackIndex, selection: tuple[int, int], new: TrackIndex) -> tuple[int, int] | None:
    """The selected slice in the new index: same track, same position, when that position still holds the same
    start (newer records come after it); None when the selection cannot be found again."""
    track_id, pos = selection
    key = old.tracks[track_id].key
    new_id = new.by_key.get(key)
    if new_id is None:
        return None
    before, after = old.tracks[track_id], new.tracks[new_id]
    if not (before.ready and after.ready) or pos >= after.size or pos >= before.size:
        return None
    return (new_id, pos) if np.int64(before.starts[pos]) == np.int64(after.starts[pos]) else None


@dataclass
class Rerun:
    """One background job of the view (steps, dashboard) run again on the newest trace once the run in flight ends,
    instead of beside it: a capture that grows faster than the job runs gets it back to back, never piled up."""

    busy: bool = False
    again: bool = False

    def start(self) -> bool:
        """True when the job may start now; else it is marked to run again when the one in flight ends."""
        if self.busy:
            self.again = True
            return False
        self.busy = True
        return True

    def done(self) -> bool:
        """The run in flight ended; True when it must run again (the trace changed meanwhile)."""
        self.busy, again = False, self.again
        self.again = False
        return again


def read_capture(path: Path, load_options: dict[str, bool]) -> tuple[Trace, TrackIndex]:
    """Read the store again and build its whole track index, tracks and links included (in the follow worker)."""
    from ktrace.importers import load
    from ktrace.model.display_text import printable_trace
    from ktrace.tui.index_build import build_index

    trace = printable_trace(load(path, with_ops=load_options.get("with_ops", True)))
    return trace, build_index(trace)
