"""The rules of following a live capture (ktrace.tui.live_follow), on the indexes of a real capture before and after
it grew: where the window goes, which rows and which selection carry over, when a re-read is due, what the status
line says."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_capture import LOADER, PID, STEP_NS, CpuLoop

from ktrace.tui.first_rows import default_rows
from ktrace.tui.live_follow import (
    FollowState,
    Rerun,
    carried_rows,
    carried_slice,
    followed_viewport,
    holds,
    is_capture_in_progress,
    read_capture,
    store_signature,
)
from ktrace.tui.tracks import TrackIndex
from ktrace.tui.viewmodel import Viewport


@pytest.fixture
def grown(tmp_path: Path) -> tuple[TrackIndex, TrackIndex, CpuLoop, Path]:
    """The index of a 3-step capture, and of the same capture once 2 more steps and a loader thread came."""
    root = tmp_path / "run.ktrace"
    loop = CpuLoop(root)
    loop.append_steps(3)
    _, before = read_capture(root, {})
    loop.add_loader()
    loop.append_steps(2)
    _, after = read_capture(root, {})
    return before, after, loop, root


def test_a_window_showing_everything_keeps_showing_everything(
    grown: tuple[TrackIndex, TrackIndex, CpuLoop, Path],
) -> None:
    before, after, _, _ = grown
    fitted = Viewport(before.t0, before.t1, 100).show(before.t0, before.t1)
    assert followed_viewport(fitted, before, after) == fitted.show(after.t0, after.t1)


def test_a_zoomed_window_keeps_its_span_and_slides_to_the_newest(
    grown: tuple[TrackIndex, TrackIndex, CpuLoop, Path],
) -> None:
    before, after, _, _ = grown
    zoomed = Viewport(before.t1 - STEP_NS, before.t1 + STEP_NS // 50, 100)
    moved = followed_viewport(zoomed, before, after)
    assert moved.span_ns == zoomed.span_ns and moved.width == 100
    assert moved.start_ns < after.t1 <= moved.end_ns
    assert not holds(moved.end_ns, after.t1)
    assert holds(zoomed.end_ns, after.t1)  # the old window no longer shows the newest records


def test_rows_carry_over_by_track_and_new_threads_join(grown: tuple[TrackIndex, TrackIndex, CpuLoop, Path]) -> None:
    before, after, _, _ = grown
    main = [before.by_key[f"host-a/0/p{PID}/t{PID}/nvtx1"], before.by_key[f"host-a/0/p{PID}/t{PID}/nvtx0"]]
    rows = carried_rows(before, main, after, default_rows(after))
    assert [after.tracks[r].key for r in rows[:2]] == [before.tracks[r].key for r in main]  # same order
    assert after.tracks[rows[-1]].key == f"host-a/0/p{PID}/t{LOADER}/nvtx0"  # the new thread's row
    removed = main[:1]  # the user removed the level-0 row: it does not come back
    assert after.by_key[before.tracks[main[1]].key] not in carried_rows(before, removed, after, default_rows(after))


def test_the_selection_is_found_again_or_dropped(grown: tuple[TrackIndex, TrackIndex, CpuLoop, Path]) -> None:
    before, after, _, _ = grown
    track = before.by_key[f"host-a/0/p{PID}/t{PID}/nvtx0"]
    found = carried_slice(before, (track, 1), after)
    assert found is not None
    assert after.tracks[found[0]].starts[found[1]] == before.tracks[track].starts[1]
    assert carried_slice(before, (track, before.tracks[track].size), after) is None


def test_a_re_read_is_due_only_after_a_publish(grown: tuple[TrackIndex, TrackIndex, CpuLoop, Path]) -> None:
    _, _, loop, root = grown
    assert is_capture_in_progress(root)
    seen = store_signature(root)
    loop.writer.append("threads", loop.thread_row(4300, "late"))  # appended, not yet published
    assert store_signature(root) == seen
    loop.append_steps(1)
    assert store_signature(root) != seen
    loop.finish(root)
    assert not is_capture_in_progress(root)


def test_the_status_line_says_live_lag_held_and_ended(grown: tuple[TrackIndex, TrackIndex, CpuLoop, Path]) -> None:
    before, after, _, _ = grown
    state = FollowState(live=True).grown(before, ended=False)
    now = before.t1 + 1_500_000_000
    assert state.status(now) == "● live 600 ms, lag 1.5 s · "
    assert "held: End follows" in FollowState(live=True, following=False).grown(after, False).status(now)
    assert FollowState(live=True).grown(after, ended=True).status(now).startswith("capture ended (")
    assert FollowState().status(now) == ""


def test_a_job_runs_again_once_on_the_newest_trace() -> None:
    job = Rerun()
    assert job.start()
    assert not job.start() and not job.start()  # two growths while it runs: one more run, not two
    assert job.done()
    assert job.start()
    assert not job.done()
