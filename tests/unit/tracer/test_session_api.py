"""CaptureSession + the Python API in-process: ranges, steps windows, threads, partition files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import ktrace
from ktrace.model import store
from ktrace.tracer import api
from ktrace.tracer.config import CaptureConfig
from ktrace.tracer.session import CaptureSession


@pytest.fixture
def session(tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(config: CaptureConfig) -> CaptureSession:
        s = CaptureSession(tmp_path / "run.ktrace", config, "host", 0)
        api.attach(s)
        return s

    yield make
    api.attach(None)


def test_api_without_ktrace_run_is_nvtx_only() -> None:
    api.attach(None)
    with ktrace.annotate("forward"):
        pass
    assert isinstance(ktrace.step(), int)
    with ktrace.step() as index:  # the block form works without `ktrace run` too
        assert isinstance(index, int)
    assert ktrace.start() is False and ktrace.stop() is False


def test_annotate_and_step_ranges_reach_the_capture(session, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = session(CaptureConfig())
    for _ in range(3):
        ktrace.step()
        with ktrace.annotate("forward"):
            with ktrace.annotate("attention"):
                pass
    s.close()
    store.finalize(tmp_path / "run.ktrace")
    t = store.read(tmp_path / "run.ktrace")
    names = t.ranges.sort("start_ns")["name"].cast(str).to_list()
    assert names.count("forward") == 3 and names.count("attention") == 3
    # The last step has no next step() call: it still counts, ending with the last range inside it.
    assert [n for n in names if n.startswith("ProfilerStep")] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    depth = dict(zip(t.ranges["name"].cast(str), t.ranges["depth"], strict=False))
    assert depth["ProfilerStep#2"] == 0 and depth["forward"] == 1 and depth["attention"] == 2
    last = t.ranges.filter(t.ranges["name"].cast(str) == "ProfilerStep#2").row(0, named=True)
    work = t.ranges.filter(t.ranges["name"].cast(str) == "forward").sort("start_ns").row(-1, named=True)
    assert last["end_ns"] == work["end_ns"]
    assert threading.get_native_id() in t.threads["tid"].to_list()
    assert t.meta.health.get("writer_errors", 0) == 0


def test_step_is_also_a_context_manager(session, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`with ktrace.step():` used to raise TypeError: 'int' object does not support the context manager protocol."""
    s = session(CaptureConfig())
    for i in range(12):
        with ktrace.step() as index:
            assert index == i
            with ktrace.annotate("forward"):
                pass
        with ktrace.annotate("between"):  # outside any step: not nested
            pass
    s.close()
    store.finalize(tmp_path / "run.ktrace")
    t = store.read(tmp_path / "run.ktrace").ranges.sort("start_ns")
    names = t["name"].cast(str).to_list()
    assert [n for n in names if n.startswith("ProfilerStep")] == [f"ProfilerStep#{i}" for i in range(12)]
    depth = {(r["name"], r["start_ns"]): r["depth"] for r in t.iter_rows(named=True)}
    assert {d for (n, _), d in depth.items() if n == "forward"} == {1}
    assert {d for (n, _), d in depth.items() if n == "between"} == {0}
    steps = t.filter(t["name"].cast(str).str.starts_with("ProfilerStep"))
    between = t.filter(t["name"].cast(str) == "between")
    assert (steps["end_ns"].to_numpy() <= between["start_ns"].to_numpy()).all()


def test_steps_window_keeps_only_those_steps(session, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = session(CaptureConfig(steps=(2, 4)))
    for i in range(6):
        ktrace.step()
        with ktrace.annotate(f"work{i}"):
            pass
    s.close()
    store.finalize(tmp_path / "run.ktrace")
    t = store.read(tmp_path / "run.ktrace")
    assert sorted(n for n in t.ranges["name"].cast(str).to_list() if n.startswith("work")) == ["work2", "work3"]
    assert t.meta.health["outside_window_records"] > 0


def test_start_stop_pause_recording(session, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = session(CaptureConfig(capture_range="cudaProfilerApi"))
    with ktrace.annotate("before"):
        pass
    assert ktrace.start() is True
    with ktrace.annotate("inside"):
        pass
    assert ktrace.stop() is True
    with ktrace.annotate("after"):
        pass
    s.close()
    store.finalize(tmp_path / "run.ktrace")
    assert store.read(tmp_path / "run.ktrace").ranges["name"].cast(str).to_list() == ["inside"]


def test_forked_child_abandons_the_session(session) -> None:  # type: ignore[no-untyped-def]
    s = session(CaptureConfig())
    s.abandon()
    assert api.current_session() is None
    s.close()  # a no-op: nothing written by the dead copy


def test_a_close_interrupted_by_another_close_neither_deadlocks_nor_writes_twice(session, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`ktrace run` forwards a SIGTERM to its command, which a process-group kill delivered already: the second
    one ran the handler's close() inside the first, between bytecodes of its locked ranges swap, and waited on the
    lock the outer close held (a CI run waited 90 s). The inner close must return at once."""
    s = session(CaptureConfig())
    with ktrace.annotate("kept"):
        pass
    lock = s._lock

    class InterruptedOnce:
        fired = False

        def __enter__(self) -> None:
            if not lock.acquire(timeout=5):
                raise AssertionError("close() waited on the lock its outer close() holds")
            if not InterruptedOnce.fired:
                InterruptedOnce.fired = True
                s.close()  # what a second SIGTERM's handler does at this point

        def __exit__(self, *exc: object) -> None:
            lock.release()

    s._lock = InterruptedOnce()
    s.close()
    assert InterruptedOnce.fired
    store.finalize(tmp_path / "run.ktrace")
    assert store.read(tmp_path / "run.ktrace").ranges["name"].cast(str).to_list() == ["kept"]


def test_a_close_that_raises_does_not_leave_the_session_closing(session, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """`closing` makes the SIGTERM handler ignore signals; a close() that raised (ending the last step, say) left it
    true for good (found in review)."""
    s = session(CaptureConfig())

    def fails(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(s, "end_step", fails)
    with pytest.raises(RuntimeError):
        s.close()
    assert not s.closing


def test_a_second_sigterm_while_the_capture_is_written_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    from ktrace.tracer import hook

    calls: list[str] = []

    class Closing:
        closing = False

        def close(self) -> None:
            calls.append("close")
            Closing.closing = True
            installed(signal.SIGTERM, None)  # the second SIGTERM arrives while this one is writing

    handlers: dict[int, object] = {}
    monkeypatch.setattr(signal, "getsignal", lambda sig: signal.SIG_DFL)
    monkeypatch.setattr(signal, "signal", lambda sig, h: handlers.__setitem__(sig, h))
    monkeypatch.setattr(hook.os, "kill", lambda pid, sig: calls.append("kill"))
    hook._close_on_sigterm(Closing())
    installed = handlers[signal.SIGTERM]
    installed(signal.SIGTERM, None)  # type: ignore[operator]
    assert calls == ["close", "kill"]  # one close, then the default action once
