"""`--cluster` at a port that is not a Dask scheduler: one line and exit 2 within --cluster-timeout, never a
traceback ("Unable to allocate 2.82 EiB" from a foreign banner), a hang (a silent server) or 23 s (a closed port)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from real_traces import fixture_path

from ktrace.fleet.engines import open_engine
from ktrace.fleet.scheduler_probe import SchedulerAddress, probe_scheduler, split_address
from ktrace.model.errors import ExitCode, KtraceError


def _serve(banner: bytes | None) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that sends `banner` to each connection (None: says nothing); yields its address."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if banner is not None:
                conn.sendall(banner)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


@pytest.fixture
def foreign() -> Iterator[str]:
    yield from _serve(b"SSH-2.0-OpenSSH_9.6\r\n" * 50)


@pytest.fixture
def silent() -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture
def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"  # (nothing listens there once it is closed)


def _refused(address: str, timeout_s: float) -> tuple[str, float]:
    start = time.monotonic()
    with pytest.raises(KtraceError) as info:
        probe_scheduler(SchedulerAddress(address, timeout_s))
    assert info.value.exit_code == ExitCode.USAGE
    return str(info.value), time.monotonic() - start


def test_a_foreign_banner_is_not_a_scheduler(foreign: str) -> None:
    message, took = _refused(foreign, 5)
    assert "is not a Dask scheduler (it answered 'SSH-2.0-')" in message and took < 3


def test_a_silent_server_is_given_up_on_after_the_timeout(silent: str) -> None:
    message, took = _refused(silent, 0.5)
    assert "no handshake within 0.5 s" in message and 0.4 < took < 3


def test_a_closed_port_fails_at_once(closed_port: str) -> None:
    message, took = _refused(closed_port, 10)
    assert "Connection refused" in message and took < 2


def test_addresses() -> None:
    assert split_address("tcp://sched:8786") == ("tcp", "sched", 8786)
    assert split_address("sched") == ("tcp", "sched", 8786)
    assert split_address("tls://[::1]:9000") == ("tls", "::1", 9000)
    assert split_address("[::1]") == ("tcp", "::1", 8786)
    with pytest.raises(KtraceError, match="port must be a number"):
        split_address("tcp://sched:http")


@pytest.mark.parametrize("server", ["foreign", "silent", "closed_port"])
@pytest.mark.parametrize("verb", ["summary", "import"])
def test_the_cli_says_one_line_and_exits_2(
    server: str, verb: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    address = request.getfixturevalue(server)
    pytest.importorskip("distributed", reason="--cluster without dask.distributed exits 6 before any connection")
    source = fixture_path("nccl").parent
    args = [verb, str(source), "--cluster", address, "--cluster-timeout", "1"]
    if verb == "import":
        args += ["-o", str(tmp_path / "out.ktrace"), "--no-progress"]
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "ktrace", *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "cannot use the Dask scheduler" in res.stderr, res.stderr
    assert time.monotonic() - start < 20  # (a closed port took 23 s, a silent server forever)


def test_a_timeout_that_is_not_positive_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from ktrace.cli import main

    source = str(fixture_path("nccl").parent)
    assert main(["summary", source, "--cluster", "tcp://127.0.0.1:1", "--cluster-timeout", "0"]) == 2
    assert "--cluster-timeout must be a positive number of seconds" in capsys.readouterr().err


def test_a_real_scheduler_passes_the_probe() -> None:
    distributed = pytest.importorskip("distributed", reason="dask[distributed] (the ktrace[dask] extra) is missing")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=":0"
    ) as cluster:
        probe_scheduler(SchedulerAddress(cluster.scheduler_address, 10))
        with open_engine(cluster=SchedulerAddress(cluster.scheduler_address, 10)) as engine:
            assert engine.name == "dask"
            assert sorted(result for _, result in engine.map(abs, [-1, 2])) == [1, 2]
