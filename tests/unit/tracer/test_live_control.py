"""A traced process applying `ktrace ctl` requests (in-process: a real CaptureSession, requests in the marker)."""

from __future__ import annotations

from pathlib import Path

import ktrace
from ktrace.model.control import answer_of, read_requests, send_request
from ktrace.model.outputs import CAPTURE_MARKER
from ktrace.tracer import api
from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.session import CaptureSession


def new_session(tmp_path: Path, config: CaptureConfig) -> CaptureSession:
    root = tmp_path / "run.ktrace"
    session = CaptureSession(root, config, "host", 0)
    session.flush_once()  # its writer, partition and the capture marker exist, as after the first flush
    return session


def test_requests_open_and_close_the_window_and_are_answered(tmp_path: Path) -> None:
    session = new_session(tmp_path, CaptureConfig(delay_s=3600))  # recording would begin in an hour
    changes: list[bool] = []
    session.add_recording_listener(changes.append)
    poller = session._control  # what the writer thread polls about once a second
    assert not session.windows.active and not poller.poll(session)  # no request yet
    send_request(session.root, "start")
    assert poller.poll(session) and session.windows.active and changes == [True]
    assert all(t.finished.is_set() for t in session._timers)  # ctl decides now: --delay's timer will not fire
    assert not poller.poll(session)  # the same request is applied once
    send_request(session.root, "stop")
    send_request(session.root, "start")  # two requests between polls: both applied, in order
    assert poller.poll(session) and changes == [True, False, True]
    assert poller.answer is not None and poller.answer.seq == 3 and poller.answer.ok
    session.flush_once()
    answer = answer_of(session._writer.folder)
    assert answer is not None and answer.seq == 3 and "recording from" in answer.message
    session.close()


def test_steps_record_exactly_that_window_and_a_past_step_is_refused(tmp_path: Path) -> None:
    session = new_session(tmp_path, CaptureConfig())
    api.attach(session)
    try:
        poller = session._control  # what the writer thread polls about once a second
        active = []
        for i in range(12):
            ktrace.step()
            if i == 2:
                send_request(session.root, "steps", (5, 8))
                assert poller.poll(session) and poller.answer is not None and poller.answer.ok
            active.append(session.windows.active)
        assert active == [True, True, False, False, False, True, True, True, False, False, False, False]
        send_request(session.root, "steps", (4, 20))
        assert poller.poll(session)
        assert poller.answer is not None and not poller.answer.ok
        assert poller.answer.message.startswith("step 4 already began (this process is at step 11)")
    finally:
        api.attach(None)
        session.close()


def test_the_marker_keeps_the_latest_requests_and_ignores_what_it_cannot_read(tmp_path: Path) -> None:
    root = tmp_path / "run.ktrace"
    root.mkdir()
    (root / CAPTURE_MARKER).touch()  # as the capture writer leaves it: empty
    assert read_requests(root) == []
    for _ in range(25):
        send_request(root, "stop")
    seqs = [r.seq for r in read_requests(root)]
    assert seqs == list(range(6, 26))
    (root / CAPTURE_MARKER).write_text('{"requests": [{"seq": 1, "action": "explode"}, 7, "x"]}')
    assert read_requests(root) == []
